"""The task table: a small hot item per task, its large write-once parts beside it, every state change
a conditional write on the hot item.

Hot item (key `pk = "task#<id>"`): owner, status, statusMessage, progress, log lines, createdAt/
lastUpdatedAt (ISO 8601), ttlMs, expiresAt (epoch seconds, the table's TTL attribute; absent when ttlMs
is null), version (optimistic lock), toolName, the outstanding inputRequests and received answers
(maps keyed by wire key, so one answer is one map entry), every issued key, the taskToken the execution
waits on, the final result or error (write-once; over 32 KB it is in S3), the execution's name, the
lease, and the `effect` the supervisor still has to carry out (start, resume, stop; see
`models.EFFECTS`). Big or free-form values are JSON.

Parts (`schema.PART_KEY_PREFIX`), items of their own under other keys, with the task's TTL and no
owner, lease, status or effect (so neither index nor the supervisor sees them):
- `part#<id>#call`: the tool call (arguments, client, prepared), put once at create (conditional
  puts, like the hot item's), before the hot item (a create that dies between leaves parts nothing
  reads, which `discard` or the TTL removes);
- `part#<id>#work`: the tool's scratch, and the first durable records while they fit in
  `limits.WORK_PART_RECORDS_BYTES` (each with its `n`), put (empty) at create;
- `part#<id>#step#<n>`: the n-th durable operation a run asks for (its key, and its running mark or
  its record), created by its first write. A run numbers them without gaps; `stepItems` on the hot item
  counts those of the runs that ended at a boundary, and `stepsOpen` says a run may have written more
  (`load` then looks past the count up to the first slot not written).

Why this split: DynamoDB bills a write on the larger of the item before and after it, so a progress,
lease or status write on one item holding a 64 KB argument and 60 KB of records cost 124 WRU; on the
hot item it costs 1, and a step's writes on its own item cost what its record weighs, at step 1,000
as at step 1 (`bench/capacity.py` measures both). `tasks/get` reads the hot item alone (one
GetItem, at most 1 RRU); the worker reads the hot item and its two parts with one consistent
BatchGetItem, then the step items the work part does not stand for, 100 a request (`load`): a task
whose records fit on the work part is read in one request. The table keeps its partition-only key
(no sort key, so no table replacement, and no Query of a task's items): the parts' keys are derived
from the task id and the slot, never listed. A step is two writes, both of its own item: its running
mark, then its record (there, or on the work part while the first small records fit), 1 WRU each
for a small record; neither writes the hot item. The run's first write (`begin_run`) does what a hot
write before each step did (the task works, its lease, the token and effect it consumes), the run
looks at the task every `durable.STEP_STATUS_SECONDS` between steps (`keep_working`: a cancel is
noticed there), and its boundary writes count the step items it wrote. The writes of two items that
remain are ordered, each saying why a crash between them is harmless (`record_operation`,
`mark_step`, `checkpoint`, `await_input`, `await_callback`, `complete_callback`), rather than
transactions, which DynamoDB bills twice on both items.

What stays on the hot item, because one conditional write must change it with the status or
`tasks/get` must read it: the questions (at most 32 KB, only while the task waits for input, when
nothing writes progress), the answers (at most 96 KB, `MAX_TASK_KEPT_ANSWERS_BYTES`, removed by the
terminal write) and the latest log lines (16 of at most 512 bytes). A progress write of a task that
kept large answers is billed on them.

Rules every write follows:
- a terminal status is written once: every transition requires an active status; it removes what
  only a working task needs (`WORKING_PARTS`), so a settled item is small, and its write fits
  whatever the task carried; the parts expire with the task (TTL deletes are free; a delete is
  billed on the part's size), and a task without a TTL has them deleted (its step items too, 25 a
  BatchWriteItem: `stepItems` and `stepsOpen` stay on the settled hot item to say which): nothing
  reads a settled task's parts, and none grows;
- a create stores at most `limits.MAX_TASK_CREATED_BYTES` (counted as DynamoDB counts, `item_bytes`);
- every write that leaves a task active renews its lease (`leaseExpiresAt` = now + the lease, rounded
  down to a tenth of it, in the same request, so no write is added for it; a write that parks the task
  on input, a callback or a timer sets it to one lease past that wait's deadline instead, so a parked
  task costs the sweeper nothing while it waits), and every terminal write removes it: the sparse
  `ActiveTasks` index holds exactly the active tasks, and a stale lease means a task nothing wrote
  for a whole lease period (the sweeper then asks Step Functions about it, `tasks.sweeper`);
- an item past `expiresAt` is treated as absent (DynamoDB deletes late), on reads and in conditions;
- another principal's item looks exactly like a missing one;
- a write is safe to send again when AWS applied it but its answer was lost: each write carries a
  write id (creates a create token), and a retry whose condition fails on an item that already
  shows that write is the write's success, not a conflict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .._aws import CONDITION_FAILED, AwsCaller, AwsCallError, AwsRejected, AwsUnavailable
from ..limits import MAX_TASK_CREATED_BYTES, MAX_TASK_KEPT_ANSWERS_BYTES, bounded_error, kept_answer_bytes
from ..observability import NO_TELEMETRY, Telemetry, traced
from . import schema
from .errors import (
    CallbackLate,
    OperationsOutOfOrder,
    TaskAnswersFull,
    TaskConflict,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
    TaskTooLarge,
)
from .models import (
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    EFFECT_RESUME,
    EFFECT_START,
    EFFECT_STOP,
    FAILED,
    INPUT_REQUIRED,
    TERMINAL_STATUSES,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    iso_timestamp,
    new_write_id,
)

Item = dict[str, dict[str, Any]]
log = logging.getLogger(__name__)
# A task's parts (`schema.PART_KEY_PREFIX`): the call, put once; the work, its records and scratch.
_PARTS: Final = (schema.CALL_PART, schema.WORK_PART)
# What the answers take on the item (`limits.kept_answer_bytes`): every answer write adds to it,
# conditioned on staying within MAX_TASK_KEPT_ANSWERS_BYTES.
ANSWERS_BYTES = "answersBytes"
# The progress value of the report the statusMessage came from (`TaskRecord.progress`).
PROGRESS = "progress"
# The total the same report gave (`TaskRecord.progress_total`), when it gave one.
PROGRESS_TOTAL = "progressTotal"
LOG_LINES = "logLines"

# DynamoDB's most keys in one BatchGetItem, and items in one BatchWriteItem.
BATCH_GET_KEYS: Final = 100
BATCH_WRITE_ITEMS: Final = 25
# The load's first look past the counted step items (while a run may have written more): this many keys.
PROBE_FIRST_SLOTS: Final = 10

# How long an active task may go without a write before the sweeper looks at its execution.
DEFAULT_LEASE_SECONDS: Final = 600


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """What `answer` did: the keys it accepted, and whether the task is now due to resume. `task_token`
    is the token the execution waits on when it is (what resumes it); not part of equality."""

    accepted_keys: tuple[str, ...]
    resumed: bool
    task_token: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """`cancelled` is False when the task had already reached a terminal status (the cancel is a no-op).
    `settled` is the task as the cancel left it (reported to telemetry); not part of equality."""

    cancelled: bool
    settled: TaskRecord | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Lease:
    """An active task whose lease ran out, as the `ActiveTasks` index shows it (eventually consistent)."""

    task_id: str
    status: str
    execution: str
    lease_expires_at: int
    expires_at: int | None

    def is_expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True, slots=True)
class AwaitOutcome:
    """What `await_input` or `await_callback` found: `applied` when the item shows this write (now, or
    from an attempt whose answer was lost); `record` is the item as it is after the write (or as the
    failed condition saw it)."""

    applied: bool
    record: TaskRecord


class TaskStore(Protocol):
    def create(self, record: TaskRecord) -> None: ...

    def discard(self, task_id: str, create_token: str) -> None: ...

    def get(self, task_id: str, owner: str | None = None) -> TaskRecord: ...

    def load(self, task_id: str) -> TaskRecord: ...

    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> AnswerOutcome: ...

    def cancel(self, task_id: str, owner: str) -> CancelOutcome: ...

    def set_status_message(
        self, task_id: str, message: str, progress: float | None = None, total: float | None = None
    ) -> None: ...

    def set_log_lines(self, task_id: str, lines: Sequence[dict[str, Any]]) -> None: ...

    def await_input(
        self,
        task_id: str,
        expected_version: int,
        input_requests: Mapping[str, dict[str, Any]],
        issued_keys: tuple[tuple[str, str], ...],
        scratch: Mapping[str, Any],
        task_token: str,
        parked_until: float | None = None,
        step_items: int | None = None,
    ) -> AwaitOutcome: ...

    def replace_token(self, task_id: str, old_token: str | None, new_token: str) -> bool: ...

    def finish(
        self,
        task_id: str,
        status: str,
        payload: dict[str, Any],
        expected_version: int | None = None,
        result_ref: dict[str, Any] | None = None,
    ) -> TaskRecord: ...

    def settle_lost(self, task_id: str, execution_name: str, error: dict[str, Any]) -> TaskRecord: ...

    def record_operation(
        self,
        task_id: str,
        key: str,
        record: dict[str, Any],
        scratch: Mapping[str, Any] | None,
        *,
        replace: bool = False,
        parked_until: float | None = None,
        slot: int | None = None,
        expires_at: int | None = None,
        step_items: int | None = None,
    ) -> dict[str, Any]: ...

    def begin_run(self, task_id: str, run_id: str) -> None: ...

    def keep_working(self, task_id: str) -> None: ...

    def mark_step(
        self,
        task_id: str,
        key: str,
        mark: dict[str, Any],
        now: float,
        *,
        slot: int | None = None,
        expires_at: int | None = None,
        opens: bool = False,
    ) -> dict[str, Any]: ...

    def unmark_step(self, task_id: str, key: str, run_id: str, *, slot: int | None = None) -> None: ...

    def checkpoint(self, task_id: str, scratch: Mapping[str, Any], step_items: int | None = None) -> None: ...

    def renew(self, task_id: str, current_execution: str, next_execution: str) -> TaskRecord: ...

    def await_callback(
        self,
        task_id: str,
        key: str,
        task_token: str,
        message: str,
        parked_until: float | None = None,
        *,
        slot: int | None = None,
    ) -> AwaitOutcome: ...

    def complete_callback(
        self, task_id: str, key: str, secret_hash: str, outcome: dict[str, Any], *, slot: int | None = None
    ) -> bool: ...


def task_key(task_id: str) -> dict[str, dict[str, str]]:
    return {schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + task_id}}


def part_key(task_id: str, part: str) -> dict[str, dict[str, str]]:
    """The key of one of a task's parts (`schema.CALL_PART`, `schema.WORK_PART`)."""
    return {schema.PARTITION_KEY: {"S": schema.part_key_value(task_id, part)}}


def step_key(task_id: str, slot: int) -> dict[str, dict[str, str]]:
    """The key of the item of a task's `slot`-th durable operation."""
    return {schema.PARTITION_KEY: {"S": schema.step_key_value(task_id, slot)}}


def _json(value: Any) -> dict[str, str]:
    return {"S": json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_jsonable)}


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _loads(attribute: dict[str, Any] | None, default: Any = None) -> Any:
    if not attribute or "S" not in attribute:
        return default
    return json.loads(attribute["S"])


# What only a working task needs (the tool call, its answers, records and scratch): every terminal
# write removes them, so a settled item is small whatever the task carried, and the write always fits.
WORKING_PARTS: Final[tuple[str, ...]] = (
    "arguments",
    "client",
    "prepared",
    "inputRequests",
    "answers",
    ANSWERS_BYTES,
    "issuedKeys",
    "scratch",
    "steps",
)


def item_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """An item's size as DynamoDB counts it (what the 400 KB limit and the write and read units use):
    each attribute's name in UTF-8 and its value (docs: "Item sizes and formats")."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in item.items())


def _value_bytes(value: Mapping[str, Any]) -> int:
    kind, data = next(iter(value.items()))
    if kind == "S":
        return len(str(data).encode())
    if kind == "N":
        return _number_bytes(str(data))
    if kind == "B":
        return len(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(entry).encode()) for entry in data)
    if kind == "NS":
        return sum(_number_bytes(str(entry)) for entry in data)
    if kind == "BS":
        return sum(len(entry) for entry in data)
    if kind == "L":
        return 3 + sum(1 + _value_bytes(entry) for entry in data)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + _value_bytes(entry) for name, entry in data.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def _number_bytes(text: str) -> int:
    """1 byte per two significant digits, plus 1."""
    mantissa = text.lower().split("e")[0].lstrip("+-").replace(".", "").strip("0")
    return (max(1, len(mantissa)) + 1) // 2 + 1


def to_items(record: TaskRecord) -> tuple[Item, Item, Item]:
    """The task's hot item, its call part and its work part."""
    ttl: Item = {} if record.expires_at is None else {schema.TTL_ATTRIBUTE: {"N": str(record.expires_at)}}
    token: Item = {"createToken": {"S": record.create_token}}
    call: Item = {
        **part_key(record.task_id, schema.CALL_PART),
        "arguments": _json(record.arguments),
        "client": _json(record.client.to_json()),
        "prepared": _json(record.prepared),
        **token,
        **ttl,
    }
    work: Item = {
        **part_key(record.task_id, schema.WORK_PART),
        "steps": {"M": {key: record_to_attribute(value) for key, value in record.steps.items()}},
        "scratch": _json(record.scratch),
        **token,
        **ttl,
    }
    return to_item(record), call, work


def to_item(record: TaskRecord) -> Item:
    """The hot item (`to_items` gives the parts too)."""
    item: Item = {
        **task_key(record.task_id),
        "taskId": {"S": record.task_id},
        "owner": {"S": record.owner},
        "status": {"S": record.status},
        "createdAt": {"S": record.created_at},
        "lastUpdatedAt": {"S": record.last_updated_at},
        "ttlMs": {"NULL": True} if record.ttl_ms is None else {"N": str(record.ttl_ms)},
        "version": {"N": str(record.version)},
        "toolName": {"S": record.tool_name},
        "inputRequests": {"M": {k: _json(v) for k, v in record.input_requests.items()}},
        "answers": {"M": {k: _json(v) for k, v in record.answers.items()}},
        "issuedKeys": _json([list(pair) for pair in record.issued_keys]),
        "createToken": {"S": record.create_token},
    }
    if record.write_id:
        item["writeId"] = {"S": record.write_id}
    if record.execution_name:
        item["executionName"] = {"S": record.execution_name}
    if record.effect is not None:
        item["effect"] = {"S": record.effect}
    if record.poll_interval_ms is not None:
        item["pollIntervalMs"] = {"N": str(record.poll_interval_ms)}
    if record.status_message is not None:
        item["statusMessage"] = {"S": record.status_message}
    if record.progress is not None:
        item[PROGRESS] = {"N": repr(float(record.progress))}
    if record.progress_total is not None:
        item[PROGRESS_TOTAL] = {"N": repr(float(record.progress_total))}
    if record.log_lines:
        item[LOG_LINES] = _json(list(record.log_lines))
    if record.task_token is not None:
        item["taskToken"] = {"S": record.task_token}
    if record.result is not None:
        item["result"] = _json(record.result)
    if record.error is not None:
        item["error"] = _json(record.error)
    if record.expires_at is not None:
        item[schema.TTL_ATTRIBUTE] = {"N": str(record.expires_at)}
    if record.result_ref is not None:
        item["resultRef"] = _json(record.result_ref)
    if record.answers_bytes:
        item[ANSWERS_BYTES] = {"N": str(record.answers_bytes)}
    if record.step_items:
        item[schema.STEP_ITEMS_ATTRIBUTE] = {"N": str(record.step_items)}
    return item


# Fields of a durable operation's record: JSON-encoded, or typed (so conditions can read them).
_RECORD_JSON_FIELDS = ("v", "ref", "error")


def record_to_attribute(record: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in record.items():
        if name in _RECORD_JSON_FIELDS:
            fields[name] = _json(value)
        elif value is None:
            fields[name] = {"NULL": True}
        elif isinstance(value, bool):
            fields[name] = {"BOOL": value}
        elif isinstance(value, int | float):
            fields[name] = {"N": repr(value) if isinstance(value, float) else str(value)}
        else:
            fields[name] = {"S": str(value)}
    return {"M": fields}


def record_from_attribute(attribute: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for name, value in (attribute.get("M") or {}).items():
        if name in _RECORD_JSON_FIELDS:
            record[name] = json.loads(value["S"])
        elif "NULL" in value:
            record[name] = None
        elif "BOOL" in value:
            record[name] = bool(value["BOOL"])
        elif "N" in value:
            number = float(value["N"])
            record[name] = int(number) if number.is_integer() and "." not in value["N"] else number
        else:
            record[name] = value.get("S")
    return record


def from_item(item: Item, call: Item | None = None, work: Item | None = None) -> TaskRecord:
    """The task as its hot item shows it, with what its parts hold when given (`load`)."""
    parts = {**(call or {}), **(work or {}), **item}

    def text(name: str) -> str | None:
        value = item.get(name)
        return value["S"] if value and "S" in value else None

    def number(name: str) -> int | None:
        value = item.get(name)
        return int(value["N"]) if value and "N" in value else None

    return TaskRecord(
        task_id=item["taskId"]["S"],
        owner=item["owner"]["S"],
        status=item["status"]["S"],
        created_at=item["createdAt"]["S"],
        last_updated_at=item["lastUpdatedAt"]["S"],
        ttl_ms=number("ttlMs"),
        version=number("version") or 0,
        tool_name=item["toolName"]["S"],
        arguments=_loads(parts.get("arguments"), {}),
        client=ClientSnapshot.from_json(_loads(parts.get("client"), {})),
        prepared=_loads(parts.get("prepared")),
        poll_interval_ms=number("pollIntervalMs"),
        status_message=text("statusMessage"),
        progress=float(item[PROGRESS]["N"]) if PROGRESS in item and "N" in item[PROGRESS] else None,
        progress_total=float(item[PROGRESS_TOTAL]["N"]) if "N" in item.get(PROGRESS_TOTAL, {}) else None,
        log_lines=tuple(_loads(item.get(LOG_LINES), [])),
        input_requests={k: json.loads(v["S"]) for k, v in (item.get("inputRequests") or {}).get("M", {}).items()},
        answers={k: json.loads(v["S"]) for k, v in (item.get("answers") or {}).get("M", {}).items()},
        answers_bytes=number(ANSWERS_BYTES) or 0,
        issued_keys=tuple((str(a), str(b)) for a, b in _loads(item.get("issuedKeys"), [])),
        scratch=_loads(parts.get("scratch"), {}) or {},
        task_token=text("taskToken"),
        result=_loads(item.get("result")),
        error=_loads(item.get("error")),
        expires_at=number(schema.TTL_ATTRIBUTE),
        create_token=text("createToken") or "",
        write_id=text("writeId") or "",
        effect=text("effect"),
        execution_name=text("executionName") or "",
        steps=steps_of(parts),
        result_ref=_loads(item.get("resultRef")),
        step_items=number(schema.STEP_ITEMS_ATTRIBUTE) or 0,
        steps_open=schema.STEPS_OPEN_ATTRIBUTE in item,
    )


def steps_of(item: Item | None) -> dict[str, dict[str, Any]]:
    """The durable records a work part (or an item holding `steps`) shows."""
    return {key: record_from_attribute(value) for key, value in ((item or {}).get("steps") or {}).get("M", {}).items()}


def step_item_entry(item: Item | None) -> tuple[str, dict[str, Any] | None] | None:
    """(the operation's key, its entry: a running mark or a record, None once taken back) a step item
    shows; None for no item."""
    if not item or schema.STEP_KEY_ATTRIBUTE not in item:
        return None
    attribute = item.get(schema.STEP_RECORD_ATTRIBUTE)
    return item[schema.STEP_KEY_ATTRIBUTE]["S"], record_from_attribute(attribute) if attribute else None


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a durable operation's entry is written: an entry of the work part's `steps` map (`slot`
    None: the first small records, and tasks from before step items), or the step item of its slot."""

    task_id: str
    key: str
    slot: int | None

    @property
    def item_key(self) -> dict[str, dict[str, str]]:
        return part_key(self.task_id, schema.WORK_PART) if self.slot is None else step_key(self.task_id, self.slot)

    def path(self, expression: _Expression) -> str:
        if self.slot is None:
            return f"{expression.name('steps')}.{expression.name(self.key)}"
        return expression.name(schema.STEP_RECORD_ATTRIBUTE)

    def set_entry(self, expression: _Expression, entry: Mapping[str, Any], expires_at: int | None) -> None:
        """Write `entry` here; a step item is created by its first write (with its key and the task's TTL),
        and never takes the entry of another operation (`OperationsOutOfOrder` on the failure)."""
        expression.sets.append(f"{self.path(expression)} = {expression.value(record_to_attribute(entry))}")
        if self.slot is None:
            return
        key, value = expression.name(schema.STEP_KEY_ATTRIBUTE), expression.value({"S": self.key})
        expression.sets.append(f"{key} = {value}")
        expression.require(f"(attribute_not_exists({key}) OR {key} = {value})")
        if expires_at is not None:
            expression.set(schema.TTL_ATTRIBUTE, {"N": str(expires_at)})

    def entry(self, item: Item | None) -> dict[str, Any] | None:
        """This operation's entry as `item` (this place's item, or None when absent) shows it."""
        if self.slot is None:
            return steps_of(item).get(self.key) if item else None
        shown = step_item_entry(item)
        if shown is None:
            return None
        key, entry = shown
        if key != self.key:
            raise OperationsOutOfOrder(
                f"task {self.task_id}: durable operation {self.slot + 1} was {key!r} in an earlier run, "
                f"{self.key!r} in this one"
            )
        return entry


class _Expression:
    """Builds one UpdateItem call: placeholders are numbered, so user-chosen map keys never clash."""

    def __init__(self) -> None:
        self.sets: list[str] = []
        self.removes: list[str] = []
        self.conditions: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, dict[str, Any]] = {}
        # A terminal write (or one that takes an expired task out of the index): removes the lease.
        self.ends_lease = False
        # A write that sets the lease itself (the sweeper's), or may land on a settled task: the lease
        # rule leaves it alone, so a settled task never gets one back.
        self.keeps_lease = False
        # A write that parks the task (on input, a callback or a timer) until then: its lease runs to
        # then plus one lease, so the sweeper does not ask about it while it waits as it should.
        self.parked_until: float | None = None

    def name(self, attribute: str) -> str:
        for placeholder, existing in self.names.items():
            if existing == attribute:
                return placeholder
        placeholder = f"#n{len(self.names)}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, attribute_value: dict[str, Any]) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = attribute_value
        return placeholder

    def set(self, attribute: str, attribute_value: dict[str, Any]) -> None:
        self.sets.append(f"{self.name(attribute)} = {self.value(attribute_value)}")

    def set_entry(self, map_attribute: str, key: str, attribute_value: dict[str, Any]) -> None:
        self.sets.append(f"{self.name(map_attribute)}.{self.name(key)} = {self.value(attribute_value)}")

    def remove(self, attribute: str) -> None:
        self.removes.append(self.name(attribute))

    def ends_settled_task(self) -> None:
        """A terminal write: removes the lease and what only a working task needs (`WORKING_PARTS`)."""
        self.ends_lease = True
        for attribute in WORKING_PARTS:
            self.remove(attribute)

    def remove_entry(self, map_attribute: str, key: str) -> None:
        self.removes.append(f"{self.name(map_attribute)}.{self.name(key)}")

    def bump_version(self) -> None:
        self.sets.append(f"{self.name('version')} = {self.name('version')} + {self.value({'N': '1'})}")

    def require(self, condition: str) -> None:
        self.conditions.append(condition)

    def require_equals(self, attribute: str, attribute_value: dict[str, Any]) -> None:
        self.conditions.append(f"{self.name(attribute)} = {self.value(attribute_value)}")

    def require_status_in(self, statuses: tuple[str, ...]) -> None:
        placeholders = ", ".join(self.value({"S": status}) for status in statuses)
        self.conditions.append(f"{self.name('status')} IN ({placeholders})")

    def require_execution(self, execution_name: str, task_id: str) -> None:
        """The item names this execution; a task's first execution, named by its id, may go unnamed on it."""
        name, value = self.name("executionName"), self.value({"S": execution_name})
        if execution_name == task_id:
            self.conditions.append(f"({name} = {value} OR attribute_not_exists({name}))")
        else:
            self.conditions.append(f"{name} = {value}")

    def require_live(self, now: float) -> None:
        ttl = self.name(schema.TTL_ATTRIBUTE)
        self.conditions.append(f"(attribute_not_exists({ttl}) OR {ttl} > {self.value({'N': str(math.floor(now))})})")

    def request(self) -> dict[str, Any]:
        # REMOVE first: the order DynamoDB applies them in does not matter, but moto checks the item's
        # size after each action, and a terminal write's removals make room for what it sets.
        update = " ".join(
            f"{verb} {', '.join(parts)}" for verb, parts in (("REMOVE", self.removes), ("SET", self.sets)) if parts
        )
        request: dict[str, Any] = {"UpdateExpression": update, "ExpressionAttributeNames": self.names}
        if self.values:
            request["ExpressionAttributeValues"] = self.values
        if self.conditions:
            request["ConditionExpression"] = " AND ".join(self.conditions)
        return request


class DynamoTaskStore:
    """`TaskStore` on one DynamoDB table. The client is injected, or built lazily on first use."""

    def __init__(
        self,
        table_name: str,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry = NO_TELEMETRY,
        caller: AwsCaller | None = None,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.table_name = table_name
        self._aws = caller or AwsCaller("dynamodb", client, endpoint_url=endpoint_url, region_name=region_name)
        self._clock = clock
        self.telemetry = telemetry
        self.lease_seconds = lease_seconds

    # ---- reads ----------------------------------------------------------------------------------
    @traced("TaskStore.get")
    def get(self, task_id: str, owner: str | None = None) -> TaskRecord:
        """A consistent read of the hot item alone (one GetItem, of a small item): the task without its
        parts (arguments, client, prepared, steps and scratch read empty; `load` reads them). `owner=None`
        is the worker's and the supervisor's view (they act for whoever owns the task)."""
        response = self._call("get_item", TableName=self.table_name, Key=task_key(task_id), ConsistentRead=True)
        return self._visible(response.get("Item"), owner)

    @traced("TaskStore.load")
    def load(self, task_id: str) -> TaskRecord:
        """The worker's read: the hot item and its parts in one consistent BatchGetItem, then the step
        items the work part does not stand for, 100 a request: the slots `stepItems` counts, and while a
        run may have written more (`stepsOpen`), the slots after them up to the first one missing (a run
        numbers its operations without gaps). A task whose records all fit on the work part, read after a
        run that ended at a boundary, is read in one request."""
        items = self._batch_get([task_key(task_id), *(part_key(task_id, part) for part in _PARTS)])
        hot = items.get(schema.TASK_KEY_PREFIX + task_id)
        call, work = (items.get(schema.part_key_value(task_id, part)) for part in _PARTS)
        record = self._visible(hot, None, call, work)
        on_work_part = {entry["n"] for entry in record.steps.values() if isinstance(entry.get("n"), int)}
        counted = [slot for slot in range(record.step_items) if slot not in on_work_part]
        probe_from = record.step_items if record.steps_open else None
        found = self._step_items(task_id, counted, probe_from, on_work_part)
        if not found:
            return record
        steps, slots = dict(record.steps), dict[str, int]()
        for slot, item in found:
            key, entry = step_item_entry(item) or ("", None)
            if entry is None:
                continue  # a mark taken back
            if key not in steps or _is_mark(steps[key]):  # the work part's record, if any, came first
                steps[key], slots[key] = entry, slot
        return dataclasses.replace(record, steps=steps, step_slots=slots)

    def _step_items(
        self, task_id: str, counted: list[int], probe_from: int | None, skip: set[int] | frozenset[int] = frozenset()
    ) -> list[tuple[int, Item]]:
        """(slot, item) of the step items there are of the slots `counted`, and (from `probe_from`, None:
        none) of the slots after them, up to the first slot neither in `skip` nor there; 100 keys a
        request, the looks past the count PROBE_FIRST_SLOTS keys, then twice as many each time (a run
        that ended without counting its step items usually left few)."""
        found: list[tuple[int, Item]] = []
        rest, window = list(counted), PROBE_FIRST_SLOTS
        while rest or probe_from is not None:
            batch, rest = rest[:BATCH_GET_KEYS], rest[BATCH_GET_KEYS:]
            probed: list[int] = []
            if probe_from is not None and not rest:
                while len(batch) + len(probed) < BATCH_GET_KEYS and len(probed) < window:
                    if probe_from not in skip:
                        probed.append(probe_from)
                    probe_from += 1
            got = self._batch_get([step_key(task_id, slot) for slot in batch + probed])
            found.extend((slot, got[key]) for slot in batch if (key := schema.step_key_value(task_id, slot)) in got)
            for slot in probed:
                item = got.get(schema.step_key_value(task_id, slot))
                if item is None:  # the first slot no run wrote: what is after it, a run of another order wrote
                    probe_from = None
                    break
                found.append((slot, item))
            window = min(BATCH_GET_KEYS, 2 * window)  # a key asked for and not found is billed too
        return found

    def _batch_get(self, keys: list[dict[str, dict[str, str]]]) -> dict[str, Item]:
        """The items of `keys` (at most 100) that exist, by partition key value (what DynamoDB left
        unprocessed is asked again)."""
        found: dict[str, Item] = {}
        request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
        for _ in range(5):
            response = self._call("batch_get_item", RequestItems=request)
            for item in (response.get("Responses") or {}).get(self.table_name) or ():
                found[item[schema.PARTITION_KEY]["S"]] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return found
        raise TaskStoreUnavailable("task table unavailable (batch_get_item: keys left unprocessed)")

    def _visible(
        self, item: Item | None, owner: str | None, call: Item | None = None, work: Item | None = None
    ) -> TaskRecord:
        if not item:
            raise TaskNotFound("Task not found")
        record = from_item(item, call, work)
        if (owner is not None and record.owner != owner) or record.is_expired(self._clock()):
            raise TaskNotFound("Task not found")
        return record

    # ---- writes from the API --------------------------------------------------------------------
    @traced("TaskStore.create")
    def create(self, record: TaskRecord) -> None:
        """Put the parts, then the hot item (its `effect` asks for the execution to start, so the worker
        finds the parts); a create that meets its own earlier attempt (same create token) succeeded.
        TaskTooLarge, with nothing written, when the items would be over MAX_TASK_CREATED_BYTES together."""
        item, *parts = to_items(record)
        if record.status in ACTIVE_STATUSES:
            item.update(self._lease(record.task_id))
        size = sum(item_bytes(each) for each in (item, *parts))
        if size > MAX_TASK_CREATED_BYTES:
            raise TaskTooLarge(size, MAX_TASK_CREATED_BYTES)
        for part in parts:
            self._put_part(part, record.create_token, record.task_id)
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": schema.PARTITION_KEY},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failure:
            if failure.record is not None and failure.record.create_token == record.create_token:
                return
            raise TaskConflict(f"task {record.task_id} already exists") from None

    def _put_part(self, part: Item, create_token: str, task_id: str) -> None:
        """One part of a new task, conditional like the task's own put: a create never overwrites
        another task's part, and one sent again meets its own (the same create token)."""
        try:
            self._call(
                "put_item",
                TableName=self.table_name,
                Item=part,
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": schema.PARTITION_KEY},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failure:
            if (failure.item or {}).get("createToken", {}).get("S") != create_token:
                raise TaskConflict(f"task {task_id} already exists") from None

    @traced("TaskStore.discard")
    def discard(self, task_id: str, create_token: str) -> None:
        """Delete a task (and its parts) whose create may have been applied although the caller was told it failed."""
        for key in (task_key(task_id), *(part_key(task_id, part) for part in _PARTS)):
            try:
                self._call(
                    "delete_item",
                    TableName=self.table_name,
                    Key=key,
                    ConditionExpression="#token = :token",
                    ExpressionAttributeNames={"#token": "createToken"},
                    ExpressionAttributeValues={":token": {"S": create_token}},
                )
            except _ConditionFailed:
                continue  # never written (or not ours): nothing to take back

    def _end_parts(self, settled: TaskRecord) -> None:
        """A settled task's parts: nothing reads them again, and they do not grow. They expire with the
        task, as TTL deletes are free (a delete is billed like a write of the whole part); a task without
        a TTL has them deleted, its step items too: the slots the settled hot item counts (`stepItems`),
        and while a run may have written more (`stepsOpen`), those found after them."""
        if settled.expires_at is None:
            probe_from = settled.step_items if settled.steps_open else None
            later = [slot for slot, _ in self._step_items(settled.task_id, [], probe_from)]
            self._delete_parts(settled.task_id, [*range(settled.step_items), *later])

    def _delete_parts(self, task_id: str, slots: Sequence[int]) -> None:
        """BatchWriteItem, 25 deletes a request. A delete that fails leaves the item behind: nothing reads
        it, and it does not grow. (A run that began before the settle may still write a step or two until
        it notices, `durable.STEP_STATUS_SECONDS`, putting a step item back after this: the same holds for
        it.)"""
        keys = [*(part_key(task_id, part) for part in _PARTS), *(step_key(task_id, n) for n in slots)]
        for first in range(0, len(keys), BATCH_WRITE_ITEMS):
            request: dict[str, Any] = {
                self.table_name: [{"DeleteRequest": {"Key": key}} for key in keys[first : first + BATCH_WRITE_ITEMS]]
            }
            try:
                for _ in range(5):
                    request = self._call("batch_write_item", RequestItems=request).get("UnprocessedItems") or {}
                    if not request:
                        break
                else:
                    raise TaskStoreUnavailable("task table unavailable (batch_write_item: items left unprocessed)")
            except (TaskStoreUnavailable, TaskStoreRefused) as exc:
                log.warning("task %s: %d of its parts were not deleted (%s)", task_id, len(keys) - first, exc)
                return

    @traced("TaskStore.answer")
    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> AnswerOutcome:
        """Record answers to outstanding keys; others (never issued, answered, superseded) are ignored.

        First try assumes the answers cover every outstanding key (the usual case: one write). When
        that condition fails, the item comes back with the failure: if it already shows these answers
        (this write, or the same answers sent before, applied with the answer lost), that is the
        answer's success; otherwise the exact subset is written, conditioned on the version just seen.
        The task token stays on the item until the resumed run's first write consumes it. Answers
        that would take what the task keeps past MAX_TASK_KEPT_ANSWERS_BYTES raise TaskAnswersFull,
        with nothing written.
        """
        if not responses:
            self.get(task_id, owner)  # an empty update still answers "not found" for unknown ids
            return AnswerOutcome((), False)
        keys = tuple(responses)
        write_id = new_write_id()
        try:
            new = self._apply_answers(task_id, owner, responses, keys, True, None, write_id)
            return AnswerOutcome(keys, new.status == WORKING, new.task_token)
        except _ConditionFailed as failure:
            current = failure.record
        for _ in range(3):
            record = self._visible_or_missing(current, owner)
            already = tuple(key for key in keys if key in record.answers and record.answers[key] == responses[key])
            if already and not any(key in record.input_requests for key in keys):
                return self._resume_again(record, already)
            if record.status != INPUT_REQUIRED:
                return AnswerOutcome((), False)
            outstanding = tuple(key for key in keys if key in record.input_requests)
            if not outstanding:
                return AnswerOutcome((), False)
            covers_all = set(outstanding) == set(record.input_requests)
            adding = _answers_bytes(responses, outstanding)
            if record.answers_bytes + adding > MAX_TASK_KEPT_ANSWERS_BYTES:
                raise TaskAnswersFull(record.answers_bytes, adding, MAX_TASK_KEPT_ANSWERS_BYTES)
            try:
                new = self._apply_answers(task_id, owner, responses, outstanding, covers_all, record.version, write_id)
            except _ConditionFailed as failure:
                current = failure.record
                continue
            return AnswerOutcome(outstanding, covers_all, new.task_token if covers_all else None)
        raise TaskConflict(f"task {task_id} kept changing while answers were recorded")

    def _resume_again(self, record: TaskRecord, keys: tuple[str, ...]) -> AnswerOutcome:
        """The answers are on the item already (a retried update). While the resumed run has not
        consumed the token yet, ask for it to be sent again: a new stream record, a new attempt."""
        if record.status != WORKING or record.task_token is None:
            return AnswerOutcome(keys, record.status == WORKING)
        expression = _Expression()
        expression.set("writeId", {"S": new_write_id()})
        expression.set("effect", {"S": EFFECT_RESUME})
        expression.require_equals("status", {"S": WORKING})
        expression.require_equals("taskToken", {"S": record.task_token})
        try:
            self._update(record.task_id, expression)
        except _ConditionFailed:  # the run consumed it meanwhile, so it resumed
            return AnswerOutcome(keys, True)
        return AnswerOutcome(keys, True, record.task_token)

    def _apply_answers(
        self,
        task_id: str,
        owner: str,
        responses: Mapping[str, Any],
        keys: tuple[str, ...],
        covers_all: bool,
        expected_version: int | None,
        write_id: str,
    ) -> TaskRecord:
        now = self._clock()
        adding = _answers_bytes(responses, keys)
        if adding > MAX_TASK_KEPT_ANSWERS_BYTES:
            raise TaskAnswersFull(0, adding, MAX_TASK_KEPT_ANSWERS_BYTES)
        expression = _Expression()
        counter, zero = expression.name(ANSWERS_BYTES), expression.value({"N": "0"})
        expression.sets.append(f"{counter} = if_not_exists({counter}, {zero}) + {expression.value({'N': str(adding)})}")
        room = expression.value({"N": str(MAX_TASK_KEPT_ANSWERS_BYTES - adding)})
        expression.require(f"(attribute_not_exists({counter}) OR {counter} <= {room})")
        for key in keys:
            expression.set_entry("answers", key, _json(responses[key]))
            expression.remove_entry("inputRequests", key)
            if expected_version is None:
                expression.require(f"attribute_exists({expression.name('inputRequests')}.{expression.name(key)})")
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.set("writeId", {"S": write_id})
        expression.bump_version()
        if covers_all:
            expression.set("status", {"S": WORKING})
            expression.set("effect", {"S": EFFECT_RESUME})
            expression.remove("statusMessage")
            if expected_version is None:
                expression.require(
                    f"size({expression.name('inputRequests')}) = {expression.value({'N': str(len(keys))})}"
                )
        expression.require_equals("owner", {"S": owner})
        expression.require_equals("status", {"S": INPUT_REQUIRED})
        if expected_version is not None:
            expression.require_equals("version", {"N": str(expected_version)})
        expression.require_live(now)
        return self._update(task_id, expression)

    @traced("TaskStore.cancel")
    def cancel(self, task_id: str, owner: str) -> CancelOutcome:
        """Settle `cancelled`; the item's `effect` then asks for the execution to be stopped."""
        now = self._clock()
        write_id = new_write_id()
        expression = _Expression()
        expression.set("status", {"S": CANCELLED})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.set("statusMessage", {"S": "Cancelled by the client"})
        expression.set("writeId", {"S": write_id})
        expression.set("effect", {"S": EFFECT_STOP})
        expression.bump_version()
        expression.remove("taskToken")
        expression.ends_settled_task()
        expression.require_equals("owner", {"S": owner})
        expression.require_status_in(ACTIVE_STATUSES)
        expression.require_live(now)
        try:
            settled = self._update(task_id, expression)
        except _ConditionFailed as failure:
            record = self._visible_or_missing(failure.record, owner)
            if record.status == CANCELLED and record.write_id == write_id:
                self._end_parts(record)
                return CancelOutcome(True, record)  # this cancel, applied, its answer lost
            if record.is_terminal:
                return CancelOutcome(False)
            raise TaskConflict(f"task {task_id} could not be cancelled") from None
        self._end_parts(settled)
        return CancelOutcome(True, settled)

    # ---- writes from the worker -----------------------------------------------------------------
    @traced("TaskStore.set_status_message")
    def set_status_message(
        self, task_id: str, message: str, progress: float | None = None, total: float | None = None
    ) -> None:
        """Progress from a running tool (and the progress value and total its message reports); raises TaskConflict
        once the task stopped working. Like every write of a running tool, it consumes the token and the
        effect that started or resumed it."""
        expression = _Expression()
        expression.set("statusMessage", {"S": message})
        if progress is not None:
            expression.set(PROGRESS, {"N": repr(float(progress))})
        if total is not None:
            expression.set(PROGRESS_TOTAL, {"N": repr(float(total))})
        self._update_while_working(task_id, self._running_tool_write(expression))

    @traced("TaskStore.set_log_lines")
    def set_log_lines(self, task_id: str, lines: Sequence[dict[str, Any]]) -> None:
        """The tool's latest log lines, for a 2025 client following the task; TaskConflict once it stopped working."""
        expression = _Expression()
        expression.set(LOG_LINES, _json(list(lines)))
        self._update_while_working(task_id, self._running_tool_write(expression))

    @traced("TaskStore.await_input")
    def await_input(
        self,
        task_id: str,
        expected_version: int,
        input_requests: Mapping[str, dict[str, Any]],
        issued_keys: tuple[tuple[str, str], ...],
        scratch: Mapping[str, Any],
        task_token: str,
        parked_until: float | None = None,
        step_items: int | None = None,
    ) -> AwaitOutcome:
        """working -> input_required, with the requests and the task token that resumes the execution;
        then the scratch on the work part (the resumed run reads it). `parked_until`: when the
        execution's wait for the answers times out (its lease runs to then). `step_items`: the step
        items the run that asked wrote (`stepItems` at least that, the step items closed; None from an
        execution started before the count was handed over: left as they are).

        The hot write goes first, so only the write that moved the task on keeps its scratch (a late
        attempt of an older round fails on the version and writes nothing). A crash between the two
        loses this round's scratch, as a checkpoint that fails does (`TaskWorker` goes on without it);
        the steps are kept.

        The requests' own keys are new (never issued before), so an item whose issued keys begin with
        `issued_keys` shows this write: applied by an earlier attempt whose answer was lost (possibly
        with an earlier token, and possibly answered since)."""
        now = self._clock()
        expression = _Expression()
        expression.set("status", {"S": INPUT_REQUIRED})
        expression.set("inputRequests", {"M": {k: _json(v) for k, v in input_requests.items()}})
        expression.set("issuedKeys", _json([list(pair) for pair in issued_keys]))
        expression.set("taskToken", {"S": task_token})
        expression.set("statusMessage", {"S": "Waiting for input"})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.set("writeId", {"S": new_write_id()})
        expression.remove("effect")
        expression.parked_until = parked_until
        expression.bump_version()
        expression.require_equals("status", {"S": WORKING})
        expression.require_equals("version", {"N": str(expected_version)})
        if step_items is not None:
            count, value = expression.name(schema.STEP_ITEMS_ATTRIBUTE), expression.value({"N": str(step_items)})
            expression.sets.append(f"{count} = {value}")
            expression.require(f"(attribute_not_exists({count}) OR {count} <= {value})")
            expression.remove(schema.STEPS_OPEN_ATTRIBUTE)
        try:
            record = self._update(task_id, expression)
            applied = True
        except _ConditionFailed as failure:
            if failure.record is None:
                raise TaskNotFound("Task not found") from None
            record = failure.record
            if (record.status, record.version) == (WORKING, expected_version) and step_items is not None:
                # Another run counted more step items (the count only grows): the write without the count.
                return self.await_input(
                    task_id, expected_version, input_requests, issued_keys, scratch, task_token, parked_until
                )
            applied = bool(issued_keys) and record.issued_keys[: len(issued_keys)] == tuple(issued_keys)
        if applied and record.status == INPUT_REQUIRED:
            self._keep_scratch(task_id, scratch)
        return AwaitOutcome(applied, record)

    def _keep_scratch(self, task_id: str, scratch: Mapping[str, Any]) -> None:
        work = _Expression()
        work.set("scratch", _json(dict(scratch)))
        with contextlib.suppress(_ConditionFailed):  # settled meanwhile: its parts are gone
            self._update_part(_Place(task_id, "", None), work)

    @traced("TaskStore.replace_token")
    def replace_token(self, task_id: str, old_token: str | None, new_token: str) -> bool:
        """Swap the stored task token for the one the execution now waits on (its WaitForToken step was
        retried)."""
        expression = _Expression()
        expression.set("taskToken", {"S": new_token})
        expression.require_equals("status", {"S": INPUT_REQUIRED})
        if old_token is None:
            expression.require(f"attribute_not_exists({expression.name('taskToken')})")
        else:
            expression.require_equals("taskToken", {"S": old_token})
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            return False
        return True

    # ---- durable operations (mcp_runtime.tasks.durable) -------------------------------------------
    # A step's running mark and its record are one write each, of the step's own item (the record: or of
    # the work part, while the first small records fit there), and leave the hot item alone: a step costs
    # what its record weighs, at step 1,000 as at step 1. What the hot write before each gave is had
    # otherwise: the run's first write (`begin_run`) consumes the token and the effect, renews the lease
    # and opens the step items for the worker's read (`stepsOpen`); the run looks at the task's status
    # (and renews the lease when it runs low) every `durable.STEP_STATUS_SECONDS` at a step boundary
    # (`keep_working`), so a cancel is noticed there; and a step's write that lands after the task
    # settled is harmless: nothing reads a settled task's step items, they expire with it (or, without a
    # TTL, are deleted with what the settle finds), and a step item only ever holds one small entry.
    # A wait's or a callback's record keeps its hot write first (the lease parked to its deadline, the
    # count of step items, and the step items closed: the run ends there).
    @traced("TaskStore.begin_run")
    def begin_run(self, task_id: str, run_id: str) -> None:
        """A run of the tool begins: consume the token and the effect that started or resumed it, renew
        the lease, and open the step items (`stepsOpen` = `run_id`: the run may write step items past
        `stepItems`). TaskConflict once the task does not work."""
        self._step_hot_write(task_id, None, opens=run_id)

    @traced("TaskStore.keep_working")
    def keep_working(self, task_id: str) -> None:
        """A running tool's look at its task between steps: one consistent GetItem of the hot item;
        TaskConflict once it does not work (cancelled, settled, expired). When less than half the lease
        is left, the lease is renewed (a running tool's write) instead of the sweeper asking about it."""
        response = self._call("get_item", TableName=self.table_name, Key=task_key(task_id), ConsistentRead=True)
        item = response.get("Item")
        now = self._clock()
        if not item or item["status"]["S"] != WORKING or from_item(item).is_expired(now):
            raise TaskConflict(f"task {task_id} is no longer working")
        lease = int((item.get(schema.LEASE_ATTRIBUTE) or {}).get("N") or 0)
        if lease - now < self.lease_seconds / 2:
            self._update_while_working(task_id, self._running_tool_write(_Expression()))

    @traced("TaskStore.record_operation")
    def record_operation(
        self,
        task_id: str,
        key: str,
        record: dict[str, Any],
        scratch: Mapping[str, Any] | None,
        *,
        replace: bool = False,
        parked_until: float | None = None,
        slot: int | None = None,
        expires_at: int | None = None,
        step_items: int | None = None,
    ) -> dict[str, Any]:
        """A step's, wait's or callback's record; the first writer wins (a callback that was never
        awaited is replaced). Raises TaskConflict when the task is known to have stopped working.
        `parked_until`: when a wait this record starts ends (the task's lease runs to then). `scratch`
        (None: left as it is) is kept on the work part: in the same write, or, for a record on a step
        item, in the write after. `expires_at`: the task's TTL, for a step item this write creates.

        A step's record is one write (`_is_step`): it takes the place of a running mark (any run's: the
        first value wins) or of nothing, so a run whose mark was taken over, or that records after the
        task settled, writes a value no run reads twice (the settled task's items are not read at all).
        A wait's or callback's record has a hot write first (the task works; its lease, parked to the
        wait's deadline; `stepItems` to `step_items`, or to `slot` + 1, closing the step items): a crash
        before its record leaves a task whose run records the operation again, as after any crash. A
        crash between a step item's record and the scratch that follows it loses that scratch, as a
        checkpoint that fails does (the run that follows goes on with the scratch kept before)."""
        place = _Place(task_id, key, slot)
        if not _is_step(key):
            count = step_items if step_items is not None else (None if slot is None else slot + 1)
            hot = self._step_hot_write(task_id, count, parked_until, closes=step_items is not None)
            expires_at = hot.expires_at
        expression = _Expression()
        place.set_entry(expression, record, expires_at)
        if scratch is not None and slot is None:
            expression.set("scratch", _json(dict(scratch)))
        path = place.path(expression)
        if replace:
            expression.require(f"{path}.{expression.name('state')} = {expression.value({'S': 'waiting'})}")
        else:  # a value takes the place of a running mark, any run's: the first value wins
            running = expression.value({"S": "running"})
            expression.require(f"(attribute_not_exists({path}) OR {path}.{expression.name('state')} = {running})")
        try:
            kept = place.entry(self._update_part(place, expression))
        except _ConditionFailed as failure:
            current = place.entry(failure.item)
            if failure.item is None and slot is None:
                raise TaskConflict(f"task {task_id} is no longer working") from None  # settled: its parts are gone
            if current is not None and current.get("state") != "running":
                return current  # recorded first by another run (or by this write, its answer lost)
            raise TaskConflict(f"task {task_id}: {key} could not be recorded") from None
        if scratch is not None and slot is not None:
            self._keep_scratch(task_id, scratch)
        assert kept is not None
        return kept

    @traced("TaskStore.mark_step")
    def mark_step(
        self,
        task_id: str,
        key: str,
        mark: dict[str, Any],
        now: float,
        *,
        slot: int | None = None,
        expires_at: int | None = None,
        opens: bool = False,
    ) -> dict[str, Any]:
        """Mark a step running (`durable.is_step_mark`) where nothing is, or only an expired mark; returns
        the step's entry as it is after the write. `expires_at`: the task's TTL, for the step item this
        write creates.

        On a step item (`slot`) this is the step's one write before it runs: the mark names its run and
        expires with the run's invocation, so a run that died leaves a mark another run takes over once
        it expires, and a live one makes another run wait; a cancelled task's run notices at its next
        look at the status (`keep_working`), and a mark it wrote meanwhile is never read. A mark that
        took the place of another run's expired mark looks at the work part too: that run may have kept
        its record there (`record_operation` with `slot` None) before it died, and then this step is
        recorded, not to be run again.

        On the work part (`slot` None: the run's own in-progress mark) the hot write goes first (the task
        works, TaskConflict once not; with `opens`, it is the run's `begin_run` too), so a cancelled
        task's run never marks itself; a crash between the two leaves a renewed lease and no mark, as
        when the run died before it began."""
        place = _Place(task_id, key, slot)
        if slot is None:
            expires_at = self._step_hot_write(task_id, None, opens=mark.get("run") if opens else None).expires_at
        expression = _Expression()
        place.set_entry(expression, mark, expires_at)
        path = place.path(expression)
        running = expression.value({"S": mark["state"]})
        expired = f"({path}.{expression.name('state')} = {running} AND {path}.{expression.name('expires')} < "
        expression.require(f"(attribute_not_exists({path}) OR {expired}{expression.value({'N': repr(float(now))})}))")
        try:
            old = self._update_part(place, expression, returns="ALL_OLD")
        except _ConditionFailed as failure:
            current = place.entry(failure.item)
            if current is None:
                raise TaskConflict(f"task {task_id} is no longer working") from None
            return current  # another run's live mark, or the value it recorded
        taken_over = place.entry(old) if slot is not None and old else None
        if taken_over is not None and taken_over.get("run") != mark.get("run"):
            work = self._call(
                "get_item", TableName=self.table_name, Key=part_key(task_id, schema.WORK_PART), ConsistentRead=True
            ).get("Item")
            recorded = steps_of(work).get(key)
            if recorded is not None and not _is_mark(recorded):
                return recorded
        return dict(mark)

    @traced("TaskStore.unmark_step")
    def unmark_step(self, task_id: str, key: str, run_id: str, *, slot: int | None = None) -> None:
        """Remove this run's running mark of a step; anything else there stays. A settled task's work
        part is gone (or going), so the write finds nothing and changes nothing. A step item keeps its
        key without an entry (the load skips it), so the slots a run wrote stay without gaps."""
        place = _Place(task_id, key, slot)
        expression = _Expression()
        path = place.path(expression)
        expression.require(f"{path}.{expression.name('run')} = {expression.value({'S': run_id})}")
        expression.removes.append(path)
        with contextlib.suppress(_ConditionFailed):
            if slot is not None:
                self._call(
                    "update_item",
                    TableName=self.table_name,
                    Key=place.item_key,
                    ReturnValuesOnConditionCheckFailure="NONE",
                    **expression.request(),
                )
                return
            self._update_part(place, expression)

    def _step_hot_write(
        self,
        task_id: str,
        count: int | None,
        parked_until: float | None = None,
        *,
        opens: str | None = None,
        closes: bool = False,
    ) -> TaskRecord:
        """A hot write of the running tool (the task works, TaskConflict once not; its lease, token and
        effect): with `count`, `stepItems` at least `count` (a number for a number: the item does not
        grow), and with `closes` too, the step items closed (no run wrote past the count); with `opens`,
        the step items opened by run `opens`."""
        expression = self._running_tool_write(_Expression())
        expression.parked_until = parked_until
        if opens is not None:
            expression.set(schema.STEPS_OPEN_ATTRIBUTE, {"S": opens})
        if count is not None:
            name, value = expression.name(schema.STEP_ITEMS_ATTRIBUTE), expression.value({"N": str(count)})
            expression.set(schema.STEP_ITEMS_ATTRIBUTE, {"N": str(count)})
            expression.require(f"(attribute_not_exists({name}) OR {name} <= {value})")
            if closes:
                expression.remove(schema.STEPS_OPEN_ATTRIBUTE)
        try:
            return self._update(task_id, expression)
        except _ConditionFailed as failure:
            seen = failure.record
            if count is None or seen is None or seen.status != WORKING or seen.step_items <= count:
                raise TaskConflict(f"task {task_id} is no longer working") from None
        # Another run counted more step items already (the count only grows): the write without it.
        return self._step_hot_write(task_id, None, parked_until, opens=opens)

    @traced("TaskStore.checkpoint")
    def checkpoint(self, task_id: str, scratch: Mapping[str, Any], step_items: int | None = None) -> None:
        """Keep the tool's `ctx.scratch` as the invocation ends at a step boundary (and with `step_items`,
        the count of the step items the run wrote, closing them); TaskConflict once not working. The hot
        write goes first: a crash before the scratch is kept loses it, as a checkpoint that fails does."""
        self._step_hot_write(task_id, step_items, closes=step_items is not None)
        expression = _Expression()
        expression.set("scratch", _json(dict(scratch)))
        try:
            self._update_part(_Place(task_id, "", None), expression)
        except _ConditionFailed:
            raise TaskConflict(f"task {task_id} is no longer working") from None

    @traced("TaskStore.renew")
    def renew(self, task_id: str, current_execution: str, next_execution: str) -> TaskRecord:
        """Hand the task to a new execution (this one nears Step Functions' history limit): the write
        names it and asks the supervisor to start it."""
        expression = _Expression()
        expression.set("executionName", {"S": next_execution})
        expression.set("effect", {"S": EFFECT_START})
        expression.set("writeId", {"S": new_write_id()})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(self._clock())})
        expression.remove("taskToken")
        expression.require_equals("status", {"S": WORKING})
        expression.require_execution(current_execution, task_id)
        try:
            return self._update(task_id, expression)
        except _ConditionFailed as failure:
            if failure.record is not None and failure.record.execution == next_execution:
                return failure.record  # this renewal, applied, its answer lost
            raise TaskConflict(f"task {task_id} moved on before it could continue in a new execution") from None

    @traced("TaskStore.await_callback")
    def await_callback(
        self,
        task_id: str,
        key: str,
        task_token: str,
        message: str,
        parked_until: float | None = None,
        *,
        slot: int | None = None,
    ) -> AwaitOutcome:
        """Store the task token a callback's completion resumes the execution with, then mark the
        callback `awaited` on the work part (its token went out; the task stays working). `parked_until`:
        when the execution's wait for the completion times out (the task's lease runs to then).

        The token goes first: a completion that arrives between the two writes finds it and resumes
        the execution; a crash between them leaves the callback not marked awaited, so a run woken
        without a completion issues a new token, as after a run that died before its wait began. When
        the callback was completed before its token was stored, the mark is refused and the caller
        resumes the execution with its token itself."""
        expression = _Expression()
        expression.parked_until = parked_until
        expression.set("taskToken", {"S": task_token})
        expression.set("statusMessage", {"S": message})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(self._clock())})
        expression.remove("effect")
        expression.require_equals("status", {"S": WORKING})
        try:
            self._update(task_id, expression)
        except _ConditionFailed as failure:
            if failure.record is None:
                raise TaskNotFound("Task not found") from None
            return AwaitOutcome(False, self.load(task_id))
        place = _Place(task_id, key, slot)
        work = _Expression()
        path = place.path(work)
        work.sets.append(f"{path}.{work.name('awaited')} = {work.value({'BOOL': True})}")
        work.require(f"{path}.{work.name('state')} = {work.value({'S': 'waiting'})}")
        try:
            self._update_part(place, work)
        except _ConditionFailed:
            return AwaitOutcome(False, self.load(task_id))
        return AwaitOutcome(True, self.load(task_id))

    @traced("TaskStore.complete_callback")
    def complete_callback(
        self, task_id: str, key: str, secret_hash: str, outcome: dict[str, Any], *, slot: int | None = None
    ) -> bool:
        """The external system's completion: once, for the holder of the token, while the task works
        and before the callback's deadline. Asks for the waiting execution to be resumed. False when
        refused (unknown, used, forged, ended); CallbackLate, with nothing written, for the holder of
        the token after the deadline.

        The record goes on the work part first (conditioned on the token's hash, the callback waiting
        and its deadline: only the holder's first completion passes), then the effect on the hot item
        (conditioned on the task working). The other order would wake the execution before the record
        is there. A crash between the two leaves the completion recorded and the execution waiting on
        the token still stored: the holder's retry finds exactly that and asks for the resume again."""
        now = self._clock()
        write_id = new_write_id()
        place = _Place(task_id, key, slot)
        work = _Expression()
        path = place.path(work)
        for name, value in {"state": "done", **outcome}.items():
            attribute = _json(value) if name in _RECORD_JSON_FIELDS else {"S": str(value)}
            work.sets.append(f"{path}.{work.name(name)} = {work.value(attribute)}")
        work.require(f"{path}.{work.name('hash')} = {work.value({'S': secret_hash})}")
        work.require(f"{path}.{work.name('state')} = {work.value({'S': 'waiting'})}")
        deadline = f"{path}.{work.name('deadline')}"
        no_deadline = f"attribute_not_exists({deadline}) OR attribute_type({deadline}, {work.value({'S': 'NULL'})})"
        work.require(f"({no_deadline} OR {deadline} > {work.value({'N': repr(float(now))})})")
        try:
            self._update_part(place, work)
        except _ConditionFailed:
            try:
                record = self.load(task_id)
            except TaskNotFound:
                return False
            waiting = (record.steps.get(key) or {}) if record.status == WORKING else {}
            if waiting.get("hash") == secret_hash and _resume_never_asked(record, key):
                return self._ask_resume(task_id, now, write_id, record.task_token)
            ends = waiting.get("deadline")
            holder = waiting.get("hash") == secret_hash and waiting.get("state") == "waiting"
            if holder and ends is not None and float(ends) <= now:
                raise CallbackLate(f"task {task_id}: callback {key} completed after its deadline") from None
            return False
        return self._ask_resume(task_id, now, write_id)

    def _ask_resume(self, task_id: str, now: float, write_id: str, token: str | None = None) -> bool:
        """The effect that resumes the execution waiting on a completed callback (while the task works;
        with `token`, only while that token still waits and no effect is due)."""
        expression = _Expression()
        expression.set("effect", {"S": EFFECT_RESUME})
        expression.set("writeId", {"S": write_id})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.require_equals("status", {"S": WORKING})
        expression.require_live(now)
        if token is not None:
            expression.require_equals("taskToken", {"S": token})
            expression.require(f"attribute_not_exists({expression.name('effect')})")
        try:
            self._update(task_id, expression)
        except _ConditionFailed as failure:
            return failure.record is not None and failure.record.write_id == write_id  # applied, answer lost
        return True

    @traced("TaskStore.finish")
    def finish(
        self,
        task_id: str,
        status: str,
        payload: dict[str, Any],
        expected_version: int | None = None,
        result_ref: dict[str, Any] | None = None,
    ) -> TaskRecord:
        """The one terminal write: completed with `result` (or where it is, `result_ref`), or failed
        with `error`. Returns the task as settled."""
        if status not in (COMPLETED, FAILED):
            raise ValueError(f"finish() writes completed or failed, not {status}")
        expression, write_id = self._terminal(status, payload, result_ref)
        if expected_version is not None:
            expression.require_equals("version", {"N": str(expected_version)})
        return self._settle(task_id, expression, write_id)

    @traced("TaskStore.settle_lost")
    def settle_lost(self, task_id: str, execution_name: str, error: dict[str, Any]) -> TaskRecord:
        """`failed`, for a task still active although its execution (this one, by name) has ended."""
        expression, write_id = self._terminal(FAILED, error)
        expression.require_execution(execution_name, task_id)
        return self._settle(task_id, expression, write_id)

    def _terminal(
        self, status: str, payload: dict[str, Any], result_ref: dict[str, Any] | None = None
    ) -> tuple[_Expression, str]:
        write_id = new_write_id()
        expression = _Expression()
        expression.set("status", {"S": status})
        if result_ref is not None:
            expression.set("resultRef", _json(result_ref))
        elif status == COMPLETED:
            expression.set("result", _json(payload))
        else:
            expression.set("error", _json(bounded_error(payload)))
        expression.set("lastUpdatedAt", {"S": iso_timestamp(self._clock())})
        expression.set("writeId", {"S": write_id})
        expression.bump_version()
        expression.remove("taskToken")
        expression.remove("statusMessage")
        expression.remove("effect")
        expression.ends_settled_task()
        expression.require_status_in(ACTIVE_STATUSES)
        return expression, write_id

    def _settle(self, task_id: str, expression: _Expression, write_id: str) -> TaskRecord:
        try:
            settled = self._update(task_id, expression)
        except _ConditionFailed as failure:
            if failure.record is None or failure.record.write_id != write_id:
                raise TaskConflict(f"task {task_id} was already settled or moved on") from None
            settled = failure.record  # this write, applied, its answer lost
        self._end_parts(settled)
        return settled

    # ---- the sweeper (mcp_runtime.tasks.sweeper) ----------------------------------------------------
    @traced("TaskStore.stale_leases")
    def stale_leases(self, now: float, limit: int) -> list[Lease]:
        """At most `limit` active tasks whose lease ran out by `now`, oldest lease first (one query per shard)."""
        found: list[Lease] = []
        for shard in range(schema.LEASE_SHARDS):
            response = self._call(
                "query",
                TableName=self.table_name,
                IndexName=schema.ACTIVE_INDEX,
                KeyConditionExpression="#shard = :shard AND #lease <= :now",
                ExpressionAttributeNames={"#shard": schema.LEASE_SHARD_ATTRIBUTE, "#lease": schema.LEASE_ATTRIBUTE},
                ExpressionAttributeValues={":shard": {"S": str(shard)}, ":now": {"N": str(math.floor(now))}},
                Limit=limit,
            )
            found.extend(_lease_of(item) for item in response.get("Items") or ())
        return sorted(found, key=lambda lease: (lease.lease_expires_at, lease.task_id))[:limit]

    @traced("TaskStore.extend_lease")
    def extend_lease(self, task_id: str, seen: int) -> bool:
        """Renew the lease the sweeper saw run out (its execution still runs); False when a write renewed
        or removed it since."""
        expression = _Expression()
        expression.require_equals(schema.LEASE_ATTRIBUTE, {"N": str(seen)})
        expression.require_status_in(ACTIVE_STATUSES)
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            return False
        return True

    @traced("TaskStore.set_lease_aside")
    def set_lease_aside(self, task_id: str, seen: int, seconds: int) -> bool:
        """Move the lease the sweeper saw `seconds` ahead (a task whose writes the table refuses), so the
        runs that follow take the tasks behind it; a number for a number, the item does not grow. False
        when a write renewed or removed it since."""
        expression = _Expression()
        expression.keeps_lease = True
        expression.set(schema.LEASE_ATTRIBUTE, {"N": str(math.floor(self._clock()) + seconds)})
        expression.require_equals(schema.LEASE_ATTRIBUTE, {"N": str(seen)})
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            return False
        return True

    @traced("TaskStore.clear_settled_lease")
    def clear_settled_lease(self, task_id: str, seen: int) -> bool:
        """Take a settled task out of the index should a write have left it a lease (no write that can
        land on a settled task should; this keeps the sweeper from asking about it again and again)."""
        expression = _Expression()
        expression.ends_lease = True
        expression.require_equals(schema.LEASE_ATTRIBUTE, {"N": str(seen)})
        expression.require_status_in(TERMINAL_STATUSES)
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            return False
        return True

    @traced("TaskStore.drop_lease")
    def drop_lease(self, task_id: str, seen: int) -> bool:
        """Take a task past its expiry out of the index (it reads as absent; DynamoDB deletes it late)."""
        expression = _Expression()
        expression.ends_lease = True
        expression.require_equals(schema.LEASE_ATTRIBUTE, {"N": str(seen)})
        ttl = expression.name(schema.TTL_ATTRIBUTE)
        expression.require(f"{ttl} <= {expression.value({'N': str(math.floor(self._clock()))})}")
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            return False
        return True

    def _lease(self, task_id: str, parked_until: float | None = None) -> Item:
        until = lease_until(self._clock(), self.lease_seconds)
        if parked_until is not None:
            until = max(until, parked_lease_until(parked_until, self.lease_seconds))
        return {
            schema.LEASE_ATTRIBUTE: {"N": str(until)},
            schema.LEASE_SHARD_ATTRIBUTE: {"S": schema.lease_shard(task_id)},
        }

    # ---- plumbing -------------------------------------------------------------------------------
    def _running_tool_write(self, expression: _Expression) -> _Expression:
        """Make `expression` a write of the running tool: like every such write it stamps the item,
        consumes the task token and the effect that started or resumed the run, and holds only while
        the task works."""
        expression.set("lastUpdatedAt", {"S": iso_timestamp(self._clock())})
        expression.remove("taskToken")
        expression.remove("effect")
        expression.require_equals("status", {"S": WORKING})
        return expression

    def _update_while_working(self, task_id: str, expression: _Expression) -> TaskRecord:
        """`_update` for a write whose only condition is that the task works: TaskConflict once it does not."""
        try:
            return self._update(task_id, expression)
        except _ConditionFailed:
            raise TaskConflict(f"task {task_id} is no longer working") from None

    def _update(self, task_id: str, expression: _Expression) -> TaskRecord:
        """Run one conditional UpdateItem of the hot item; returns it as the write left it."""
        response = self._call(
            "update_item",
            TableName=self.table_name,
            Key=task_key(task_id),
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            **self._hot_write(task_id, expression).request(),
        )
        return from_item(response["Attributes"])

    def _hot_write(self, task_id: str, expression: _Expression) -> _Expression:
        """Every write of the hot item goes through here, so none can forget the lease rule: a terminal
        write removes the lease, any other renews it; and none creates an item."""
        if expression.ends_lease:
            expression.remove(schema.LEASE_ATTRIBUTE)
        elif not expression.keeps_lease:
            for attribute, value in self._lease(task_id, expression.parked_until).items():
                expression.set(attribute, value)
        expression.require(f"attribute_exists({expression.name(schema.PARTITION_KEY)})")
        return expression

    def _update_part(self, place: _Place, expression: _Expression, returns: str = "ALL_NEW") -> Item:
        """One conditional UpdateItem of the item of `place`; returns it as written (`returns`: or as it
        was). The work part must exist (a settled task's without a TTL is gone); a step item is created by
        its first write, by a run whose first write found the task working (`begin_run`)."""
        if place.slot is None:
            expression.require(f"attribute_exists({expression.name(schema.PARTITION_KEY)})")
        response = self._call(
            "update_item",
            TableName=self.table_name,
            Key=place.item_key,
            ReturnValues=returns,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
            **expression.request(),
        )
        attributes: Item = response.get("Attributes") or {}
        return attributes

    def _call(self, operation: str, **params: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self._aws.call(operation, **params)
        except AwsCallError as exc:
            raise _translate(exc) from exc
        return response

    def _visible_or_missing(self, record: TaskRecord | None, owner: str) -> TaskRecord:
        if record is None or record.owner != owner or record.is_expired(self._clock()):
            raise TaskNotFound("Task not found")
        return record


def lease_until(now: float, lease_seconds: int) -> int:
    """Now plus the lease, rounded down to a tenth of the lease (a minute of the default ten): the writes
    of one such step leave the index key as it was, and DynamoDB writes no index for them. Rounded
    down, so a lease never outlasts the period it promises."""
    step = max(1, lease_seconds // 10)
    until = math.floor(now) + lease_seconds
    return until - until % step


def parked_lease_until(parked_until: float, lease_seconds: int) -> int:
    """The lease of a task parked until `parked_until` (its wait's deadline): one lease past it, since
    the run that follows the wait writes within one lease, as any running task does."""
    return math.ceil(parked_until) + lease_seconds


def _lease_of(item: Item) -> Lease:
    expires = item.get(schema.TTL_ATTRIBUTE)
    task_id = item["taskId"]["S"]
    return Lease(
        task_id=task_id,
        status=item["status"]["S"],
        execution=(item.get("executionName") or {}).get("S") or task_id,
        lease_expires_at=int(item[schema.LEASE_ATTRIBUTE]["N"]),
        expires_at=int(expires["N"]) if expires and "N" in expires else None,
    )


def _resume_never_asked(record: TaskRecord, key: str) -> bool:
    """The callback `key` is completed but its resume was never asked for: the task works, a token
    still waits (the resumed run's first write would have consumed it), no effect is due, and no
    other callback is being waited for (whose token that would be)."""
    entry = record.steps.get(key) or {}
    others_waiting = any(
        other.get("state") == "waiting" and other.get("awaited") for name, other in record.steps.items() if name != key
    )
    return (
        entry.get("state") == "done"
        and record.status == WORKING
        and record.task_token is not None
        and record.effect is None
        and not others_waiting
    )


def _is_mark(entry: Mapping[str, Any]) -> bool:
    return entry.get("state") == "running"


def _is_step(key: str) -> bool:
    """A step's record (`durable`'s keys begin with their kind): one write, no hot write before it."""
    return key.startswith("step:")


def _answers_bytes(responses: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    return sum(kept_answer_bytes(key, responses[key]) for key in keys)


def _translate(exc: AwsCallError) -> Exception:
    if isinstance(exc, AwsRejected) and exc.code == CONDITION_FAILED:
        return _ConditionFailed(exc.item)
    if isinstance(exc, AwsUnavailable):
        return TaskStoreUnavailable(f"task table unavailable ({exc.operation}: {exc.code})")
    return TaskStoreRefused(f"task table refused the request ({exc})", exc.code)


class _ConditionFailed(Exception):
    """Internal: a conditional write lost; carries the item as it was (None when absent)."""

    def __init__(self, item: Item | None) -> None:
        super().__init__("condition failed")
        self.item = item

    @property
    def record(self) -> TaskRecord | None:
        """The hot item as it was (None for a part)."""
        return from_item(self.item) if self.item and "taskId" in self.item else None
