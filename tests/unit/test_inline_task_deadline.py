"""A task tool called by a client without tasks support runs inline, under a deadline taken from the
invocation's remaining time: at that deadline it ends with a tool error that names what it needs,
never with the function's timeout (behind API Gateway, an HTTP 500). Sync and async tools, both eras."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_runtime import tool, wire
from mcp_runtime._aws import ANSWER_RESERVE_SECONDS, invocation_deadline
from mcp_runtime.context import Principal
from mcp_runtime.legacy import build_legacy_leg
from mcp_runtime.limits import INLINE_TASK_MARGIN_SECONDS
from mcp_runtime.server import INLINE_TASK_TIMED_OUT
from mcp_runtime.tools import ToolContext, task_support
from mcp_runtime.transport import HttpRequest, McpHttpTransport
from tests.unit.conftest import error_of, make_server, make_settings, result_of
from tests.unit.test_tool_authoring import client_for, module_with, spec_of

# The invocation's remaining time each call gets: the tool's deadline is this less the answer's reserve
# and the inline margin, half a second.
REMAINING_MS = (ANSWER_RESERVE_SECONDS + INLINE_TASK_MARGIN_SECONDS + 0.5) * 1000
LONGER_THAN_THE_DEADLINE = 5.0


@pytest.fixture(autouse=True)
def no_alarm_left_behind() -> Iterator[None]:
    handler = signal.getsignal(signal.SIGALRM)
    yield
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is handler


def timed_out(response: Any) -> None:
    result = result_of(response)
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": INLINE_TASK_TIMED_OUT}]


@tool(description="Sleeps.", task=True)
def sleeps(args: None, ctx: ToolContext) -> str:
    time.sleep(LONGER_THAN_THE_DEADLINE)
    return "slept"


def test_an_optional_task_tool_that_outlives_the_inline_deadline_ends_with_a_tool_error_naming_tasks() -> None:
    client = client_for(sleeps)
    started = time.monotonic()
    with invocation_deadline(REMAINING_MS):
        response = client.call_tool("sleeps", {})
    timed_out(response)
    assert time.monotonic() - started < LONGER_THAN_THE_DEADLINE


def test_the_inline_deadline_ends_a_busy_loop_that_swallows_every_exception() -> None:
    @tool(description="Spins.", task=True)
    def spins(args: None, ctx: ToolContext) -> str:
        ends = time.monotonic() + LONGER_THAN_THE_DEADLINE
        while time.monotonic() < ends:
            try:
                sum(range(1000))
            except Exception:  # what a careless tool does: it cannot keep the deadline
                continue
        return "spun"

    with invocation_deadline(REMAINING_MS):
        timed_out(client_for(spins).call_tool("spins", {}))


def test_an_optional_task_tool_that_finishes_in_time_answers_as_usual() -> None:
    @tool(description="Quick.", task=True)
    def quick(args: None, ctx: ToolContext) -> str:
        return "quick"

    with invocation_deadline(REMAINING_MS):
        result = result_of(client_for(quick).call_tool("quick", {}))
    assert result["content"] == [{"type": "text", "text": "quick"}]
    assert "isError" not in result


def test_with_no_time_left_for_the_margin_an_optional_task_tool_does_not_start() -> None:
    ran: list[str] = []

    @tool(description="Records.", task=True)
    def records(args: None, ctx: ToolContext) -> str:
        ran.append("ran")
        return "ran"

    with invocation_deadline(ANSWER_RESERVE_SECONDS * 1000):
        timed_out(client_for(records).call_tool("records", {}))
    assert ran == []


def test_a_plain_tool_gets_no_inline_deadline() -> None:
    @tool(description="Plain and a little slow.")
    def plain(args: None, ctx: ToolContext) -> str:
        time.sleep(1.0)
        return "plain"

    with invocation_deadline(REMAINING_MS):
        assert result_of(client_for(plain).call_tool("plain", {}))["content"][0]["text"] == "plain"


def test_a_required_task_tool_is_refused_with_minus_32021_before_it_runs() -> None:
    @tool(
        description="Only a task.",
        task="required",
    )
    def only_task(args: None, ctx: ToolContext) -> str:
        raise AssertionError("never runs")

    with invocation_deadline(REMAINING_MS):
        response = client_for(only_task).call_tool("only_task", {})
    assert response.status == 400
    assert error_of(response) == {
        "code": wire.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "message": "Tool only_task runs only as a task",
        "data": {"requiredCapabilities": {"extensions": {wire.TASKS_EXTENSION: {}}}},
    }


# ---- async: a coroutine on an event loop is cancelled at the deadline, its `finally` runs ----------------------------
def run_on_a_loop(coroutine: Any) -> Any:
    """How an async tool runs: to its end on an event loop of the process."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.close()


def test_an_async_task_tool_is_cancelled_at_the_inline_deadline_and_unwinds() -> None:
    unwound: list[str] = []

    async def work() -> str:
        try:
            await asyncio.sleep(LONGER_THAN_THE_DEADLINE)
        finally:
            unwound.append("finally")
        return "done"

    @tool(description="Awaits.", task=True)
    def awaits(args: None, ctx: ToolContext) -> str:
        return str(run_on_a_loop(work()))

    with invocation_deadline(REMAINING_MS):
        timed_out(client_for(awaits).call_tool("awaits", {}))
    assert unwound == ["finally"]


def test_an_async_task_tool_blocking_its_loop_is_ended_after_the_grace() -> None:
    async def blocks() -> str:
        time.sleep(LONGER_THAN_THE_DEADLINE)  # a blocking call: the cancel cannot reach it
        return "done"

    @tool(description="Blocks its loop.", task=True)
    def blocking(args: None, ctx: ToolContext) -> str:
        return str(run_on_a_loop(blocks()))

    started = time.monotonic()
    with invocation_deadline(REMAINING_MS):
        timed_out(client_for(blocking).call_tool("blocking", {}))
    assert time.monotonic() - started < LONGER_THAN_THE_DEADLINE


# ---- the 2025 leg: a client that accepts no event stream gets task tools inline, with the same deadline ------------
def test_a_2025_client_without_event_streams_gets_the_inline_deadline_tool_error() -> None:
    server = make_server(fixtures=False, patterns=False)
    server.tools.include(module_with(sleeps))
    transport = McpHttpTransport(server, legacy=build_legacy_leg(server, make_settings()))
    principal = Principal("test:alice", "test")
    headers = {"content-type": "application/json", "accept": "application/json"}

    def post(message: dict[str, Any], extra: dict[str, str] | None = None) -> Any:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        return transport.handle(HttpRequest("POST", "/mcp", {**headers, **(extra or {})}, body, principal))

    initialized = post(
        {
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
        }
    )
    session = {wire.HEADER_SESSION_ID: initialized.headers[wire.HEADER_SESSION_ID]}
    with invocation_deadline(REMAINING_MS):
        response = post({"id": 2, "method": "tools/call", "params": {"name": "sleeps", "arguments": {}}}, session)
    assert response.json()["result"] == {
        "content": [{"type": "text", "text": INLINE_TASK_TIMED_OUT}],
        "isError": True,
    }


# ---- the one place a tool's task support is stated, for FastMCP's `task=` ----------------------------------------
@pytest.mark.parametrize(
    ("task", "support"),
    [(True, "optional"), ("optional", "optional"), ("required", "required"), (False, "forbidden"), (None, "forbidden")],
)
def test_fastmcps_task_argument_is_the_one_switch_for_task_behaviour(task: bool | str | None, support: str) -> None:
    assert task_support(task) == support

    @tool(description="T.", task=task)  # type: ignore[arg-type]
    def mapped(args: None, ctx: ToolContext) -> str:
        return "t"

    assert spec_of(mapped).task_support == support


def test_an_unknown_task_argument_is_refused_naming_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"task= takes True, False, 'optional' or 'required', not 'sometimes'"):
        task_support("sometimes")
