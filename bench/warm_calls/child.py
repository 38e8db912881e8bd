"""Warm calls in a fresh interpreter, for callgrind: build the handler, warm every method, then call one.

    python bench/warm_calls/child.py METHOD CALLS ours|bare

The environment comes from the file named by BENCH_WARM_ENV (the parent's `lambda_env()`), so no CDK
synthesis runs under valgrind, and the issuer's signing key from BENCH_WARM_KEY (PEM), so no key is
generated: both would make the counts differ from run to run. The issuer stops before the measured
calls (its keys and the verified token are cached by then). With CALLS=0 the run is the baseline
every method's count is taken against: the same setup and warm-up, no measured call. Exits at once
after the last call.
"""

import contextlib
import json
import os
import sys

sys.path[:0] = [os.path.join(os.environ["BENCH_REPO"], "functions"), os.environ["BENCH_REPO"]]

from bench import warm  # noqa: E402
from cryptography.hazmat.primitives.serialization import load_pem_private_key  # noqa: E402
from testkit import SigningKey, serve_issuer  # noqa: E402

WARM_UP_CALLS = 20


def main() -> None:
    method, calls, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(os.environ["BENCH_WARM_ENV"], encoding="utf-8") as handle:
        environment = json.load(handle)
    with open(os.environ["BENCH_WARM_KEY"], "rb") as handle:
        key = SigningKey("k1", load_pem_private_key(handle.read(), password=None))  # type: ignore[arg-type]
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        with serve_issuer([key]) as issuer:
            ours, events, _ = warm.setup(issuer, environment)
            bare = warm.make_bare(warm.canned_results(ours, events))
            for event in events.values():
                for _ in range(WARM_UP_CALLS):
                    ours(event, None)
                    bare(event, None)
        handler, event = (ours if which == "ours" else bare), events[method]
        for _ in range(calls):
            handler(event, None)
    os._exit(0)


main()
