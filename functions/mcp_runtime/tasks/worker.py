"""The worker side of a task: what the state machine's Lambda steps do.

Four actions, one per step of `infra/statemachine/task_workflow.asl.json`:
- `run`: load the task, run the tool from the top with every answer received so far. A result
  settles `completed` (also for `isError: true`), a protocol error (`McpError`) settles `failed`
  with that error inline, and a question the tool still needs answered goes back to the state
  machine as `input_required` with fresh wire keys, for the next step to park. A terminal write
  that AWS would not take in the invocation's time goes back as `settle`, with the result in hand.
- `park`: runs inside the `.waitForTaskToken` step; stores the questions and the callback token in
  one conditional write (so a client never sees input_required without a token to resume).
- `settle`: writes a terminal status the run could not (the state machine retries it, never the tool).
- `fail`: the state machine's Catch; settles `failed` with -32603 unless already terminal.
Storage that refuses a write for good (validation, access) fails the task at once, naming why;
only `TaskStoreUnavailable` (nothing irreversible done yet) is retried by the state machine.
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
from .errors import (
    ExecutorRefused,
    ExecutorUnavailable,
    TaskConflict,
    TaskNoLongerRunning,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
)
from .executor import TaskExecutor
from .limits import (
    MAX_INPUT_REQUESTS_BYTES,
    MAX_STATE_BYTES,
    MAX_STORED_RESULT_BYTES,
    encoded_size,
    too_large_error,
)
from .models import COMPLETED, EXECUTION_FAILED_ERROR, FAILED, INPUT_REQUIRED, WORKING, TaskRecord
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
# The terminal write could not be made in time: the state machine's Settle step makes it.
OUTCOME_SETTLE: Final = "settle"
# Step Functions' longest task timeout we ask for (its executions last a year at most).
MAX_PARK_SECONDS: Final = 365 * 24 * 3600
# A park outlives the task's TTL by this much, so the task's own expiry, not the timeout, ends it.
PARK_TIMEOUT_MARGIN_SECONDS: Final = 60


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
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
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
        wall_clock: Callable[[], float] = time.time,
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
        self._wall_clock = wall_clock
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
        if action == "settle":
            return self.settle(task_id, event["settle"])
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
            return self._ask(record, needed, ctx)
        except TaskNoLongerRunning:
            return _outcome(OUTCOME_STOPPED)
        except McpError as exc:
            return self._settle(record, FAILED, exc.to_error_object())
        payload = result.to_wire()
        size = encoded_size(payload)
        if size > MAX_STORED_RESULT_BYTES:
            return self._settle(record, FAILED, too_large_error("result", size, MAX_STORED_RESULT_BYTES))
        return self._settle(record, COMPLETED, payload)

    def _ask(self, record: TaskRecord, needed: InputNeeded, ctx: ToolContext) -> dict[str, Any]:
        requests, issued = allocate_wire_keys(record.issued_keys, needed.requests)
        for what, value, limit in (
            ("questions", requests, MAX_INPUT_REQUESTS_BYTES),
            ("state", ctx.state, MAX_STATE_BYTES),
        ):
            size = encoded_size(value)
            if size > limit:
                return self._settle(record, FAILED, too_large_error(what, size, limit))
        park = {
            "version": record.version,
            "inputRequests": requests,
            "issuedKeys": [list(p) for p in issued],
            "state": ctx.state,
            "timeoutSeconds": self._park_timeout(record),
        }
        return {**_outcome(OUTCOME_INPUT_REQUIRED), "park": park}

    def _park_timeout(self, record: TaskRecord) -> int:
        """How long the execution may wait: until the task expires (and a little more), at most a year."""
        if record.expires_at is None:
            return MAX_PARK_SECONDS
        left = record.expires_at - self._wall_clock() + PARK_TIMEOUT_MARGIN_SECONDS
        return max(1, min(MAX_PARK_SECONDS, int(left)))

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
        """The terminal write, retried here with the result in hand; if AWS will not take it within this
        invocation, the state machine's Settle step retries it (the tool never runs again for it)."""
        try:
            settled = self.store.finish(record.task_id, status, payload, expected_version=record.version)
        except TaskConflict:
            return _outcome(OUTCOME_STOPPED)  # cancelled (or settled) while the tool ran: that write wins
        except TaskStoreUnavailable as exc:
            log.warning("task %s: terminal write not taken in time (%s); handing it to Settle", record.task_id, exc)
            settle = {"status": status, "payload": payload, "version": record.version}
            return {**_outcome(OUTCOME_SETTLE), "settle": settle}
        except TaskStoreRefused as exc:
            return self._refused(record.task_id, exc)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_COMPLETED if status == COMPLETED else OUTCOME_FAILED)

    def _refused(self, task_id: str, exc: TaskStoreRefused) -> dict[str, Any]:
        """The table refused the terminal write for good: fail the task with a small error saying so."""
        log.error("task %s: terminal write refused (%s)", task_id, exc)
        error = {**EXECUTION_FAILED_ERROR, "message": "Task result could not be stored", "data": {"reason": exc.code}}
        settled = self.store.finish(task_id, FAILED, error)  # refused again: Lambda reports it, the Catch fails it
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_FAILED)

    # ---- settle -------------------------------------------------------------------------------
    def settle(self, task_id: str, settle: Mapping[str, Any]) -> dict[str, Any]:
        """The Settle step: the terminal write the run handed over; TaskStoreUnavailable is retried."""
        status, payload = str(settle["status"]), dict(settle["payload"])
        try:
            settled = self.store.finish(task_id, status, payload, expected_version=int(settle["version"]))
        except TaskConflict:
            return _outcome(OUTCOME_STOPPED)
        except TaskStoreRefused as exc:
            return self._refused(task_id, exc)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_COMPLETED if status == COMPLETED else OUTCOME_FAILED)

    # ---- park ---------------------------------------------------------------------------------
    def park(self, task_id: str, task_token: str, park: Mapping[str, Any]) -> dict[str, Any]:
        issued = tuple((str(a), str(b)) for a, b in park["issuedKeys"])
        try:
            outcome = self.store.park(
                task_id, int(park["version"]), park["inputRequests"], issued, park.get("state") or {}, task_token
            )
        except TaskNotFound:
            self._resume(task_token)  # the task is gone: end the wait
            return _outcome(OUTCOME_STOPPED)
        record = outcome.record
        if outcome.applied and record.status == INPUT_REQUIRED:
            if record.task_token == task_token or self.store.replace_token(task_id, record.task_token, task_token):
                return _outcome(OUTCOME_PARKED)
            record = self.store.get(task_id)  # answered while the token was swapped
        if outcome.applied and record.status == WORKING:
            # This park was applied by an attempt whose answer was lost, and the client has answered
            # since: the execution waits on this step's token, which only this step holds.
            self._resume(task_token)
            return _outcome(OUTCOME_PARKED)
        # Cancelled or settled since the run: end the wait now (the run that follows sees why).
        self._resume(task_token)
        return _outcome(OUTCOME_STOPPED)

    def _resume(self, task_token: str) -> None:
        try:
            self.executor.resume(task_token)
        except (ExecutorUnavailable, ExecutorRefused) as exc:
            log.warning("could not end a wait with its own token (%s); the execution's timeout will", exc)

    # ---- fail ---------------------------------------------------------------------------------
    def fail(self, task_id: str, error_name: str) -> dict[str, Any]:
        log.error("task %s: execution failed with %s", task_id, error_name)
        try:
            settled = self.store.finish(task_id, FAILED, {**EXECUTION_FAILED_ERROR, "data": {"reason": error_name}})
        except (TaskConflict, TaskNotFound):
            return _outcome(OUTCOME_STOPPED)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_FAILED)


def _outcome(outcome: str) -> dict[str, Any]:
    # Every key is always present: the state machine's paths must resolve on every outcome.
    return {"outcome": outcome, "park": None, "settle": None}
