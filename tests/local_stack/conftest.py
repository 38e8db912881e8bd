"""The template-driven local stack as `make run` starts it, and a small client for its HTTP API."""

from __future__ import annotations

import json
import shutil
import time
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


def descendants(pid: int) -> dict[int, str]:
    """The processes `pid` started, and theirs (Linux /proc): pid -> command line. Not the warm synthesizer
    (LOCAL_SYNTH_WARM, the suite's), which a stack may spawn and which serves the stacks after it."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, IndexError):
            continue  # ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        if "local_stack._warm_synth" in commands.get(child, ""):
            continue
        found[child] = commands.get(child, "")
        pending.extend(children.get(child, []))
    return found


def still_running(processes: dict[int, str], *, within: float = 10.0) -> dict[int, str]:
    """Those of `processes` that still run the same command (a reused pid runs another) once `within`
    seconds passed: a process killed a moment ago takes a moment to go on a loaded machine."""
    deadline = time.monotonic() + within
    while (alive := _alive(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive


def _alive(processes: dict[int, str]) -> dict[int, str]:
    alive = {}
    for pid, command in processes.items():
        try:
            now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if now == command and state != "Z":
            alive[pid] = command
    return alive
