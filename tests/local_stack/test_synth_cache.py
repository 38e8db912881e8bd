"""`make run` synthesizes the CDK app once per set of inputs: a second start reads the cached assembly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from local_stack.synth import TEMPLATE_INPUTS, inputs_digest, synthesize
from tests.support import REPO

pytestmark = pytest.mark.infra


def test_a_second_synthesis_of_unchanged_inputs_comes_from_the_cache(tmp_path: Path) -> None:
    first = synthesize({"logRetentionDays": 14}, cache_root=tmp_path)
    second = synthesize({"logRetentionDays": 14}, cache_root=tmp_path)
    assert (first.cached, second.cached) == (False, True)
    assert first.directory == second.directory
    assert (second.directory / f"{second.stack_name}.template.json").is_file()


def test_the_cache_key_changes_with_the_context_and_with_each_input(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    for entry in TEMPLATE_INPUTS:
        source, target = REPO / entry, copy / entry
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)
    base = inputs_digest({}, copy)
    assert inputs_digest({"workerTimeoutSeconds": 10}, copy) != base
    edits = [copy / "cdk.json", copy / "infra" / "statemachine" / "task_workflow.asl.json", copy / "infra" / "stack.py"]
    edits.append(copy / "functions" / "mcp_runtime" / "tasks" / "schema.py")
    seen = {base}
    for path in edits:
        path.write_text(path.read_text() + "\n")
        digest = inputs_digest({}, copy)
        assert digest not in seen, path
        seen.add(digest)
