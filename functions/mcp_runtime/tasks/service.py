"""The tasks extension on the API side: create, get, update and cancel (WIRE.md §14).

Every operation is one conditional write or one consistent read on the task item; the API never
calls Step Functions. A write that makes a call due (start the execution, resume it, stop it)
leaves that `effect` on the item, and the table's stream hands it to the supervisor, which retries
it until it succeeds (`mcp_runtime.tasks.supervisor`). So a throttled Step Functions can neither
fail a request nor lose its effect.

AWS calls per operation (DESIGN.md budgets): create = one conditional put; get = one consistent
read in every state (and one S3 GetObject for a completed task whose result is in the payload
bucket); update = one conditional update (a second one only for a partial or partly
stale answer, or to ask again for the resume of a retried update); cancel = one conditional update.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..context import RequestContext
from ..errors import InternalError, InvalidParams
from ..limits import MAX_TASK_ANSWERS, MAX_TASK_ANSWERS_BYTES, MAX_TASK_ARGUMENTS_BYTES, encoded_size
from ..observability import NO_TELEMETRY, TASKS_CREATED, Telemetry
from ..tools import ToolSpec
from .errors import TaskAnswersFull, TaskConflict, TaskNotFound, TaskStoreRefused, TaskStoreUnavailable
from .models import (
    COMPLETED,
    EFFECT_START,
    WORKING,
    BrokenTaskRecord,
    ClientSnapshot,
    TaskRecord,
    create_task_result,
    expiry_epoch,
    get_task_result,
    iso_timestamp,
)
from .payloads import PayloadStore
from .store import TaskStore
from .telemetry import report_settled

log = logging.getLogger(__name__)

TASK_NOT_FOUND_MESSAGE = "Failed to retrieve task: Task not found"


def answers_full_message(limit_bytes: int) -> str:
    return f"Invalid params: a task keeps at most {limit_bytes} bytes of answers; these would exceed it"


__all__ = [
    "TASK_NOT_FOUND_MESSAGE",
    "TaskService",
    "answers_full_message",
    "new_task_id",
]


def new_task_id() -> str:
    """192 bits from the OS CSPRNG, URL-safe: also a valid Step Functions execution name."""
    return secrets.token_urlsafe(24)


class TaskService:
    """`TaskGateway` over a `TaskStore`. Holds no per-task state in memory."""

    def __init__(
        self,
        store: TaskStore,
        *,
        ttl_ms: int | None,
        poll_interval_ms: int | None,
        payloads: PayloadStore | None = None,
        clock: Callable[[], float] = time.time,
        id_factory: Callable[[], str] = new_task_id,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.payloads = payloads
        self.telemetry = telemetry
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self._clock = clock
        self._new_id = id_factory

    # ---- TaskGateway ------------------------------------------------------------------------------
    def create(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any) -> dict[str, Any]:
        if encoded_size(arguments) > MAX_TASK_ARGUMENTS_BYTES:
            raise InvalidParams(f"Invalid params: arguments of a task may be at most {MAX_TASK_ARGUMENTS_BYTES} bytes")
        now = self._clock()
        stamp = iso_timestamp(now)
        task_id = self._new_id()
        record = TaskRecord(
            task_id=task_id,
            owner=ctx.principal.id,
            status=WORKING,
            created_at=stamp,
            last_updated_at=stamp,
            ttl_ms=self.ttl_ms,
            version=1,
            tool_name=spec.name,
            arguments=dict(arguments),
            client=ClientSnapshot(ctx.meta.protocol_version, dict(ctx.meta.client_capabilities), ctx.meta.client_info),
            prepared=prepared,
            poll_interval_ms=self.poll_interval_ms,
            expires_at=expiry_epoch(now, self.ttl_ms),
            create_token=(token := secrets.token_hex(16)),
            write_id=token,
            effect=EFFECT_START,
            execution_name=task_id,
        )
        self.telemetry.correlate(task_id=record.task_id)
        try:
            self.store.create(record)  # durable before the CreateTaskResult leaves; the stream starts it
        except TaskStoreUnavailable as exc:
            # Perhaps written with its answer lost: take it back, so no task outlives this error.
            self._discard(record)
            raise InternalError("Failed to create task") from exc
        except (TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to create task") from exc
        self.telemetry.count(TASKS_CREATED, tool=spec.name)
        return create_task_result(record)

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        self.telemetry.correlate(task_id=task_id)
        try:
            record = self.store.get(task_id, ctx.principal.id)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            raise InternalError("Failed to retrieve task") from exc
        result = None
        if record.status == COMPLETED and record.result_ref is not None:
            if self.payloads is None:
                raise InternalError("Failed to retrieve task")
            try:
                result = self.payloads.get(record.result_ref)
            except (TaskStoreUnavailable, TaskStoreRefused) as exc:
                raise InternalError("Failed to retrieve task") from exc
        try:
            return get_task_result(record, result)
        except BrokenTaskRecord as exc:  # never answer with an invented result
            raise InternalError("Failed to retrieve task") from exc

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: RequestContext) -> None:
        self.telemetry.correlate(task_id=task_id)
        if len(input_responses) > MAX_TASK_ANSWERS:
            raise InvalidParams(f"Invalid params: at most {MAX_TASK_ANSWERS} inputResponses are accepted")
        if encoded_size(input_responses) > MAX_TASK_ANSWERS_BYTES:
            raise InvalidParams(f"Invalid params: inputResponses may be at most {MAX_TASK_ANSWERS_BYTES} bytes")
        # An empty key can never be outstanding, and DynamoDB refuses it as an attribute name.
        input_responses = {key: value for key, value in input_responses.items() if key}
        try:
            self.store.answer(task_id, ctx.principal.id, input_responses)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except TaskAnswersFull as full:
            raise InvalidParams(answers_full_message(full.limit_bytes)) from full
        except (TaskStoreUnavailable, TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to update task") from exc

    def cancel(self, task_id: str, ctx: RequestContext) -> None:
        self.telemetry.correlate(task_id=task_id)
        try:
            outcome = self.store.cancel(task_id, ctx.principal.id)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except (TaskStoreUnavailable, TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to cancel task") from exc
        if outcome.settled is not None:
            report_settled(self.telemetry, outcome.settled)

    # ---- helpers ----------------------------------------------------------------------------------
    def _discard(self, record: TaskRecord) -> None:
        try:
            self.store.discard(record.task_id, record.create_token)
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.error("task %s: create failed and could not be taken back (%s); it may exist", record.task_id, exc)
