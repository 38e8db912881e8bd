"""The tasks extension on the API side: create, get, update and cancel (WIRE.md §14).

AWS calls per operation (DESIGN.md budgets): create = one conditional put + one StartExecution;
get = one consistent read (plus one DescribeExecution only for a task that has been quiet longer
than `reconcile_after_seconds`); update = one conditional update (a second one only for a partial
or partly stale answer) + at most one SendTaskSuccess; cancel = one conditional update + one
StopExecution.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from ..context import RequestContext
from ..errors import InternalError, InvalidParams
from ..observability import NO_TELEMETRY, TASKS_CREATED, Telemetry
from ..tools import ToolSpec
from .errors import ExecutorUnavailable, TaskConflict, TaskNotFound, TaskStoreUnavailable
from .executor import ENDED_STATUSES, TaskExecutor
from .models import (
    EXECUTION_FAILED_ERROR,
    EXECUTION_LOST_ERROR,
    FAILED,
    WORKING,
    BrokenTaskRecord,
    ClientSnapshot,
    TaskRecord,
    create_task_result,
    expiry_epoch,
    get_task_result,
    iso_timestamp,
)
from .store import TaskStore
from .telemetry import report_settled

log = logging.getLogger(__name__)

TASK_NOT_FOUND_MESSAGE = "Failed to retrieve task: Task not found"
# Limits that keep a task item well inside DynamoDB's 400 KB and its expressions inside 4 KB; checked
# before any lookup, so they answer the same for every task id.
MAX_TASK_ANSWERS = 64
MAX_TASK_ANSWERS_BYTES = 65_536
MAX_TASK_ARGUMENTS_BYTES = 65_536
RESUME_FAILED_ERROR: dict[str, Any] = {"code": EXECUTION_FAILED_ERROR["code"], "message": "Task could not be resumed"}


def _encoded_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def new_task_id() -> str:
    """192 bits from the OS CSPRNG, URL-safe: also a valid Step Functions execution name."""
    return secrets.token_urlsafe(24)


class TaskService:
    """`TaskGateway` over a `TaskStore` and a `TaskExecutor`. Holds no per-task state in memory."""

    def __init__(
        self,
        store: TaskStore,
        executor: TaskExecutor,
        *,
        ttl_ms: int | None,
        poll_interval_ms: int | None,
        reconcile_after_seconds: float = 300.0,
        clock: Callable[[], float] = time.time,
        id_factory: Callable[[], str] = new_task_id,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.executor = executor
        self.telemetry = telemetry
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.reconcile_after_seconds = reconcile_after_seconds
        self._clock = clock
        self._new_id = id_factory

    # ---- TaskGateway ------------------------------------------------------------------------------
    def create(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any) -> dict[str, Any]:
        if _encoded_size(arguments) > MAX_TASK_ARGUMENTS_BYTES:
            raise InvalidParams(f"Invalid params: arguments of a task may be at most {MAX_TASK_ARGUMENTS_BYTES} bytes")
        now = self._clock()
        stamp = iso_timestamp(now)
        record = TaskRecord(
            task_id=self._new_id(),
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
        )
        self.telemetry.correlate(task_id=record.task_id)
        try:
            self.store.create(record)  # durable before the CreateTaskResult leaves
        except (TaskStoreUnavailable, TaskConflict) as exc:
            raise InternalError("Failed to create task") from exc
        self.telemetry.count(TASKS_CREATED, tool=spec.name)
        try:
            self.executor.start(record.task_id)
        except ExecutorUnavailable as exc:
            self._settle_failed(record.task_id, EXECUTION_FAILED_ERROR, None)
            raise InternalError("Failed to start task") from exc
        return create_task_result(record)

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        self.telemetry.correlate(task_id=task_id)
        record = self._load(task_id, ctx)
        try:
            return get_task_result(self._reconciled(record))
        except BrokenTaskRecord as exc:  # never answer with an invented result
            raise InternalError("Failed to retrieve task") from exc

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: RequestContext) -> None:
        self.telemetry.correlate(task_id=task_id)
        if len(input_responses) > MAX_TASK_ANSWERS:
            raise InvalidParams(f"Invalid params: at most {MAX_TASK_ANSWERS} inputResponses are accepted")
        if _encoded_size(input_responses) > MAX_TASK_ANSWERS_BYTES:
            raise InvalidParams(f"Invalid params: inputResponses may be at most {MAX_TASK_ANSWERS_BYTES} bytes")
        # An empty key can never be outstanding, and DynamoDB refuses it as an attribute name.
        input_responses = {key: value for key, value in input_responses.items() if key}
        try:
            outcome = self.store.answer(task_id, ctx.principal.id, input_responses)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except (TaskStoreUnavailable, TaskConflict) as exc:
            raise InternalError("Failed to update task") from exc
        if outcome.resume_token is None:
            return
        try:
            resumed = self.executor.resume(outcome.resume_token)
        except ExecutorUnavailable as exc:
            # The answers are recorded and no longer outstanding, so a retried update could not send
            # the token again: settle the task rather than leave it waiting forever.
            self._settle_failed(task_id, RESUME_FAILED_ERROR, None)
            self._stop_quietly(task_id)
            raise InternalError("Failed to resume task") from exc
        if not resumed:
            self._settle_failed(task_id, EXECUTION_LOST_ERROR, None)

    def cancel(self, task_id: str, ctx: RequestContext) -> None:
        self.telemetry.correlate(task_id=task_id)
        try:
            outcome = self.store.cancel(task_id, ctx.principal.id)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except (TaskStoreUnavailable, TaskConflict) as exc:
            raise InternalError("Failed to cancel task") from exc
        if outcome.settled is not None:
            report_settled(self.telemetry, outcome.settled)
        if outcome.cancelled:
            # The cancel is already durable: a worker still running sees it at its next write.
            self._stop_quietly(task_id)

    # ---- helpers ----------------------------------------------------------------------------------
    def _load(self, task_id: str, ctx: RequestContext) -> TaskRecord:
        try:
            return self.store.get(task_id, ctx.principal.id)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except TaskStoreUnavailable as exc:
            raise InternalError("Failed to retrieve task") from exc

    def _reconciled(self, record: TaskRecord) -> TaskRecord:
        """A quiet active task whose execution ended (or never began) settles `failed`, not working forever."""
        if record.is_terminal or record.seconds_since_update(self._clock()) < self.reconcile_after_seconds:
            return record
        try:
            execution_status = self.executor.status(record.task_id)
        except ExecutorUnavailable:
            return record
        if execution_status is not None and execution_status not in ENDED_STATUSES:
            return record
        log.warning("task %s: execution %s without a terminal write; settling failed", record.task_id, execution_status)
        self._settle_failed(record.task_id, EXECUTION_LOST_ERROR, record.version)
        try:
            return self.store.get(record.task_id, record.owner)
        except (TaskNotFound, TaskStoreUnavailable):
            return record

    def _settle_failed(self, task_id: str, error: dict[str, Any], expected_version: int | None) -> None:
        try:
            settled = self.store.finish(task_id, FAILED, dict(error), expected_version)
        except (TaskConflict, TaskStoreUnavailable) as exc:
            log.info("task %s: not settled failed (%s)", task_id, exc)
            return
        report_settled(self.telemetry, settled)

    def _stop_quietly(self, task_id: str) -> None:
        try:
            self.executor.stop(task_id)
        except ExecutorUnavailable as exc:
            log.warning("task %s: StopExecution failed (%s); the worker will see the cancel", task_id, exc)
