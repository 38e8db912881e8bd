"""The supervisor takes every stream record on its own: what one record raises is that record's failure.

Records are real task items (written by the task service on the template's table in moto) wrapped as
Lambda hands them over; the supervisor calls moto's Step Functions. Nothing delivers the stream here:
each test hands the supervisor its batch.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fixtures import conformance_tasks
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack

from mcp_runtime.observability import TASK_WRITES_REFUSED
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.supervisor import TaskSupervisor
from mcp_runtime.tools import Registry
from tests.integration.task_harness import TaskResources, request_context
from tests.telemetry_support import RecordingTelemetry


class Tasks:
    def __init__(self, aws: EmbeddedAws, deployed: ProvisionedStack) -> None:
        self.aws = aws
        self.resources = TaskResources.of(deployed)
        self.dynamodb = aws.client("dynamodb")
        self.stepfunctions = aws.client("stepfunctions")
        self.tools = Registry()
        self.tools.include(conformance_tasks)
        self.service = TaskService(self.store(), ttl_ms=60_000, poll_interval_ms=500)
        self._sequence = 1000

    def store(self, table: str | None = None) -> DynamoTaskStore:
        return DynamoTaskStore(table or self.resources.table_name, self.dynamodb)

    def executor(self, state_machine_arn: str | None = None) -> StepFunctionsExecutor:
        return StepFunctionsExecutor(state_machine_arn or self.resources.state_machine_arn, self.stepfunctions)

    def create(self) -> str:
        spec = self.tools.get("slow_compute")
        assert spec is not None
        task_id: str = self.service.create(spec, {"seconds": 0, "label": "x"}, request_context(), None)["taskId"]
        return task_id

    def record(self, task_id: str, **image_changes: Any) -> dict[str, Any]:
        """The stream record of the task item as it is now (`image_changes` edit its new image)."""
        key = {schema.PARTITION_KEY: {"S": f"{schema.TASK_KEY_PREFIX}{task_id}"}}
        image = dict(self.dynamodb.get_item(TableName=self.resources.table_name, Key=key)["Item"])
        for name, value in image_changes.items():
            if value is None:
                image.pop(name, None)
            else:
                image[name] = value
        self._sequence += 1
        return {
            "eventID": str(self._sequence),
            "eventName": "MODIFY",
            "eventSource": "aws:dynamodb",
            "dynamodb": {"Keys": key, "NewImage": image, "SequenceNumber": str(self._sequence)},
        }

    def started(self, task_id: str) -> bool:
        arn = self.resources.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{task_id}"
        try:
            self.stepfunctions.describe_execution(executionArn=arn)
        except self.stepfunctions.exceptions.ExecutionDoesNotExist:
            return False
        return True


@pytest.fixture
def tasks(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> Tasks:
    return Tasks(embedded_aws, deployed)


def failures(answer: dict[str, Any]) -> list[str]:
    return [str(failure["itemIdentifier"]) for failure in answer["batchItemFailures"]]


def sequence(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def test_a_record_whose_item_does_not_parse_fails_alone_and_the_other_tasks_start(tasks: Tasks) -> None:
    first, broken, last = tasks.create(), tasks.create(), tasks.create()
    records = [tasks.record(first), tasks.record(broken, owner=None), tasks.record(last)]

    answer = TaskSupervisor(tasks.store(), tasks.executor()).process_stream_batch(records)

    assert failures(answer) == [sequence(records[1])]
    assert tasks.started(first) and tasks.started(last)
    assert not tasks.started(broken)


def test_a_refused_write_while_settling_a_refused_start_is_counted_as_that_tasks_failure_not_retried(
    tasks: Tasks,
) -> None:
    """StartExecution refused (no such state machine), then the settle refused (no such table): the
    task's failure, logged and counted (TaskWritesRefused alarms); retrying the record cannot help, so
    it is not reported failed, and nothing is raised out of the batch."""
    task_id = tasks.create()
    machine = tasks.resources.state_machine_arn + "-gone"
    telemetry = RecordingTelemetry()
    supervisor = TaskSupervisor(tasks.store("no-such-table"), tasks.executor(machine), telemetry=telemetry)
    records = [tasks.record(task_id)]

    assert failures(supervisor.process_stream_batch(records)) == []
    assert [(s.value, s.dimensions) for s in telemetry.of(TASK_WRITES_REFUSED)] == [(1, {"by": "supervisor"})]


def test_once_a_record_of_a_task_fails_its_later_records_wait_and_other_tasks_go_on(tasks: Tasks) -> None:
    failing, other = tasks.create(), tasks.create()
    records = [
        tasks.record(failing, owner=None),
        tasks.record(other),
        tasks.record(failing),  # would start it, but only after the record before it
    ]

    answer = TaskSupervisor(tasks.store(), tasks.executor()).process_stream_batch(records)

    assert failures(answer) == [sequence(records[0]), sequence(records[2])]
    assert tasks.started(other)
    assert not tasks.started(failing)


def test_a_start_the_same_batch_stops_later_is_not_carried_out(tasks: Tasks) -> None:
    task_id = tasks.create()
    records = [tasks.record(task_id), tasks.record(task_id, effect={"S": schema.EFFECT_STOP})]

    answer = TaskSupervisor(tasks.store(), tasks.executor()).process_stream_batch(records)

    assert failures(answer) == []
    assert not tasks.started(task_id)


class MeetingExecutor(StepFunctionsExecutor):
    """Starts wait at a barrier: they pass only if every party's start is in flight at once."""

    def __init__(self, inner: StepFunctionsExecutor, parties: int) -> None:
        super().__init__(inner.state_machine_arn, caller=inner._aws)
        self.barrier = threading.Barrier(parties, timeout=30)

    def start(self, task_id: str, execution_name: str) -> None:
        self.barrier.wait()
        super().start(task_id, execution_name)


def test_the_records_of_different_tasks_are_carried_out_at_once(tasks: Tasks) -> None:
    created = [tasks.create() for _ in range(3)]
    supervisor = TaskSupervisor(tasks.store(), MeetingExecutor(tasks.executor(), parties=3), workers=3)

    answer = supervisor.process_stream_batch([tasks.record(task_id) for task_id in created])

    assert failures(answer) == []
    assert all(tasks.started(task_id) for task_id in created)


def test_a_record_of_a_tasks_part_is_ignored_even_with_an_effect_and_nothing_starts(tasks: Tasks) -> None:
    """The mapping's filter drops a part's records (they never carry an effect); the supervisor ignores
    them anyway, so not even a part that copied a task's attributes could start an execution."""
    task_id = tasks.create()
    record = tasks.record(task_id)
    part = {schema.PARTITION_KEY: {"S": schema.part_key_value(task_id, schema.CALL_PART)}}
    record["dynamodb"]["Keys"] = part
    record["dynamodb"]["NewImage"] = {**record["dynamodb"]["NewImage"], **part}

    answer = TaskSupervisor(tasks.store(), tasks.executor()).handle({"Records": [record]})

    assert failures(answer) == []
    assert not tasks.started(task_id)
