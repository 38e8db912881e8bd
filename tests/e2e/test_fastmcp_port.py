"""Modules written for FastMCP 4.1.4 (fixtures/support_desk.py) and mcp 2.3.0's MCPServer
(fixtures/weather_station.py), ported by changing their import line, served by the stack as
`make run` starts it and called by real clients: `mcp` 2.3.0 and fastmcp's own `Client` (2026-07-28,
tasks included), and `mcp` 1.30.0 through the 2025-11-25 leg."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from testkit import RunningStack

from mcp_runtime import wire
from tests.e2e.scripted_user import ScriptedUser
from tests.e2e.test_legacy_clients import MCP1_PYTHON, PY_CLIENT, run_client
from tests.support import PORTED_TOOLS

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(developer_stack: RunningStack) -> RunningStack:
    return developer_stack


def texts(result: mcp_types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]


def test_the_mcp_2_3_0_client_lists_and_calls_every_ported_tool(stack: RunningStack) -> None:
    user = ScriptedUser({"value": True}, {"fahrenheit": True})
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def run() -> dict[str, Any]:
        async with Client(stack.url, mode=wire.PROTOCOL_VERSION, elicitation_callback=user) as client:
            with anyio.fail_after(60):
                listed = {tool.name: tool for tool in (await client.list_tools()).tools}
                return {
                    "listed": listed,
                    "summary": await client.call_tool("ticket_summary", {"ticket_id": 101, "max_words": 3}),
                    "customers": [
                        await client.call_tool("find_customer", {"email": "ada.lovelace@example.com"}) for _ in range(3)
                    ],
                    "counts": await client.call_tool("ticket_counts", {"status": "open"}),
                    "open": await client.call_tool("open_ticket_count", {}),
                    "close": await client.call_tool("close_ticket", {"ticket_id": 103}),
                    "reading": await client.call_tool("station_reading", {"station": "oslo"}),
                    "average": await client.call_tool(
                        "average_temperature", {"stations": ["oslo", "bergen"]}, progress_callback=on_progress
                    ),
                    "forecast": await client.call_tool("forecast", {"station": "oslo"}),
                    "bad": await client.call_tool("ticket_summary", {"ticket_id": 101, "max_words": 0}),
                }

    answers = anyio.run(run)

    assert set(PORTED_TOOLS) <= set(answers["listed"])
    assert answers["listed"]["ticket_summary"].input_schema["properties"]["max_words"] == {
        "default": 10,
        "description": "At most this many words.",
        "maximum": 50,
        "minimum": 1,
        "type": "integer",
    }
    assert texts(answers["summary"]) == ["#101 Printer on"]
    assert [c.structured_content for c in answers["customers"]] == [
        {"email": "ada.lovelace@example.com", "name": "Ada Lovelace", "open_tickets": 2}
    ] * 3
    assert answers["counts"].structured_content == {"high": 1, "normal": 1}
    assert (texts(answers["open"]), answers["open"].structured_content) == (["2"], {"result": 2})
    assert texts(answers["close"]) == ["Closed ticket #103."]
    assert answers["reading"].structured_content == {"station": "oslo", "celsius": 21.5, "humidity": 40}
    assert answers["average"].structured_content == {"result": 21.5}
    assert progress == ["read oslo", "read bergen"]
    assert texts(answers["forecast"]) == ["oslo: sunny, 73.4 F"]
    assert user.asked == ["Close ticket #103?", "Units for oslo?"]
    assert (answers["bad"].is_error, texts(answers["bad"])) == (
        True,
        ["Invalid arguments: 'max_words' is too small (at least 1)"],
    )


def test_fastmcps_own_client_runs_the_task_tool_as_a_task_and_unwraps_results(stack: RunningStack) -> None:
    from fastmcp import Client as FastMCPClient

    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def answer(message: str, response_type: Any, params: Any, context: Any) -> Any:
        return {"value": False}

    async def run() -> dict[str, Any]:
        async with FastMCPClient(stack.url, mode=wire.PROTOCOL_VERSION, elicitation_handler=answer) as client:
            with anyio.fail_after(90):
                return {
                    "open": await client.call_tool("open_ticket_count", {}),
                    "customer": await client.call_tool("find_customer", {"email": "grace.hopper@example.com"}),
                    "close": await client.call_tool("close_ticket", {"ticket_id": 101}),
                    "export": await client.call_tool("export_tickets", {"batches": 3}, progress_handler=on_progress),
                    "error": await client.call_tool("ticket_summary", {"ticket_id": 999}, raise_on_error=False),
                }

    answers = anyio.run(run)

    assert answers["open"].data == 2
    assert answers["customer"].structured_content == {
        "email": "grace.hopper@example.com",
        "name": "Grace Hopper",
        "open_tickets": 2,
    }
    assert answers["close"].content[0].text == "Ticket #101 stays open."
    assert answers["export"].content[0].text == "Exported 9 tickets in 3 batches."
    assert (answers["error"].is_error, answers["error"].content[0].text) == (True, "No ticket 999.")


def test_the_mcp_1_30_0_client_on_the_2025_leg_answers_elicitation_and_sees_the_task_tools_progress(
    stack: RunningStack,
) -> None:
    if not MCP1_PYTHON.exists():
        pytest.fail("the mcp 1.x client is not installed: run `make install`")
    script = {
        "list": True,
        "calls": [
            {"tool": "close_ticket", "arguments": {"ticket_id": 101}},
            {"tool": "export_tickets", "arguments": {"batches": 2}, "progress": True},
            {"tool": "ticket_counts", "arguments": {}},
            {"tool": "forecast", "arguments": {"station": "bergen"}},
        ],
        "answers": [{"value": True}, "decline"],
    }

    report = run_client([str(MCP1_PYTHON), str(PY_CLIENT), stack.url, json.dumps(script)])

    assert report["protocolVersion"] == wire.LEGACY_PROTOCOL_VERSION
    assert set(PORTED_TOOLS) <= set(report["tools"])
    assert report["asked"] == ["Close ticket #101?", "Units for bergen?"]
    close, export, counts, forecast = report["calls"]
    assert close == {"texts": ["Closed ticket #101."], "isError": False}
    assert export == {"texts": ["Exported 6 tickets in 2 batches."], "isError": False}
    assert json.loads(counts["texts"][0]) == {"high": 1, "low": 1, "normal": 1}
    assert forecast == {"texts": ["bergen: sunny, 23.0 C"], "isError": False}
    # The task's progress, relayed on the 2025 stream (the worker writes at most one report a second).
    assert report["progress"][0] == "batch 1 of 2"
    assert report["figures"][0] == [1, 2]  # the tool's own figures, its total with them
