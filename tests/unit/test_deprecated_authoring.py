"""A tool module written for release 1.0.0 keeps working after the update: `ToolMode`, `@tool(mode=...,
task_required=...)`, `ToolRegistry` and `ToolContext`'s `*_async` twins are the one builder's and the one
registry's under their old names, each warning (DeprecationWarning) what to write instead until 3.0.0."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from testkit import rpc

from mcp_runtime import Registry, ToolContext, tool, wire
from mcp_runtime.components import ToolMode
from mcp_runtime.tools import Unportable
from mcp_runtime.transport import McpHttpTransport, sse_messages
from tests.unit.conftest import Client, make_server, result_of

# A team's module as release 1.0.0's README taught it, and the same tools written as this release teaches.
OLD_MODULE = '''"""Written for release 1.0.0."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, ToolMode, tool


class UntilArgs(BaseModel):
    days: int = Field(description="Days from now.", ge=0, le=3650)


class Confirm(BaseModel):
    confirm: bool


@tool(description="How long until a number of days from now, in words.", mode=ToolMode.PLAIN)
def time_until(args: UntilArgs, ctx: ToolContext) -> str:
    return f"{args.days} days"


@tool(description="Double a number in a durable step.", mode=ToolMode.TASK)
async def double(n: int, ctx: ToolContext) -> str:
    await ctx.report_progress_async(0, 1, "doubling")
    await ctx.log_async("info", {"doubling": n})
    doubled = await ctx.step_async("double", lambda: n * 2)
    await ctx.wait_async(0)
    await ctx.report_progress_async(1, 1)
    return str(doubled)


@tool(description="A job that only runs as a task.", mode=ToolMode.TASK, task_required=True)
def long_job(args: None, ctx: ToolContext) -> str:
    return "done"


@tool(description="Ask before archiving.", mode=ToolMode.INPUT_REQUIRED)
async def archive(project: str, ctx: ToolContext) -> str:
    answer = await ctx.elicit_async("confirm", f"Archive {project}?", Confirm)
    return f"archived {project}" if answer.content and answer.content.confirm else "kept"
'''
NEW_MODULE = '''"""The same tools, written as this release teaches."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, tool
from mcp_runtime.fastmcp import Context


class UntilArgs(BaseModel):
    days: int = Field(description="Days from now.", ge=0, le=3650)


class Confirm(BaseModel):
    confirm: bool


@tool(description="How long until a number of days from now, in words.")
def time_until(args: UntilArgs, ctx: ToolContext) -> str:
    return f"{args.days} days"


@tool(description="Double a number in a durable step.", task=True)
async def double(n: int, ctx: Context) -> str:
    await ctx.report_progress(0, 1, "doubling")
    await ctx.log("info", {"doubling": n})
    doubled = await ctx.step("double", lambda: n * 2)
    await ctx.wait(0)
    await ctx.report_progress(1, 1)
    return str(doubled)


@tool(description="A job that only runs as a task.", task="required")
def long_job(args: None, ctx: ToolContext) -> str:
    return "done"


@tool(description="Ask before archiving.")
async def archive(project: str, ctx: ToolContext) -> str:
    answer = ctx.elicit("confirm", f"Archive {project}?", Confirm)
    return f"archived {project}" if answer.content and answer.content.confirm else "kept"
'''
GOES_AWAY = "is deprecated and goes away in 3.0.0"
TOOL_MODE_ADVICE = (
    'task= is the one switch for task behaviour (write @tool(task=True) for mode=ToolMode.TASK, @tool(task="required") '
    "for task_required=True, and drop the other modes)"
)
DROP_MODE = "drop mode= (task= is the one switch for task behaviour; the other modes changed nothing)"
AWAIT_ON_CONTEXT = (
    "annotate the parameter `ctx: Context` (from mcp_runtime.fastmcp import Context) and write `await ctx.{}(...)`"
)
TWINS = {
    "report_progress_async": AWAIT_ON_CONTEXT.format("report_progress"),
    "log_async": AWAIT_ON_CONTEXT.format("log"),
    "step_async": AWAIT_ON_CONTEXT.format("step"),
    "wait_async": AWAIT_ON_CONTEXT.format("wait"),
    "wait_for_callback_async": AWAIT_ON_CONTEXT.format("wait_for_callback"),
    "elicit_async": "write `ctx.elicit(key, message, Model)` (not awaited: the same answer), or annotate the parameter "
    "`ctx: Context` (from mcp_runtime.fastmcp import Context) and write `await ctx.elicit(message, Model)` "
    "(its answer's `.data`)",
}
ELICITATION = {"elicitation": {}}

Warned = tuple[str, str, int]


def load(tmp_path: Path, name: str, source: str) -> tuple[ModuleType, list[Warned]]:
    """Import `source` as the module `name` from a file, as a team's tool package imports it, and the
    warnings it gave: (text, file name, line)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec.loader.exec_module(module)
    return module, deprecations(caught)


def deprecations(caught: list[warnings.WarningMessage]) -> list[Warned]:
    assert {entry.category for entry in caught} <= {DeprecationWarning}, [str(entry.message) for entry in caught]
    return [(str(entry.message), Path(entry.filename).name, entry.lineno) for entry in caught]


def line_of(source: str, text: str) -> int:
    (number,) = [index for index, line in enumerate(source.splitlines(), start=1) if text in line]
    return number


def served(module: ModuleType) -> Client:
    server = make_server(fixtures=False, patterns=False)
    server.tools.include(module)
    return Client(McpHttpTransport(server))


def called(client: Client, name: str, arguments: dict[str, Any], **options: Any) -> tuple[Any, list[Warned]]:
    """The JSON-RPC message(s) a call answered (its stream's, when it has one) and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if options.pop("stream", False):
            message = rpc("tools/call", {"name": name, "arguments": arguments}, 7)
            message["params"]["_meta"].update({"progressToken": "tok", wire.META_LOG_LEVEL: "info"})
            answered: Any = sse_messages(client.post(message).body)
        else:
            answered = client.call_tool(name, arguments, request_id=7, **options).json()
    return answered, deprecations(caught)


def test_a_module_written_for_1_0_0_loads_warning_once_for_each_old_form_at_its_own_line(tmp_path: Path) -> None:
    _, warned = load(tmp_path, "old_tools", OLD_MODULE)

    assert warned == [
        (f"mcp_runtime.ToolMode {GOES_AWAY}: {TOOL_MODE_ADVICE}", "old_tools.py", line_of(OLD_MODULE, "import ToolC")),
        (f"@tool(mode=ToolMode.PLAIN) {GOES_AWAY}: {DROP_MODE}", "old_tools.py", line_of(OLD_MODULE, "ToolMode.PLAIN")),
        (
            f"@tool(mode=ToolMode.TASK) {GOES_AWAY}: write @tool(task=True)",
            "old_tools.py",
            line_of(OLD_MODULE, "TASK)"),
        ),
        (
            f'@tool(mode=ToolMode.TASK, task_required=True) {GOES_AWAY}: write @tool(task="required")',
            "old_tools.py",
            line_of(OLD_MODULE, "task_required=True"),
        ),
        (
            f"@tool(mode=ToolMode.INPUT_REQUIRED) {GOES_AWAY}: {DROP_MODE}",
            "old_tools.py",
            line_of(OLD_MODULE, "ToolMode.INPUT_REQUIRED"),
        ),
    ]


def test_a_module_written_for_1_0_0_lists_the_tools_its_new_form_twin_lists(tmp_path: Path) -> None:
    old, _ = load(tmp_path, "old_tools", OLD_MODULE)
    new, warned = load(tmp_path, "new_tools", NEW_MODULE)
    assert warned == []

    listed = [result_of(served(module).request("tools/list", request_id=1))["tools"] for module in (old, new)]
    assert listed[0] == listed[1]
    assert [tool["name"] for tool in listed[0]] == ["archive", "double", "long_job", "time_until"]
    supports = []
    for module in (old, new):
        registry = Registry()
        registry.include(module)
        supports.append({spec.name: spec.task_support for spec in registry})
    assert (
        supports[0]
        == supports[1]
        == {
            "archive": "forbidden",
            "double": "optional",
            "long_job": "required",
            "time_until": "forbidden",
        }
    )


def twin_warning(twin: str, written: str) -> Warned:
    """The warning of a `ToolContext.*_async` twin, at the line of OLD_MODULE that has `written`."""
    return (f"ToolContext.{twin} {GOES_AWAY}: {TWINS[twin]}", "old_tools.py", line_of(OLD_MODULE, written))


def test_a_module_written_for_1_0_0_answers_every_call_as_its_new_form_twin_and_warns_at_each_twin_it_awaits(
    tmp_path: Path,
) -> None:
    old, _ = load(tmp_path, "old_tools", OLD_MODULE)
    new, _ = load(tmp_path, "new_tools", NEW_MODULE)
    old_client, new_client = served(old), served(new)
    expected: list[tuple[str, dict[str, Any], dict[str, Any], list[Warned]]] = [
        ("time_until", {"days": 7}, {}, []),
        (
            "double",
            {"n": 21},
            {"stream": True},
            [
                twin_warning("report_progress_async", "report_progress_async(0"),
                twin_warning("log_async", "log_async("),
                twin_warning("step_async", "step_async("),
                twin_warning("wait_async", "wait_async("),
                twin_warning("report_progress_async", "report_progress_async(1"),
            ],
        ),
        ("long_job", {}, {}, []),
        (
            "archive",
            {"project": "apollo"},
            {"capabilities": ELICITATION},
            [twin_warning("elicit_async", "elicit_async(")],
        ),
    ]
    answers: dict[str, Any] = {}
    for name, arguments, options, twins in expected:
        old_answer, old_warned = called(old_client, name, arguments, **options)
        new_answer, new_warned = called(new_client, name, arguments, **options)
        if name == "archive":  # each sealed state has its own nonce; the question asked is the same
            states = [answer["result"].pop("requestState") for answer in (old_answer, new_answer)]
        assert old_answer == new_answer, name
        assert (old_warned, new_warned) == (twins, []), name
        answers[name] = old_answer

    assert answers["time_until"]["result"]["content"] == [{"type": "text", "text": "7 days"}]
    *notifications, final = answers["double"]
    assert [note["params"].get("message") or note["params"].get("data") for note in notifications] == [
        "doubling",
        {"doubling": 21},
        None,
    ]
    assert final["result"]["content"] == [{"type": "text", "text": "42"}]
    assert answers["long_job"]["error"]["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert answers["archive"]["result"]["resultType"] == wire.RESULT_INPUT_REQUIRED
    confirmed = {"confirm": {"action": "accept", "content": {"confirm": True}}}
    for client, state, twins in zip(
        (old_client, new_client), states, ([twin_warning("elicit_async", "elicit_async(")], []), strict=True
    ):
        answered, warned = called(
            client,
            "archive",
            {"project": "apollo"},
            capabilities=ELICITATION,
            inputResponses=confirmed,
            requestState=state,
        )
        assert answered["result"]["content"] == [{"type": "text", "text": "archived apollo"}]
        assert warned == twins


@pytest.mark.parametrize(
    ("statement", "module"),
    [
        ("from mcp_runtime import ToolMode, ToolRegistry", "mcp_runtime"),
        ("from mcp_runtime.tools import ToolMode, ToolRegistry", "mcp_runtime.tools"),
        ("import mcp_runtime\nToolMode = mcp_runtime.ToolMode\nToolRegistry = mcp_runtime.ToolRegistry", "mcp_runtime"),
    ],
)
def test_tool_mode_and_tool_registry_import_as_1_0_0_had_them_warning_what_to_write(
    tmp_path: Path, statement: str, module: str
) -> None:
    imported, warned = load(tmp_path, "old_names", statement + "\n")

    assert imported.ToolMode is ToolMode
    assert [member.name for member in ToolMode] == ["PLAIN", "INPUT_REQUIRED", "TASK", "HANDLE"]
    assert imported.ToolRegistry is Registry
    lines = [1, 1] if statement.startswith("from") else [2, 3]
    assert warned == [
        (f"{module}.ToolMode {GOES_AWAY}: {TOOL_MODE_ADVICE}", "old_names.py", lines[0]),
        (
            f"{module}.ToolRegistry {GOES_AWAY}: write Registry (from mcp_runtime import Registry), the one registry "
            "under its new name",
            "old_names.py",
            lines[1],
        ),
    ]


def test_the_decorator_imported_from_its_1_0_0_module_is_the_one_builders_warning_where_it_moved(
    tmp_path: Path,
) -> None:
    imported, warned = load(tmp_path, "old_import", "from mcp_runtime.tools import ToolContext, tool\n")

    assert imported.tool is tool
    assert warned == [(f"mcp_runtime.tools.tool {GOES_AWAY}: write from mcp_runtime import tool", "old_import.py", 1)]


def test_tool_registry_is_the_one_registry_serving_a_1_0_0_module(tmp_path: Path) -> None:
    old, _ = load(tmp_path, "old_tools", OLD_MODULE)
    with pytest.warns(DeprecationWarning):
        from mcp_runtime import ToolRegistry

    registry = ToolRegistry()
    registry.include(old)
    assert isinstance(registry, Registry)
    assert [spec.name for spec in registry] == ["archive", "double", "long_job", "time_until"]


def test_task_with_a_deprecated_mode_is_refused_naming_the_one_to_keep() -> None:
    with pytest.raises(TypeError) as refused:
        tool(description="Both.", task=True, mode=ToolMode.TASK)
    assert str(refused.value) == "@tool(task=True, mode=ToolMode.TASK): keep task= alone (mode= is deprecated)"


def test_an_unknown_option_of_the_decorator_is_still_a_type_error() -> None:
    with pytest.raises(TypeError) as refused:
        tool(description="Typo.", taks=True)  # type: ignore[call-arg]
    assert str(refused.value) == "tool() got an unexpected keyword argument 'taks'"


def test_a_twin_on_a_context_parameter_fails_at_import_naming_the_method_to_await() -> None:
    """`Context` never had the `*_async` twins (they were `ToolContext`'s): refused where the module loads."""
    source = (
        "from mcp_runtime import tool\n"
        "from mcp_runtime.fastmcp import Context\n"
        "@tool(description='Mixed.')\n"
        "async def mixed(n: int, ctx: Context) -> int:\n"
        "    return await ctx.step_async('double', lambda: n * 2)\n"
    )
    with pytest.raises(Unportable) as refused:
        exec(compile(source, "mixed_tools.py", "exec"), {"__name__": "mixed_tools"})
    assert str(refused.value) == (
        "mixed: ctx.step_async is ToolContext's deprecated twin, never Context's: write `await ctx.step(...)`"
    )


def action_for(category: type[Warning], module: str, message: str) -> str:
    """What the warning filters in force do with a warning (the first filter that matches it, as Python
    looks them up)."""
    for action, text, filtered, where, line in warnings.filters:
        matches = (text is None or text.match(message)) and (where is None or where.match(module))
        if matches and issubclass(category, filtered) and line == 0:
            return action
    return warnings.defaultaction


def test_a_teams_test_run_shows_the_runtimes_deprecations_and_never_fails_on_them() -> None:
    """The filters this test runs under are the ones pytest and pyproject.toml's `filterwarnings` set for every
    test of the project, a team's among them: a deprecation of an old form is shown, never an error."""
    message = f"@tool(mode=ToolMode.PLAIN) {GOES_AWAY}: {DROP_MODE}"
    assert action_for(DeprecationWarning, "tools.time_until", message) in ("always", "default", "module", "once")


def test_the_twins_wait_for_a_callback_as_the_method_they_name() -> None:
    """Outside a task both refuse with the same -32021 (only a task waits for an external system)."""
    context = ToolContext.__new__(ToolContext)
    context._durable = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import asyncio

        with pytest.raises(Exception) as twin:
            asyncio.run(context.wait_for_callback_async("ci", lambda callback: None))
    with pytest.raises(Exception) as method:
        context.wait_for_callback("ci", lambda callback: None)
    assert (type(twin.value), str(twin.value)) == (type(method.value), str(method.value))
    assert [str(entry.message) for entry in caught] == [
        f"ToolContext.wait_for_callback_async {GOES_AWAY}: {TWINS['wait_for_callback_async']}"
    ]
