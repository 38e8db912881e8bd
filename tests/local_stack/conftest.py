"""The template-driven local stack as `make run` starts it, and a small client for its HTTP API."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from local_stack.synth import synthesize
from testkit import RunningStack, StackClient


@pytest.fixture(scope="module")
def lifecycle_stack(short_timeout_stack: RunningStack) -> StackClient:
    """The template with a 5 s worker and an 8 s API timeout; the conformance and lifecycle fixtures as a layer."""
    return StackClient(short_timeout_stack)


def edited_assembly(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], context: dict[str, Any] | None = None
) -> Path:
    """A copy of the synthesized assembly whose template `edit` changed (LOCAL_CDK_OUT serves it)."""
    source = synthesize(context).directory
    target = tmp_path / "assembly"
    shutil.copytree(source, target)
    (template_path,) = target.glob("*.template.json")
    template = json.loads(template_path.read_text())
    edit(template)
    template_path.write_text(json.dumps(template))
    return target


def resource_of(template: dict[str, Any], logical_id_prefix: str) -> dict[str, Any]:
    (found,) = [body for key, body in template["Resources"].items() if key.startswith(logical_id_prefix)]
    return found
