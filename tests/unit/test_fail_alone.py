"""Fail fast, fail alone: a tool, prompt or resource that cannot be described is named when its module
loads, and left out while every other tool keeps serving (issue 37)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from testkit import api_event, rpc

from mcp_runtime import ToolContext
from mcp_runtime import tool as native_tool
from mcp_runtime.catalog import Catalog, undescribable
from mcp_runtime.observability import COMPONENTS_LEFT_OUT
from mcp_runtime.tools import Registry, Undescribable
from tests.support import project_tools

# threading.Lock as pydantic names it: a function on 3.11 (allocate_lock), a class on 3.13 (_thread.lock).
LOCK = repr(threading.Lock)

# A teammate's module: two good tools, and one of each mistake that cannot be described.
BROKEN_SOURCE = '''\
import threading

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("teammate")


@mcp.tool
def still_works(text: str) -> str:
    """Echo the text."""
    return text


@mcp.tool
def holds_a_lock(lock: threading.Lock) -> str:
    """A parameter no JSON schema describes."""
    return "never"


@mcp.tool(name="still_works")
def taken_name() -> str:
    """A name another tool has."""
    return "never"


@mcp.tool(task="sometimes")
def bad_option() -> str:
    return "never"


@mcp.prompt
def fine_prompt(topic: str) -> str:
    """Talk about a topic."""
    return f"Talk about {topic}"


@mcp.resource("data://{name}/x")
def context_in_resource(name: str, ctx: "Context") -> str:
    return name
'''


@pytest.fixture
def teammate_module(tmp_path: Path) -> Iterator[Callable[[str], types.ModuleType]]:
    """A module written to a file (so its lines are real), imported as `name`."""
    names: list[str] = []

    def load(name: str) -> types.ModuleType:
        path = tmp_path / f"{name}.py"
        path.write_text(BROKEN_SOURCE, encoding="utf-8")
        sys.path.insert(0, str(tmp_path))
        try:
            names.append(name)
            return __import__(name)
        finally:
            sys.path.remove(str(tmp_path))

    yield load
    for name in names:
        sys.modules.pop(name, None)


def test_a_module_with_tools_that_cannot_be_described_loads_and_names_each_one_with_its_line(
    teammate_module: Callable[[str], types.ModuleType],
) -> None:
    module = teammate_module("teammate_tools")
    catalog = Catalog()
    catalog.tools.include(module)

    assert [spec.name for spec in catalog.tools] == ["still_works"]
    assert [prompt.name for prompt in catalog.prompts] == ["fine_prompt"]
    problems = {(p.kind, p.name, p.line): p.reason for p in catalog.tools.left_out}
    assert set(problems) == {
        ("tool", "holds_a_lock", 14),
        ("tool", "still_works", 20),
        ("tool", "bad_option", 26),
        ("resource", "data://{name}/x", 37),
    }
    assert problems[("tool", "holds_a_lock", 14)].startswith(f"TypeError: parameter 'lock' ({LOCK}) has no JSON schema")
    assert problems[("tool", "still_works", 20)] == "ValueError: tool 'still_works' is registered twice"
    assert problems[("tool", "bad_option", 26)] == (
        "ValueError: task= takes True, False, 'optional' or 'required', not 'sometimes'"
    )
    assert all(p.module == "teammate_tools" for p in catalog.tools.left_out)


def test_a_tool_left_out_is_logged_by_name_and_counted_and_the_others_are_listed_and_called(
    teammate_module: Callable[[str], types.ModuleType],
    caplog: pytest.LogCaptureFixture,
) -> None:
    module = teammate_module("teammate_counted")
    counted: list[tuple[str, dict[str, str]]] = []

    class Recorder:
        def count(self, metric: str, value: float = 1, **dimensions: str) -> None:
            counted.append((metric, dimensions))

    registry = Registry(Recorder())  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="mcp_runtime.tools"):
        registry.include(module)

    assert (COMPONENTS_LEFT_OUT, {"component": "tool:holds_a_lock"}) in counted
    assert [metric for metric, _ in counted] == [COMPONENTS_LEFT_OUT] * 4
    assert "tool:holds_a_lock left out of the catalog (the other tools are served)" in caplog.text
    assert "teammate_counted.py, line 14: tool 'holds_a_lock' cannot be described" in caplog.text


def test_deployed_the_handler_lists_and_calls_the_other_tools_and_logs_the_broken_one_by_name(
    teammate_module: Callable[[str], types.ModuleType],
    configure_app: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import tools
    from app import handlers

    module = teammate_module("teammate_deployed")
    project = project_tools(table_backed=False)  # the examples, or whatever the project has
    monkeypatch.setattr(tools, "MODULES", (*tools.MODULES, module))
    configure_app(DEV_AUTH="1")
    headers = {"authorization": "Bearer dev:alice"}

    listed = handlers.api_handler(api_event(rpc("tools/list", {}, 1), headers=headers))
    called = handlers.api_handler(
        api_event(rpc("tools/call", {"name": "still_works", "arguments": {"text": "hi"}}, 2), headers=headers)
    )

    assert listed["statusCode"] == 200
    names = [tool["name"] for tool in json.loads(listed["body"])["result"]["tools"]]
    assert sorted(names) == sorted([*project, "still_works"])
    assert json.loads(called["body"])["result"]["content"] == [{"type": "text", "text": "hi"}]
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    errors = [line for line in printed if line.get("level") == "ERROR"]
    metrics = [line for line in printed if COMPONENTS_LEFT_OUT in line]
    assert [line["component"] for line in errors] == [
        "tool:holds_a_lock",
        "tool:still_works",
        "tool:bad_option",
        "resource:data://{name}/x",
    ]
    assert errors[0]["message"].startswith("tool:holds_a_lock left out of the catalog (the other tools are served): ")
    assert errors[0]["message"].endswith(
        "teammate_deployed.py, line 14: tool 'holds_a_lock' cannot be described: TypeError: parameter 'lock' "
        f"({LOCK}) has no JSON schema: Unable to generate pydantic-core schema for "
        f"{LOCK}. Set `arbitrary_types_allowed=True` in the model_config to ignore this "
        "error or implement `__get_pydantic_core_schema__` on your type to fully support it."
    )
    assert [(line["component"], line[COMPONENTS_LEFT_OUT]) for line in metrics] == [
        (line["component"], [1.0]) for line in errors
    ]


def test_a_native_tool_that_cannot_be_described_is_named_too() -> None:
    def broken(lock: threading.Lock, ctx: ToolContext) -> str:
        return "never"

    marked = native_tool(description="Broken.")(broken)
    problem = marked.__mcp_tool__  # type: ignore[attr-defined]

    assert isinstance(problem, Undescribable)
    assert (problem.kind, problem.name) == ("tool", "broken")
    assert problem.reason.startswith("TypeError: parameter 'lock'")


def test_the_whole_catalog_of_functions_tools_can_be_described() -> None:
    """What `make run`, a reload and the asset build check: every tool, prompt and resource of the
    team's modules (whatever they are: none at all passes) is described."""
    assert [problem.describe() for problem in undescribable("tools")] == []
