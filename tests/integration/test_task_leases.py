"""The active-task lease on moto: every write that leaves a task active renews `leaseExpiresAt` in the
same request, every terminal write removes it, so the sparse `ActiveTasks` index holds exactly the
active tasks, and the sweeper's query finds the ones whose lease ran out, oldest first."""

from __future__ import annotations

import math
from typing import Any

import pytest
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack

from mcp_runtime.tasks import schema
from mcp_runtime.tasks.errors import TaskConflict
from mcp_runtime.tasks.models import COMPLETED, EXECUTION_LOST_ERROR, FAILED, INPUT_REQUIRED, WORKING
from mcp_runtime.tasks.store import DynamoTaskStore, lease_until, parked_lease_until, task_key
from tests.integration.task_harness import ALICE, Clock, TaskEnvironment, TaskResources
from tests.integration.test_task_store import RESULT, accept, await_input, create

LEASE = 600


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def task_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> TaskEnvironment:
    return TaskEnvironment(
        embedded_aws, TaskResources.of(deployed), embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )


@pytest.fixture
def store(task_env: TaskEnvironment, clock: Clock) -> DynamoTaskStore:
    return DynamoTaskStore(task_env.resources.table_name, task_env.dynamodb, clock=clock, lease_seconds=LEASE)


def raw(task_env: TaskEnvironment, task_id: str) -> dict[str, Any]:
    item: dict[str, Any] = task_env.dynamodb.get_item(
        TableName=task_env.resources.table_name, Key=task_key(task_id), ConsistentRead=True
    )["Item"]
    return item


def lease_of(task_env: TaskEnvironment, task_id: str) -> int | None:
    value = raw(task_env, task_id).get(schema.LEASE_ATTRIBUTE)
    return int(value["N"]) if value else None


def indexed(task_env: TaskEnvironment) -> set[str]:
    found: set[str] = set()
    for shard in range(schema.LEASE_SHARDS):
        page = task_env.dynamodb.query(
            TableName=task_env.resources.table_name,
            IndexName=schema.ACTIVE_INDEX,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": schema.LEASE_SHARD_ATTRIBUTE},
            ExpressionAttributeValues={":s": {"S": str(shard)}},
        )
        found.update(item["taskId"]["S"] for item in page["Items"])
    return found


def test_a_created_task_holds_a_lease_of_now_plus_the_lease_period_on_its_stable_shard(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    record = create(store, clock)

    item = raw(task_env, record.task_id)
    assert int(item[schema.LEASE_ATTRIBUTE]["N"]) == lease_until(clock(), LEASE)
    assert int(clock()) + LEASE - LEASE // 10 < lease_until(clock(), LEASE) <= int(clock()) + LEASE
    assert item[schema.LEASE_SHARD_ATTRIBUTE] == {"S": schema.lease_shard(record.task_id)}
    assert indexed(task_env) == {record.task_id}


def test_every_write_that_leaves_a_task_active_renews_its_lease(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id
    renewed: list[int | None] = []
    expected: list[int] = []
    for write in (
        lambda: store.set_status_message(task_id, "half way"),
        lambda: store.begin_run(task_id, "r1"),
        lambda: store.mark_step(task_id, "run:a", {"state": "running", "run": "r1", "expires": clock() + 60}, clock()),
        lambda: store.checkpoint(task_id, {"n": 1}),
        lambda: await_input(store, task_id, ["ok"]),
        lambda: store.answer(task_id, ALICE.id, {"ok": accept(ok=True)}),
    ):
        clock.advance(60)
        write()
        renewed.append(lease_of(task_env, task_id))
        expected.append(lease_until(clock(), LEASE))

    assert renewed == expected
    assert len(set(renewed)) == 6  # each a minute later: each renewed it
    assert store.get(task_id).status == WORKING


def test_writes_within_one_tenth_of_the_lease_leave_its_value_and_so_the_index_untouched(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    clock.now = 1_800_000_000.0  # on a whole minute
    task_id = create(store, clock, ttl_ms=None).task_id
    first = lease_of(task_env, task_id)
    clock.advance(59)
    store.set_status_message(task_id, "still going")
    same = lease_of(task_env, task_id)
    clock.advance(1)
    store.set_status_message(task_id, "a minute on")

    assert first == same == 1_800_000_000 + LEASE
    assert lease_of(task_env, task_id) == 1_800_000_060 + LEASE


def test_a_runs_mark_removed_after_its_task_settled_gives_the_task_no_lease_back(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock).task_id
    store.mark_step(task_id, "step:charge", {"state": "running", "run": "run-1", "expires": clock() + 60}, clock())
    store.cancel(task_id, ALICE.id)
    clock.advance(60)

    store.unmark_step(task_id, "step:charge", "run-1")  # the step raised after the cancel

    assert store.load(task_id).steps == {}
    assert schema.LEASE_ATTRIBUTE not in raw(task_env, task_id)
    assert indexed(task_env) == set()


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled", "lost"])
def test_every_terminal_write_removes_the_lease_so_the_task_leaves_the_index(
    ending: str, store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock).task_id
    if ending == "completed":
        store.finish(task_id, COMPLETED, RESULT)
    elif ending == "failed":
        store.finish(task_id, FAILED, dict(EXECUTION_LOST_ERROR))
    elif ending == "cancelled":
        store.cancel(task_id, ALICE.id)
    else:
        store.settle_lost(task_id, task_id, dict(EXECUTION_LOST_ERROR))

    assert schema.LEASE_ATTRIBUTE not in raw(task_env, task_id)
    assert indexed(task_env) == set()


def test_stale_leases_are_the_tasks_whose_lease_ran_out_oldest_first_and_at_most_the_limit(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    first = create(store, clock).task_id
    clock.advance(100)
    second = create(store, clock).task_id
    clock.advance(100)
    create(store, clock)  # fresh: its lease has not run out yet at the time asked
    settled = create(store, clock).task_id
    store.finish(settled, COMPLETED, RESULT)

    asked_at = clock() - 100 + LEASE + 30  # after the first two leases ran out, before the third
    stale = store.stale_leases(asked_at, limit=10)
    only_one = store.stale_leases(asked_at, limit=1)

    assert [lease.task_id for lease in stale] == [first, second]
    assert [lease.task_id for lease in only_one] == [first]
    assert stale[0].status == WORKING and stale[0].execution == first


def test_extending_a_lease_holds_only_against_the_lease_the_sweeper_saw(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock).task_id
    seen = lease_of(task_env, task_id)
    assert seen is not None
    clock.advance(LEASE + 1)

    assert store.extend_lease(task_id, seen) is True
    assert lease_of(task_env, task_id) == lease_until(clock(), LEASE)
    assert store.extend_lease(task_id, seen) is False  # someone (here: the first extension) renewed it since
    store.finish(task_id, COMPLETED, RESULT)
    assert store.extend_lease(task_id, seen) is False  # settled: no lease comes back
    assert schema.LEASE_ATTRIBUTE not in raw(task_env, task_id)


def test_a_task_awaiting_input_is_in_the_index_until_it_is_settled(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock).task_id
    assert await_input(store, task_id, ["ok"]).status == INPUT_REQUIRED
    assert indexed(task_env) == {task_id}
    store.settle_lost(task_id, task_id, dict(EXECUTION_LOST_ERROR))
    with pytest.raises(TaskConflict):
        store.settle_lost(task_id, task_id, dict(EXECUTION_LOST_ERROR))
    assert indexed(task_env) == set()


# ---- parked tasks: a lease that matches their own deadline ----------------------------------------


def test_a_task_parked_on_input_holds_a_lease_of_one_lease_past_its_waits_deadline(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id
    record = store.get(task_id)
    deadline = clock() + 86_400  # the execution waits a day for the answers

    store.await_input(
        task_id, record.version, {"ok": {"method": "elicitation/create"}}, (("ok", "ok"),), {}, "t", deadline
    )

    assert lease_of(task_env, task_id) == parked_lease_until(deadline, LEASE) == math.ceil(deadline) + LEASE
    clock.advance(86_400)
    assert store.stale_leases(clock(), 10) == []  # not asked about while it waits as it should
    clock.advance(LEASE + 1)
    assert [lease.task_id for lease in store.stale_leases(clock(), 10)] == [task_id]
    store.answer(task_id, ALICE.id, {"ok": accept(ok=True)})  # answered: an ordinary lease again
    assert lease_of(task_env, task_id) == lease_until(clock(), LEASE)


def test_a_task_parked_on_a_callback_or_a_timer_holds_a_lease_past_that_deadline(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    waiting = create(store, clock, ttl_ms=None).task_id
    called = create(store, clock, ttl_ms=None).task_id
    ends = clock() + 3 * 3600

    store.record_operation(waiting, "wait:", {"until": ends}, {}, parked_until=ends)
    store.record_operation(called, "callback:ci", {"state": "waiting", "hash": "h"}, {})
    store.await_callback(called, "callback:ci", "token", "Waiting for ci", parked_until=ends)

    assert lease_of(task_env, waiting) == lease_of(task_env, called) == math.ceil(ends) + LEASE
    store.begin_run(waiting, "run-2")  # the run after the wait: its first write
    assert lease_of(task_env, waiting) == lease_until(clock(), LEASE)
