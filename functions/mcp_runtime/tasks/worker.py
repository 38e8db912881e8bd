"""The worker side of a task: what the state machine's Lambda steps do.

Three actions, one per step of `infra/statemachine/task_workflow.asl.json`:
- `run`: load the task, run the tool from the top with every answer received so far. A result
  settles `completed` (also for `isError: true`), a protocol error (`McpError`) settles `failed`
  with that error inline, and a question the tool still needs answered goes back to the state
  machine as `input_required` with fresh wire keys, for the next step to park.
- `park`: runs inside the `.waitForTaskToken` step; stores the questions and the callback token in
  one conditional write (so a client never sees input_required without a token to resume).
- `fail`: the state machine's Catch; settles `failed` with -32603 unless already terminal.
Any other exception escapes, so Lambda reports it and the state machine's Retry/Catch decide.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..context import Principal, RequestMeta
from ..errors import McpError
from ..mrtr import InputNeeded, InputRequest
from ..observability import NO_TELEMETRY, Telemetry
from ..tools import ToolContext, ToolError, ToolRegistry, ToolResult, text
from .errors import TaskConflict, TaskNoLongerRunning, TaskNotFound, TaskStoreUnavailable
from .executor import TaskExecutor
from .models import COMPLETED, EXECUTION_FAILED_ERROR, FAILED, WORKING, TaskRecord
from .store import TaskStore
from .telemetry import report_settled

if TYPE_CHECKING:
    from ..handles import CallerHandles, HandleStore
    from .history import CallerTaskHistory, DynamoTaskHistory

log = logging.getLogger(__name__)

OUTCOME_COMPLETED: Final = "completed"
OUTCOME_FAILED: Final = "failed"
OUTCOME_INPUT_REQUIRED: Final = "input_required"
OUTCOME_PARKED: Final = "parked"
# The task is gone, settled or cancelled: nothing more to do for this execution.
OUTCOME_STOPPED: Final = "stopped"


def allocate_wire_keys(
    issued_keys: tuple[tuple[str, str], ...], requests: Mapping[str, InputRequest]
) -> tuple[dict[str, dict[str, Any]], tuple[tuple[str, str], ...]]:
    """Wire keys for the tool's questions: its own key the first time, `key.2`, `key.3`... after.

    A wire key is never issued twice in a task's life, so an answer can only ever match the
    question it was given for (WIRE.md §14.6 key discipline).
    """
    issued = list(issued_keys)
    used = {wire_key for wire_key, _ in issued}
    outgoing: dict[str, dict[str, Any]] = {}
    for tool_key, request in requests.items():
        wire_key, round_number = tool_key, 1
        while wire_key in used:
            round_number += 1
            wire_key = f"{tool_key}.{round_number}"
        used.add(wire_key)
        issued.append((wire_key, tool_key))
        outgoing[wire_key] = request.to_wire()
    return outgoing, tuple(issued)


class ProgressReporter:
    """Turns `ctx.report_progress` into throttled `statusMessage` writes; notices a cancel at each write."""

    def __init__(self, store: TaskStore, task_id: str, min_interval_seconds: float, clock: Callable[[], float]) -> None:
        self._store = store
        self._task_id = task_id
        self._min_interval = min_interval_seconds
        self._clock = clock
        self._last_write: float | None = None

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        now = self._clock()
        if self._last_write is not None and now - self._last_write < self._min_interval:
            return
        self._last_write = now
        if message is None:
            message = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        try:
            self._store.set_status_message(self._task_id, message)
        except TaskConflict:
            raise TaskNoLongerRunning(self._task_id) from None
        except TaskStoreUnavailable as exc:
            log.info("task %s: progress not recorded (%s)", self._task_id, exc)


class TaskWorker:
    def __init__(
        self,
        store: TaskStore,
        executor: TaskExecutor,
        tools: ToolRegistry,
        *,
        handles: HandleStore | None = None,
        history: DynamoTaskHistory | None = None,
        progress_interval_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.executor = executor
        self.tools = tools
        # What a tool run as a task sees besides its arguments, as when it runs synchronously.
        self.handles = handles
        self.history = history
        self.progress_interval_seconds = progress_interval_seconds
        self._clock = clock
        self.telemetry = telemetry

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        action = event.get("action")
        task_id = str(event.get("taskId") or "")
        if not task_id:
            raise ValueError("worker event without taskId")
        # Every execution is named by its task id (`TaskExecutor.start`); an event may say so itself.
        self.telemetry.correlate(task_id=task_id, execution_name=str(event.get("executionName") or task_id))
        if action == "run":
            return self.run(task_id)
        if action == "park":
            return self.park(task_id, str(event["taskToken"]), event["park"])
        if action == "fail":
            return self.fail(task_id, str(event.get("error") or "Unknown"))
        raise ValueError(f"unknown worker action {action!r}")

    # ---- run ----------------------------------------------------------------------------------
    def run(self, task_id: str) -> dict[str, Any]:
        try:
            record = self.store.get(task_id)
        except TaskNotFound:
            return _outcome(OUTCOME_STOPPED)
        if record.status != WORKING:
            return _outcome(OUTCOME_STOPPED)
        spec = self.tools.get(record.tool_name)
        if spec is None:
            return self._settle(
                record, FAILED, {"code": EXECUTION_FAILED_ERROR["code"], "message": f"Unknown tool: {record.tool_name}"}
            )
        ctx = self._tool_context(record)
        try:
            args = spec.parse_arguments(record.arguments)
            result = spec.run(args, ctx)
        except ToolError as exc:  # arguments that no longer validate
            result = ToolResult([text(str(exc))], is_error=True)
        except InputNeeded as needed:
            requests, issued = allocate_wire_keys(record.issued_keys, needed.requests)
            park = {
                "version": record.version,
                "inputRequests": requests,
                "issuedKeys": [list(p) for p in issued],
                "state": ctx.state,
            }
            return {"outcome": OUTCOME_INPUT_REQUIRED, "park": park}
        except TaskNoLongerRunning:
            return _outcome(OUTCOME_STOPPED)
        except McpError as exc:
            return self._settle(record, FAILED, exc.to_error_object())
        return self._settle(record, COMPLETED, result.to_wire())

    def _tool_context(self, record: TaskRecord) -> ToolContext:
        meta = RequestMeta(record.client.protocol_version, dict(record.client.capabilities), record.client.client_info)
        return ToolContext(
            meta,
            Principal(record.owner, "task"),
            answers=record.answers_by_tool_key(),
            state=record.scratch,
            progress=ProgressReporter(self.store, record.task_id, self.progress_interval_seconds, self._clock),
            task_id=record.task_id,
            prepared=record.prepared,
            handles=self._caller_handles(record.owner),
            task_history=self._caller_history(record.owner),
        )

    def _caller_handles(self, owner: str) -> CallerHandles | None:
        if self.handles is None:
            return None
        from ..handles import CallerHandles

        return CallerHandles(self.handles, owner)

    def _caller_history(self, owner: str) -> CallerTaskHistory | None:
        if self.history is None:
            return None
        from .history import CallerTaskHistory

        return CallerTaskHistory(self.history, owner)

    def _settle(self, record: TaskRecord, status: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            settled = self.store.finish(record.task_id, status, payload, expected_version=record.version)
        except TaskConflict:
            return _outcome(OUTCOME_STOPPED)  # cancelled (or settled) while the tool ran: that write wins
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_COMPLETED if status == COMPLETED else OUTCOME_FAILED)

    # ---- park ---------------------------------------------------------------------------------
    def park(self, task_id: str, task_token: str, park: Mapping[str, Any]) -> dict[str, Any]:
        issued = tuple((str(a), str(b)) for a, b in park["issuedKeys"])
        try:
            self.store.park(
                task_id, int(park["version"]), park["inputRequests"], issued, park.get("state") or {}, task_token
            )
        except TaskConflict:
            # Cancelled (or settled) since the run: end the wait at once instead of parking.
            self.executor.release(task_token)
            return _outcome(OUTCOME_STOPPED)
        return _outcome(OUTCOME_PARKED)

    # ---- fail ---------------------------------------------------------------------------------
    def fail(self, task_id: str, error_name: str) -> dict[str, Any]:
        log.error("task %s: execution failed with %s", task_id, error_name)
        try:
            settled = self.store.finish(task_id, FAILED, {**EXECUTION_FAILED_ERROR, "data": {"reason": error_name}})
        except TaskConflict:
            return _outcome(OUTCOME_STOPPED)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_FAILED)


def _outcome(outcome: str) -> dict[str, Any]:
    # `park` is always present: the state machine's paths must resolve on every outcome.
    return {"outcome": outcome, "park": None}
