"""`make bench BENCH_ARGS=--quick` is a smoke run: it never writes over the committed bench/results/."""

from __future__ import annotations

import json

from bench import run
from bench.common import QUICK_RESULTS, RESULTS


def test_a_quick_run_writes_beside_the_build_and_leaves_the_committed_results_as_they_are() -> None:
    committed = {path.name: path.read_bytes() for path in RESULTS.iterdir() if path.is_file()}
    assert run.main(["--quick", "--only", "none"]) == 0
    assert {path.name: path.read_bytes() for path in RESULTS.iterdir() if path.is_file()} == committed
    written = json.loads((QUICK_RESULTS / "latest.json").read_text())
    assert (written["quick"], written["budgets"]) == (True, {})
