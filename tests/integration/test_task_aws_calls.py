"""AWS calls per task operation are at the minimum DESIGN.md lists, counted on the API side's clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures import conformance_tasks
from local_stack.aws import DUMMY_CREDENTIALS, REGION
from mcp_runtime.tasks.aws_clients import shared_session
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until


class CallLog:
    """Every API call made through the clients it is attached to, as "Service.Operation"."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call.*.*", self._record)
        return client

    def _record(self, model: Any, **_: Any) -> None:
        self.calls.append(f"{model.service_model.service_id}.{model.name}")

    def take(self) -> list[str]:
        taken, self.calls = self.calls, []
        return taken


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

    yield TaskService(
        DynamoTaskStore(task_env.resources.table_name, client("dynamodb")),
        StepFunctionsExecutor(task_env.resources.state_machine_arn, client("stepfunctions")),
        ttl_ms=60_000,
        poll_interval_ms=500,
    )


def create(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any]) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


def test_creating_a_task_is_one_conditional_write_and_one_start_execution(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    create(api_service, task_env, "slow_compute", {"seconds": 0, "label": "x"})

    assert calls.take() == ["DynamoDB.PutItem", "SFN.StartExecution"]


def test_reading_a_task_is_one_consistent_read(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    task_id = create(api_service, task_env, "slow_compute", {"seconds": 0, "label": "x"})
    calls.take()

    api_service.get(task_id, request_context())

    assert calls.take() == ["DynamoDB.GetItem"]


def test_answering_every_question_is_one_conditional_update_and_one_send_task_success(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    task_id = create(api_service, task_env, "confirm_delete", {"filename": "f.txt"})
    wait_until(lambda: api_service.get(task_id, request_context()), lambda t: t["status"] == "input_required")
    calls.take()

    api_service.update(task_id, {"confirm": {"action": "accept", "content": {"confirm": True}}}, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem", "SFN.SendTaskSuccess"]
    done = wait_until(lambda: api_service.get(task_id, request_context()), lambda t: t["status"] == "completed")
    assert done["status"] == "completed"


def test_an_answer_to_a_key_nobody_asked_is_one_update_attempt_and_sends_nothing(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    task_id = create(api_service, task_env, "confirm_delete", {"filename": "f.txt"})
    wait_until(lambda: api_service.get(task_id, request_context()), lambda t: t["status"] == "input_required")
    calls.take()

    api_service.update(task_id, {"unknown-key": {"ignored": True}}, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem"]
    api_service.cancel(task_id, request_context())


def test_cancelling_a_running_task_is_one_conditional_update_and_one_stop_execution(
    api_service: TaskService, task_env: TaskEnvironment, calls: CallLog
) -> None:
    task_id = create(api_service, task_env, "slow_compute", {"seconds": 30, "label": "x"})
    calls.take()

    api_service.cancel(task_id, request_context())

    assert calls.take() == ["DynamoDB.UpdateItem", "SFN.StopExecution"]
