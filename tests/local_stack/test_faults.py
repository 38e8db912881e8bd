"""Nothing lost, stuck or repeated: the task runtime under AWS's ordinary failures, through the template-driven stack.

Faults are injected into the functions' own AWS calls by a layer (`fault_layer/sitecustomize.py`):
throttling, 5xx answers, timeouts, and requests that AWS applied but whose answer was lost, so a
retry meets its own write. Each scenario below failed before the runtime was made to survive it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime import wire
from tests.local_stack.conftest import TERMINAL, StackClient
from tests.local_stack.faults import CRASH, LOST, THROTTLE, FaultLayer, Rule
from tests.support import local_stack_process

pytestmark = pytest.mark.e2e

API, WORKER = "Api", "Worker"


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> FaultLayer:
    return FaultLayer.create(tmp_path_factory.mktemp("fault-layer"))


@pytest.fixture(scope="module")
def faulty_stack(faults: FaultLayer) -> Iterator[StackClient]:
    env = {"LOCAL_LAYERS": str(faults.directory), "LOCAL_CDK_CONTEXT": json.dumps({"workerTimeoutSeconds": 10})}
    with local_stack_process(fixtures="conformance,lifecycle", extra_env=env) as running:
        yield StackClient(running, user="fault-tester")


@pytest.fixture
def stack(faulty_stack: StackClient, faults: FaultLayer) -> Iterator[StackClient]:
    faults.arm()
    yield faulty_stack
    faults.arm()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.txt"
    path.touch()
    return path


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def runs(ledger: Path) -> int:
    return len(ledger.read_text().splitlines())


def parked(stack: StackClient, task_id: str) -> tuple[str, dict[str, Any]]:
    task = stack.wait_for(task_id, lambda t: t["status"] != "working")
    assert task["status"] == "input_required", task
    (key,) = task["inputRequests"]
    return key, task


def my_task_ids(stack: StackClient) -> set[str]:
    page = stack.result("tools/call", {"name": "list_my_tasks", "arguments": {"limit": 50}})
    return {entry["taskId"] for entry in page["structuredContent"]["tasks"]}


def execution_ends(stack: StackClient, task_id: str, timeout: float = 30.0) -> str:
    return stack.wait_for_execution(task_id, timeout)


# ---- answered, then stuck working forever -------------------------------------------------------------------
def test_an_answer_whose_write_was_applied_but_whose_response_was_lost_still_resumes_the_task(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "lost-answer.txt"})
    key, _ = parked(stack, task_id)
    faults.arm(Rule(LOST, "DynamoDB.UpdateItem", API, contains=('"confirm"',)))

    stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-answer.txt")
    assert faults.fired()[("DynamoDB.UpdateItem", LOST)] == 1


def test_a_client_that_retries_its_update_while_send_task_success_is_throttled_still_gets_the_task_resumed(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "retried-answer.txt"})
    key, _ = parked(stack, task_id)
    faults.arm(Rule(THROTTLE, "SFN.SendTaskSuccess", times=4))
    answer = {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}}

    stack.call("tasks/update", answer)
    stack.call("tasks/update", answer)  # the client's retry, after it saw an error or no answer

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted retried-answer.txt")


def test_send_task_success_the_settle_write_and_stop_execution_throttled_in_a_row_still_resume_the_task(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "row.txt"})
    key, _ = parked(stack, task_id)
    faults.arm(
        Rule(THROTTLE, "SFN.SendTaskSuccess", times=4),
        Rule(THROTTLE, "DynamoDB.UpdateItem", API, skip=1, times=4),
        Rule(THROTTLE, "SFN.StopExecution", times=4),
    )

    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted row.txt")


# ---- healthy tasks failed by one lost response -------------------------------------------------------------
def test_a_send_task_success_applied_whose_response_was_lost_does_not_fail_the_resumed_task(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "lost-resume.txt"})
    key, _ = parked(stack, task_id)
    faults.arm(Rule(LOST, "SFN.SendTaskSuccess"))

    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-resume.txt")
    assert faults.fired()[("SFN.SendTaskSuccess", LOST)] == 1


def test_a_park_write_applied_whose_response_was_lost_keeps_the_task_parked_and_answerable(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(Rule(LOST, "DynamoDB.UpdateItem", WORKER, contains=("input_required",)))
    task_id = stack.start("confirm_delete", {"filename": "lost-park.txt"})
    key, _ = parked(stack, task_id)
    assert stack.execution_status(task_id) == "RUNNING"

    stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-park.txt")
    assert faults.fired()[("DynamoDB.UpdateItem", LOST)] == 1


# ---- executions left running behind terminal tasks ---------------------------------------------------------
def test_cancelling_a_parked_task_while_stop_execution_is_throttled_still_ends_its_execution(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "throttled-stop.txt"})
    parked(stack, task_id)
    faults.arm(Rule(THROTTLE, "SFN.StopExecution", times=4))

    stack.result("tasks/cancel", {"taskId": task_id})

    assert stack.task(task_id)["status"] == "cancelled"
    assert execution_ends(stack, task_id) == "ABORTED"
    assert faults.fired()[("SFN.StopExecution", THROTTLE)] == 4


def test_a_cancel_write_applied_whose_response_was_lost_still_ends_the_execution(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "lost-cancel.txt"})
    parked(stack, task_id)
    faults.arm(Rule(LOST, "DynamoDB.UpdateItem", API, contains=("cancelled",)))

    stack.result("tasks/cancel", {"taskId": task_id})

    assert stack.task(task_id)["status"] == "cancelled"
    assert execution_ends(stack, task_id) == "ABORTED"


# ---- phantom tasks ----------------------------------------------------------------------------------------
def test_a_throttled_start_execution_never_fails_the_create_and_the_task_runs(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(Rule(THROTTLE, "SFN.StartExecution", times=4))

    task_id = stack.start("slow_compute", {"seconds": 0, "label": "throttled-start"})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == (
        "completed",
        "slow_compute 'throttled-start' finished after 0s",
    )
    assert faults.fired()[("SFN.StartExecution", THROTTLE)] == 4


def test_a_create_write_applied_whose_response_was_lost_answers_the_task_and_runs_it(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(Rule(LOST, "DynamoDB.PutItem", API, contains=("lost-create",)))

    task_id = stack.start("slow_compute", {"seconds": 0, "label": "lost-create"})

    done = stack.settled(task_id, timeout=30)
    assert done["status"] == "completed"
    assert faults.fired()[("DynamoDB.PutItem", LOST)] == 1


def test_a_create_that_cannot_be_written_answers_an_error_and_leaves_no_task_behind(
    stack: StackClient, faults: FaultLayer
) -> None:
    before = my_task_ids(stack)
    faults.arm(Rule(THROTTLE, "DynamoDB.PutItem", API, contains=("never-written",), times=50))

    answer = stack.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "never-written"}})

    assert answer["error"] == {"code": wire.INTERNAL_ERROR, "message": "Failed to create task"}
    faults.arm()
    assert my_task_ids(stack) == before


# ---- errors classified where they happen --------------------------------------------------------------------
def test_a_throttled_final_write_is_retried_with_the_result_in_hand_and_the_tool_runs_once(
    stack: StackClient, faults: FaultLayer, ledger: Path
) -> None:
    faults.arm(Rule(THROTTLE, "DynamoDB.UpdateItem", WORKER, contains=("completed",), times=8))

    task_id = stack.start("counted_job", {"ledger": str(ledger)})

    done = stack.settled(task_id, timeout=40)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", f"ran {task_id}")
    assert runs(ledger) == 1


def test_a_result_too_big_to_store_fails_the_task_at_once_naming_the_limit_and_runs_the_tool_once(
    stack: StackClient, ledger: Path
) -> None:
    task_id = stack.start("counted_job", {"ledger": str(ledger), "result_kb": 450})

    done = stack.settled(task_id, timeout=40)
    assert done["status"] == "failed"
    assert done["error"]["code"] == wire.INTERNAL_ERROR
    assert "limit" in done["error"]["message"]
    assert runs(ledger) == 1


def test_a_question_too_big_to_park_fails_the_task_naming_the_limit(stack: StackClient, ledger: Path) -> None:
    task_id = stack.start("counted_job", {"ledger": str(ledger), "question_kb": 300})

    done = stack.settled(task_id, timeout=40)
    assert done["status"] == "failed"
    assert "limit" in done["error"]["message"]
    assert execution_ends(stack, task_id) in ("SUCCEEDED", "FAILED")


def test_a_killed_worker_invocation_fails_the_task_instead_of_leaving_it_working(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(Rule(CRASH, "DynamoDB.UpdateItem", WORKER, contains=("killed-mid-run",)))

    task_id = stack.start("slow_compute", {"seconds": 0.3, "label": "killed-mid-run"})

    done = stack.settled(task_id, timeout=40)
    assert done["status"] in TERMINAL
    assert execution_ends(stack, task_id) != "RUNNING"
