"""A task run cut short (timed out, crashed) on the real ASL with the worker in-process: it resumes after
its last recorded step; code outside steps that already ran runs again only for a tool that allows it,
otherwise the task fails naming the limit and the fix, recorded for the operator and masked on the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from local_stack.aws import register_invoker

from mcp_runtime._aws import invocation_deadline
from mcp_runtime.fastmcp import Context, FastMCP, TasksExtension
from mcp_runtime.tasks.models import COMPLETED, FAILED, OPERATOR_REASON
from mcp_runtime.tasks.service import TaskService
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until

TERMINAL = {COMPLETED, FAILED}


class Killed(BaseException):
    """Lambda ending the invocation (its timeout, a crash): nothing in the worker catches it, so the run
    leaves its marks on the task as a dead invocation does. (A step's own mark is removed on the way out,
    which a real kill skips; the retry then meets it and waits until it expires, and runs the step
    again, as here.)"""


class Invocation:
    """Kills the invocation in which the tool's region first runs."""

    def die(self) -> None:
        raise Killed


def oncall(ledger: Path, kill_in_region: int, invocation: Invocation, *, mask: bool = True) -> FastMCP:
    """The on-call module's rollback as its team wrote it for FastMCP 4.1.4, three ways."""
    mcp = FastMCP("oncall", mask_error_details=mask)
    mcp.add_extension(TasksExtension())

    async def roll_back(region: int) -> str:
        with ledger.open("a", encoding="utf-8") as written:
            written.write(f"region {region}\n")
        if region == kill_in_region and len(ledger.read_text().splitlines()) == region + 1:
            invocation.die()  # the first time this region runs, the invocation dies after its side effect
        return f"region {region} rolled back"

    @mcp.tool(task=True)
    async def rollback(regions: int, ctx: Context) -> str:
        """No steps: FastMCP runs this once."""
        for region in range(regions):
            await roll_back(region)
            await ctx.report_progress(region + 1, regions)
        return f"rolled back {regions}"

    @mcp.tool(task=True, rerun_interrupted=True)
    async def rollback_again(regions: int, ctx: Context) -> str:
        """No steps, and safe to run again (its team says so)."""
        for region in range(regions):
            await roll_back(region)
        return f"rolled back {regions}"

    @mcp.tool(task=True)
    async def rollback_in_steps(regions: int, ctx: Context) -> str:
        """Each region a step: a run resumes after the last one recorded."""
        for region in range(regions):
            await ctx.step(f"region-{region}", lambda region=region: roll_back(region))
        return f"rolled back {regions}"

    @mcp.tool(task=True)
    async def rollback_failing(regions: int, ctx: Context) -> str:
        raise RuntimeError("deploy API answered 503 for eu-west-1")

    return mcp


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    return path


def serve(env: TaskEnvironment, module_server: FastMCP, invocation: Invocation) -> None:
    """The worker function, answering Sandbox.Timedout (as Lambda reports a timeout) for an invocation
    that was killed."""
    import types

    module = types.ModuleType("oncall_port")
    module.mcp = module_server  # type: ignore[attr-defined]
    env.tools.include(module)

    def invoke(body: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
        event = json.loads(body.decode())
        try:
            with invocation_deadline(10_000):
                return json.dumps(env.worker().handle(event)).encode(), None
        except Killed:
            timed_out = {"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out after 10.00 seconds"}
            return json.dumps(timed_out).encode(), "Unhandled"

    register_invoker(env.resources.worker_function_name, invoke)


@pytest.fixture
def invocation() -> Invocation:
    return Invocation()


def run_task(env: TaskEnvironment, name: str, regions: int) -> tuple[str, dict[str, Any]]:
    service: TaskService = env.service()
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, {"regions": regions}, request_context(), None)["taskId"]
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL, 30)
    return task_id, done


def task_env_store(env: TaskEnvironment) -> Any:
    return env.store()


def item_error(env: TaskEnvironment, task_id: str) -> dict[str, Any]:
    """What `make task ID=` shows of the failed task's error: the item's."""
    return task_env_store(env).load(task_id).error or {}


def wire_error(env: TaskEnvironment, task_id: str) -> dict[str, Any]:
    from mcp_runtime.tasks.models import get_task_result

    return dict(get_task_result(task_env_store(env).load(task_id))["error"])


def test_a_task_without_steps_cut_short_fails_naming_the_limit_and_the_fix_and_never_repeats_a_region(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=1, invocation=invocation), invocation)

    task_id, done = run_task(task_env, "rollback", 3)

    assert done["status"] == FAILED
    assert ledger.read_text().splitlines() == ["region 0", "region 1"]  # region 0 never rolled back twice
    reason = item_error(task_env, task_id)[OPERATOR_REASON]
    assert reason.startswith(
        "the run of tool 'rollback' was cut short (the worker's timeout, cdk.json's workerTimeoutSeconds, or a "
        "crash) and it records no steps; running it again from the top would repeat what it already did."
    )
    assert "`await ctx.step(name, fn)`" in reason and "rerun_interrupted=True" in reason
    assert wire_error(task_env, task_id) == {"code": -32603, "message": "Task execution failed"}


def test_a_tool_that_allows_it_runs_again_from_the_top_after_it_was_cut_short(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=1, invocation=invocation), invocation)

    _, done = run_task(task_env, "rollback_again", 3)

    assert done["status"] == COMPLETED
    assert ledger.read_text().splitlines() == ["region 0", "region 1", "region 0", "region 1", "region 2"]


def test_a_task_in_steps_cut_short_resumes_after_its_last_recorded_step_each_region_once_more_at_most(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=1, invocation=invocation), invocation)

    _, done = run_task(task_env, "rollback_in_steps", 3)

    assert done["status"] == COMPLETED
    # Region 1's step died before it was recorded: only that step runs again; region 0 is replayed.
    assert ledger.read_text().splitlines() == ["region 0", "region 1", "region 1", "region 2"]


def test_a_failed_tasks_reason_is_on_the_item_and_reaches_the_client_only_when_details_are_not_masked(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=-1, invocation=invocation), invocation)
    masked_id, _ = run_task(task_env, "rollback_failing", 1)

    assert item_error(task_env, masked_id)[OPERATOR_REASON] == "RuntimeError: deploy API answered 503 for eu-west-1"
    assert wire_error(task_env, masked_id) == {"code": -32603, "message": "Task execution failed"}


def test_with_mask_error_details_false_the_client_reads_why_as_fastmcp_answers(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=-1, invocation=invocation, mask=False), invocation)
    shown_id, done = run_task(task_env, "rollback_failing", 1)
    result = task_env.store().load(shown_id).result or {}

    assert done["status"] == COMPLETED
    assert (result.get("isError"), result.get("content")) == (
        True,
        [{"type": "text", "text": "Error calling tool 'rollback_failing': deploy API answered 503 for eu-west-1"}],
    )


def test_a_cut_short_task_fails_with_its_reason_shown_when_details_are_not_masked(
    task_env: TaskEnvironment, ledger: Path, invocation: Invocation
) -> None:
    serve(task_env, oncall(ledger, kill_in_region=0, invocation=invocation, mask=False), invocation)

    task_id, done = run_task(task_env, "rollback", 2)

    assert done["status"] == FAILED
    assert wire_error(task_env, task_id)["message"].startswith(
        "Task execution failed: the run of tool 'rollback' was cut short"
    )
