"""`sam local invoke` on the template `npx cdk synth` writes: SAM finds every resource by the id the
template gives it (no `Cannot detect function id` warnings), and each function's code in `cdk.out`."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from infra.sam_metadata import SAM_RESOURCE_ID

from tests.infra.conftest import REPO

pytestmark = pytest.mark.infra


def test_every_resource_names_itself_to_sam_by_its_logical_id(cli_template: dict[str, Any]) -> None:
    # SAM's ResourceMetadataNormalizer.get_resource_id takes SamResourceId before anything else.
    unnamed = {
        logical_id: resource.get("Metadata", {}).get(SAM_RESOURCE_ID)
        for logical_id, resource in cli_template["Resources"].items()
        if resource.get("Metadata", {}).get(SAM_RESOURCE_ID) != logical_id
    }
    assert unnamed == {}
    assert len(cli_template["Resources"]) > 50


def test_every_function_points_sam_at_its_code_in_the_cloud_assembly(
    cdk_cli_synth: tuple[Any, Path], cli_template: dict[str, Any]
) -> None:
    _, outdir = cdk_cli_synth
    functions = {
        logical_id: resource["Metadata"]
        for logical_id, resource in cli_template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function"
    }
    assert "FunctionsApiFunction34137F74" in functions
    for metadata in functions.values():
        assert metadata["aws:asset:property"] == "Code"
        assert (outdir / metadata["aws:asset:path"] / "app" / "handlers.py").is_file()


def test_make_synth_writes_the_template_sam_reads_with_the_cdk_cli() -> None:
    """`make synth` is the CLI synth above (into cdk.out/, the README's `sam local invoke -t` path), not a no-op."""
    planned = subprocess.run(["make", "-n", "synth"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    commands = [line for line in planned.splitlines() if not line.startswith("make")]  # make -w's own lines
    assert commands[-1].endswith("npx cdk synth --quiet --no-notices")
    # The platform's guide names the template of the template's own stack (a copy's is named after it).
    assert "sam local invoke -t cdk.out/ServerlessMcpTasks.template.json" in (
        REPO / "docs" / "local-stack.md"
    ).read_text(encoding="utf-8")
