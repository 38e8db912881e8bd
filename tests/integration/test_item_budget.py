"""A task item stays inside DynamoDB's 400 KB: everything a create stores is counted against its budget
(and refused with -32602, nothing stored, when over it), only what the worker needs of the client is
kept, and every terminal write leaves the small parts alone, so it fits whatever the task carried."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from fixtures import conformance_tasks
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack

from mcp_runtime import wire
from mcp_runtime.context import RequestMeta
from mcp_runtime.errors import InvalidParams
from mcp_runtime.limits import MAX_TASK_CLIENT_BYTES, MAX_TASK_CREATED_BYTES, encoded_size
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import CANCELLED, COMPLETED, FAILED, WORKING, ClientSnapshot
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore, item_bytes, part_key, task_key
from tests.integration.task_harness import ALICE, Clock, TaskEnvironment, TaskResources, request_context
from tests.integration.test_task_store import RESULT, create

CAPABILITIES: dict[str, Any] = {
    "elicitation": {"form": {"applyDefaults": True}, "url": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {"notes": "n" * 2000}},
    "sampling": {"tools": {}},
    "roots": True,
}
STORED_CAPABILITIES = {
    "elicitation": {"form": {}, "url": {}},
    "extensions": {"io.modelcontextprotocol/tasks": {}},
    "sampling": {"tools": {}},
    "roots": None,
}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def table_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> TaskEnvironment:
    """The template's table alone (no stream delivery, no executor): what a create stores, and nothing else."""
    env = TaskEnvironment(
        embedded_aws, TaskResources.of(deployed), embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )
    env.tools.include(conformance_tasks)
    return env


@pytest.fixture
def store(table_env: TaskEnvironment, clock: Clock) -> DynamoTaskStore:
    return table_env.store(clock)


def items(env: TaskEnvironment) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = env.dynamodb.scan(TableName=env.resources.table_name, ConsistentRead=True)["Items"]
    return found


def raw(env: TaskEnvironment, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = env.dynamodb.get_item(
        TableName=env.resources.table_name, Key=task_key(task_id), ConsistentRead=True
    )["Item"]
    return found


def create_through_service(
    env: TaskEnvironment, capabilities: dict[str, Any], prepared: Any = None, arguments: dict[str, Any] | None = None
) -> str:
    spec = env.tools.get("slow_compute")
    assert spec is not None
    service = TaskService(env.store(), ttl_ms=60_000, poll_interval_ms=500)
    context = request_context(ALICE, capabilities)
    task_id: str = service.create(spec, arguments or {"seconds": 1}, context, prepared)["taskId"]
    return task_id


def test_a_task_call_whose_client_capabilities_carry_300_kb_is_refused_and_nothing_is_stored(
    table_env: TaskEnvironment,
) -> None:
    capabilities = {**CAPABILITIES, "experimental": {"padding": ["x" * 100_000] * 3}}

    with pytest.raises(InvalidParams) as refused:
        create_through_service(table_env, capabilities)

    assert (refused.value.code, refused.value.message) == (
        wire.INVALID_PARAMS,
        f"Invalid params: clientCapabilities of a task may be at most {MAX_TASK_CLIENT_BYTES} bytes",
    )
    assert items(table_env) == []
    assert (
        table_env.stepfunctions.list_executions(stateMachineArn=table_env.resources.state_machine_arn)["executions"]
        == []
    )


def test_everything_a_create_stores_counts_against_the_budget_and_over_it_nothing_is_stored(
    table_env: TaskEnvironment,
) -> None:
    prepared = {"draft": "p" * (MAX_TASK_CREATED_BYTES - 20 * 1024)}  # 60 KB, as the arguments may be
    arguments = {"seconds": 1, "label": "l" * 100, "extra": "a" * (30 * 1024)}  # 30 KB, under their own 64 KB

    with pytest.raises(InvalidParams) as refused:
        create_through_service(table_env, CAPABILITIES, prepared, arguments)

    assert (refused.value.code, refused.value.message) == (
        wire.INVALID_PARAMS,
        f"Invalid params: a task may store at most {MAX_TASK_CREATED_BYTES} bytes of its request "
        "(arguments, client capabilities, prepared state)",
    )
    assert items(table_env) == []


def test_a_task_keeps_only_the_protocol_version_and_the_capability_names_of_its_client(
    table_env: TaskEnvironment, store: DynamoTaskStore
) -> None:
    task_id = create_through_service(table_env, CAPABILITIES)

    stored = store.load(task_id).client

    assert stored == ClientSnapshot(wire.PROTOCOL_VERSION, STORED_CAPABILITIES)
    original, kept = (
        RequestMeta(wire.PROTOCOL_VERSION, CAPABILITIES),
        RequestMeta(stored.protocol_version, stored.capabilities),
    )
    for question in ("elicitation", "sampling", "roots", "extensions", "experimental"):
        assert kept.declares(question) == original.declares(question), question
    for mode in ("form", "url"):
        assert kept.declares_elicitation_mode(mode) == original.declares_elicitation_mode(mode), mode
    assert kept.declares_extension("io.modelcontextprotocol/tasks")
    for elicitation in ({}, {"form": True}, {"url": {}}, {"form": {}, "url": {"x": 1}}):
        original = RequestMeta(wire.PROTOCOL_VERSION, {"elicitation": elicitation})
        snapshot = ClientSnapshot.of(wire.PROTOCOL_VERSION, {"elicitation": elicitation})
        kept = RequestMeta(snapshot.protocol_version, snapshot.capabilities)
        for mode in ("form", "url"):
            assert kept.declares_elicitation_mode(mode) == original.declares_elicitation_mode(mode), (elicitation, mode)


def grown(store: DynamoTaskStore, clock: Clock) -> str:
    """A task carrying what a task may carry: 120 KB of step records, 30 KB of scratch."""
    task_id = create(store, clock).task_id
    for number in range(12):
        store.record_operation(task_id, f"step:s{number}", {"v": "r" * 10_000, "ms": 5}, {})
    store.checkpoint(task_id, {"scratch": "s" * 30_000})
    return task_id


@pytest.mark.parametrize("ending", [COMPLETED, FAILED, CANCELLED, "lost"])
def test_every_terminal_write_leaves_only_the_small_parts_of_the_task(
    ending: str, table_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    task_id = grown(store, clock)
    assert sum(item_bytes(each) for each in items(table_env)) > 150_000

    if ending == CANCELLED:
        store.cancel(task_id, ALICE.id)
    elif ending == "lost":
        store.settle_lost(task_id, task_id, {"code": wire.INTERNAL_ERROR, "message": "lost"})
    else:
        store.finish(task_id, ending, RESULT if ending == COMPLETED else {"code": -32603, "message": "x"})

    item = raw(table_env, task_id)
    assert item_bytes(item) < 1000
    assert not {"arguments", "client", "prepared", "steps", "scratch", "answers", "issuedKeys", "inputRequests"} & set(
        item
    )
    parts = [each for each in items(table_env) if each != item]
    assert [part[schema.TTL_ATTRIBUTE] for part in parts] == [item[schema.TTL_ATTRIBUTE]] * 2  # they expire with it
    settled = store.get(task_id)
    assert settled.status == (FAILED if ending == "lost" else ending)
    assert (settled.arguments, settled.steps, settled.scratch) == ({}, {}, {})


@pytest.mark.parametrize("ending", [COMPLETED, CANCELLED, "lost"])
def test_the_parts_of_a_task_without_a_ttl_are_deleted_when_it_settles(
    ending: str, table_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id
    store.record_operation(task_id, "step:s0", {"v": "r" * 10_000, "ms": 5}, {"at": 0})

    if ending == CANCELLED:
        store.cancel(task_id, ALICE.id)
    elif ending == "lost":
        store.settle_lost(task_id, task_id, {"code": wire.INTERNAL_ERROR, "message": "lost"})
    else:
        store.finish(task_id, COMPLETED, RESULT)

    assert items(table_env) == [raw(table_env, task_id)]


def test_a_task_item_at_dynamodbs_limit_is_still_settled(
    table_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    task_id = create(store, clock).task_id
    item = raw(table_env, task_id)
    # What a create stored before clientCapabilities were counted: an item the table takes, within a
    # few bytes of what it takes at most (so a write that adds anything is refused).
    item["client"] = {"S": ""}
    taken, refused = 380 * 1024 - item_bytes(item), 420 * 1024 - item_bytes(item)
    while refused - taken > 1:  # the largest padding the table takes
        padding = (taken + refused) // 2
        item["client"] = {"S": "c" * padding}
        try:
            table_env.dynamodb.put_item(TableName=table_env.resources.table_name, Item=item)
            taken = padding
        except ClientError as too_large:
            assert too_large.response["Error"]["Code"] == "ValidationException"
            refused = padding
    item["client"] = {"S": "c" * taken}
    table_env.dynamodb.put_item(TableName=table_env.resources.table_name, Item=item)
    with pytest.raises(ClientError, match="Item size to update has exceeded the maximum allowed size"):
        grow = "SET #n = :v"
        table_env.dynamodb.update_item(
            TableName=table_env.resources.table_name,
            Key=task_key(task_id),
            UpdateExpression=grow,
            ExpressionAttributeNames={"#n": "statusMessage"},
            ExpressionAttributeValues={":v": {"S": "sixteen bytes..."}},
        )

    settled = store.settle_lost(task_id, task_id, {"code": wire.INTERNAL_ERROR, "message": "lost"})

    assert settled.status == FAILED
    assert item_bytes(raw(table_env, task_id)) < 1000


def test_a_terminal_error_too_large_for_the_item_keeps_its_code_and_the_start_of_its_message(
    table_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    task_id = create(store, clock).task_id
    huge = {"code": -32000, "message": "m" * 5000, "data": {"detail": "d" * 200_000}}

    settled = store.finish(task_id, FAILED, huge)

    assert settled.error == {"code": -32000, "message": "m" * 1000}
    assert encoded_size(settled.error) < 1100
    assert settled.status == FAILED and schema.LEASE_ATTRIBUTE not in raw(table_env, task_id)


def test_a_working_task_keeps_what_its_worker_needs_in_its_parts_and_its_hot_item_stays_small(
    table_env: TaskEnvironment, store: DynamoTaskStore, clock: Clock
) -> None:
    task_id = grown(store, clock)
    record = store.load(task_id)
    assert record.status == WORKING
    assert len(record.steps) == 12 and record.arguments and record.scratch
    assert item_bytes(raw(table_env, task_id)) < 1024  # a progress write on it costs 1 WRU
    work = table_env.dynamodb.get_item(
        TableName=table_env.resources.table_name, Key=part_key(task_id, schema.WORK_PART), ConsistentRead=True
    )["Item"]
    assert item_bytes(work) > 150_000 and not {"owner", schema.LEASE_ATTRIBUTE, schema.EFFECT_ATTRIBUTE} & set(work)
