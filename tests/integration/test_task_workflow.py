"""The real ASL executed by moto's Step Functions interpreter, with the real worker invoked in-process."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import pytest
from fixtures import conformance_tasks
from pydantic import BaseModel

from mcp_runtime import tool, wire
from mcp_runtime.observability import TOOL_EXCEPTIONS
from mcp_runtime.tasks.models import (
    CANCELLED,
    COMPLETED,
    EXECUTION_LOST_ERROR,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
)
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tools import ToolContext
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until
from tests.telemetry_support import RecordingTelemetry

TERMINAL = {COMPLETED, FAILED, CANCELLED}


class NoArgs(BaseModel):
    pass


class Approval(BaseModel):
    approve: bool


@tool(description="Crashes with an exception that is not a tool or protocol error.", task=True)
def crash(args: NoArgs, ctx: ToolContext) -> str:
    raise RuntimeError("disk on fire")


@tool(description="Reports progress, then waits a little, then finishes.", task=True)
def report_then_finish(args: NoArgs, ctx: ToolContext) -> str:
    ctx.report_progress(1, 2, "step 1 of 2: copying")
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return "copied"


@tool(description="Asks for approval; re-asks until the answer is well-formed.", task=True)
def needs_approval(args: NoArgs, ctx: ToolContext) -> str:
    answer = ctx.elicit("approval", "Approve?", Approval)
    return f"approved={answer.content.approve if answer.content else None}"


@pytest.fixture
def env(task_env: TaskEnvironment) -> TaskEnvironment:
    task_env.tools.include(conformance_tasks)
    task_env.tools.include(sys.modules[__name__])
    return task_env


@pytest.fixture
def service(env: TaskEnvironment) -> TaskService:
    return env.service()


def start(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any] | None = None) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    created = service.create(spec, arguments or {}, request_context(), None)
    task_id: str = created["taskId"]
    return task_id


def poll(service: TaskService, task_id: str, statuses: set[str], timeout: float = 15.0) -> dict[str, Any]:
    result: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda r: r["status"] in statuses, timeout
    )
    return result


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def test_a_task_runs_to_completion_and_tasks_get_inlines_the_tool_result(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "slow_compute", {"seconds": 0.2, "label": "quick"})

    done = poll(service, task_id, TERMINAL)

    assert done["status"] == COMPLETED
    assert done["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "slow_compute 'quick' finished after 0.2s"}],
    }
    assert "error" not in done and "inputRequests" not in done
    assert wait_until(lambda: env.execution_status(task_id), lambda s: s == "SUCCEEDED") == "SUCCEEDED"


def test_a_tool_asking_for_input_holds_the_execution_until_tasks_update_answers(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "confirm_delete", {"filename": "report.txt"})

    waiting = poll(service, task_id, {INPUT_REQUIRED} | TERMINAL)
    assert waiting["status"] == INPUT_REQUIRED
    assert waiting["inputRequests"] == {
        "confirm": {
            "method": wire.INPUT_METHOD_ELICIT,
            "params": {
                "mode": "form",
                "message": "Delete report.txt?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"confirm": {"description": "Go ahead?", "type": "boolean"}},
                    "required": ["confirm"],
                },
            },
        }
    }
    assert env.execution_status(task_id) == "RUNNING"

    service.update(task_id, {"confirm": accept(confirm=True)}, request_context())
    done = poll(service, task_id, TERMINAL)

    assert done["status"] == COMPLETED
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted report.txt"}]
    assert wait_until(lambda: env.execution_status(task_id), lambda s: s == "SUCCEEDED") == "SUCCEEDED"


def test_answering_one_of_two_questions_keeps_the_task_waiting_on_the_other(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "multi_input")
    waiting = poll(service, task_id, {INPUT_REQUIRED} | TERMINAL)
    assert sorted(waiting["inputRequests"]) == ["confirm", "name"]

    service.update(task_id, {"name": accept(name="Ada"), "unknown": accept(x=1)}, request_context())
    partial = service.get(task_id, request_context())
    service.update(task_id, {"confirm": accept(confirm=True)}, request_context())
    done = poll(service, task_id, TERMINAL)

    assert (partial["status"], list(partial["inputRequests"])) == (INPUT_REQUIRED, ["confirm"])
    assert done["result"]["content"] == [{"type": "text", "text": "multi_input done: name=Ada, confirm=true"}]


def test_a_malformed_answer_is_asked_again_under_a_fresh_key(service: TaskService, env: TaskEnvironment) -> None:
    task_id = start(service, env, "needs_approval")
    first = poll(service, task_id, {INPUT_REQUIRED} | TERMINAL)
    service.update(task_id, {"approval": accept(approve="yes please")}, request_context())

    second = wait_until(
        lambda: service.get(task_id, request_context()),
        lambda r: r["status"] != WORKING and list(r.get("inputRequests", {})) != ["approval"],
    )
    service.update(task_id, {"approval": accept(approve=True)}, request_context())  # the old key: ignored
    service.update(task_id, {"approval.2": accept(approve=True)}, request_context())
    done = poll(service, task_id, TERMINAL)

    assert list(first["inputRequests"]) == ["approval"]
    assert (second["status"], list(second["inputRequests"])) == (INPUT_REQUIRED, ["approval.2"])
    assert done["result"]["content"] == [{"type": "text", "text": "approved=True"}]


def test_a_tool_error_settles_completed_with_is_error(service: TaskService, env: TaskEnvironment) -> None:
    task_id = start(service, env, "failing_job")

    done = poll(service, task_id, TERMINAL)

    assert done["status"] == COMPLETED
    assert done["result"] == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "failing_job failed on purpose: simulated tool error"}],
        "isError": True,
    }
    assert "error" not in done


def test_a_protocol_error_settles_failed_with_that_error_inline(service: TaskService, env: TaskEnvironment) -> None:
    task_id = start(service, env, "protocol_error_job")

    done = poll(service, task_id, TERMINAL)

    assert done["status"] == FAILED
    assert done["error"] == {
        "code": wire.INTERNAL_ERROR,
        "message": "protocol_error_job failed on purpose: simulated protocol error",
    }
    assert "result" not in done


def test_a_tool_that_raises_fails_its_task_with_a_generic_error_counts_it_and_logs_its_traceback(
    service: TaskService, env: TaskEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="mcp_runtime.tasks.worker")
    env.telemetry = telemetry = RecordingTelemetry()
    task_id = start(service, env, "crash")

    done = poll(service, task_id, TERMINAL)

    assert done["status"] == FAILED
    assert done["error"] == {"code": wire.INTERNAL_ERROR, "message": "Task execution failed"}  # no class names
    # A tool's bug is the task's failure and a metric by tool, not a failed execution (which pages).
    assert wait_until(lambda: env.execution_status(task_id), lambda s: s != "RUNNING") == "SUCCEEDED"
    assert [(s.value, s.dimensions) for s in telemetry.of(TOOL_EXCEPTIONS)] == [(1, {"tool": "crash"})]
    logged = [r for r in caplog.records if r.name == "mcp_runtime.tasks.worker" and task_id in r.getMessage()]
    assert [r.getMessage() for r in logged] == [f"task {task_id}: tool crash raised: disk on fire"]
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is RuntimeError  # the traceback


def test_progress_reports_become_the_status_message(service: TaskService, env: TaskEnvironment) -> None:
    task_id = start(service, env, "report_then_finish")

    working = wait_until(
        lambda: service.get(task_id, request_context()), lambda r: "statusMessage" in r or r["status"] in TERMINAL
    )
    done = poll(service, task_id, TERMINAL)

    assert (working["status"], working["statusMessage"]) == (WORKING, "step 1 of 2: copying")
    assert (done["status"], done["result"]["content"][0]["text"]) == (COMPLETED, "copied")
    assert "statusMessage" not in done


def test_cancelling_a_running_task_settles_cancelled_and_stops_its_work(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "slow_compute", {"seconds": 30, "label": "long"})
    wait_until(lambda: service.get(task_id, request_context()), lambda r: "statusMessage" in r)

    service.cancel(task_id, request_context())
    done = service.get(task_id, request_context())

    assert done["status"] == CANCELLED
    assert "result" not in done and "error" not in done
    # Stopped by the supervisor (ABORTED), or ended by its own run when the tool noticed the cancel
    # first (SUCCEEDED); moto's interpreter ends FAILED when the stop lands inside a state transition
    # ("pop from empty list" in its Choice state). Whichever: nothing keeps running behind the task.
    ended = wait_until(lambda: env.execution_status(task_id), lambda s: s != "RUNNING")
    assert ended in {"ABORTED", "SUCCEEDED", "FAILED"}
    service.cancel(task_id, request_context())  # cancelling a terminal task: the same empty ack
    assert service.get(task_id, request_context())["status"] == CANCELLED


def test_cancelling_a_task_awaiting_input_settles_cancelled_and_ends_its_execution(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "confirm_delete", {"filename": "keep.txt"})
    poll(service, task_id, {INPUT_REQUIRED})

    service.cancel(task_id, request_context())
    service.update(task_id, {"confirm": accept(confirm=True)}, request_context())  # too late: ignored

    assert service.get(task_id, request_context())["status"] == CANCELLED
    assert wait_until(lambda: env.execution_status(task_id), lambda s: s != "RUNNING") == "ABORTED"
    assert service.get(task_id, request_context())["status"] == CANCELLED


def test_a_task_whose_execution_was_stopped_behind_its_back_is_settled_failed_in_the_background(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "confirm_delete", {"filename": "a.txt"})
    awaiting = poll(service, task_id, {INPUT_REQUIRED})
    env.executor().stop(task_id)  # an operator stops the execution behind the service's back

    settled = poll(service, task_id, TERMINAL)

    assert awaiting["status"] == INPUT_REQUIRED
    assert (settled["status"], settled["error"]) == (FAILED, EXECUTION_LOST_ERROR)  # the status is in the log


def test_an_ended_execution_that_is_not_the_tasks_current_one_leaves_the_task_alone(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "confirm_delete", {"filename": "b.txt"})
    poll(service, task_id, {INPUT_REQUIRED})
    stale = f"{task_id}.0"
    env.stepfunctions.start_execution(
        stateMachineArn=env.resources.state_machine_arn, name=stale, input=json.dumps({"taskId": task_id, "round": 0})
    )
    env.executor().stop(stale)
    wait_until(lambda: env.execution_status(stale), lambda s: s != "RUNNING")

    assert service.get(task_id, request_context())["status"] == INPUT_REQUIRED
    env.executor().stop(task_id)
    settled = poll(service, task_id, TERMINAL)
    assert (settled["status"], settled["error"]) == (FAILED, EXECUTION_LOST_ERROR)


def test_a_task_that_stays_quiet_is_left_alone_while_its_execution_runs(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "confirm_delete", {"filename": "a.txt"})
    poll(service, task_id, {INPUT_REQUIRED})

    assert service.get(task_id, request_context())["status"] == INPUT_REQUIRED
    assert env.execution_status(task_id) == "RUNNING"
    service.cancel(task_id, request_context())


def test_the_worker_leaves_a_cancelled_task_alone(service: TaskService, env: TaskEnvironment) -> None:
    task_id = start(service, env, "slow_compute", {"seconds": 30, "label": "x"})
    service.cancel(task_id, request_context())

    assert env.worker().run(task_id) == {
        "outcome": wire.OUTCOME_NOT_WORKING,
        "tokenWait": None,
        "settle": None,
        "wait": None,
    }
    assert env.store().get(task_id).status == CANCELLED


def _execution_arn(env: TaskEnvironment, task_id: str) -> str:
    from mcp_runtime.tasks.executor import execution_arn

    return execution_arn(env.resources.state_machine_arn, task_id)


def test_a_run_of_an_execution_the_task_no_longer_names_leaves_the_task_to_its_current_one(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "slow_compute", {"seconds": 30, "label": "x"})

    stale = env.worker().run(task_id, 0, f"{task_id}.7")
    assert stale == {"outcome": wire.OUTCOME_NOT_CURRENT, "tokenWait": None, "settle": None, "wait": None}
    assert env.store().get(task_id).status == WORKING
    service.cancel(task_id, request_context())


def test_a_terminal_write_that_a_cancel_got_to_first_leaves_the_cancel_standing(
    service: TaskService, env: TaskEnvironment
) -> None:
    task_id = start(service, env, "slow_compute", {"seconds": 30, "label": "x"})
    version = env.store().get(task_id).version
    service.cancel(task_id, request_context())

    late = env.worker().settle(task_id, {"status": COMPLETED, "version": version, "payload": {"content": []}})
    assert late == {"outcome": wire.OUTCOME_OVERTAKEN, "tokenWait": None, "settle": None, "wait": None}
    assert env.store().get(task_id).status == CANCELLED
