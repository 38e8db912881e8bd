"""A FastMCP-style task tool (mcp_runtime.fastmcp) on the real ASL with the worker in-process: async steps
recorded once across a durable wait, `await ctx.elicit` as the task's input_required answered by
tasks/update, and the tool run again from the top after each (the replay rule of docs/fastmcp.md)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime.fastmcp import Context, FastMCP
from mcp_runtime.tasks.models import COMPLETED, INPUT_REQUIRED
from mcp_runtime.tasks.service import TaskService
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until

mcp = FastMCP("durable-port")


@mcp.tool(task="required")
async def export_in_parts(parts: int, ledger: str, ctx: Context) -> str:
    """Export in parts, wait a second after the first, then ask whether to keep the export."""

    async def part(index: int) -> int:
        await asyncio.sleep(0)
        with open(ledger, "a", encoding="utf-8") as written:
            written.write(f"part {index}\n")
        return index * index

    total = 0
    for index in range(parts):
        total += await ctx.step(f"part-{index}", lambda index=index: part(index))
        await ctx.report_progress(index + 1, parts, f"part {index + 1} of {parts}")
        if index == 0:
            await ctx.wait(1)
    answer = await ctx.elicit(f"Keep the export of {parts} parts?", bool)
    return f"{parts} parts, sum of squares {total}, kept: {answer.action == 'accept' and answer.data}"


@pytest.fixture
def service(task_env: TaskEnvironment) -> TaskService:
    task_env.tools.include(sys.modules[__name__])
    return task_env.service()


def test_an_async_task_tool_records_each_async_step_once_across_a_wait_and_asks_through_the_task(
    service: TaskService, task_env: TaskEnvironment, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    spec = task_env.tools.get("export_in_parts")
    assert spec is not None
    task_id: str = service.create(spec, {"parts": 3, "ledger": str(ledger)}, request_context(), None)["taskId"]

    waiting: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda t: t["status"] != "working", timeout=30
    )
    assert waiting["status"] == INPUT_REQUIRED
    assert waiting["inputRequests"]["elicit-1"]["params"]["message"] == "Keep the export of 3 parts?"
    steps = task_env.store().load(task_id).steps  # the records go with the item's terminal write
    assert [steps[f"step:part-{index}"]["v"] for index in range(3)] == [0, 1, 4]
    service.update(task_id, {"elicit-1": {"action": "accept", "content": {"value": True}}}, request_context())
    done: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda t: t["status"] == COMPLETED, timeout=30
    )

    assert done["result"]["content"] == [{"type": "text", "text": "3 parts, sum of squares 5, kept: True"}]
    assert ledger.read_text().splitlines() == ["part 0", "part 1", "part 2"]
