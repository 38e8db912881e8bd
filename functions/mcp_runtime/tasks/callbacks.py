"""Completing a `ctx.wait_for_callback`: what an external system's POST to the callback route does.

The body is JSON: `{"token": "<the token submit was given>", "result": <any JSON>}`, or
`{"token": ..., "error": {"message": "..."}}` to report a failure. The token is the only
credential (the route has no other authorizer): it names the task and the callback and carries a
256-bit secret whose hash the callback's record holds. A completion is one conditional write:
for the holder of the token, while the callback waits and the task works, once. The write asks
for the waiting execution to be resumed (the supervisor sends its task token, as for `tasks/update`).
An unknown, forged, already used or expired token gets the same answer, so tokens cannot be probed;
the holder of a valid token whose callback's deadline has passed gets 409, saying so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Final

from ..limits import MAX_CALLBACK_BYTES, MAX_CALLBACK_ERROR_CHARS, MAX_INLINE_RECORD_BYTES, encoded_size
from ..observability import NO_TELEMETRY, Telemetry
from .durable import CALLBACK_WAITING, callback_address, decode_callback_token, token_hash
from .errors import CallbackLate, TaskNotFound, TaskStoreRefused, TaskStoreUnavailable
from .payloads import PayloadStore
from .store import TaskStore

log = logging.getLogger(__name__)

REFUSED: Final[dict[str, Any]] = {"message": "Unknown, expired or already completed callback token"}
# For the holder of the token only (its secret matched), so it tells nothing to a prober.
LATE: Final[dict[str, Any]] = {"message": "The callback's deadline has passed: the task no longer takes a completion"}
USAGE: Final = 'Send {"token": ..., "result": ...} or {"token": ..., "error": {"message": ...}}'


@dataclass(frozen=True, slots=True)
class CallbackAnswer:
    status: int
    body: dict[str, Any]


class CallbackService:
    def __init__(self, store: TaskStore, payloads: PayloadStore | None, *, telemetry: Telemetry = NO_TELEMETRY) -> None:
        self.store = store
        self.payloads = payloads
        self.telemetry = telemetry

    def complete(self, raw: bytes) -> CallbackAnswer:
        if len(raw) > MAX_CALLBACK_BYTES:
            return CallbackAnswer(413, {"message": f"A completion may be at most {MAX_CALLBACK_BYTES} bytes"})
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return CallbackAnswer(400, {"message": "The body must be JSON"})
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("token"), str)
            or ("result" in body) == ("error" in body)
            or set(body) - {"token", "result", "error"}
        ):
            return CallbackAnswer(
                400, {"message": 'Send {"token": ..., "result": ...} or {"token": ..., "error": {...}}'}
            )
        decoded = decode_callback_token(body["token"])
        if decoded is None:
            return CallbackAnswer(404, REFUSED)
        task_id, address, secret = decoded
        key, slot = callback_address(address)
        self.telemetry.correlate(task_id=task_id)
        try:
            outcome = self._outcome(task_id, key, secret, body)
            if outcome is None:
                return CallbackAnswer(404, REFUSED)
            completed = self.store.complete_callback(task_id, key, token_hash(secret), outcome, slot=slot)
        except CallbackLate as exc:
            log.warning("%s; refused", exc)
            return CallbackAnswer(409, LATE)
        except TaskStoreUnavailable as exc:
            log.warning("callback for task %s not recorded yet (%s)", task_id, exc)
            return CallbackAnswer(503, {"message": "Not recorded: send it again"})
        except TaskStoreRefused as exc:
            log.error("callback for task %s refused by storage (%s)", task_id, exc)
            return CallbackAnswer(500, {"message": "Internal error"})
        if not completed:
            return CallbackAnswer(404, REFUSED)
        return CallbackAnswer(200, {"completed": True})

    def _outcome(self, task_id: str, key: str, secret: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The record's new fields; a result too large for the item goes to the payload bucket first,
        but only for a token that could complete (so a forged one cannot fill the bucket)."""
        if "error" in body:
            error = body["error"]
            message = error.get("message") if isinstance(error, dict) else error
            return {"error": str(message or "failed")[:MAX_CALLBACK_ERROR_CHARS]}
        result = body["result"]
        if encoded_size(result) <= MAX_INLINE_RECORD_BYTES or self.payloads is None:
            return {"v": result}
        try:
            task = self.store.load(task_id)
        except TaskNotFound:
            return None
        record = task.steps.get(key) or {}
        if record.get("state") != CALLBACK_WAITING or record.get("hash") != token_hash(secret):
            return None
        return {"ref": self.payloads.put(task_id, f"{key}/result", result, expires=task.ttl_ms is not None)}
