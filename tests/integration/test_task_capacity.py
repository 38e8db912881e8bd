"""What a task's writes and reads cost in DynamoDB units, modelled from item sizes as on-demand bills
them (`bench.capacity.CapacityMeter`): a progress, lease or status write costs 1 WRU whatever the task
carries, and `tasks/get` reads one item of at most 4 KB in every state."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from bench.capacity import CapacityMeter
from local_stack.aws import DUMMY_CREDENTIALS, REGION, EmbeddedAws
from local_stack.clients import aws_client
from local_stack.provision import ProvisionedStack

from mcp_runtime.limits import MAX_TASK_ARGUMENTS_BYTES
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import INPUT_REQUIRED
from mcp_runtime.tasks.store import DynamoTaskStore, task_key
from tests.integration.task_harness import ALICE, Clock, TaskEnvironment, TaskResources
from tests.integration.test_task_store import RESULT, await_input, create

STEP_RECORD = {"v": "r" * 4000, "ms": 5}  # an inline record: 15 of them are 60 KB of step records


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def table_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> TaskEnvironment:
    return TaskEnvironment(
        embedded_aws, TaskResources.of(deployed), embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )


@pytest.fixture
def meter(table_env: TaskEnvironment) -> CapacityMeter:
    # A client of its own: the embedded moto's cached one is shared by the whole session.
    return CapacityMeter(
        aws_client("dynamodb", endpoint=table_env.aws.endpoint, region=REGION, credentials=DUMMY_CREDENTIALS)
    )


@pytest.fixture
def store(table_env: TaskEnvironment, meter: CapacityMeter, clock: Clock) -> DynamoTaskStore:
    return DynamoTaskStore(table_env.resources.table_name, meter.client, clock=clock)


def big_task(store: DynamoTaskStore, clock: Clock) -> str:
    """A task with a 64 KB argument and 60 KB of step records (each on its step item, as the worker keeps
    a record too large for the work part)."""
    record = create(store, clock)
    task_id = record.task_id
    store.discard(task_id, record.create_token)
    arguments: dict[str, Any] = {"blob": "a" * (MAX_TASK_ARGUMENTS_BYTES - 100)}
    store.create(dataclasses.replace(record, arguments=arguments))
    for number in range(15):
        store.record_operation(task_id, f"step:s{number}", dict(STEP_RECORD), {"at": number}, slot=number)
    return task_id


def test_a_steps_mark_and_record_are_1_wru_each_of_its_own_item_on_a_task_of_many_records_as_on_a_fresh_one(
    store: DynamoTaskStore, meter: CapacityMeter, clock: Clock
) -> None:
    fresh, big = create(store, clock).task_id, big_task(store, clock)
    small = {"v": {"ok": True, "n": 16}, "ms": 5}

    for task_id, slot in ((fresh, 0), (big, 15)):
        with meter.measuring(f"mark {slot}"):
            store.mark_step(
                task_id, "step:next", {"state": "running", "run": "r", "expires": clock() + 60}, clock(), slot=slot
            )
        with meter.measuring(f"record {slot}"):
            store.record_operation(task_id, "step:next", dict(small), None, slot=slot)

    for label in ("mark 0", "record 0", "mark 15", "record 15"):
        assert (meter.calls[label], meter.wru(label)) == (["UpdateItem"], 1), label  # its own item, not the hot one


def test_a_progress_write_on_a_task_with_a_64_kb_argument_and_60_kb_of_step_records_costs_1_wru(
    store: DynamoTaskStore, meter: CapacityMeter, clock: Clock
) -> None:
    task_id = big_task(store, clock)

    with meter.measuring("progress"):
        store.set_status_message(task_id, "Step 16 of 20", 0.8)

    assert meter.calls["progress"] == ["UpdateItem"]
    assert meter.wru("progress") == 1


def test_lease_status_and_terminal_writes_of_a_big_task_cost_1_wru_and_tasks_get_reads_one_small_item(
    table_env: TaskEnvironment, store: DynamoTaskStore, meter: CapacityMeter, clock: Clock
) -> None:
    task_id = big_task(store, clock)
    with meter.measuring("log"):
        store.set_log_lines(task_id, [{"level": "info", "data": "deploying"}])
    with meter.measuring("get while working"):
        assert store.get(task_id, ALICE.id).arguments == {}  # the API's view: the hot item alone
    hot = table_env.dynamodb.get_item(TableName=table_env.resources.table_name, Key=task_key(task_id))["Item"]
    with meter.measuring("lease"):
        assert store.extend_lease(task_id, int(hot[schema.LEASE_ATTRIBUTE]["N"]))
    with meter.measuring("finish"):
        store.finish(task_id, "completed", RESULT)
    with meter.measuring("get when settled"):
        store.get(task_id, ALICE.id)

    assert (meter.wru("log"), meter.calls["get while working"], meter.rru("get while working")) == (1, ["GetItem"], 1)
    assert meter.wru("lease") == 1
    assert (meter.calls["finish"], meter.wru("finish")) == (["UpdateItem"], 1)  # its parts expire with it
    assert (meter.calls["get when settled"], meter.rru("get when settled")) == (["GetItem"], 1)


def test_a_task_waiting_for_input_answers_tasks_get_with_one_read_of_one_small_item(
    store: DynamoTaskStore, meter: CapacityMeter, clock: Clock
) -> None:
    task_id = big_task(store, clock)
    await_input(store, task_id, ["k1"])

    with meter.measuring("get"):
        task = store.get(task_id, ALICE.id)

    assert task.status == INPUT_REQUIRED
    assert (meter.calls["get"], meter.rru("get")) == (["GetItem"], 1)
