"""`make bench BENCH_ARGS=--quick` is a smoke run: it never writes over the committed bench/results/."""

from __future__ import annotations

import json

from bench import assets, coldstart, run
from bench.assets import MB
from bench.common import QUICK_RESULTS, RESULTS


def test_a_quick_run_writes_beside_the_build_and_leaves_the_committed_results_as_they_are() -> None:
    committed = {path.name: path.read_bytes() for path in RESULTS.iterdir() if path.is_file()}
    assert run.main(["--quick", "--only", "none"]) == 0
    assert {path.name: path.read_bytes() for path in RESULTS.iterdir() if path.is_file()} == committed
    written = json.loads((QUICK_RESULTS / "latest.json").read_text())
    assert (written["quick"], written["budgets"]) == (True, {})


def test_the_asset_report_holds_size_to_the_cdk_json_ceiling_and_names_the_cold_start_budget() -> None:
    """Size is the team's ceiling (assetSizeLimitMb), not a budget; the asset's budget is its cold start."""
    result = {
        "target": "cp313-manylinux2014_aarch64",
        "ours": {"unzipped_bytes": 14 * MB, "zipped_bytes": 5 * MB, "files": 900, "largest": []},
        "ceiling": {"assetSizeLimitMb": 50, "within": True},
        "budgets": {},
    }
    assert assets.report(result)[-1] == (
        "  ceiling assetSizeLimitMb 50 MB (cdk.json, checked at synth): within; not a budget: the asset's is its "
        "cold start packaged_discover_token/boto3_runtime <= 1.0"
    )
    assert coldstart.PACKAGED_BUDGET == "cold start packaged_discover_token/boto3_runtime <= 1.0"


def test_the_capacity_report_gives_each_tasks_units_and_holds_the_progress_write_of_a_big_task_to_1_wru() -> None:
    from bench import capacity

    operation = {"calls": 1, "wru": 1.0, "rru": 0.0}
    scenarios = {
        "1 step": {"tasks/get": {"calls": 2, "wru": 0.0, "rru": 2.0}, "progress": operation},
        "64 KB argument, 60 KB of step records": {"progress on the big task": operation},
    }
    result = {"quick": True, "hour_reports": 60, "scenarios": scenarios, "budgets": capacity.budgets(scenarios)}

    lines = capacity.report(result)

    assert lines[1:3] == [
        "  1 step: 1 WRU, 2 RRU per task",
        "    tasks/get                        2 calls        0 WRU      2 RRU  (0 WRU, 1 RRU each)",
    ]
    assert lines[-3:] == [
        "  budget a progress write on a task with a 64 KB argument and 60 KB of step records = 1 WRU: HOLDS",
        "  budget every progress write = 1 WRU: HOLDS",
        "  budget tasks/get = 1 GetItem of at most 1 RRU: HOLDS",
    ]
    big = {"progress on the big task": {"calls": 1, "wru": 125.0, "rru": 0.0}}
    assert not capacity.budgets({**scenarios, "64 KB argument, 60 KB of step records": big})[
        "a progress write on a task with a 64 KB argument and 60 KB of step records = 1 WRU"
    ]


def test_the_step_budget_holds_a_steps_writes_summed_to_2_wru_at_step_1_100_and_1000() -> None:
    """Issue 38: the whole step (its running mark and its record together) at most 2 WRU, at each step shown."""
    from bench import capacity

    scenarios = {"64 KB argument, 60 KB of step records": {"progress on the big task": {"calls": 1, "wru": 1.0}}}
    budget = "a step's writes (its running mark and its record) <= 2 WRU together, at steps 1, 100 and 1,000"

    def steps(mark: float, record: float) -> dict[str, dict[str, dict[str, float]]]:
        cost = {capacity.MARK: mark, capacity.RECORD: record}
        return {
            "1 step": {"step 1": {capacity.MARK: 1, capacity.RECORD: 1}},
            "1,000 steps": {"step 100": {capacity.MARK: 1, capacity.RECORD: 1}, "step 1,000": cost},
        }

    assert capacity.budgets(scenarios, steps(1, 1))[budget]
    assert not capacity.budgets(scenarios, steps(2, 1))[budget]  # each at most 2, yet 3 together
    assert not capacity.budgets(scenarios, steps(2, 2))[budget]
    assert not capacity.budgets(scenarios, {"1 step": {"step 1": {capacity.MARK: 1, capacity.RECORD: 1}}})[budget]
