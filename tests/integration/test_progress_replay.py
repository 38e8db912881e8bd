"""Progress and logs across the runs of one task (issue 28, item 4): a task tool runs from the top on every
invocation, so its earlier reports come again; they are never written again, and `statusMessage`
never goes back to an earlier report (seen: stuck at `shard 1/8` for 35 s after a continuation). The
latest report is written before an invocation ends at a durable boundary. `ctx.log` lines go to the
function's log with the task id, those a run replays marked so. On the real ASL, the worker in-process,
with the deployed throttling made certain (one write a minute)."""

from __future__ import annotations

import json
import logging
import sys
import time
from functools import partial
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_runtime import ToolContext, tool, wire
from mcp_runtime.legacy._leg import LegacyLeg
from mcp_runtime.legacy._store import DynamoLegacyStore
from mcp_runtime.sealing import SealingKey, StateSealer
from mcp_runtime.server import McpServer
from mcp_runtime.settings import Settings
from mcp_runtime.tasks.models import COMPLETED, TERMINAL_STATUSES
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.transport import HttpRequest, McpHttpTransport
from tests.integration.task_harness import ALICE, TaskEnvironment, request_context, wait_until

SHARDS = 4
# What the tool saw of its own task at the start of each shard's work: (shard, statusMessage).
SEEN: list[tuple[int, str | None]] = []
STORE: list[DynamoTaskStore] = []


class NoArgs(BaseModel):
    pass


def shard_work(task_id: str, shard: int) -> int:
    SEEN.append((shard, STORE[0].get(task_id).status_message))
    return shard


@tool(description="Works shard by shard, reporting each; waits after the second (a new invocation).", task=True)
def sharded(args: NoArgs, ctx: ToolContext) -> str:
    for shard in range(SHARDS):
        ctx.step(f"shard-{shard}", partial(shard_work, str(ctx.task_id), shard))
        ctx.log("info", {"shard": shard})
        ctx.report_progress(shard + 1, SHARDS, f"shard {shard + 1}/{SHARDS}")
        if shard == 1:
            ctx.wait(0.01)
    return "all shards"


@pytest.fixture
def writes(env: TaskEnvironment, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    written: list[str] = []
    original = DynamoTaskStore.set_status_message

    def recorded(self: DynamoTaskStore, task_id: str, message: str, *args: Any, **kwargs: Any) -> None:
        written.append(message)
        original(self, task_id, message, *args, **kwargs)

    monkeypatch.setattr(DynamoTaskStore, "set_status_message", recorded)
    return written


@pytest.fixture
def env(task_env: TaskEnvironment) -> TaskEnvironment:
    task_env.tools.include(sys.modules[__name__])
    task_env.progress_interval_seconds = 60.0  # after a run's first write, every report within a minute waits
    SEEN.clear()
    STORE[:] = [task_env.store()]
    return task_env


def test_after_a_new_invocation_the_status_message_never_goes_back_and_replayed_reports_are_not_written(
    env: TaskEnvironment, writes: list[str]
) -> None:
    service = env.service()
    spec = env.tools.get("sharded")
    assert spec is not None
    task_id = service.create(spec, {}, request_context(), None)["taskId"]

    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL_STATUSES, 30)

    assert (done["status"], done["result"]["content"][0]["text"]) == (COMPLETED, "all shards")
    # The first run writes its first report, and its latest before the wait ends the invocation; the
    # second replays shards 1 and 2 (their reports are not written again), then writes shard 3's.
    assert writes == ["shard 1/4", "shard 2/4", "shard 3/4"]
    assert SEEN == [(0, None), (1, "shard 1/4"), (2, "shard 2/4"), (3, "shard 3/4")]


def test_ctx_log_inside_a_task_goes_to_the_functions_log_with_the_task_id_and_replays_are_marked(
    env: TaskEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_runtime.tool")
    service = env.service()
    spec = env.tools.get("sharded")
    assert spec is not None
    task_id = service.create(spec, {}, request_context(), None)["taskId"]

    wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL_STATUSES, 30)

    lines = [record for record in caplog.records if record.name == "mcp_runtime.tool"]
    assert [(line.getMessage(), getattr(line, "replayed", False)) for line in lines] == [
        ('tool sharded: {"shard": 0}', False),
        ('tool sharded: {"shard": 1}', False),
        ('tool sharded: {"shard": 0}', True),  # the second run replays the first two shards
        ('tool sharded: {"shard": 1}', True),
        ('tool sharded: {"shard": 2}', False),
        ('tool sharded: {"shard": 3}', False),
    ]
    assert {(line.task_id, line.tool, line.levelname, line.level_mcp) for line in lines} == {  # type: ignore[attr-defined]
        (task_id, "sharded", "INFO", "info")
    }


# ---- a 2025 client following the task on its event stream gets the log lines as notifications ---------------------
def sse_messages(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: ") :]) for line in body.splitlines() if line.startswith("data: {")]


def test_a_2025_client_following_a_task_on_its_stream_gets_its_log_lines_as_notifications_once(
    env: TaskEnvironment,
) -> None:
    settings = Settings.model_validate({"MCP_STATE_KEY": "integration-only-requestState-key-0123456789"})
    sealer = StateSealer([SealingKey("k1", b"integration-test-sealing-key-0123456789")])
    server = McpServer(settings, sealer, tools=env.tools, tasks=env.service())
    leg = LegacyLeg(server, DynamoLegacyStore(env.resources.table_name, env.dynamodb), wait_seconds=1.0)
    transport = McpHttpTransport(server, legacy=leg)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

    def send(method: str, body: dict[str, Any] | None, extra: dict[str, str]) -> Any:
        raw = b"" if body is None else json.dumps({"jsonrpc": "2.0", **body}).encode()
        return transport.handle(HttpRequest(method, "/mcp", {**headers, **extra}, raw, ALICE))

    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    session = {
        wire.HEADER_SESSION_ID: send("POST", {"id": 1, "method": "initialize", "params": init}, {}).headers[
            wire.HEADER_SESSION_ID
        ]
    }
    assert send("POST", {"id": 2, "method": "logging/setLevel", "params": {"level": "info"}}, session).status == 200
    call = {"name": "sharded", "arguments": {}, "_meta": {"progressToken": "p"}}
    opened = send("POST", {"id": 3, "method": "tools/call", "params": call}, session)
    received = sse_messages(opened.body)
    last_event = [line for line in opened.body.splitlines() if line.startswith("id: ")][-1][len("id: ") :]
    deadline = time.monotonic() + 60
    while not any(message.get("id") == 3 for message in received) and time.monotonic() < deadline:
        resumed = send("GET", None, {**session, wire.HEADER_LAST_EVENT_ID: last_event})
        received += sse_messages(resumed.body)
        last_event = [line for line in resumed.body.splitlines() if line.startswith("id: ")][-1][len("id: ") :]

    logged = [m["params"] for m in received if m.get("method") == wire.NOTIFICATION_MESSAGE]
    assert logged == [{"level": "info", "data": {"shard": shard}, "logger": "sharded"} for shard in range(SHARDS)]
    (result,) = [m["result"] for m in received if m.get("id") == 3]
    assert result["content"] == [{"type": "text", "text": "all shards"}]
