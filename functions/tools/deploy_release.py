"""Pattern 3, a durable task: long work with progress and one approval in the middle.

Use it when the work may outlive a request, needs an answer mid-flight, must survive a client
restart, or should be cancellable. `task=True` makes it a task tool: for a client that declares the
tasks extension, the call returns a `CreateTaskResult` at once; the work runs in a Step Functions
execution (the worker Lambda) and the client polls `tasks/get`. Everything the tool does is plain
code on its `ctx: Context`:

- `await ctx.report_progress(...)` becomes the task's `statusMessage`, and is also where a cancel
  is noticed: after `tasks/cancel` the next report stops the tool.
- `await ctx.elicit(...)` mid-task holds the execution on a task token (no Lambda runs while the
  user thinks) and shows the question on `tasks/get`; `tasks/update` answers it (`elicit-1`), and
  the tool runs again from the top.
- Because it runs again from the top, each stage is a durable step: `await ctx.step(name, fn)` runs
  `fn` once for the task and records what it returned; on the next run the stage is skipped and
  its record returned. A run that nears the worker's timeout goes on in a fresh invocation at a
  step boundary, so the stages together may take far longer than one invocation.

A client that does not declare the tasks extension gets the same tool synchronously (asked
through MRTR), which is fine for short runs; write `task="required"` to refuse those instead.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Annotated

from pydantic import BaseModel, Field

from mcp_runtime.fastmcp import Context, FastMCP

mcp = FastMCP("deploy-release")

STAGES = ("build", "test", "staging")


class Promotion(BaseModel):
    approve: bool = Field(description="Promote to production?")


async def _run_stage(ctx: Context, stage: str, seconds: float, step: int, total: int) -> str:
    """Stand-in for real work (a build, a test run, a rollout): a loop that reports as it goes."""
    await ctx.report_progress(step, total, f"{stage}: started")
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        await asyncio.sleep(min(0.5, seconds - elapsed))
        fraction = min((time.monotonic() - started) / seconds, 0.99)
        await ctx.report_progress(step + fraction, total, f"{stage}: {fraction:.0%}")
    return f"{stage} done"


@mcp.tool(task=True, annotations={"destructiveHint": False, "openWorldHint": True})
async def deploy_release(
    service: Annotated[str, Field(description="The service to deploy.", min_length=1, max_length=100)],
    version: Annotated[str, Field(description="The version to deploy, e.g. 1.4.2.", min_length=1, max_length=50)],
    ctx: Context,
    seconds_per_stage: Annotated[float, Field(description="Simulated duration of each stage.", ge=0, le=300)] = 2.0,
) -> str:
    """Deploy a service version through build, test and staging, then to production after approval."""
    total = len(STAGES) + 1
    for step, stage in enumerate(STAGES):
        # Runs once for the task; after the approval, the tool runs again and this returns at once.
        await ctx.step(stage, functools.partial(_run_stage, ctx, stage, seconds_per_stage, step, total))

    answer = await ctx.elicit(f"{service} {version} passed staging. Promote to production?", Promotion)
    if answer.action != "accept" or not answer.data.approve:
        return f"{service} {version} stays on staging; production was not changed."

    await ctx.step("production", functools.partial(_run_stage, ctx, "production", seconds_per_stage, len(STAGES), total))
    return f"{service} {version} is live in production."
