"""Pattern 3, a durable task: long work with progress and one approval in the middle.

Use it when the work may outlive a request, needs an answer mid-flight, must survive a client
restart, or should be cancellable. For a client that declares the tasks extension, the call
returns a `CreateTaskResult` at once; the work runs in a Step Functions execution (the worker
Lambda) and the client polls `tasks/get`. Everything the tool does is plain code:

- `ctx.report_progress(...)` becomes the task's `statusMessage`, and is also where a cancel is
  noticed: after `tasks/cancel` the next report stops the tool.
- `ctx.elicit(...)` mid-task holds the execution on a task token (no Lambda runs while the user
  thinks) and shows the question on `tasks/get`; `tasks/update` answers it, and the tool runs
  again from the top.
- Because it runs again from the top, each stage is a durable step: `ctx.step(name, fn)` runs
  `fn` once for the task and records what it returned; on the next run the stage is skipped and
  its record returned. A run that nears the worker's timeout goes on in a fresh invocation at a
  step boundary, so the stages together may take far longer than one invocation.

A client that does not declare the tasks extension gets the same tool synchronously (asked
through MRTR), which is fine for short runs; write `task="required"` to refuse those instead.
"""

from __future__ import annotations

import functools
import time

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, tool

STAGES = ("build", "test", "staging")


class DeployReleaseArgs(BaseModel):
    service: str = Field(description="The service to deploy.", min_length=1, max_length=100)
    version: str = Field(description="The version to deploy, e.g. 1.4.2.", min_length=1, max_length=50)
    seconds_per_stage: float = Field(2.0, description="Simulated duration of each stage.", ge=0, le=300)


class Promotion(BaseModel):
    approve: bool = Field(description="Promote to production?")


def _run_stage(ctx: ToolContext, stage: str, seconds: float, step: int, total: int) -> str:
    """Stand-in for real work (a build, a test run, a rollout): a loop that reports as it goes."""
    ctx.report_progress(step, total, f"{stage}: started")
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        time.sleep(min(0.5, seconds - elapsed))
        fraction = min((time.monotonic() - started) / seconds, 0.99)
        ctx.report_progress(step + fraction, total, f"{stage}: {fraction:.0%}")
    return f"{stage} done"


@tool(
    description="Deploy a service version through build, test and staging, then to production after approval.",
    task=True,
    asks=("elicitation",),
    annotations={"destructiveHint": False, "openWorldHint": True},
)
def deploy_release(args: DeployReleaseArgs, ctx: ToolContext) -> str:
    total = len(STAGES) + 1
    for step, stage in enumerate(STAGES):
        # Runs once for the task; after the approval, the tool runs again and this returns at once.
        ctx.step(stage, functools.partial(_run_stage, ctx, stage, args.seconds_per_stage, step, total))

    answer = ctx.elicit("promote", f"{args.service} {args.version} passed staging. Promote to production?", Promotion)
    if not (answer.accepted and answer.content is not None and answer.content.approve):
        return f"{args.service} {args.version} stays on staging; production was not changed."

    ctx.step("production", lambda: _run_stage(ctx, "production", args.seconds_per_stage, len(STAGES), total))
    return f"{args.service} {args.version} is live in production."
