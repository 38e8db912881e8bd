"""One cold start in a fresh interpreter: import a handler, answer one event, report inner timings.

    python bench/cold/child.py api|sdk EVENT.json

Kept free of bench imports so that only the handler's own imports are timed.
"""

import time

START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402


class _Absent:
    """BENCH_WITHOUT=pkg,...: those packages cannot be imported, as in the Lambda asset (the dev venv
    has `cryptography`, which PyJWT would otherwise import)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


if os.environ.get("BENCH_WITHOUT"):
    sys.meta_path.insert(0, _Absent(set(os.environ["BENCH_WITHOUT"].split(","))))  # type: ignore[arg-type]


class Context:
    function_name = "mcp-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:mcp-api"
    aws_request_id = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def main() -> None:
    variant, event_path = sys.argv[1], sys.argv[2]
    with open(event_path, encoding="utf-8") as handle:
        event = json.load(handle)
    before_import = time.perf_counter()
    if variant == "api":
        from app.handlers import api_handler as handler
    elif variant == "sdk":
        from bench.sdk_stack import handler
    else:
        raise SystemExit(f"unknown variant {variant}")
    imported = time.perf_counter()
    response = handler(event, Context())
    answered = time.perf_counter()
    body = response.get("body") or ""
    ok = response.get("statusCode") == 200 and '"result"' in body and '"error"' not in body
    print(
        json.dumps(
            {
                "import_ms": (imported - before_import) * 1000,
                "call_ms": (answered - imported) * 1000,
                "inner_ms": (answered - START) * 1000,
                "ok": ok,
                "status": response.get("statusCode"),
                "body": body[:400],
                "boto3_loaded": "boto3" in sys.modules,
                "modules": len(sys.modules),
            }
        ),
        flush=True,
    )
    if os.environ.get("BENCH_FAST_EXIT"):
        os._exit(0)  # under callgrind: count up to the answer, not interpreter shutdown


main()
