"""What the legacy leg keeps between invocations, in the task table under its own key prefixes.

- `session#<nonce>`: only for a session that was terminated (`DELETE`) or given a log level
  (`logging/setLevel`); everything else about a session travels sealed in its id. TTL: the
  session's own expiry.
- `stream#<key>`: one resumable event stream, the answer to one client request that needed a
  server-to-client request (elicitation, sampling, roots) or runs as a durable task. It holds the
  caller (principal and session), the request to re-run, the questions outstanding and the answers
  received, the last events sent (for replay after `Last-Event-ID`), and a version for optimistic
  locking. TTL: short, renewed by every write.

Items past `expiresAt` count as absent (DynamoDB deletes late), and another caller's stream looks
exactly like a missing one. Every state change is a conditional write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from .._dynamo import ConditionFailed, DynamoStore
from ..limits import MAX_KEPT_STREAM_EVENTS
from ..observability import traced
from ..tasks import schema

STREAM_OWNER: Final = "streamOwner"  # not the owner index's attribute: streams stay out of task history
OPEN: Final = "open"
RUNNING: Final = "running"
DONE: Final = "done"
CANCELLED: Final = "cancelled"
KIND_INPUT: Final = "input"
KIND_TASK: Final = "task"


class StreamNotFound(Exception):
    """Unknown, expired, settled, or another caller's: callers cannot tell which."""


class StreamConflict(Exception):
    """Someone changed the stream since it was read (a concurrent reconnect or answer)."""


class SessionEnded(Exception):
    """The session was terminated by `DELETE`."""


class LegacyStoreUnavailable(Exception):
    """DynamoDB failed or throttled; the caller answers with a generic error."""


@dataclass(frozen=True, slots=True)
class SessionState:
    revoked: bool = False
    log_level: str | None = None


@dataclass(frozen=True, slots=True)
class StreamRecord:
    key: str
    owner: str
    session: str
    request_id: Any
    method: str
    params: dict[str, Any]
    kind: str
    status: str
    version: int
    expires_at: int
    round: int = 1
    # Outstanding questions of this round: key -> `{method, params}` (task streams: what was relayed).
    pending: dict[str, Any] = field(default_factory=dict)
    # Answers of this round: key -> the client's JSON-RPC result, or `{"error": ...}`.
    answers: dict[str, Any] = field(default_factory=dict)
    request_state: str | None = None
    task_id: str | None = None
    # The last events sent, `[seq, message]`, so a reconnect can replay what it missed.
    events: tuple[tuple[int, Any], ...] = ()
    seq: int = 0
    # Task streams: the task's status and statusMessage as last relayed, and the progress count.
    last_status: str | None = None
    progress: int = 0
    lease_until: int = 0
    # Task streams: the `seq` of the task's last log line relayed (or passed over, below the session's level).
    log_seq: int = 0

    def with_events(self, messages: list[Any]) -> StreamRecord:
        seq = self.seq
        added = []
        for message in messages:
            seq += 1
            added.append((seq, message))
        kept = (*self.events, *added)[-MAX_KEPT_STREAM_EVENTS:]
        return replace(self, events=kept, seq=seq)

    def events_after(self, seq: int) -> list[tuple[int, Any]]:
        return [event for event in self.events if event[0] > seq]


class LegacyStore(Protocol):
    def session_state(self, nonce: str) -> SessionState: ...

    def set_log_level(self, nonce: str, level: str, expires_at: int) -> None: ...

    def revoke_session(self, nonce: str, expires_at: int) -> None: ...

    def create_stream(self, record: StreamRecord) -> None: ...

    def get_stream(self, key: str, owner: str, session: str) -> StreamRecord: ...

    def save_stream(self, record: StreamRecord, expected_version: int) -> StreamRecord: ...

    def record_answer(
        self, key: str, owner: str, session: str, round_number: int, answer_key: str, answer: Any
    ) -> None: ...

    def claim_stream(self, record: StreamRecord, lease_seconds: int) -> StreamRecord: ...


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _j(value: Any) -> dict[str, str]:
    return {"S": json.dumps(value, separators=(",", ":"), ensure_ascii=False)}


def _loads(attribute: dict[str, Any] | None, default: Any = None) -> Any:
    if not attribute or "S" not in attribute:
        return default
    return json.loads(attribute["S"])


def _map_of_json(attribute: dict[str, Any] | None) -> dict[str, Any]:
    if not attribute or "M" not in attribute:
        return {}
    return {key: json.loads(value["S"]) for key, value in attribute["M"].items()}


def stream_key(key: str) -> dict[str, dict[str, str]]:
    return {schema.PARTITION_KEY: _s(schema.STREAM_KEY_PREFIX + key)}


def session_key(nonce: str) -> dict[str, dict[str, str]]:
    return {schema.PARTITION_KEY: _s(schema.SESSION_KEY_PREFIX + nonce)}


def to_item(record: StreamRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        **stream_key(record.key),
        STREAM_OWNER: _s(record.owner),
        "session": _s(record.session),
        "requestId": _j(record.request_id),
        "method": _s(record.method),
        "params": _j(record.params),
        "kind": _s(record.kind),
        "status": _s(record.status),
        "version": _n(record.version),
        schema.TTL_ATTRIBUTE: _n(record.expires_at),
        "round": _n(record.round),
        "pending": {"M": {key: _j(value) for key, value in record.pending.items()}},
        "answers": {"M": {key: _j(value) for key, value in record.answers.items()}},
        "events": _j([list(event) for event in record.events]),
        "seq": _n(record.seq),
        "progress": _n(record.progress),
        "leaseUntil": _n(record.lease_until),
        "logSeq": _n(record.log_seq),
    }
    if record.request_state is not None:
        item["requestState"] = _s(record.request_state)
    if record.task_id is not None:
        item["taskId"] = _s(record.task_id)
    if record.last_status is not None:
        item["lastStatus"] = _s(record.last_status)
    return item


def from_item(item: dict[str, Any]) -> StreamRecord:
    def number(name: str) -> int:
        return int(item[name]["N"]) if name in item else 0

    def text(name: str) -> str | None:
        return str(item[name]["S"]) if name in item else None

    return StreamRecord(
        key=item[schema.PARTITION_KEY]["S"].removeprefix(schema.STREAM_KEY_PREFIX),
        owner=item[STREAM_OWNER]["S"],
        session=item["session"]["S"],
        request_id=_loads(item.get("requestId")),
        method=item["method"]["S"],
        params=_loads(item.get("params"), {}),
        kind=item["kind"]["S"],
        status=item["status"]["S"],
        version=number("version"),
        expires_at=number(schema.TTL_ATTRIBUTE),
        round=number("round"),
        pending=_map_of_json(item.get("pending")),
        answers=_map_of_json(item.get("answers")),
        request_state=text("requestState"),
        task_id=text("taskId"),
        events=tuple((int(seq), message) for seq, message in _loads(item.get("events"), [])),
        seq=number("seq"),
        last_status=text("lastStatus"),
        progress=number("progress"),
        lease_until=number("leaseUntil"),
        log_seq=number("logSeq"),
    )


class DynamoLegacyStore(DynamoStore):
    unavailable = LegacyStoreUnavailable

    # ---- sessions ---------------------------------------------------------------------------
    @traced("LegacyStore.session_state")
    def session_state(self, nonce: str) -> SessionState:
        item = self._call("get_item", TableName=self._table, Key=session_key(nonce), ConsistentRead=True).get("Item")
        if not item or self._expired(item):
            return SessionState()
        return SessionState(revoked="revoked" in item, log_level=item["logLevel"]["S"] if "logLevel" in item else None)

    @traced("LegacyStore.set_log_level")
    def set_log_level(self, nonce: str, level: str, expires_at: int) -> None:
        self._session_update(nonce, "SET logLevel = :level, #ttl = :ttl", {":level": _s(level)}, expires_at)

    @traced("LegacyStore.revoke_session")
    def revoke_session(self, nonce: str, expires_at: int) -> None:
        self._session_update(nonce, "SET revoked = :yes, #ttl = :ttl", {":yes": {"BOOL": True}}, expires_at)

    def _session_update(self, nonce: str, expression: str, values: dict[str, Any], expires_at: int) -> None:
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=session_key(nonce),
                UpdateExpression=expression,
                ConditionExpression="attribute_not_exists(revoked)",
                ExpressionAttributeNames={"#ttl": schema.TTL_ATTRIBUTE},
                ExpressionAttributeValues={**values, ":ttl": _n(expires_at)},
            )
        except ConditionFailed:
            raise SessionEnded(nonce) from None

    # ---- streams ----------------------------------------------------------------------------
    @traced("LegacyStore.create_stream")
    def create_stream(self, record: StreamRecord) -> None:
        """A new stream; it may replace only a settled or expired one (a request id is reused after it ended)."""
        try:
            self._call(
                "put_item",
                TableName=self._table,
                Item=to_item(record),
                ConditionExpression="attribute_not_exists(#pk) OR #ttl < :now OR #status IN (:done, :cancelled)",
                ExpressionAttributeNames={
                    "#pk": schema.PARTITION_KEY,
                    "#ttl": schema.TTL_ATTRIBUTE,
                    "#status": "status",
                },
                ExpressionAttributeValues={
                    ":now": _n(int(self._clock())),
                    ":done": _s(DONE),
                    ":cancelled": _s(CANCELLED),
                },
            )
        except ConditionFailed:
            raise StreamConflict(record.key) from None

    @traced("LegacyStore.get_stream")
    def get_stream(self, key: str, owner: str, session: str) -> StreamRecord:
        item = self._call("get_item", TableName=self._table, Key=stream_key(key), ConsistentRead=True).get("Item")
        if not item or self._expired(item):
            raise StreamNotFound(key)
        record = from_item(item)
        if record.owner != owner or record.session != session:
            raise StreamNotFound(key)
        return record

    @traced("LegacyStore.save_stream")
    def save_stream(self, record: StreamRecord, expected_version: int) -> StreamRecord:
        saved = replace(record, version=expected_version + 1)
        try:
            self._call(
                "put_item",
                TableName=self._table,
                Item=to_item(saved),
                ConditionExpression="#version = :expected AND #owner = :owner AND #session = :session",
                ExpressionAttributeNames={"#version": "version", "#owner": STREAM_OWNER, "#session": "session"},
                ExpressionAttributeValues={
                    ":expected": _n(expected_version),
                    ":owner": _s(record.owner),
                    ":session": _s(record.session),
                },
            )
        except ConditionFailed:
            raise StreamConflict(record.key) from None
        return saved

    @traced("LegacyStore.claim_stream")
    def claim_stream(self, record: StreamRecord, lease_seconds: int) -> StreamRecord:
        """Only one invocation re-runs a request: open (or a lapsed lease) -> running, version-checked."""
        now = int(self._clock())
        claimed = replace(record, status=RUNNING, lease_until=now + lease_seconds)
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=stream_key(record.key),
                UpdateExpression="SET #status = :running, leaseUntil = :lease, #version = :next",
                ConditionExpression=(
                    "#version = :expected AND (#status = :open OR (#status = :running AND leaseUntil < :now))"
                ),
                ExpressionAttributeNames={"#status": "status", "#version": "version"},
                ExpressionAttributeValues={
                    ":running": _s(RUNNING),
                    ":open": _s(OPEN),
                    ":lease": _n(claimed.lease_until),
                    ":now": _n(now),
                    ":expected": _n(record.version),
                    ":next": _n(record.version + 1),
                },
            )
        except ConditionFailed:
            raise StreamConflict(record.key) from None
        return replace(claimed, version=record.version + 1)

    @traced("LegacyStore.record_answer")
    def record_answer(
        self, key: str, owner: str, session: str, round_number: int, answer_key: str, answer: Any
    ) -> None:
        """The client's answer to one outstanding question of the current round, accepted once."""
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=stream_key(key),
                UpdateExpression="SET answers.#key = :answer ADD #version :one",
                ConditionExpression=(
                    "#owner = :owner AND #session = :session AND #round = :round AND #status = :open "
                    "AND attribute_exists(pending.#key) AND attribute_not_exists(answers.#key) AND #ttl > :now"
                ),
                ExpressionAttributeNames={
                    "#key": answer_key,
                    "#version": "version",
                    "#owner": STREAM_OWNER,
                    "#session": "session",
                    "#round": "round",
                    "#status": "status",
                    "#ttl": schema.TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":answer": _j(answer),
                    ":one": _n(1),
                    ":owner": _s(owner),
                    ":session": _s(session),
                    ":round": _n(round_number),
                    ":open": _s(OPEN),
                    ":now": _n(int(self._clock())),
                },
            )
        except ConditionFailed:
            raise StreamNotFound(key) from None

    # ---- helpers ----------------------------------------------------------------------------
    def _expired(self, item: dict[str, Any]) -> bool:
        ttl = item.get(schema.TTL_ATTRIBUTE)
        return ttl is not None and int(ttl["N"]) <= self._clock()
