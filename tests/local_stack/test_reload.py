"""`make run` reloads (LOCAL_RELOAD, which the Makefile's `run` sets): in a copy of the project, a stack
process serves a tool the test adds as the README says (`reload_probe`, never an example); an edit
of its file reaches the next call without a restart, the import
check runs again, and an edit that does not import is reported with its file and line while the
previous code goes on serving."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from testkit import RunningStack

from tests.local_stack.conftest import StackClient
from tests.support import REPO, copy_project, local_stack_process, serve_only

pytestmark = pytest.mark.e2e

RELOADED = "reload: serving the edited code"
REFUSED = "reload: a tool does not import: functions/tools/reload_probe.py, line"
PROBE = '''"""A tool the reload test edits."""

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, tool


class ProbeArgs(BaseModel):
    text: str = Field(description="Any text.")


@tool(description="Counts the words of a text.")
def reload_probe(args: ProbeArgs, ctx: ToolContext) -> str:
    return f"{len(args.text.split())} words"
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = copy_project(tmp_path / "project")
    (copy / "functions" / "tools" / "reload_probe.py").write_text(PROBE, encoding="utf-8")
    serve_only(copy / "functions" / "tools", "reload_probe")
    # The runtime dependencies this checkout installed for the local asset: the copy builds its own
    # asset from its own sources on them, as a second start of `make run` does.
    code = copy / "build" / "local-stack" / "code"
    code.mkdir(parents=True)
    for cached in (REPO / "build" / "local-stack" / "code").glob("*"):
        if cached.name.startswith("deps-") or cached.name == "runtime-provided":
            (code / cached.name).symlink_to(cached.resolve())
    return copy


def printed_again(running: RunningStack, text: str, seen: int, timeout: float = 90.0) -> bool:
    """Whether `text` is printed more than `seen` times within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(text in line for line in list(running.output)) > seen:
            return True
        time.sleep(0.1)
    return False


def words(client: StackClient, text: str) -> str:
    result = client.result("tools/call", {"name": "reload_probe", "arguments": {"text": text}})
    content: str = result["content"][0]["text"]
    return content


def test_an_edit_under_functions_reaches_the_next_call_and_one_that_does_not_import_leaves_the_previous_code(
    project: Path,
) -> None:
    tool = project / "functions" / "tools" / "reload_probe.py"
    source = tool.read_text(encoding="utf-8")
    counted = 'return f"{len(args.text.split())} words"'
    assert source.count(counted) == 1
    with local_stack_process(root=project, tool_packages="tools", extra_env={"LOCAL_RELOAD": "1"}) as running:
        client = StackClient(running)
        assert words(client, "hello reload") == "2 words"

        tool.write_text(source.replace(counted, 'return "edited"'), encoding="utf-8")
        assert printed_again(running, RELOADED, 0), "\n".join(running.output[-40:])
        assert words(client, "hello reload") == "edited"

        tool.write_text(source.replace(counted, "return len(=)"), encoding="utf-8")
        assert printed_again(running, REFUSED, 0), "\n".join(running.output[-40:])
        assert words(client, "hello reload") == "edited"
