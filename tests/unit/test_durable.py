"""The durable operations outside a task (a synchronous call) and the callback token's shape."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_runtime import tool, wire
from mcp_runtime.server import McpServer
from mcp_runtime.tasks.durable import (
    STEP_STATUS_SECONDS,
    DurableRun,
    decode_callback_token,
    encode_callback_token,
    token_hash,
)
from mcp_runtime.tasks.errors import TaskConflict, TaskNoLongerRunning
from mcp_runtime.tools import ToolContext
from mcp_runtime.transport import McpHttpTransport
from tests.unit.conftest import Client, error_of, result_of


class NoArgs(BaseModel):
    pass


class Point(BaseModel):
    x: int
    y: int


@tool(description="Two steps, one returning a model, and a short wait; may run synchronously.", task=True)
def steps_anywhere(args: NoArgs, ctx: ToolContext) -> str:
    point = ctx.step("point", lambda: Point(x=1, y=2))
    numbers = ctx.step("numbers", lambda: (1, 2, 3))
    ctx.wait(0.01)
    return f"{point} {numbers} {len(ctx.idempotency_key('point'))}"


@tool(description="Waits for an external system.", task=True)
def needs_a_callback(args: NoArgs, ctx: ToolContext) -> str:
    return str(ctx.wait_for_callback("ci", lambda callback: None))


def client_with(server: McpServer) -> Client:
    server.tools.include(sys.modules[__name__])
    return Client(McpHttpTransport(server))


def test_outside_a_task_a_step_runs_at_once_and_returns_its_json_value_and_a_wait_sleeps(server: McpServer) -> None:
    result = result_of(client_with(server).call_tool("steps_anywhere", {}))
    assert result["content"] == [{"type": "text", "text": "{'x': 1, 'y': 2} [1, 2, 3] 32"}]


def test_outside_a_task_a_callback_cannot_be_waited_for_and_the_client_is_told_to_declare_tasks(
    server: McpServer,
) -> None:
    error = error_of(client_with(server).call_tool("needs_a_callback", {}))
    assert error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {"extensions": {wire.TASKS_EXTENSION: {}}}}


def test_a_callback_token_names_its_task_and_record_and_carries_a_secret_only_its_hash_checks() -> None:
    token = encode_callback_token("TaskId_0123456789abcdefghijklmnop", "callback:ci.build#2", "s3cr3t-256-bits")

    assert decode_callback_token(token) == (
        "TaskId_0123456789abcdefghijklmnop",
        "callback:ci.build#2",
        "s3cr3t-256-bits",
    )
    assert token.count(".") == 2 and "callback:" not in token
    assert token_hash("s3cr3t-256-bits") != token_hash("s3cr3t-256-bitz")
    for broken in ("", "a.b", "a..c", "a.b.c.d", "x" * 1025, "task.!!!.secret"):
        assert decode_callback_token(broken) is None


@tool(description="Waits an hour; may run synchronously.", task=True)
def waits_an_hour(args: NoArgs, ctx: ToolContext) -> str:
    ctx.wait(3600)
    return "waited"


def test_outside_a_task_a_wait_longer_than_a_request_is_refused_naming_the_tasks_extension(server: McpServer) -> None:
    error = error_of(client_with(server).call_tool("waits_an_hour", {}))
    assert error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["message"] == "This tool waits longer than a request lasts and can only run as a task"


class LookingStore:
    """The calls a durable run makes of its task store; its looks at the task refused once it is cancelled."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.cancelled = False

    def begin_run(self, task_id: str, run_id: str) -> None:
        self.calls.append("begin_run")

    def keep_working(self, task_id: str) -> None:
        self.calls.append("keep_working")
        if self.cancelled:
            raise TaskConflict(f"task {task_id} is no longer working")

    def mark_step(self, task_id: str, key: str, mark: dict[str, Any], now: float, **_: Any) -> dict[str, Any]:
        self.calls.append("mark_step")
        return mark

    def record_operation(self, task_id: str, key: str, record: dict[str, Any], *_: Any, **__: Any) -> dict[str, Any]:
        self.calls.append("record_operation")
        return record

    def unmark_step(self, task_id: str, key: str, run_id: str, **_: Any) -> None:
        self.calls.append("unmark_step")


def test_a_step_a_second_after_the_run_last_saw_its_task_working_looks_at_it_and_a_cancel_stops_the_run() -> None:
    now = [0.0]
    store = LookingStore()
    run = DurableRun(
        "t1", {}, store, None, payloads_expire=True, scratch=dict, callback_url="", monotonic=lambda: now[0]
    )
    ran: list[str] = []
    run.begin("t1", 0, mark=False)

    run.step("a", lambda: ran.append("a"))
    now[0] += STEP_STATUS_SECONDS - 0.001
    run.step("b", lambda: ran.append("b"))
    now[0] += 0.001  # a second since the run's first write saw the task working
    run.step("c", lambda: ran.append("c"))
    store.cancelled = True
    now[0] += STEP_STATUS_SECONDS
    with pytest.raises(TaskNoLongerRunning):
        run.step("d", lambda: ran.append("d"))

    assert ran == ["a", "b", "c"]
    one_step = ["mark_step", "record_operation"]
    assert store.calls == ["begin_run", *one_step, *one_step, "keep_working", *one_step, "keep_working"]
