"""Nothing lost, stuck or repeated: the task runtime under AWS's ordinary failures, through the template-driven stack.

Faults are injected into the functions' own AWS calls by a layer (`testkit/_fault_layer/sitecustomize.py`):
throttling, 5xx answers, timeouts, and requests that AWS applied but whose answer was lost, so a
retry meets its own write. Each scenario below failed before the runtime was made to survive it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from testkit import CRASH, ERROR, LOST, TERMINAL, THROTTLE, TIMEOUT, FaultLayer, Rule, StackClient

from mcp_runtime import wire
from mcp_runtime.limits import MAX_RESULT_BYTES
from mcp_runtime.tasks import schema
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


def awaiting_input(stack: StackClient, task_id: str) -> tuple[str, dict[str, Any]]:
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
    key, _ = awaiting_input(stack, task_id)
    faults.arm(Rule(LOST, "DynamoDB.UpdateItem", API, contains=('"confirm"',)))

    stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-answer.txt")
    assert faults.fired()[("DynamoDB.UpdateItem", LOST)] == 1


def test_a_client_that_retries_its_update_while_send_task_success_is_throttled_still_gets_the_task_resumed(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "retried-answer.txt"})
    key, _ = awaiting_input(stack, task_id)
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
    key, _ = awaiting_input(stack, task_id)
    faults.arm(
        Rule(THROTTLE, "SFN.SendTaskSuccess", times=4),
        Rule(THROTTLE, "DynamoDB.UpdateItem", API, skip=1, times=4),
        Rule(THROTTLE, "SFN.StopExecution", times=4),
    )

    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted row.txt")


def test_an_update_whose_answers_could_not_be_recorded_sends_no_token_and_the_task_stays_answerable(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "unrecorded.txt"})
    key, _ = awaiting_input(stack, task_id)
    mark = time.time()
    faults.arm(Rule(THROTTLE, "DynamoDB.UpdateItem", API, contains=('"confirm"',), times=50))
    answer = {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}}

    refused = stack.call("tasks/update", answer)

    assert refused["error"] == {"code": wire.INTERNAL_ERROR, "message": "Failed to update task"}
    assert "SFN.SendTaskSuccess" not in api_calls(faults, mark)  # the token goes only after the answers are kept
    faults.arm()
    assert stack.task(task_id)["status"] == "input_required"
    stack.result("tasks/update", answer)
    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted unrecorded.txt")


# ---- healthy tasks failed by one lost response -------------------------------------------------------------
def test_a_send_task_success_applied_whose_response_was_lost_does_not_fail_the_resumed_task(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "lost-resume.txt"})
    key, _ = awaiting_input(stack, task_id)
    faults.arm(Rule(LOST, "SFN.SendTaskSuccess"))

    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-resume.txt")
    assert faults.fired()[("SFN.SendTaskSuccess", LOST)] == 1


def test_an_await_input_write_applied_whose_response_was_lost_keeps_the_task_awaiting_and_answerable(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(Rule(LOST, "DynamoDB.UpdateItem", WORKER, contains=("input_required",)))
    task_id = stack.start("confirm_delete", {"filename": "lost-await.txt"})
    key, _ = awaiting_input(stack, task_id)
    assert stack.execution_status(task_id) == "RUNNING"

    stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted lost-await.txt")
    assert faults.fired()[("DynamoDB.UpdateItem", LOST)] == 1


# ---- executions left running behind terminal tasks ---------------------------------------------------------
def test_cancelling_a_task_awaiting_input_while_stop_execution_is_throttled_still_ends_its_execution(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "throttled-stop.txt"})
    awaiting_input(stack, task_id)
    faults.arm(Rule(THROTTLE, "SFN.StopExecution", times=4))

    stack.result("tasks/cancel", {"taskId": task_id})

    assert stack.task(task_id)["status"] == "cancelled"
    assert execution_ends(stack, task_id) == "ABORTED"
    assert faults.fired()[("SFN.StopExecution", THROTTLE)] == 4


def test_a_cancel_write_applied_whose_response_was_lost_still_ends_the_execution(
    stack: StackClient, faults: FaultLayer
) -> None:
    task_id = stack.start("confirm_delete", {"filename": "lost-cancel.txt"})
    awaiting_input(stack, task_id)
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


def executions_started_since(stack: StackClient, mark: float) -> dict[str, str]:
    """Name -> status of every execution of the task workflow started at or after `mark`."""
    sfn = stack.running.aws_client("stepfunctions")
    machine = stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    listed = sfn.list_executions(stateMachineArn=machine, maxResults=1000)["executions"]
    return {e["name"]: e["status"] for e in listed if e["startDate"].timestamp() >= mark}


def lost_create_then_throttled(tool: str) -> tuple[Rule, Rule]:
    """The create's PutItem of the task's hot item (the one naming the tool: its parts, put before it,
    do not) applied with its answer lost, then every retry of it throttled (issue 21, item 8)."""
    hot_item = ('"toolName"', tool)
    return (
        Rule(LOST, "DynamoDB.PutItem", API, contains=hot_item),
        Rule(THROTTLE, "DynamoDB.PutItem", API, contains=hot_item, skip=1, times=50),
    )


def test_a_create_applied_whose_answer_was_lost_and_whose_retries_are_throttled_answers_the_task_it_wrote(
    stack: StackClient, faults: FaultLayer
) -> None:
    mark = time.time()
    faults.arm(*lost_create_then_throttled("confirm_delete"))

    created = stack.call("tools/call", {"name": "confirm_delete", "arguments": {"filename": "written-unheard.txt"}})

    assert "result" in created, created
    task_id = created["result"]["taskId"]
    key, _ = awaiting_input(stack, task_id)
    stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})
    done = stack.settled(task_id, timeout=30)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted written-unheard.txt")
    assert set(executions_started_since(stack, mark)) == {task_id}
    assert faults.fired()[("DynamoDB.PutItem", LOST)] == 1


def test_a_create_taken_back_because_it_could_not_be_confirmed_leaves_no_execution_running(
    stack: StackClient, faults: FaultLayer
) -> None:
    before = my_task_ids(stack)
    mark = time.time()
    faults.arm(*lost_create_then_throttled("confirm_delete"), Rule(THROTTLE, "DynamoDB.GetItem", API, times=50))

    answer = stack.call("tools/call", {"name": "confirm_delete", "arguments": {"filename": "taken-back.txt"}})

    assert answer["error"] == {"code": wire.INTERNAL_ERROR, "message": "Failed to create task"}
    faults.arm()
    assert my_task_ids(stack) == before
    deadline = time.monotonic() + 30
    started = executions_started_since(stack, mark)
    while (not started or "RUNNING" in started.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
        started = executions_started_since(stack, mark)
    assert len(started) == 1, started  # the stream started it from the item the create wrote
    assert "RUNNING" not in started.values(), started


# ---- a step's own item: its writes and its read under faults -------------------------------------------------
def test_step_item_writes_lost_or_throttled_and_a_throttled_read_of_them_run_each_step_once(
    stack: StackClient, faults: FaultLayer, ledger: Path
) -> None:
    # 14 small steps: the first ten records fit on the work part, the rest (and the wait after step 12)
    # are kept on the items of their slots; every step's running mark is on its own item. A step is its
    # two writes of that item; the run's first write opens the step items (`stepsOpen`), and a step that
    # begins a second or more after the run last saw its task working reads it first (the GetItem).
    faults.arm(
        Rule(LOST, "DynamoDB.UpdateItem", WORKER, contains=('#step#11"',), times=2),  # applied, answers lost
        Rule(LOST, "DynamoDB.UpdateItem", WORKER, contains=('#step#3"',)),  # a mark whose record is on the work part
        Rule(THROTTLE, "DynamoDB.UpdateItem", WORKER, contains=('#step#12"',), times=3),
        Rule(THROTTLE, "DynamoDB.BatchGetItem", WORKER, contains=("#step#",), times=2),  # the run after the wait
        Rule(LOST, "DynamoDB.UpdateItem", WORKER, contains=(schema.STEPS_OPEN_ATTRIBUTE,)),  # a run's first write
        Rule(THROTTLE, "DynamoDB.GetItem", WORKER),  # a look at the task between steps
    )

    task_id = stack.start(
        "stepped_job", {"steps": 14, "seconds": 0.1, "ledger": str(ledger), "wait_after": 12, "wait_seconds": 1}
    )

    done = stack.settled(task_id, timeout=60)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "14 steps, sum of squares 819")
    assert [int(line.split()[1]) for line in ledger.read_text().splitlines()] == list(range(14))
    assert faults.fired() == {
        ("DynamoDB.UpdateItem", LOST): 4,
        ("DynamoDB.UpdateItem", THROTTLE): 3,
        ("DynamoDB.BatchGetItem", THROTTLE): 2,
        ("DynamoDB.GetItem", THROTTLE): 1,
    }


# ---- errors classified where they happen --------------------------------------------------------------------
def test_a_throttled_final_write_is_retried_with_the_result_in_hand_and_the_tool_runs_once(
    stack: StackClient, faults: FaultLayer, ledger: Path
) -> None:
    faults.arm(Rule(THROTTLE, "DynamoDB.UpdateItem", WORKER, contains=("completed",), times=8))

    task_id = stack.start("counted_job", {"ledger": str(ledger)})

    done = stack.settled(task_id, timeout=40)
    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", f"ran {task_id}")
    assert runs(ledger) == 1


def test_a_result_the_payload_bucket_fails_to_store_is_stored_by_settle_and_the_tool_runs_once(
    stack: StackClient, faults: FaultLayer, ledger: Path
) -> None:
    # Six failed attempts in the run hand the result to Settle; six more fail Settle's first invocation,
    # which the state machine retries; its second invocation stores the result at its third attempt.
    faults.arm(Rule(ERROR, "S3.PutObject", WORKER, times=14))

    task_id = stack.start("counted_job", {"ledger": str(ledger), "result_kb": 64})

    done = stack.settled(task_id, timeout=60)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == f"ran {task_id}" + " " * 64 * 1024
    assert runs(ledger) == 1
    assert faults.fired()[("S3.PutObject", ERROR)] == 14
    assert execution_ends(stack, task_id) == "SUCCEEDED"


def test_a_result_too_big_to_store_fails_the_task_at_once_naming_the_limit_and_runs_the_tool_once(
    stack: StackClient, ledger: Path
) -> None:
    task_id = stack.start("counted_job", {"ledger": str(ledger), "result_kb": 6144})

    done = stack.settled(task_id, timeout=40)
    size = done["error"]["data"]["sizeBytes"]
    assert done["status"] == "failed"
    assert done["error"] == {
        "code": wire.INTERNAL_ERROR,
        "message": f"Task result is {size} bytes, over the limit of {MAX_RESULT_BYTES} bytes",
        "data": {"limitBytes": MAX_RESULT_BYTES, "sizeBytes": size},
    }
    assert size > 6 * 1024 * 1024
    assert runs(ledger) == 1


def test_a_question_too_big_to_store_fails_the_task_naming_the_limit(stack: StackClient, ledger: Path) -> None:
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


# ---- the AWS-call budget, counted on each function's own calls --------------------------------------------
SUPERVISOR = "Supervisor"


def api_calls(faults: FaultLayer, since: float) -> list[str]:
    return sorted(call["operation"] for call in faults.calls(since) if API in call["function"])


def background_sfn_calls(faults: FaultLayer, since: float) -> list[str]:
    return sorted(
        call["operation"]
        for call in faults.calls(since)
        if SUPERVISOR in call["function"] and call["operation"].startswith("SFN.")
    )


def await_background_sfn_calls(faults: FaultLayer, since: float) -> list[str]:
    """The supervisor's Step Functions calls since `since`, once there is one (it follows the stream)."""
    deadline = time.monotonic() + 30
    found = background_sfn_calls(faults, since)
    while not found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = background_sfn_calls(faults, since)
    return found


def test_each_operation_makes_its_budgeted_aws_calls_and_tasks_get_is_one_read_in_every_state(
    stack: StackClient, faults: FaultLayer, ledger: Path
) -> None:
    # The API makes each write's Step Functions call itself; the supervisor repeats it from the
    # stream, a backstop that changes nothing when the direct call was done.
    mark = time.time()
    awaiting_id = stack.start("confirm_delete", {"filename": "budget.txt"})
    # The conditional puts of the task's two parts, then of its hot item.
    assert api_calls(faults, mark) == ["DynamoDB.PutItem"] * 3 + ["SFN.StartExecution"]
    key, _ = awaiting_input(stack, awaiting_id)
    assert await_background_sfn_calls(faults, mark) == ["SFN.StartExecution"]

    mark = time.time()
    stack.result("tasks/update", {"taskId": awaiting_id, "inputResponses": {key: accept(confirm=True)}})
    assert api_calls(faults, mark) == ["DynamoDB.UpdateItem", "SFN.SendTaskSuccess"]
    done = stack.settled(awaiting_id)
    # The repeat meets an answered token (sent again while moto answers it 500: issue 21, item 9).
    assert set(await_background_sfn_calls(faults, mark)) == {"SFN.SendTaskSuccess"}

    mark = time.time()
    running_id = stack.start("slow_compute", {"seconds": 5, "label": "budget"})
    stack.wait_for(running_id, lambda task: bool(task.get("statusMessage")))
    # The start's repeat from the stream can come after the task runs: it is not the cancel's.
    assert await_background_sfn_calls(faults, mark) == ["SFN.StartExecution"]
    mark = time.time()
    stack.result("tasks/cancel", {"taskId": running_id})
    assert api_calls(faults, mark) == ["DynamoDB.UpdateItem", "SFN.StopExecution"]
    assert execution_ends(stack, running_id) in ("ABORTED", "SUCCEEDED")
    assert await_background_sfn_calls(faults, mark) == ["SFN.StopExecution"]

    failed_id = stack.start("protocol_error_job", {})
    stack.settled(failed_id)
    # Working for ten minutes whatever the machine's load: a step, then a durable wait.
    working_id = stack.start(
        "stepped_job", {"steps": 1, "seconds": 0, "ledger": str(ledger), "wait_after": 0, "wait_seconds": 600}
    )
    waiting_id = stack.start("confirm_delete", {"filename": "budget-waiting.txt"})
    awaiting_input(stack, waiting_id)
    for task_id, status in (
        (working_id, "working"),
        (waiting_id, "input_required"),
        (awaiting_id, "completed"),
        (failed_id, "failed"),
        (running_id, "cancelled"),
    ):
        mark = time.time()
        assert stack.task(task_id)["status"] == status
        assert api_calls(faults, mark) == ["DynamoDB.GetItem"], status
    assert done["result"]["content"][0]["text"] == "Deleted budget.txt"
    for task_id in (working_id, waiting_id):
        stack.result("tasks/cancel", {"taskId": task_id})


# ---- a seeded random phase: every fault, on every operation, over every kind of task ------------------------
SEED = 20261201
RANDOM_OPERATIONS = (
    "DynamoDB.PutItem",
    "DynamoDB.GetItem",
    "DynamoDB.UpdateItem",
    "DynamoDB.DeleteItem",
    "SFN.StartExecution",
    "SFN.SendTaskSuccess",
    "SFN.StopExecution",
)
RANDOM_FAULTS = (THROTTLE, ERROR, TIMEOUT, LOST)
CLIENT_RETRIES = 8


def random_rules(probability: float) -> list[Rule]:
    rules = [
        Rule(fault, operation, probability=probability, seed=SEED)
        for operation in RANDOM_OPERATIONS
        for fault in RANDOM_FAULTS
    ]
    # A worker killed mid-invocation, now and then, just before one of its writes.
    rules.append(Rule(CRASH, "DynamoDB.UpdateItem", WORKER, probability=probability, seed=SEED))
    return rules


@dataclass
class Scenario:
    """One task driven the way a client would: every call answered -32603 is tried again."""

    kind: str
    stack: StackClient
    task_id: str | None = None
    create_failed: bool = False
    first_terminal: dict[str, Any] | None = None
    answers: dict[str, Any] = field(default_factory=dict)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        for _ in range(CLIENT_RETRIES):
            body = self.stack.call(method, params)
            if "result" in body:
                result: dict[str, Any] = body["result"]
                return result
            assert body["error"]["code"] == wire.INTERNAL_ERROR, body  # only AWS trouble, never bad input
            time.sleep(0.2)
        return None

    def run(self) -> None:
        tool, arguments = SCENARIO_CALLS[self.kind]
        created = self.call("tools/call", {"name": tool, "arguments": arguments})
        if created is None:
            self.create_failed = True
            return
        assert created["resultType"] == wire.RESULT_TASK, created
        self.task_id = created["taskId"]
        if self.kind in ("answer-yes", "answer-no", "cancel-awaiting"):
            task = self.poll(lambda t: t["status"] != "working")
            if task is not None and task["status"] == "input_required":
                (key,) = task["inputRequests"]
                if self.kind == "cancel-awaiting":
                    self.call("tasks/cancel", {"taskId": self.task_id})
                else:
                    self.answers = {key: accept(confirm=self.kind == "answer-yes")}
                    self.call("tasks/update", {"taskId": self.task_id, "inputResponses": self.answers})
        elif self.kind == "cancel-running":
            self.poll(lambda t: bool(t.get("statusMessage")) or t["status"] != "working")
            self.call("tasks/cancel", {"taskId": self.task_id})
        self.first_terminal = self.poll(lambda t: t["status"] in TERMINAL, timeout=90)

    def poll(self, accept_task: Any, timeout: float = 45) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            task = self.call("tasks/get", {"taskId": self.task_id})
            if task is not None and accept_task(task):
                return task
            time.sleep(0.1)
        return None

    def acceptable(self, task: dict[str, Any]) -> bool:
        """A result is the one this task's answers call for; failing (a killed worker, a refusal) is allowed."""
        if task["status"] == "failed":
            return task["error"]["code"] == wire.INTERNAL_ERROR
        if task["status"] == "cancelled":
            return self.kind.startswith("cancel")
        text = task["result"]["content"][0]["text"]
        expected = {
            "complete": "slow_compute 'random' finished after 0.2s",
            "tool-error": "failing_job failed on purpose: simulated tool error",
            "answer-yes": "Deleted random.txt",
            "answer-no": "Kept random.txt",
            "cancel-running": "slow_compute 'random-long' finished after 3s",
        }
        return self.kind in expected and text == expected[self.kind]


SCENARIO_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "complete": ("slow_compute", {"seconds": 0.2, "label": "random"}),
    "tool-error": ("failing_job", {}),
    "protocol-error": ("protocol_error_job", {}),
    "answer-yes": ("confirm_delete", {"filename": "random.txt"}),
    "answer-no": ("confirm_delete", {"filename": "random.txt"}),
    "cancel-running": ("slow_compute", {"seconds": 3, "label": "random-long"}),
    "cancel-awaiting": ("confirm_delete", {"filename": "random.txt"}),
}


def test_a_seeded_mix_of_every_fault_loses_strands_and_repeats_nothing(
    faulty_stack: StackClient, faults: FaultLayer
) -> None:
    stack = StackClient(faulty_stack.running, user="random-phase")
    scenarios = [Scenario(kind, stack) for kind in SCENARIO_CALLS for _ in range(2)]
    faults.arm(*random_rules(0.03))
    threads = [threading.Thread(target=scenario.run) for scenario in scenarios]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    fired = faults.fired()
    faults.arm()

    created = [scenario for scenario in scenarios if scenario.task_id is not None]
    assert sum(fired.values()) >= 10, fired  # the phase really was faulty
    assert {s.task_id for s in created} == my_task_ids(stack), "a task lost, or a failed create left one"
    for scenario in created:
        assert scenario.task_id is not None
        assert scenario.first_terminal is not None, f"{scenario.kind} {scenario.task_id} never settled"
        assert scenario.acceptable(scenario.first_terminal), (scenario.kind, scenario.first_terminal)
        assert execution_ends(stack, scenario.task_id, timeout=60) != "RUNNING", scenario.kind
        again = stack.task(scenario.task_id)
        assert {k: v for k, v in again.items() if k != "lastUpdatedAt"} == {
            k: v for k, v in scenario.first_terminal.items() if k != "lastUpdatedAt"
        }, "a terminal task changed"
        assert again["lastUpdatedAt"] == scenario.first_terminal["lastUpdatedAt"]
