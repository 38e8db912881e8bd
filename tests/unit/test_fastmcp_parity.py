"""Parity with the libraries where a port used to differ (issue 37): `typing.TypedDict` on Python < 3.12,
the `TasksExtension` lines of a FastMCP 4.1.4 task module, `ctx.secret`, the import advice."""

from __future__ import annotations

import asyncio
import json

from tests.unit.conftest import result_of
from tests.unit.test_fastmcp_facade import listed, load, served, without_titles

SDK_TICKETS = '''\
from typing import TypedDict

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("tickets")


class Ticket(TypedDict):
    """A ticket."""

    id: str
    priority: int


@mcp.tool()
def sdk_ticket(title: str) -> Ticket:
    """Open a ticket."""
    return {"id": f"T-{len(title)}", "priority": 2}
'''
NESTED_ARGUMENTS = '''\
from typing import NotRequired, TypedDict

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("filters")


class Window(TypedDict):
    hours: int
    label: NotRequired[str]


class Filter(TypedDict):
    service: str
    windows: list[Window]


@mcp.tool
def search(query: Filter) -> dict[str, Any]:
    """Search."""
    return {"service": query["service"], "windows": len(query["windows"])}
'''.replace("-> dict[str, Any]", "-> dict")


def test_an_mcpserver_module_returning_a_typing_typeddict_is_listed_and_called_as_mcp_2_3_0_serves_it() -> None:
    ours = served(
        load(SDK_TICKETS.replace("from mcp.server.mcpserver import", "from mcp_runtime.fastmcp import"), "t1")
    )
    real = load(SDK_TICKETS, "t1_real").mcp
    theirs = {
        tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        for tool in asyncio.run(real.list_tools())
    }

    tool = listed(ours)["sdk_ticket"]
    assert without_titles(tool["outputSchema"]) == without_titles(theirs["sdk_ticket"]["outputSchema"])
    assert tool["outputSchema"]["properties"] == {"id": {"type": "string"}, "priority": {"type": "integer"}}
    assert tool["outputSchema"]["required"] == ["id", "priority"]
    result = result_of(ours.call_tool("sdk_ticket", {"title": "disk"}))
    real_result = asyncio.run(real.call_tool("sdk_ticket", {"title": "disk"}))
    assert result["structuredContent"] == real_result.structured_content == {"id": "T-4", "priority": 2}
    assert json.loads(result["content"][0]["text"]) == {"id": "T-4", "priority": 2}


def test_typing_typeddict_arguments_nested_and_not_required_keys_validate_on_this_python() -> None:
    client = served(load(NESTED_ARGUMENTS, "nested_typeddicts"))
    schema = listed(client)["search"]["inputSchema"]

    assert schema["properties"]["query"]["properties"]["windows"]["items"]["required"] == ["hours"]
    ok = result_of(client.call_tool("search", {"query": {"service": "api", "windows": [{"hours": 2}]}}))
    assert ok["structuredContent"] == {"service": "api", "windows": 1}
    bad = result_of(client.call_tool("search", {"query": {"service": "api", "windows": [{"label": "x"}]}}))
    assert bad["isError"] is True
    assert bad["content"][0]["text"].startswith("Invalid arguments: 'query.windows.0.hours' is required")


ONCALL_TASKS = '''\
import asyncio

from mcp_runtime.fastmcp import Context, FastMCP, TasksExtension

mcp = FastMCP("oncall")
mcp.add_extension(TasksExtension())


@mcp.tool(task=True)
async def rollback(regions: int, ctx: Context) -> str:
    """Roll back, region by region."""
    for region in range(regions):
        await ctx.report_progress(region + 1, regions)
    return f"rolled back {regions}"
'''


def test_a_fastmcp_4_1_4_task_module_keeps_its_tasks_extension_lines_and_its_task_tool_is_served() -> None:
    from mcp_runtime.tools import Registry

    module = load(ONCALL_TASKS, "oncall_tasks")
    registry = Registry()
    registry.include(module)
    client = served(module)

    assert registry.left_out == []
    assert registry.get("rollback").task_support == "optional"  # type: ignore[union-attr]
    assert result_of(client.call_tool("rollback", {"regions": 2}))["content"] == [
        {"type": "text", "text": "rolled back 2"}
    ]


def test_any_other_extension_is_refused_when_the_module_loads_saying_what_to_do() -> None:
    import pytest

    from mcp_runtime.fastmcp import FastMCP

    class AppsExtension:
        pass

    with pytest.raises(NotImplementedError) as refused:
        FastMCP("x").add_extension(AppsExtension())
    assert str(refused.value) == (
        "FastMCP.add_extension(AppsExtension(...)): only TasksExtension ports (and is not needed: task=True is "
        "enough here); drop the line"
    )


def test_ctx_secret_on_the_fastmcp_context_is_the_tools_secrets() -> None:
    import pytest

    from mcp_runtime.context import Principal, RequestMeta
    from mcp_runtime.fastmcp import Context
    from mcp_runtime.tool_secrets import ToolSecrets, UnknownSecret
    from mcp_runtime.tools import ToolContext

    secrets = ToolSecrets({"deploy_token": "arn:aws:secretsmanager:us-east-1:123456789012:secret:deploy"})
    ctx = Context(ToolContext(RequestMeta("2026-07-28", {}), Principal("alice"), secrets=secrets))

    with pytest.raises(UnknownSecret, match=r"cdk\.json's toolSecrets gives the tools 'deploy_token'"):
        ctx.secret("github_token")


CONSTRAINED = '''\
from typing import Annotated, Literal

from pydantic import Field

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("oncall")


@mcp.tool
def page(
    service: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{2,30}$")],
    hours: Annotated[int, Field(ge=1, le=72)],
    severity: Literal["sev1", "sev2"] = "sev2",
) -> str:
    """Page the on-call of a service."""
    return f"paged {service}"
'''


def test_a_validation_error_names_the_pattern_bound_and_allowed_values_and_never_the_value_sent() -> None:
    client = served(load(CONSTRAINED, "constrained_oncall"))

    refused = result_of(client.call_tool("page", {"service": "Payments API!", "hours": 500, "severity": "SECRET-sev0"}))

    (text,) = [block["text"] for block in refused["content"]]
    assert refused["isError"] is True
    assert text == (
        "Invalid arguments: 'service' must match the pattern '^[a-z][a-z0-9-]{2,30}$'; "
        "'hours' is too large (at most 72); 'severity' is not one of the allowed values: 'sev1' or 'sev2'"
    )
    assert "Payments" not in text and "500" not in text and "SECRET" not in text
