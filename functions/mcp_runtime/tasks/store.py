"""The task table: one DynamoDB item per task, every state change a conditional write.

Item (key `pk = "task#<id>"`): owner, status, createdAt/lastUpdatedAt (ISO 8601), ttlMs, expiresAt
(epoch seconds, the table's TTL attribute; absent when ttlMs is null), version (optimistic lock),
the tool call (toolName, arguments, client, prepared), the outstanding inputRequests and received
answers (maps keyed by wire key, so one answer is one map entry), every issued key, the parked
taskToken, and the final result or error. Big or free-form values are JSON strings.

Rules every write follows:
- a terminal status is written once: every transition requires an active status;
- an item past `expiresAt` is treated as absent (DynamoDB deletes late), on reads and in conditions;
- another principal's item looks exactly like a missing one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..observability import NO_TELEMETRY, Telemetry, traced
from . import schema
from .aws_clients import THROTTLING_CODES, client_provider, error_code, is_aws_error
from .errors import TaskConflict, TaskNotFound, TaskStoreUnavailable
from .models import (
    ACTIVE_STATUSES,
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    iso_timestamp,
)

Item = dict[str, dict[str, Any]]


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """What `answer` did: the keys it accepted, and the token to resume the execution with (if now due)."""

    accepted_keys: tuple[str, ...]
    resume_token: str | None


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """`cancelled` is False when the task had already reached a terminal status (the cancel is a no-op).
    `settled` is the task as the cancel left it (reported to telemetry); not part of equality."""

    cancelled: bool
    parked_token: str | None = None
    settled: TaskRecord | None = field(default=None, compare=False)


class TaskStore(Protocol):
    def create(self, record: TaskRecord) -> None: ...

    def get(self, task_id: str, owner: str | None = None) -> TaskRecord: ...

    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> AnswerOutcome: ...

    def cancel(self, task_id: str, owner: str) -> CancelOutcome: ...

    def set_status_message(self, task_id: str, message: str) -> None: ...

    def park(
        self,
        task_id: str,
        expected_version: int,
        input_requests: Mapping[str, dict[str, Any]],
        issued_keys: tuple[tuple[str, str], ...],
        scratch: Mapping[str, Any],
        task_token: str,
    ) -> None: ...

    def finish(
        self, task_id: str, status: str, payload: dict[str, Any], expected_version: int | None = None
    ) -> TaskRecord: ...


def task_key(task_id: str) -> dict[str, dict[str, str]]:
    return {schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + task_id}}


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


def to_item(record: TaskRecord) -> Item:
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
        "arguments": _json(record.arguments),
        "client": _json(record.client.to_json()),
        "prepared": _json(record.prepared),
        "inputRequests": {"M": {k: _json(v) for k, v in record.input_requests.items()}},
        "answers": {"M": {k: _json(v) for k, v in record.answers.items()}},
        "issuedKeys": _json([list(pair) for pair in record.issued_keys]),
        "scratch": _json(record.scratch),
    }
    if record.poll_interval_ms is not None:
        item["pollIntervalMs"] = {"N": str(record.poll_interval_ms)}
    if record.status_message is not None:
        item["statusMessage"] = {"S": record.status_message}
    if record.task_token is not None:
        item["taskToken"] = {"S": record.task_token}
    if record.result is not None:
        item["result"] = _json(record.result)
    if record.error is not None:
        item["error"] = _json(record.error)
    if record.expires_at is not None:
        item[schema.TTL_ATTRIBUTE] = {"N": str(record.expires_at)}
    return item


def from_item(item: Item) -> TaskRecord:
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
        arguments=_loads(item.get("arguments"), {}),
        client=ClientSnapshot.from_json(_loads(item.get("client"), {})),
        prepared=_loads(item.get("prepared")),
        poll_interval_ms=number("pollIntervalMs"),
        status_message=text("statusMessage"),
        input_requests={k: json.loads(v["S"]) for k, v in (item.get("inputRequests") or {}).get("M", {}).items()},
        answers={k: json.loads(v["S"]) for k, v in (item.get("answers") or {}).get("M", {}).items()},
        issued_keys=tuple((str(a), str(b)) for a, b in _loads(item.get("issuedKeys"), [])),
        scratch=_loads(item.get("scratch"), {}) or {},
        task_token=text("taskToken"),
        result=_loads(item.get("result")),
        error=_loads(item.get("error")),
        expires_at=number(schema.TTL_ATTRIBUTE),
    )


class _Expression:
    """Builds one UpdateItem call: placeholders are numbered, so user-chosen map keys never clash."""

    def __init__(self) -> None:
        self.sets: list[str] = []
        self.removes: list[str] = []
        self.conditions: list[str] = []
        self.names: dict[str, str] = {}
        self.values: dict[str, dict[str, Any]] = {}

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

    def require_live(self, now: float) -> None:
        ttl = self.name(schema.TTL_ATTRIBUTE)
        self.conditions.append(f"(attribute_not_exists({ttl}) OR {ttl} > {self.value({'N': str(math.floor(now))})})")

    def request(self) -> dict[str, Any]:
        update = "SET " + ", ".join(self.sets)
        if self.removes:
            update += " REMOVE " + ", ".join(self.removes)
        request: dict[str, Any] = {
            "UpdateExpression": update,
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": self.values,
        }
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
    ) -> None:
        self.table_name = table_name
        self._client = client_provider(client, "dynamodb", endpoint_url, region_name)
        self._clock = clock
        self.telemetry = telemetry

    # ---- reads ----------------------------------------------------------------------------------
    @traced("TaskStore.get")
    def get(self, task_id: str, owner: str | None = None) -> TaskRecord:
        """A consistent read. `owner=None` is the worker's view (it acts for whoever owns the task)."""
        try:
            response = self._client().get_item(TableName=self.table_name, Key=task_key(task_id), ConsistentRead=True)
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            raise self._translate(exc) from exc
        return self._visible(response.get("Item"), owner)

    def _visible(self, item: Item | None, owner: str | None) -> TaskRecord:
        if not item:
            raise TaskNotFound("Task not found")
        record = from_item(item)
        if (owner is not None and record.owner != owner) or record.is_expired(self._clock()):
            raise TaskNotFound("Task not found")
        return record

    # ---- writes ---------------------------------------------------------------------------------
    @traced("TaskStore.create")
    def create(self, record: TaskRecord) -> None:
        try:
            self._client().put_item(
                TableName=self.table_name,
                Item=to_item(record),
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": schema.PARTITION_KEY},
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) == "ConditionalCheckFailedException":
                raise TaskConflict(f"task {record.task_id} already exists") from exc
            raise self._translate(exc) from exc

    @traced("TaskStore.answer")
    def answer(self, task_id: str, owner: str, responses: Mapping[str, Any]) -> AnswerOutcome:
        """Record answers to outstanding keys; others (never issued, answered, superseded) are ignored.

        First try assumes the answers cover every outstanding key (the usual case: one write). When
        that condition fails, the old item comes back with the failure and the exact subset is
        written, conditioned on the version just seen.
        """
        if not responses:
            self.get(task_id, owner)  # an empty update still answers "not found" for unknown ids
            return AnswerOutcome((), None)
        keys = tuple(responses)
        try:
            old = self._apply_answers(task_id, owner, responses, keys, covers_all=True, expected_version=None)
            return AnswerOutcome(keys, old.task_token)
        except _ConditionFailed as failure:
            current = failure.record
        for _ in range(3):
            record = self._visible_or_missing(current, owner)
            if record.status != INPUT_REQUIRED:
                return AnswerOutcome((), None)
            outstanding = tuple(key for key in keys if key in record.input_requests)
            if not outstanding:
                return AnswerOutcome((), None)
            covers_all = set(outstanding) == set(record.input_requests)
            try:
                self._apply_answers(task_id, owner, responses, outstanding, covers_all, expected_version=record.version)
            except _ConditionFailed as failure:
                current = failure.record
                continue
            return AnswerOutcome(outstanding, record.task_token if covers_all else None)
        raise TaskConflict(f"task {task_id} kept changing while answers were recorded")

    def _apply_answers(
        self,
        task_id: str,
        owner: str,
        responses: Mapping[str, Any],
        keys: tuple[str, ...],
        covers_all: bool,
        expected_version: int | None,
    ) -> TaskRecord:
        now = self._clock()
        expression = _Expression()
        for key in keys:
            expression.set_entry("answers", key, _json(responses[key]))
            expression.remove_entry("inputRequests", key)
            if expected_version is None:
                expression.require(f"attribute_exists({expression.name('inputRequests')}.{expression.name(key)})")
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.bump_version()
        if covers_all:
            expression.set("status", {"S": WORKING})
            expression.remove("taskToken")
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
        now = self._clock()
        expression = _Expression()
        expression.set("status", {"S": CANCELLED})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.set("statusMessage", {"S": "Cancelled by the client"})
        expression.bump_version()
        expression.remove("taskToken")
        expression.set("inputRequests", {"M": {}})
        expression.require_equals("owner", {"S": owner})
        expression.require_status_in(ACTIVE_STATUSES)
        expression.require_live(now)
        try:
            old = self._update(task_id, expression)
        except _ConditionFailed as failure:
            record = self._visible_or_missing(failure.record, owner)
            if record.is_terminal:
                return CancelOutcome(False)
            raise TaskConflict(f"task {task_id} could not be cancelled") from None
        settled = replace(
            old,
            status=CANCELLED,
            last_updated_at=iso_timestamp(now),
            status_message="Cancelled by the client",
            version=old.version + 1,
            task_token=None,
            input_requests={},
        )
        return CancelOutcome(True, old.task_token, settled)

    @traced("TaskStore.set_status_message")
    def set_status_message(self, task_id: str, message: str) -> None:
        """Progress from a running tool; raises TaskConflict once the task stopped working."""
        now = self._clock()
        expression = _Expression()
        expression.set("statusMessage", {"S": message})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.require_equals("status", {"S": WORKING})
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            raise TaskConflict(f"task {task_id} is no longer working") from None

    @traced("TaskStore.park")
    def park(
        self,
        task_id: str,
        expected_version: int,
        input_requests: Mapping[str, dict[str, Any]],
        issued_keys: tuple[tuple[str, str], ...],
        scratch: Mapping[str, Any],
        task_token: str,
    ) -> None:
        """working -> input_required, with the requests and the token that resumes the execution."""
        now = self._clock()
        expression = _Expression()
        expression.set("status", {"S": INPUT_REQUIRED})
        expression.set("inputRequests", {"M": {k: _json(v) for k, v in input_requests.items()}})
        expression.set("issuedKeys", _json([list(pair) for pair in issued_keys]))
        expression.set("scratch", _json(dict(scratch)))
        expression.set("taskToken", {"S": task_token})
        expression.set("statusMessage", {"S": "Waiting for input"})
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.bump_version()
        expression.require_equals("status", {"S": WORKING})
        expression.require_equals("version", {"N": str(expected_version)})
        try:
            self._update(task_id, expression)
        except _ConditionFailed:
            raise TaskConflict(f"task {task_id} moved on before it could park") from None

    @traced("TaskStore.finish")
    def finish(
        self, task_id: str, status: str, payload: dict[str, Any], expected_version: int | None = None
    ) -> TaskRecord:
        """The one terminal write: completed with `result`, or failed with `error`. Returns the task as settled."""
        if status not in (COMPLETED, FAILED):
            raise ValueError(f"finish() writes completed or failed, not {status}")
        now = self._clock()
        expression = _Expression()
        expression.set("status", {"S": status})
        expression.set("result" if status == COMPLETED else "error", _json(payload))
        expression.set("lastUpdatedAt", {"S": iso_timestamp(now)})
        expression.bump_version()
        expression.remove("taskToken")
        expression.remove("statusMessage")
        expression.set("inputRequests", {"M": {}})
        expression.require_status_in(ACTIVE_STATUSES)
        if expected_version is not None:
            expression.require_equals("version", {"N": str(expected_version)})
        try:
            old = self._update(task_id, expression)
        except _ConditionFailed:
            raise TaskConflict(f"task {task_id} was already settled or moved on") from None
        return replace(
            old,
            status=status,
            last_updated_at=iso_timestamp(now),
            version=old.version + 1,
            status_message=None,
            task_token=None,
            input_requests={},
            result=payload if status == COMPLETED else old.result,
            error=payload if status == FAILED else old.error,
        )

    # ---- plumbing -------------------------------------------------------------------------------
    def _update(self, task_id: str, expression: _Expression) -> TaskRecord:
        """Run one conditional UpdateItem; returns the item as it was before the write."""
        expression.require(f"attribute_exists({expression.name(schema.PARTITION_KEY)})")
        try:
            response = self._client().update_item(
                TableName=self.table_name,
                Key=task_key(task_id),
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **expression.request(),
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) == "ConditionalCheckFailedException":
                item = getattr(exc, "response", {}).get("Item")
                raise _ConditionFailed(from_item(item) if item else None) from exc
            raise self._translate(exc) from exc
        return from_item(response["Attributes"])

    def _visible_or_missing(self, record: TaskRecord | None, owner: str) -> TaskRecord:
        if record is None or record.owner != owner or record.is_expired(self._clock()):
            raise TaskNotFound("Task not found")
        return record

    @staticmethod
    def _translate(exc: Exception) -> TaskStoreUnavailable:
        code = error_code(exc)
        if code in THROTTLING_CODES or not code:
            return TaskStoreUnavailable(f"task table unavailable: {code or type(exc).__name__}")
        return TaskStoreUnavailable(f"task table refused the request: {code}")


class _ConditionFailed(Exception):
    """Internal: a conditional write lost; carries the item as it was (None when absent)."""

    def __init__(self, record: TaskRecord | None) -> None:
        super().__init__("condition failed")
        self.record = record
