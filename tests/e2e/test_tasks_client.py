"""The real Python tasks client (`fastmcp[tasks]==4.1.4`: `mcp.Client` + `TasksClientExtension`)
against `make run`'s stack: the real ASL on embedded moto, the real worker, the conformance fixtures."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
import pytest
from fastmcp_tasks.client import TasksClientExtension, _send_cancel, _send_get
from mcp import Client
from testkit import RunningStack

from mcp_runtime import wire
from tests.e2e.scripted_user import ScriptedUser

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(conformance_stack: RunningStack) -> RunningStack:
    return conformance_stack


def tasks_client(stack: RunningStack, user: ScriptedUser | None = None) -> Client:
    return Client(
        stack.url,
        mode=wire.PROTOCOL_VERSION,
        elicitation_callback=user,
        extensions=[TasksClientExtension(user)],
        cache=None,
    )


def call(
    stack: RunningStack, name: str, arguments: dict[str, Any], user: ScriptedUser | None = None
) -> mcp_types.CallToolResult:
    async def run() -> mcp_types.CallToolResult:
        async with tasks_client(stack, user) as client:
            with anyio.fail_after(30):
                return await client.call_tool(name, arguments)

    return anyio.run(run)


def texts(result: mcp_types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]


def test_a_task_runs_to_completion_and_the_client_receives_the_tool_result(stack: RunningStack) -> None:
    result = call(stack, "slow_compute", {"seconds": 0.5, "label": "client"})

    assert (result.is_error, texts(result)) == (False, ["slow_compute 'client' finished after 0.5s"])


def test_the_client_answers_a_mid_task_question_through_tasks_update(stack: RunningStack) -> None:
    user = ScriptedUser({"confirm": True})

    result = call(stack, "confirm_delete", {"filename": "notes.txt"}, user)

    assert user.asked == ["Delete notes.txt?"]
    assert (result.is_error, texts(result)) == (False, ["Deleted notes.txt"])


def test_a_tool_error_reaches_the_client_as_an_error_result(stack: RunningStack) -> None:
    result = call(stack, "failing_job", {})

    assert (result.is_error, texts(result)) == (True, ["failing_job failed on purpose: simulated tool error"])


def test_a_protocol_failure_reaches_the_client_with_the_tasks_error_message(stack: RunningStack) -> None:
    result = call(stack, "protocol_error_job", {})

    assert (result.is_error, texts(result)) == (
        True,
        ["protocol_error_job failed on purpose: simulated protocol error"],
    )


def test_a_task_cancelled_by_the_client_settles_cancelled(stack: RunningStack) -> None:
    async def run() -> tuple[str, str]:
        async with tasks_client(stack) as client:
            with anyio.fail_after(30):
                created = await client.session.call_tool(
                    name="slow_compute", arguments={"seconds": 60, "label": "cancel-me"}, allow_claimed=True
                )
                task_id = created.task_id  # type: ignore[union-attr]
                await _send_cancel(client.session, task_id)
                final = await _send_get(client.session, task_id)
                return created.status, final.status  # type: ignore[union-attr]

    assert anyio.run(run) == ("working", "cancelled")
