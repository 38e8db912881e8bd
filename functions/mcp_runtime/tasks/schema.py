"""The task table's shape, shared by the store, the CDK construct and their tests."""

from __future__ import annotations

from typing import Final

PARTITION_KEY: Final = "pk"  # "task#<id>", "handle#<id>", "session#<nonce>", "stream#<key>"
TTL_ATTRIBUTE: Final = "expiresAt"  # epoch seconds; DynamoDB TTL deletes late, reads filter on it
OWNER_INDEX: Final = "by-owner"  # GSI: the caller's own items, newest first
OWNER_INDEX_PARTITION_KEY: Final = "owner"
OWNER_INDEX_SORT_KEY: Final = "createdAt"
# What the owner index keeps of each item besides the keys (an INCLUDE projection): exactly what the
# task history reads. A write that changes none of these leaves the index alone, and one that does
# writes a few hundred bytes there, not the whole item.
OWNER_INDEX_ATTRIBUTES: Final[tuple[str, ...]] = (
    "taskId",
    "toolName",
    "status",
    "lastUpdatedAt",
    "statusMessage",
    TTL_ATTRIBUTE,
)
TASK_KEY_PREFIX: Final = "task#"
# A task's large parts, each its own item beside the task's (`mcp_runtime.tasks.store`): "part#<id>#call"
# (the tool call: arguments, client, prepared), "part#<id>#work" (the scratch and the first small durable
# records) and "part#<id>#step#<n>" (the n-th durable operation a run asks for: its running mark or its
# record). They carry no owner, lease, status or effect, so neither index holds them and the supervisor's
# stream filter (an `effect` on the new image) drops their records.
PART_KEY_PREFIX: Final = "part#"
CALL_PART: Final = "call"
WORK_PART: Final = "work"
STEP_PART: Final = "step"
# On the hot item: how many step item slots the runs that ended at a boundary asked for (absent: none), so
# the worker knows their keys. A step's own writes leave the hot item alone: a run that begins writes
# `stepsOpen` (its run id), and while it is there, a run may have written step items past `stepItems`
# (they are numbered without gaps, so the worker's read looks on until the first slot that is not there).
# The write that ends a run at a boundary sets `stepItems` and removes `stepsOpen`.
STEP_ITEMS_ATTRIBUTE: Final = "stepItems"
STEPS_OPEN_ATTRIBUTE: Final = "stepsOpen"
# On a step item: the operation's key (`step:fetch#2`) and its record (a map, as the work part's entries).
STEP_KEY_ATTRIBUTE: Final = "key"
STEP_RECORD_ATTRIBUTE: Final = "record"


def part_key_value(task_id: str, part: str) -> str:
    return f"{PART_KEY_PREFIX}{task_id}#{part}"


def step_key_value(task_id: str, slot: int) -> str:
    """The key of the item of a task's `slot`-th durable operation (counted from 0 in the order a run asks)."""
    return f"{PART_KEY_PREFIX}{task_id}#{STEP_PART}#{slot}"


# The sparse index of active tasks the sweeper reads (`mcp_runtime.tasks.sweeper`). Every write that
# leaves a task active sets `leaseExpiresAt` (epoch seconds: now + the lease) in the same request;
# every terminal write removes it, so only active tasks are in the index. The partition key spreads
# the index's writes over shards (one fixed key would be one hot partition for every task write).
ACTIVE_INDEX: Final = "ActiveTasks"
LEASE_ATTRIBUTE: Final = "leaseExpiresAt"
LEASE_SHARD_ATTRIBUTE: Final = "leaseShard"
# Never lower this once deployed (tasks keep the shard they were given); raising it is safe.
LEASE_SHARDS: Final = 16
# What the sweeper reads from the index besides its keys (and the table's `pk`).
ACTIVE_INDEX_PROJECTION: Final[tuple[str, ...]] = ("taskId", "status", "executionName", "expiresAt")


def lease_shard(task_id: str) -> str:
    """The index shard of a task: stable for its life, spread evenly over `LEASE_SHARDS`."""
    import zlib

    return str(zlib.crc32(task_id.encode()) % LEASE_SHARDS)


HANDLE_KEY_PREFIX: Final = "handle#"

# What a task's execution must be told, left on the item (attribute `effect`) by the write that made
# it due. The table's stream delivers that write to the supervisor, which makes the Step Functions
# call (and is retried until it succeeds); the worker's next write removes it.
EFFECT_ATTRIBUTE: Final = "effect"
EFFECT_START: Final = "start"  # start the execution named `executionName`
EFFECT_RESUME: Final = "resume"  # send `taskToken` to the execution waiting on it
EFFECT_STOP: Final = "stop"  # stop the execution named `executionName`
EFFECTS: Final[tuple[str, ...]] = (EFFECT_START, EFFECT_RESUME, EFFECT_STOP)

# The EventBridge events the supervisor settles lost executions from: only the ends that can leave a
# task active. A SUCCEEDED execution wrote its task's terminal status itself, or found the task settled
# or carried on by another execution (and the sweeper covers anything else), so a finished task does
# not invoke the supervisor on its reserved concurrency.
EXECUTION_STATUS_CHANGE: Final = "Step Functions Execution Status Change"
ENDED_STATUSES: Final[tuple[str, ...]] = ("ABORTED", "FAILED", "TIMED_OUT")

# The legacy (2025) leg: a terminated or re-levelled session, and a resumable event stream.
SESSION_KEY_PREFIX: Final = "session#"
STREAM_KEY_PREFIX: Final = "stream#"
