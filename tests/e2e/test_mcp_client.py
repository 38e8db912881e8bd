"""The real Python MCP client (`mcp==2.3.0`, pinned to 2026-07-28) against the local stack, with
every response the server sent validated against the official wire types (`mcp_types.methods`)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp_types import methods as wire_types
from pydantic import TypeAdapter

from mcp_runtime import wire
from tests.e2e.conftest import RecordingStack
from tests.e2e.scripted_user import ScriptedUser

pytestmark = pytest.mark.e2e

ERROR_DATA = {
    wire.MISSING_REQUIRED_CLIENT_CAPABILITY: mcp_types.MissingRequiredClientCapabilityErrorData,
    wire.UNSUPPORTED_PROTOCOL_VERSION: mcp_types.UnsupportedProtocolVersionErrorData,
}


def assert_wire_valid(stack: RecordingStack) -> None:
    """Every message the server sent, checked against the official 2026-07-28 wire types."""
    assert stack.exchanges, "no traffic was recorded"
    for exchange in stack.exchanges:
        for message in exchange.messages:
            if "result" in message:
                wire_types.validate_server_result(exchange.method, wire.PROTOCOL_VERSION, message["result"])
            elif "error" in message:
                mcp_types.JSONRPCError.model_validate(message)
                data_type = ERROR_DATA.get(message["error"]["code"])
                if data_type is not None:
                    data_type.model_validate(message["error"]["data"])
            else:
                notification = wire_types.SERVER_NOTIFICATIONS[(message["method"], wire.PROTOCOL_VERSION)]
                TypeAdapter(notification).validate_python(message)


async def _call(
    stack: RecordingStack, user: ScriptedUser | None, name: str, arguments: dict[str, Any]
) -> mcp_types.CallToolResult:
    async with Client(stack.url, mode=wire.PROTOCOL_VERSION, elicitation_callback=user, cache=None) as client:
        return await client.call_tool(name, arguments)


def test_a_two_round_mrtr_tool_reaches_its_exact_final_text_through_the_real_client(
    recording_stack: RecordingStack,
) -> None:
    user = ScriptedUser({"confirm": True}, {"reason": "superseded by v2"})
    result = anyio.run(_call, recording_stack, user, "archive_project", {"project": "apollo"})
    assert not result.is_error
    assert [block.text for block in result.content] == ["Archived project 'apollo' (reason: superseded by v2)."]
    assert user.asked == ["Archive project 'apollo'? It becomes read-only.", "Why is 'apollo' being archived?"]
    calls = [e for e in recording_stack.exchanges if e.method == "tools/call"]
    assert [m["result"]["resultType"] for e in calls[-3:] for m in e.messages] == [
        "input_required",
        "input_required",
        "complete",
    ]
    assert_wire_valid(recording_stack)


def test_declining_the_confirmation_ends_the_call_without_a_second_question(recording_stack: RecordingStack) -> None:
    user = ScriptedUser("decline")
    result = anyio.run(_call, recording_stack, user, "archive_project", {"project": "apollo"})
    assert [block.text for block in result.content] == ["Archive of 'apollo' cancelled; nothing changed."]
    assert len(user.asked) == 1
    assert_wire_valid(recording_stack)


def test_the_conformance_multi_round_fixture_completes_with_both_answers(recording_stack: RecordingStack) -> None:
    user = ScriptedUser({"name": "Alice"}, {"color": "blue"})
    result = anyio.run(_call, recording_stack, user, "test_input_required_result_multi_round", {})
    assert [block.text for block in result.content] == ["Alice likes blue."]
    assert user.asked == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]
    assert_wire_valid(recording_stack)


def test_listing_reading_and_prompting_through_the_real_client_all_validate(recording_stack: RecordingStack) -> None:
    async def scenario() -> None:
        async with Client(recording_stack.url, mode=wire.PROTOCOL_VERSION, cache=None) as client:
            tools = await client.list_tools()
            assert {"count_words", "archive_project"} <= {tool.name for tool in tools.tools}
            counted = await client.call_tool("count_words", {"text": "one two three"})
            assert counted.structured_content == {"words": 3, "characters": 13}
            resource = await client.read_resource("test://template/42/data")
            assert resource.contents[0].text == '{"id": "42", "templateTest": true, "data": "Data for ID: 42"}'
            prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"})
            assert prompt.messages[0].content.text == "Prompt with arguments: arg1='hello', arg2='world'"
            await client.list_prompts()
            await client.list_resources()
            await client.list_resource_templates()

    anyio.run(scenario)
    assert_wire_valid(recording_stack)


def test_progress_arrives_on_the_event_stream_before_the_result(recording_stack: RecordingStack) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async def scenario() -> mcp_types.CallToolResult:
        async with Client(recording_stack.url, mode=wire.PROTOCOL_VERSION, cache=None) as client:
            return await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)

    result = anyio.run(scenario)
    assert [block.text for block in result.content] == ["Progress test completed."]
    assert seen == [(0, 100), (50, 100), (100, 100)]
    streamed = [e for e in recording_stack.exchanges if e.content_type.startswith("text/event-stream")]
    assert streamed and [m.get("method") for m in streamed[-1].messages] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        None,
    ]
    assert_wire_valid(recording_stack)
