"""The tasks extension on the API side: create, get, update and cancel (io.modelcontextprotocol/tasks; docs/tasks.md).

Every operation is one conditional write or one consistent read on the task item. A write that
makes a Step Functions call due (start the execution, resume it, stop it) leaves that `effect` on
the item, and then the API makes the call itself, at once: StartExecution with the name and input
the supervisor would use, SendTaskSuccess with the stored token once the answers are recorded (record
first, then send), StopExecution once the cancel is recorded. Each call is safe to repeat. The
table's stream still hands every such write to the supervisor (`mcp_runtime.tasks.supervisor`),
which makes the same call again and retries it until it succeeds: the backstop for a direct call
that was throttled, failed or lost its answer. So a throttled Step Functions can neither fail a
request nor lose its effect, and the common path waits for no stream hop.

AWS calls per operation (the budgets in docs/performance.md): create = one conditional put + one StartExecution; get
= one consistent read in every state (and one S3 GetObject for a completed task whose result is in
the payload bucket); update = one conditional update (a second one only for a partial or partly
stale answer, or to ask again for the resume of a retried update) + at most one SendTaskSuccess;
cancel = one conditional update + one StopExecution. A direct call is tried twice at most
(`DIRECT_CALL_ATTEMPTS`): past that the stream's retries take over, and the request is answered.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Final

from ..context import RequestContext
from ..errors import InternalError, InvalidParams
from ..limits import (
    MAX_TASK_ANSWERS,
    MAX_TASK_ANSWERS_BYTES,
    MAX_TASK_ARGUMENTS_BYTES,
    MAX_TASK_CLIENT_BYTES,
    encoded_size,
)
from ..observability import NO_TELEMETRY, TASKS_CREATED, Telemetry
from ..tools import ToolSpec
from .errors import (
    ExecutorRefused,
    ExecutorUnavailable,
    TaskAnswersFull,
    TaskConflict,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
    TaskTooLarge,
)
from .executor import TaskExecutor
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
# Attempts of each direct Step Functions call: one retry, then the stream's supervisor carries on.
DIRECT_CALL_ATTEMPTS: Final = 2


def answers_full_message(limit_bytes: int) -> str:
    return f"Invalid params: a task keeps at most {limit_bytes} bytes of answers; these would exceed it"


def created_too_large_message(limit_bytes: int) -> str:
    return (
        f"Invalid params: a task may store at most {limit_bytes} bytes of its request "
        "(arguments, client capabilities, prepared state)"
    )


__all__ = [
    "DIRECT_CALL_ATTEMPTS",
    "TASK_NOT_FOUND_MESSAGE",
    "TaskService",
    "answers_full_message",
    "created_too_large_message",
    "new_task_id",
]


def new_task_id() -> str:
    """192 bits from the OS CSPRNG, URL-safe: also a valid Step Functions execution name."""
    return secrets.token_urlsafe(24)


class TaskService:
    """The server's `TaskOperations` (`mcp_runtime.server`) over a `TaskStore`, making each write's
    Step Functions call directly through `executor` (without one, the stream's supervisor alone makes
    it). Holds no per-task state in memory."""

    def __init__(
        self,
        store: TaskStore,
        *,
        executor: TaskExecutor | None = None,
        ttl_ms: int | None,
        poll_interval_ms: int | None,
        payloads: PayloadStore | None = None,
        clock: Callable[[], float] = time.time,
        id_factory: Callable[[], str] = new_task_id,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.executor = executor
        self.payloads = payloads
        self.telemetry = telemetry
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self._clock = clock
        self._new_id = id_factory

    # ---- TaskOperations --------------------------------------------------------------------------
    def create(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any) -> dict[str, Any]:
        if encoded_size(arguments) > MAX_TASK_ARGUMENTS_BYTES:
            raise InvalidParams(f"Invalid params: arguments of a task may be at most {MAX_TASK_ARGUMENTS_BYTES} bytes")
        if encoded_size(ctx.meta.client_capabilities) > MAX_TASK_CLIENT_BYTES:
            raise InvalidParams(
                f"Invalid params: clientCapabilities of a task may be at most {MAX_TASK_CLIENT_BYTES} bytes"
            )
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
            client=ClientSnapshot.of(ctx.meta.protocol_version, ctx.meta.client_capabilities),
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
            self.store.create(record)  # durable before the CreateTaskResult leaves
        except TaskTooLarge as exc:
            raise InvalidParams(created_too_large_message(exc.limit_bytes)) from exc
        except TaskStoreUnavailable as exc:
            # Perhaps written with its answer lost (and the stream may have started it already): a
            # consistent read says. Only a create that cannot be confirmed is taken back, all of it.
            if not self._written(record):
                self._take_back(record)
                raise InternalError("Failed to create task") from exc
        except (TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to create task") from exc
        self.telemetry.count(TASKS_CREATED, tool=spec.name)
        self._direct(record.task_id, "start", lambda executor: executor.start(record.task_id, record.execution))
        return create_task_result(record)

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        return self.follow(task_id, ctx)[0]

    def follow(
        self, task_id: str, ctx: RequestContext
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], ...], tuple[float, float | None] | None]:
        """`tasks/get`'s answer, the tool's latest log lines and its latest progress report (its value and
        total, as reported), from one read: a 2025 task stream relays all three."""
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
            reported = None if record.progress is None else (record.progress, record.progress_total)
            return get_task_result(record, result), record.log_lines, reported
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
            outcome = self.store.answer(task_id, ctx.principal.id, input_responses)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except TaskAnswersFull as full:
            raise InvalidParams(answers_full_message(full.limit_bytes)) from full
        except (TaskStoreUnavailable, TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to update task") from exc
        token = outcome.task_token
        if outcome.resumed and token:  # the answers are recorded: only now may the execution go on
            self._direct(task_id, "resume", lambda executor: executor.resume(token))

    def cancel(self, task_id: str, ctx: RequestContext) -> None:
        self.telemetry.correlate(task_id=task_id)
        try:
            outcome = self.store.cancel(task_id, ctx.principal.id)
        except TaskNotFound:
            raise InvalidParams(TASK_NOT_FOUND_MESSAGE) from None
        except (TaskStoreUnavailable, TaskStoreRefused, TaskConflict) as exc:
            raise InternalError("Failed to cancel task") from exc
        settled = outcome.settled
        if settled is not None:
            report_settled(self.telemetry, settled)
            if outcome.cancelled:
                self._direct(task_id, "stop", lambda executor: executor.stop(settled.execution))

    # ---- helpers ----------------------------------------------------------------------------------
    def _direct(self, task_id: str, what: str, call: Callable[[TaskExecutor], object]) -> None:
        """The write's Step Functions call, made now; when it is not done, the stream's supervisor does it."""
        if self.executor is None:
            return
        try:
            call(self.executor)
        except (ExecutorUnavailable, ExecutorRefused) as exc:
            log.warning("task %s: direct %s not done (%s); the supervisor makes it from the stream", task_id, what, exc)

    def _written(self, record: TaskRecord) -> bool:
        """Whether the item this create wrote is in the table (a consistent read)."""
        try:
            found = self.store.get(record.task_id, record.owner)
        except TaskNotFound:
            return False
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.warning("task %s: create could not be confirmed (%s)", record.task_id, exc)
            return False
        return found.create_token == record.create_token

    def _take_back(self, record: TaskRecord) -> None:
        """Delete what the create may have written and stop what the stream may have started from it, so
        no task and no execution outlive the error the client gets. An execution started after the stop
        finds no task and ends at once."""
        try:
            self.store.discard(record.task_id, record.create_token)
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.error("task %s: create failed and could not be taken back (%s); it may exist", record.task_id, exc)
        self._direct(record.task_id, "stop", lambda executor: executor.stop(record.execution))
