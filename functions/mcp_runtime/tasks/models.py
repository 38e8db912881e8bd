"""The task record as the store keeps it, and its two wire renderings (a Task and its result; docs/tasks.md).

`CreateTaskResult` is flat (`resultType: "task"` plus the `Task` fields) and carries no payload;
`tasks/get` answers `resultType: "complete"` plus a `DetailedTask`, whose payload depends on the
status: `inputRequests` when input_required, `result` when completed, `error` when failed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

from .. import wire
from . import schema

WORKING: Final = "working"
INPUT_REQUIRED: Final = "input_required"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
ACTIVE_STATUSES: Final[tuple[str, ...]] = (WORKING, INPUT_REQUIRED)
TERMINAL_STATUSES: Final[tuple[str, ...]] = (COMPLETED, FAILED, CANCELLED)

EFFECT_START: Final = schema.EFFECT_START
EFFECT_RESUME: Final = schema.EFFECT_RESUME
EFFECT_STOP: Final = schema.EFFECT_STOP


def iso_timestamp(epoch_seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. 2026-07-28T10:30:00.123Z."""
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_timestamp(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


# `pollIntervalMs` grows with the task's age (now - createdAt): a tenth of it, in whole seconds, never
# below the configured interval nor above a minute. A task polled from start to end is then polled
# about 10 times per tenfold of its age, then once a minute: a day-long task 1,488 times.
POLL_INTERVAL_AGE_DIVISOR: Final = 10
MAX_POLL_INTERVAL_MS: Final = 60_000


def adaptive_poll_interval_ms(configured_ms: int, created_at: str, now: float) -> int:
    """The `pollIntervalMs` a client is told for a task created at `created_at` (see above)."""
    age_ms = max(0, int((now - datetime.fromisoformat(created_at).timestamp()) * 1000))
    by_age = age_ms // POLL_INTERVAL_AGE_DIVISOR // 1000 * 1000
    return max(configured_ms, min(by_age, MAX_POLL_INTERVAL_MS))


def expiry_epoch(created_epoch_seconds: float, ttl_ms: int | None) -> int | None:
    """The DynamoDB TTL attribute: rounded up, so the item never counts as expired before its TTL lapses."""
    if ttl_ms is None:
        return None
    return math.ceil(created_epoch_seconds + ttl_ms / 1000)


def capability_names(capabilities: dict[str, Any]) -> dict[str, Any]:
    """The declared capabilities as names only, two levels deep (a capability, and the names inside it:
    elicitation's modes, the extensions): an object becomes `{}`, any other value `None`. Every question
    `RequestMeta` answers (`declares`, `declares_extension`, `declares_elicitation_mode`) answers the
    same on the names as on the declaration, which may carry any amount of settings."""

    def name_of(value: Any) -> Any:
        return {} if isinstance(value, dict) else None

    return {
        name: {inner: name_of(setting) for inner, setting in value.items()} if isinstance(value, dict) else None
        for name, value in capabilities.items()
    }


@dataclass(frozen=True, slots=True)
class ClientSnapshot:
    """What the worker needs of the creating request's client: its protocol version and the names of
    its capabilities (`capability_names`); the worker rebuilds the tool's `RequestMeta` from it."""

    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"protocolVersion": self.protocol_version, "capabilities": self.capabilities}
        if self.client_info is not None:
            data["clientInfo"] = self.client_info
        return data

    @classmethod
    def of(cls, protocol_version: str, capabilities: dict[str, Any]) -> ClientSnapshot:
        """What a task keeps of the client that created it."""
        return cls(protocol_version, capability_names(capabilities))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientSnapshot:
        return cls(
            str(data.get("protocolVersion") or wire.PROTOCOL_VERSION),
            dict(data.get("capabilities") or {}),
            data.get("clientInfo"),
        )


@dataclass(frozen=True, slots=True)
class TaskRecord:
    task_id: str
    owner: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    version: int
    tool_name: str
    arguments: dict[str, Any]
    client: ClientSnapshot
    prepared: Any = None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    # The progress value of the report `status_message` came from: a later run of the tool writes
    # only reports above it (its replayed reports never are).
    progress: float | None = None
    # The total that report gave, if any: a 2025 client following the task gets both, as reported.
    progress_total: float | None = None
    # The latest `ctx.log` lines of the tool (`{"seq", "level", "data", "logger"}`), kept for clients
    # that follow the task on a 2025 event stream (`tasks.worker.TaskLog`).
    log_lines: tuple[dict[str, Any], ...] = ()
    # Outstanding requests, wire key -> `{method, params}`.
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every answer received, wire key -> the raw `inputResponses` value.
    answers: dict[str, Any] = field(default_factory=dict)
    # What the answers take on the item (`limits.kept_answer_bytes`), held under MAX_TASK_KEPT_ANSWERS_BYTES.
    answers_bytes: int = 0
    # Every wire key ever issued, in order, with the tool's own key it stands for.
    issued_keys: tuple[tuple[str, str], ...] = ()
    # The tool's scratch state, carried from one run to the next like MRTR's sealed state.
    scratch: dict[str, Any] = field(default_factory=dict)
    task_token: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    expires_at: int | None = None
    # Written once at create: a retried create that meets this value met its own write.
    create_token: str = ""
    # Set by every conditional write: a retried write that meets its own id was applied already.
    write_id: str = ""
    effect: str | None = None
    execution_name: str = ""
    # Durable operations (steps, waits, callbacks) by key, as `mcp_runtime.tasks.durable` records them.
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A result too large for the item: where it is in the payload bucket.
    result_ref: dict[str, Any] | None = None
    # How many step item slots the hot item counts (`schema.STEP_ITEMS_ATTRIBUTE`), and whether a run may
    # have written some past them (`schema.STEPS_OPEN_ATTRIBUTE`); which records the load read from
    # step items, by key, with their n.
    step_items: int = 0
    steps_open: bool = False
    step_slots: dict[str, int] = field(default_factory=dict)

    @property
    def execution(self) -> str:
        """The name of the execution that runs the task now (the task id, unless it continued)."""
        return self.execution_name or self.task_id

    @property
    def is_terminal(self) -> bool:
        return self.status in wire.TERMINAL_TASK_STATUSES

    def is_expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (time.time() if now is None else now) >= self.expires_at

    def seconds_since_update(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - parse_timestamp(self.last_updated_at)

    def answers_by_tool_key(self) -> dict[str, Any]:
        """The answers as the tool asked for them: the newest answered wire key wins for each tool key."""
        answers: dict[str, Any] = {}
        for wire_key, tool_key in self.issued_keys:
            if wire_key in self.answers:
                answers[tool_key] = self.answers[wire_key]
        return answers

    def to_task(self, now: float | None = None) -> dict[str, Any]:
        """The `Task` fields shared by both renderings; `pollIntervalMs` as of `now` (of its settling, once settled)."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": cast(wire.TaskStatus, self.status),
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
        }
        if self.status_message:
            task["statusMessage"] = self.status_message
        if self.poll_interval_ms is not None:
            # A settled task is the same on every read: its interval is the one it had when it settled.
            when = parse_timestamp(self.last_updated_at) if self.is_terminal else time.time() if now is None else now
            task["pollIntervalMs"] = adaptive_poll_interval_ms(self.poll_interval_ms, self.created_at, when)
        return task


def create_task_result(record: TaskRecord) -> dict[str, Any]:
    """`CreateTaskResult`: flat, with no result, error, inputRequests or requestState."""
    return {"resultType": wire.RESULT_TASK, **record.to_task()}


class BrokenTaskRecord(ValueError):
    """A stored task that cannot be rendered truthfully (a terminal status without its payload)."""


def get_task_result(record: TaskRecord, result: dict[str, Any] | None = None) -> dict[str, Any]:
    """`GetTaskResult`: `resultType: "complete"` and the `DetailedTask` for the current status.
    `result`: the completed task's result when it was fetched from the payload bucket."""
    detailed: dict[str, Any] = {"resultType": wire.RESULT_COMPLETE, **record.to_task()}
    if record.status == INPUT_REQUIRED:
        detailed["inputRequests"] = dict(record.input_requests)
    elif record.status == COMPLETED:
        stored = result if result is not None else record.result
        if stored is None:
            raise BrokenTaskRecord(f"task {record.task_id} is completed but has no result")
        detailed["result"] = dict(stored)
    elif record.status == FAILED:
        if record.error is None:
            raise BrokenTaskRecord(f"task {record.task_id} is failed but has no error")
        detailed["error"] = {key: value for key, value in record.error.items() if key != OPERATOR_REASON}
    return detailed


def new_write_id() -> str:
    """Names one logical write across its retries (not a secret: an item's own bookkeeping)."""
    import secrets

    return secrets.token_hex(8)


# Why a task failed, for the operator: kept in the item's error (`make task ID=`), left out on the wire.
OPERATOR_REASON: Final = "reason"
EXECUTION_FAILED_ERROR: Final[dict[str, Any]] = {"code": wire.INTERNAL_ERROR, "message": "Task execution failed"}
EXECUTION_LOST_ERROR: Final[dict[str, Any]] = {
    "code": wire.INTERNAL_ERROR,
    "message": "Task execution ended without a result",
}
