"""AWS calls per task operation are at the minimum docs/performance.md lists, counted on the API side's clients
and on the background's. The API makes each write's Step Functions call directly; the supervisor
makes the same call again from the table's stream (the backstop), and that repeat changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fixtures import conformance_tasks
from local_stack.aws import DUMMY_CREDENTIALS, REGION

from mcp_runtime._aws import shared_session
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import DIRECT_CALL_ATTEMPTS, TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until


class CallLog:
    """Every API call made through the clients it is attached to, as "Service.Operation"."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call.*.*", self._record)
        return client

    def attach_to(self, client: Any) -> CallLog:
        self.attach(client)
        return self

    def _record(self, model: Any, **_: Any) -> None:
        self.calls.append(f"{model.service_model.service_id}.{model.name}")

    def take(self) -> list[str]:
        taken, self.calls = self.calls, []
        return taken

    def effects(self) -> list[str]:
        """What was asked of executions so far: the test's own DescribeExecution polls left out."""
        return [call for call in self.calls if call != "SFN.DescribeExecution"]

    def take_effects(self) -> list[str]:
        effects = self.effects()
        self.calls = []
        return effects


@pytest.fixture
def calls() -> CallLog:
    return CallLog()


@pytest.fixture
def api_service(task_env: TaskEnvironment, calls: CallLog) -> Iterator[TaskService]:
    """The API side with its own clients (the worker's calls are not counted), set up as on AWS."""
    task_env.tools.include(conformance_tasks)

    def client(service: str) -> Any:
        return calls.attach(
            shared_session().client(
                service,
                endpoint_url=task_env.aws.endpoint,
                region_name=REGION,
                aws_access_key_id=DUMMY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=DUMMY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
        )

    executor = StepFunctionsExecutor(
        task_env.resources.state_machine_arn, client("stepfunctions"), max_attempts=DIRECT_CALL_ATTEMPTS
    )
    yield TaskService(
        DynamoTaskStore(task_env.resources.table_name, client("dynamodb")),
        executor=executor,
        ttl_ms=60_000,
        poll_interval_ms=500,
    )


def create(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any]) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


@pytest.fixture
def background(task_env: TaskEnvironment) -> CallLog:
    """The Step Functions calls of the background (the supervisor; the worker makes none here).

    The supervisor repeats the API's call once per stream record; a repeated SendTaskSuccess on a
    token already answered may be sent more than once until moto answers it as AWS does (issue 21,
    item 9), so the background's calls are compared as a set."""
    return CallLog().attach_to(task_env.stepfunctions)


def settle(service: TaskService, task_id: str, statuses: set[str]) -> dict[str, Any]:
    task: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda t: t["status"] in statuses
    )
    return task


def test_creating_a_task_is_three_conditional_puts_and_one_start_and_the_supervisor_only_repeats_the_start(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog, background: CallLog
) -> None:
    task_id = create(api_service, task_env, "slow_compute", {"seconds": 0, "label": "x"})

    # The conditional puts of the task's two parts, then of its hot item.
    assert calls.take() == ["DynamoDB.PutItem"] * 3 + ["SFN.StartExecution"]
    settle(api_service, task_id, {"completed"})
    calls.take()
    wait_until(background.effects, bool)  # the stream's repeat comes a poll later
    assert background.take_effects() == ["SFN.StartExecution"]


def test_reading_a_task_is_one_consistent_read_in_every_state(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    seen = []
    running = create(api_service, task_env, "slow_compute", {"seconds": 30, "label": "x"})
    awaiting = create(api_service, task_env, "confirm_delete", {"filename": "f.txt"})
    done = create(api_service, task_env, "slow_compute", {"seconds": 0, "label": "y"})
    failed = create(api_service, task_env, "protocol_error_job", {})
    for task_id, status in ((awaiting, "input_required"), (done, "completed"), (failed, "failed")):
        settle(api_service, task_id, {status})
    api_service.cancel(awaiting, request_context())
    calls.take()

    for task_id in (running, awaiting, done, failed):
        seen.append(api_service.get(task_id, request_context())["status"])
        assert calls.take() == ["DynamoDB.GetItem"]

    assert seen == ["working", "cancelled", "completed", "failed"]
    api_service.cancel(running, request_context())


def test_answering_every_question_is_one_conditional_update_and_one_send_task_success(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog, background: CallLog
) -> None:
    task_id = create(api_service, task_env, "confirm_delete", {"filename": "f.txt"})
    settle(api_service, task_id, {"input_required"})
    wait_until(background.effects, bool)  # the stream's repeat of the start (it may come after the tool parks)
    calls.take(), background.take()

    api_service.update(task_id, {"confirm": {"action": "accept", "content": {"confirm": True}}}, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem", "SFN.SendTaskSuccess"]
    assert settle(api_service, task_id, {"completed"})["status"] == "completed"
    calls.take()
    wait_until(background.effects, bool)
    assert set(background.take_effects()) == {"SFN.SendTaskSuccess"}


def test_an_answer_to_a_key_nobody_asked_is_one_update_attempt_and_resumes_nothing(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog, background: CallLog
) -> None:
    task_id = create(api_service, task_env, "confirm_delete", {"filename": "f.txt"})
    settle(api_service, task_id, {"input_required"})
    wait_until(background.effects, bool)  # the stream's repeat of the start (it may come after the tool parks)
    calls.take(), background.take()

    api_service.update(task_id, {"unknown-key": {"ignored": True}}, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem"]
    api_service.cancel(task_id, request_context())
    assert calls.take() == ["DynamoDB.UpdateItem", "SFN.StopExecution"]
    wait_until(lambda: task_env.execution_status(task_id), lambda status: status != "RUNNING")
    wait_until(background.effects, bool)  # the stream's repeat comes a poll later
    assert background.take_effects() == ["SFN.StopExecution"]


def test_cancelling_a_running_task_is_one_conditional_update_and_one_stop_execution(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog, background: CallLog
) -> None:
    task_id = create(api_service, task_env, "slow_compute", {"seconds": 30, "label": "x"})
    wait_until(lambda: api_service.get(task_id, request_context()), lambda t: "statusMessage" in t)
    # The stream's repeat of the start may come after the tool's first write: it must not count as the cancel's.
    wait_until(background.effects, bool)
    calls.take(), background.take()

    api_service.cancel(task_id, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem", "SFN.StopExecution"]
    assert wait_until(lambda: task_env.execution_status(task_id), lambda status: status != "RUNNING") in (
        "ABORTED",
        "SUCCEEDED",
    )
    wait_until(background.effects, bool)  # the stream's repeat comes a poll later
    assert background.take_effects() == ["SFN.StopExecution"]
