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
