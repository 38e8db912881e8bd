"""The worker side of a task: what the state machine's Lambda steps do.

Four actions, one per step of `infra/statemachine/task_workflow.asl.json`:
- `run`: load the task, run the tool from the top with every answer and durable record received
  so far (`mcp_runtime.tasks.durable`). A result settles `completed` (also for `isError: true`;
  one too large for the item goes to the payload bucket), a protocol error (`McpError`) settles
  `failed` with that error inline. Otherwise the run ends at a durable boundary and tells the state
  machine what comes next: `input_required` (questions under fresh wire keys) or `callback` (until
  an external system completes a callback), both with a `tokenWait` (what the WaitForToken step
  stores, and how long it waits); `wait` (a Wait state, no Lambda running), `continue` (the
  invocation ran short of time: the tool goes on in a fresh one) or `renew` (the execution nears
  Step Functions' history limit: a new execution takes over, same task). A terminal write that AWS
  would not take in the invocation's time goes back as `settle`, with the result in hand; so does a
  result for the payload bucket that S3 would not take, up to `MAX_SETTLE_RESULT_BYTES` (what the
  state machine can carry). A larger one is put again with backoff while the invocation has time,
  then the task fails with "Task result could not be stored". The tool never runs again for either.
- `store_token`: runs inside the WaitForToken step (`.waitForTaskToken`); stores the task token
  the execution waits on, with the questions (or the callback's `awaited` mark), in one
  conditional write (so a client never sees input_required without a token to resume).
- `settle`: writes a terminal status the run could not, storing the result in the payload bucket
  first when the run could not (the state machine retries it, never the tool).
- `fail`: the state machine's Catch; settles `failed` with -32603 unless already terminal.
Each action answers `{outcome, tokenWait, settle, wait}`; the outcomes are `mcp_runtime.wire`'s
`OUTCOME_*`, one per reason. Besides those above, four end an execution the task no longer needs:
`gone` (no task item), `not_working` and `not_current` (what a run finds before it starts: a task
not working, or one another execution carries on), and `overtaken` (a write of this step lost to
a cancel or a terminal write that got there first).
Storage that refuses a write for good (validation, access) fails the task at once, naming why;
only `TaskStoreUnavailable` (nothing irreversible done yet) is retried by the state machine.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from .._aws import seconds_left
from ..context import PYTHON_LOG_LEVELS, Principal, RequestMeta
from ..errors import McpError
from ..limits import (
    MAX_ANSWER_BYTES,
    MAX_INLINE_RESULT_BYTES,
    MAX_INPUT_REQUESTS_BYTES,
    MAX_KEPT_TASK_LOG_LINES,
    MAX_OPERATIONS,
    MAX_RESULT_BYTES,
    MAX_SCRATCH_BYTES,
    MAX_SETTLE_RESULT_BYTES,
    MAX_TASK_LOG_LINE_BYTES,
    MAX_TOKEN_WAIT_SECONDS,
    answer_size,
    encoded_size,
    too_large_error,
)
from ..mrtr import InputNeeded, InputRequest
from ..observability import NO_TELEMETRY, TASK_WRITES_REFUSED, TOOL_EXCEPTIONS, Telemetry
from ..tool_secrets import NO_SECRETS, ToolSecrets
from ..tools import Registry, ToolContext, ToolError, ToolSpec
from ..wire import (
    LEGACY_PROTOCOL_VERSIONS,
    OUTCOME_AWAITING,
    OUTCOME_CALLBACK,
    OUTCOME_COMPLETED,
    OUTCOME_CONTINUE,
    OUTCOME_FAILED,
    OUTCOME_GONE,
    OUTCOME_INPUT_REQUIRED,
    OUTCOME_NOT_CURRENT,
    OUTCOME_NOT_WORKING,
    OUTCOME_OVERTAKEN,
    OUTCOME_RENEW,
    OUTCOME_SETTLE,
    OUTCOME_WAIT,
    WorkerOutcome,
)
from .durable import AwaitCallback, CannotRecord, ContinueLater, DurableRun, InterruptedRun, WaitFor
from .errors import (
    ExecutorRefused,
    ExecutorUnavailable,
    TaskConflict,
    TaskError,
    TaskNoLongerRunning,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
)
from .executor import TaskExecutor
from .models import COMPLETED, EXECUTION_FAILED_ERROR, FAILED, INPUT_REQUIRED, OPERATOR_REASON, WORKING, TaskRecord
from .payloads import PayloadStore
from .store import TaskStore
from .telemetry import report_settled

if TYPE_CHECKING:
    from ..handles import HandleStore
    from .history import TaskHistory

log = logging.getLogger(__name__)
# Lines a tool logs with `ctx.log` inside a task (the function's log; a runtime logger, so Powertools').
tool_log = logging.getLogger("mcp_runtime.tool")

# Rounds (tool runs) per execution before a new one takes over: Step Functions ends an execution at
# 25,000 history events, and a round adds 9 to 20 without retries, up to 179 with every retry the
# workflow allows. The deployed value (TASK_ROUNDS_PER_EXECUTION) is computed from the ASL's retry
# policy (infra.capabilities.workflow.rounds_within_history_limit); this default is that value for
# the deployed policy (tests/infra/test_throttling.py holds them equal).
DEFAULT_ROUNDS_PER_EXECUTION: Final = 138
# A token wait outlives the task's TTL by this much, so the task's own expiry, not the timeout, ends it.
TOKEN_WAIT_MARGIN_SECONDS: Final = 60
# A result too large for Settle to carry: its puts go on with backoff (each one already makes its own
# attempts), while this much of the invocation is left for the terminal write that follows.
RESULT_PUT_BACKOFF_SECONDS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0)
RESULT_PUT_RESERVE_SECONDS: Final = 5.0
RESULT_NOT_STORED_MESSAGE: Final = "Task result could not be stored"


def allocate_wire_keys(
    issued_keys: tuple[tuple[str, str], ...], requests: Mapping[str, InputRequest]
) -> tuple[dict[str, dict[str, Any]], tuple[tuple[str, str], ...]]:
    """Wire keys for the tool's questions: its own key the first time, `key.2`, `key.3`... after.

    A wire key is never issued twice in a task's life, so an answer can only ever match the
    question it was given for (the tasks extension's input-request keys: docs/tasks.md).
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
    """Turns `ctx.report_progress` into throttled `statusMessage` writes; notices a cancel at each write,
    and ends the invocation there when its time runs short after a step was recorded in it.

    A report that does not increase the progress value recorded with the task is never written: the
    reports a run replays (the tool runs from the top after every wait, answer or continuation) came
    from an earlier run, and `statusMessage` never goes back. While the run replays, and while the
    throttle holds, the latest report waits; it is written when the first new durable operation
    begins, or before the invocation ends at a durable boundary (`flush`)."""

    def __init__(
        self,
        store: TaskStore,
        task_id: str,
        min_interval_seconds: float,
        clock: Callable[[], float],
        durable: DurableRun | None = None,
        recorded: float | None = None,
    ) -> None:
        self._store = store
        self._task_id = task_id
        self._min_interval = min_interval_seconds
        self._clock = clock
        self._durable = durable
        self._last_write: float | None = None
        self._recorded = recorded
        self._pending: tuple[float, str, float | None] | None = None
        if durable is not None:
            durable.on_live = self.flush

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if message is None:
            message = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        report = (float(progress), message, None if total is None else float(total))
        if not math.isfinite(report[0]) or (self._recorded is not None and report[0] <= self._recorded):
            return  # not an increase: replayed, or out of order
        self._pending = report
        if self._durable is not None and not self._durable.in_step and self._durable.time_is_short():
            raise ContinueLater("progress")  # between steps only: a step is never cut in two
        if self._durable is not None and self._durable.replaying:
            return
        now = self._clock()
        if self._last_write is not None and now - self._last_write < self._min_interval:
            return
        self._write(raise_on_conflict=True)

    def flush(self) -> None:
        """Write the report that waits, if one does (a cancel is noticed by the write that follows)."""
        if self._pending is not None:
            self._write(raise_on_conflict=False)

    def _write(self, *, raise_on_conflict: bool) -> None:
        assert self._pending is not None
        progress, message, total = self._pending
        self._pending = None
        self._last_write = self._clock()
        try:
            self._store.set_status_message(self._task_id, message, progress, total)
        except TaskConflict:
            if raise_on_conflict:
                raise TaskNoLongerRunning(self._task_id) from None
            return
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.info("task %s: progress not recorded (%s)", self._task_id, exc)
            return
        self._recorded = progress


class TaskLog:
    """`ctx.log` inside a task: each line goes to the function's log (structured, with the task id and
    the tool), marked `replayed` when the run replays what an earlier run logged already. For a client
    that follows the task on a 2025 event stream (`keep`), new lines are also kept on the task item (the
    latest few, written at most once per interval and before the invocation ends), and the stream
    relays them as `notifications/message`."""

    def __init__(
        self,
        store: TaskStore,
        record: TaskRecord,
        durable: DurableRun,
        *,
        keep: bool,
        min_interval_seconds: float,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._task_id = record.task_id
        self._tool_name = record.tool_name
        self._durable = durable
        self._keep = keep
        self._lines = list(record.log_lines)
        self._unwritten = False
        self._min_interval = min_interval_seconds
        self._clock = clock
        self._last_write: float | None = None

    def __call__(self, level: str, data: Any) -> None:
        number = PYTHON_LOG_LEVELS.get(level, logging.INFO)
        extra = {"task_id": self._task_id, "tool": self._tool_name, "level_mcp": level, "data": data}
        if self._durable.replaying:
            extra["replayed"] = True
        tool_log.log(number, "tool %s: %s", self._tool_name, _readable(data), extra=extra)
        if not self._keep or self._durable.replaying or level not in PYTHON_LOG_LEVELS:
            return
        seq = int(self._lines[-1]["seq"]) + 1 if self._lines else 1
        if encoded_size(data) > MAX_TASK_LOG_LINE_BYTES:
            data = _readable(data)[:MAX_TASK_LOG_LINE_BYTES] + "..."
        self._lines = [*self._lines, {"seq": seq, "level": level, "data": data, "logger": self._tool_name}]
        self._lines = self._lines[-MAX_KEPT_TASK_LOG_LINES:]
        self._unwritten = True
        now = self._clock()
        if self._last_write is None or now - self._last_write >= self._min_interval:
            self.flush()

    def flush(self) -> None:
        """Keep the lines not written yet on the task item (best effort: the log has them anyway)."""
        if not self._unwritten:
            return
        self._unwritten = False
        self._last_write = self._clock()
        try:
            self._store.set_log_lines(self._task_id, self._lines)
        except (TaskConflict, TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.info("task %s: log lines not kept for its stream (%s)", self._task_id, exc)


class TaskWorker:
    def __init__(
        self,
        store: TaskStore,
        executor: TaskExecutor,
        tools: Registry,
        *,
        handles: HandleStore | None = None,
        history: TaskHistory | None = None,
        payloads: PayloadStore | None = None,
        callback_url: str = "",
        rounds_per_execution: int = DEFAULT_ROUNDS_PER_EXECUTION,
        max_operations: int = MAX_OPERATIONS,
        progress_interval_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        time_left: Callable[[], float | None] = seconds_left,
        telemetry: Telemetry = NO_TELEMETRY,
        secrets: ToolSecrets = NO_SECRETS,
    ) -> None:
        self.store = store
        self.executor = executor
        self.tools = tools
        # What a tool run as a task sees besides its arguments, as when it runs synchronously.
        self.handles = handles
        self.history = history
        self.secrets = secrets
        self.payloads = payloads
        self.callback_url = callback_url
        self.rounds_per_execution = rounds_per_execution
        self.max_operations = max_operations  # steps, waits and callbacks a task may record (TASK_MAX_STEPS)
        self.progress_interval_seconds = progress_interval_seconds
        self._clock = clock
        self._wall_clock = wall_clock
        self._sleep = sleep
        self._time_left = time_left
        self.telemetry = telemetry

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        action = event.get("action")
        task_id = str(event.get("taskId") or "")
        if not task_id:
            raise ValueError("worker event without taskId")
        execution = str(event.get("executionName") or "")
        self.telemetry.correlate(task_id=task_id, execution_name=execution or task_id)
        if action == "run":
            return self.run(task_id, int(event.get("round") or 0), execution)
        if action == "store_token":
            return self.store_token(task_id, str(event["taskToken"]), event["tokenWait"])
        if action == "settle":
            return self.settle(task_id, event["settle"])
        if action == "fail":
            return self.fail(task_id, event.get("failure") or {}, execution)
        raise ValueError(f"unknown worker action {action!r}")

    # ---- run ----------------------------------------------------------------------------------
    def run(self, task_id: str, round_number: int = 0, execution: str = "") -> dict[str, Any]:
        try:
            record = self.store.load(task_id)
        except TaskNotFound:
            return _outcome(OUTCOME_GONE)
        if record.status != WORKING:
            return _outcome(OUTCOME_NOT_WORKING)  # settled, cancelled, or awaiting input on another step's token
        if execution and record.execution != execution:
            return _outcome(OUTCOME_NOT_CURRENT)  # a newer execution carries the task on
        if round_number >= self.rounds_per_execution:
            return self._renew(record)
        spec = self.tools.get(record.tool_name)
        if spec is None:
            return self._settle(
                record, FAILED, {"code": EXECUTION_FAILED_ERROR["code"], "message": f"Unknown tool: {record.tool_name}"}
            )
        holder: dict[str, ToolContext] = {}
        durable = DurableRun(
            record.task_id,
            record.steps,
            self.store,
            self.payloads,
            payloads_expire=record.ttl_ms is not None,
            scratch=lambda: holder["ctx"].scratch,
            callback_url=self.callback_url,
            max_operations=self.max_operations,
            step_slots=record.step_slots,
            expires_at=record.expires_at,
            step_items=record.step_items,
        )
        progress = ProgressReporter(
            self.store,
            record.task_id,
            self.progress_interval_seconds,
            self._clock,
            durable=durable,
            recorded=record.progress,
        )
        task_log = TaskLog(
            self.store,
            record,
            durable,
            keep=record.client.protocol_version in LEGACY_PROTOCOL_VERSIONS,  # a 2025 client's event stream
            min_interval_seconds=self.progress_interval_seconds,
            clock=self._clock,
        )
        ctx = holder["ctx"] = self._tool_context(record, durable, progress, task_log)
        run_execution = execution or record.execution
        interrupted = durable.interrupted_run(run_execution, round_number)
        if interrupted is not None and not (
            interrupted.in_step or interrupted.recorded_steps or spec.rerun_interrupted
        ):
            return self._fail_interrupted(record, spec, interrupted)
        # The run's first write; only a run the policy could refuse after it is cut short marks itself
        # too (a second write): a tool with recorded steps resumes after them, and one that allows it runs again.
        try:
            durable.begin(run_execution, round_number, mark=not spec.rerun_interrupted and not durable.recorded_steps())
        except TaskNoLongerRunning:
            return _outcome(OUTCOME_OVERTAKEN)
        try:
            args = spec.parse_arguments(record.arguments)
            result = spec.run(args, ctx)
        except ToolError as exc:  # arguments that no longer validate
            result = spec.answer_for(exc)
        except InputNeeded as needed:
            task_log.flush()
            durable.unmark_run()
            return self._ask(record, needed, ctx, durable.step_items)
        except ContinueLater:
            progress.flush()
            task_log.flush()
            durable.unmark_run()
            return self._continue(record, ctx, durable.step_items)
        except WaitFor as wait:
            progress.flush()
            task_log.flush()
            durable.unmark_run()
            return {**_outcome(OUTCOME_WAIT), "wait": {"seconds": wait.seconds}}
        except AwaitCallback as waiting:
            progress.flush()
            task_log.flush()
            durable.unmark_run()
            return self._callback_token_wait(record, waiting)
        except TaskNoLongerRunning:
            return _outcome(OUTCOME_OVERTAKEN)  # cancelled or settled while the tool ran: noticed at a write
        except CannotRecord as exc:
            return self._settle(record, FAILED, {**EXECUTION_FAILED_ERROR, "message": exc.reason})
        except McpError as exc:
            return self._settle(record, FAILED, exc.to_error_object())
        except TaskError:
            raise  # the task side's own (a store that did not answer): the state machine retries or fails it
        except Exception as exc:
            # As on the synchronous path: the client gets a generic error, the log gets everything.
            # A bug in the tool is its task's failure and a metric by tool; the execution ends as
            # the task did (a failed execution, and its paging alarm, is for the runtime's failures).
            log.error("task %s: tool %s raised: %s", task_id, record.tool_name, exc, exc_info=exc)
            self.telemetry.count(TOOL_EXCEPTIONS, tool=record.tool_name)
            return self._settle(record, FAILED, failure_error(f"{type(exc).__name__}: {exc}", spec))
        task_log.flush()
        return self._complete(record, result.to_wire())

    def _fail_interrupted(self, record: TaskRecord, spec: ToolSpec, interrupted: InterruptedRun) -> dict[str, Any]:
        """The run before this one was cut short, and the tool records no steps: running it again from
        the top would repeat what it did, which its authors (FastMCP runs a task once) do not expect. The
        task fails, saying which limit and what to do, unless the tool allows the rerun
        (`rerun_interrupted=True`). A tool with steps is written for replay: it resumes after its last
        recorded step."""
        reason = (
            f"the run of tool {record.tool_name!r} was cut short (the worker's timeout, cdk.json's "
            "workerTimeoutSeconds, or a crash) and it records no steps; running it again from the top would "
            "repeat what it already did. Put the work that must happen once in "
            "`await ctx.step(name, fn)` (a recorded step never runs again and a run resumes after it), raise "
            "workerTimeoutSeconds, or allow the rerun with rerun_interrupted=True on the tool's decorator"
        )
        log.error("task %s: %s", record.task_id, reason)
        return self._settle(record, FAILED, failure_error(reason, spec))

    def _complete(self, record: TaskRecord, payload: dict[str, Any]) -> dict[str, Any]:
        """The result, stated against its limits: inline when small, in the payload bucket up to 5 MB."""
        size = encoded_size(payload)
        if size > MAX_RESULT_BYTES or answer_size(payload) > MAX_ANSWER_BYTES:
            return self._settle(record, FAILED, too_large_error("result", size, MAX_RESULT_BYTES))
        if size <= MAX_INLINE_RESULT_BYTES:
            return self._settle(record, COMPLETED, payload)
        if self.payloads is None:
            return self._settle(record, FAILED, too_large_error("result", size, MAX_INLINE_RESULT_BYTES))
        expires = record.ttl_ms is not None  # a task without a TTL keeps its result object too
        try:
            pointer = self.payloads.put(record.task_id, "result", payload, expires=expires)
        except TaskStoreRefused as exc:
            return self._refused(record.task_id, exc)
        except TaskStoreUnavailable as exc:
            if len(json.dumps(payload).encode()) <= MAX_SETTLE_RESULT_BYTES:
                log.warning("task %s: result not stored in time (%s); handing it to Settle", record.task_id, exc)
                settle = {"status": COMPLETED, "version": record.version, "payload": payload, "store": True}
                settle["expires"] = expires
                return {**_outcome(OUTCOME_SETTLE), "settle": settle}
            found = self._put_result_patiently(record.task_id, payload, exc, expires=expires)
            if found is None:
                return self._settle(record, FAILED, {**EXECUTION_FAILED_ERROR, "message": RESULT_NOT_STORED_MESSAGE})
            pointer = found
        return self._settle(record, COMPLETED, payload, pointer)

    def _put_result_patiently(
        self, task_id: str, payload: dict[str, Any], failure: TaskError, *, expires: bool
    ) -> dict[str, Any] | None:
        """Put a result too large for Settle to carry again, with backoff, while the invocation has time."""
        assert self.payloads is not None
        for delay in RESULT_PUT_BACKOFF_SECONDS:
            left = self._time_left()
            if left is not None and left < delay + RESULT_PUT_RESERVE_SECONDS:
                break
            self._sleep(delay)
            try:
                return self.payloads.put(task_id, "result", payload, expires=expires)
            except (TaskStoreUnavailable, TaskStoreRefused) as exc:
                failure = exc
                if isinstance(exc, TaskStoreRefused):
                    break
        log.error("task %s: result of %d bytes could not be stored (%s)", task_id, encoded_size(payload), failure)
        return None

    def _ask(self, record: TaskRecord, needed: InputNeeded, ctx: ToolContext, step_items: int) -> dict[str, Any]:
        requests, issued = allocate_wire_keys(record.issued_keys, needed.requests)
        for what, value, limit in (
            ("questions", requests, MAX_INPUT_REQUESTS_BYTES),
            ("scratch", ctx.scratch, MAX_SCRATCH_BYTES),
        ):
            size = encoded_size(value)
            if size > limit:
                return self._settle(record, FAILED, too_large_error(what, size, limit))
        token_wait = {
            "kind": "input",
            "version": record.version,
            "inputRequests": requests,
            "issuedKeys": [list(p) for p in issued],
            "state": ctx.scratch,  # the state machine's name for it
            "timeoutSeconds": self._token_wait_timeout(record),
            "stepItems": step_items,  # the step items the run wrote: the questions' write counts them
        }
        return {**_outcome(OUTCOME_INPUT_REQUIRED), "tokenWait": token_wait}

    def _callback_token_wait(self, record: TaskRecord, waiting: AwaitCallback) -> dict[str, Any]:
        timeout = self._token_wait_timeout(record)
        if waiting.timeout_seconds is not None:
            timeout = min(timeout, waiting.timeout_seconds)
        token_wait = {"kind": "callback", "key": waiting.key, "name": waiting.name, "timeoutSeconds": timeout}
        if waiting.slot is not None:
            token_wait["slot"] = waiting.slot  # its record is on that step item
        return {**_outcome(OUTCOME_CALLBACK), "tokenWait": token_wait}

    def _continue(self, record: TaskRecord, ctx: ToolContext, step_items: int) -> dict[str, Any]:
        """End this invocation at a step boundary (counting the step items it wrote); the next one picks
        up from the recorded steps."""
        size = encoded_size(ctx.scratch)
        if size > MAX_SCRATCH_BYTES:
            return self._settle(record, FAILED, too_large_error("scratch", size, MAX_SCRATCH_BYTES))
        try:
            self.store.checkpoint(record.task_id, ctx.scratch, step_items)
        except TaskConflict:
            return _outcome(OUTCOME_OVERTAKEN)  # cancelled or settled: noticed at this boundary
        except (TaskStoreUnavailable, TaskStoreRefused) as exc:
            log.warning("task %s: scratch not kept at the boundary (%s); steps are", record.task_id, exc)
        return _outcome(OUTCOME_CONTINUE)

    def _renew(self, record: TaskRecord) -> dict[str, Any]:
        """Carry the task on in a new execution (same task id), started by the supervisor."""
        current = record.execution
        base, _, generation = current.rpartition(".")
        number = int(generation) + 1 if base == record.task_id and generation.isdigit() else 2
        try:
            self.store.renew(record.task_id, current, f"{record.task_id}.{number}")
        except TaskConflict:
            return _outcome(OUTCOME_OVERTAKEN)  # cancelled or settled before it could be renewed
        return _outcome(OUTCOME_RENEW)

    def _token_wait_timeout(self, record: TaskRecord) -> int:
        """How long the execution may wait on its task token: until the task expires (and a little
        more), at most a year."""
        if record.expires_at is None:
            return MAX_TOKEN_WAIT_SECONDS
        left = record.expires_at - self._wall_clock() + TOKEN_WAIT_MARGIN_SECONDS
        return max(1, min(MAX_TOKEN_WAIT_SECONDS, int(left)))

    def _tool_context(
        self, record: TaskRecord, durable: DurableRun, progress: ProgressReporter, task_log: TaskLog
    ) -> ToolContext:
        meta = RequestMeta(record.client.protocol_version, dict(record.client.capabilities), record.client.client_info)
        return ToolContext(
            meta,
            Principal(record.owner, "task"),
            answers=record.answers_by_tool_key(),
            scratch=record.scratch,
            progress=progress,
            log=task_log,
            task_id=record.task_id,
            prepared=record.prepared,
            handle_store=self.handles,
            history=self.history,
            durable=durable,
            secrets=self.secrets,
        )

    def _settle(
        self, record: TaskRecord, status: str, payload: dict[str, Any], pointer: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The terminal write, retried here with the result in hand; if AWS will not take it within this
        invocation, the state machine's Settle step retries it (the tool never runs again for it)."""
        try:
            settled = self.store.finish(record.task_id, status, payload, record.version, result_ref=pointer)
        except TaskConflict:
            return _outcome(OUTCOME_OVERTAKEN)  # cancelled (or settled) while the tool ran: that write wins
        except TaskStoreUnavailable as exc:
            log.warning("task %s: terminal write not taken in time (%s); handing it to Settle", record.task_id, exc)
            settle = {"status": status, "version": record.version}
            settle.update({"ref": pointer} if pointer is not None else {"payload": payload})
            return {**_outcome(OUTCOME_SETTLE), "settle": settle}
        except TaskStoreRefused as exc:
            return self._refused(record.task_id, exc)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_COMPLETED if status == COMPLETED else OUTCOME_FAILED)

    def _refused(self, task_id: str, exc: TaskStoreRefused) -> dict[str, Any]:
        """Storage refused the terminal write for good: fail the task with a small error saying so."""
        log.error("task %s: terminal write refused (%s)", task_id, exc)
        self.telemetry.count(TASK_WRITES_REFUSED, by="worker")
        error = {**EXECUTION_FAILED_ERROR, "message": "Task result could not be stored"}
        settled = self.store.finish(task_id, FAILED, error)  # refused again: Lambda reports it, the Catch fails it
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_FAILED)

    # ---- settle -------------------------------------------------------------------------------
    def settle(self, task_id: str, settle: Mapping[str, Any]) -> dict[str, Any]:
        """The Settle step: the terminal write the run handed over; TaskStoreUnavailable is retried."""
        status = str(settle["status"])
        pointer = settle.get("ref")
        payload = dict(settle.get("payload") or {})
        if settle.get("store"):  # the run's puts of this result failed: store it first (retried here)
            if self.payloads is None:
                raise RuntimeError("a result to store, with no payload bucket configured")
            try:
                # Handed over before it said whether the task expires: keep the object, as the safe side.
                expires = bool(settle.get("expires", False))
                pointer = self.payloads.put(task_id, "result", payload, expires=expires)
            except TaskStoreRefused as exc:
                return self._refused(task_id, exc)
        try:
            settled = self.store.finish(task_id, status, payload, int(settle["version"]), result_ref=pointer)
        except TaskConflict:
            return _outcome(OUTCOME_OVERTAKEN)
        except TaskStoreRefused as exc:
            return self._refused(task_id, exc)
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_COMPLETED if status == COMPLETED else OUTCOME_FAILED)

    # ---- store_token ----------------------------------------------------------------------------
    def store_token(self, task_id: str, task_token: str, token_wait: Mapping[str, Any]) -> dict[str, Any]:
        """The WaitForToken step: store the task token its execution now waits on (or, when the task
        moved on meanwhile, send that token at once, so the wait ends)."""
        if token_wait.get("kind") == "callback":
            return self._await_callback(task_id, task_token, token_wait)
        return self._await_input(task_id, task_token, token_wait)

    def _await_input(self, task_id: str, task_token: str, token_wait: Mapping[str, Any]) -> dict[str, Any]:
        issued = tuple((str(a), str(b)) for a, b in token_wait["issuedKeys"])
        try:
            outcome = self.store.await_input(
                task_id,
                int(token_wait["version"]),
                token_wait["inputRequests"],
                issued,
                token_wait.get("state") or {},
                task_token,
                parked_until=self._parked_until(token_wait),
                step_items=None if token_wait.get("stepItems") is None else int(token_wait["stepItems"]),
            )
        except TaskNotFound:
            self._resume(task_token)  # the task is gone: end the wait
            return _outcome(OUTCOME_GONE)
        record = outcome.record
        if outcome.applied and record.status == INPUT_REQUIRED:
            if record.task_token == task_token or self.store.replace_token(task_id, record.task_token, task_token):
                return _outcome(OUTCOME_AWAITING)
            record = self.store.get(task_id)  # answered while the token was swapped
        if outcome.applied and record.status == WORKING:
            # These questions were stored by an attempt whose answer was lost, and the client has
            # answered since: the execution waits on this step's token, which only this step holds.
            self._resume(task_token)
            return _outcome(OUTCOME_AWAITING)
        # Cancelled or settled since the run: end the wait now (the run that follows sees why).
        self._resume(task_token)
        return _outcome(OUTCOME_OVERTAKEN)

    def _await_callback(self, task_id: str, task_token: str, token_wait: Mapping[str, Any]) -> dict[str, Any]:
        key, name = str(token_wait["key"]), str(token_wait.get("name") or "")
        try:
            slot = token_wait.get("slot")
            outcome = self.store.await_callback(
                task_id,
                key,
                task_token,
                f"Waiting for {name}",
                parked_until=self._parked_until(token_wait),
                slot=None if slot is None else int(slot),
            )
        except TaskNotFound:
            self._resume(task_token)
            return _outcome(OUTCOME_GONE)
        if outcome.applied:
            return _outcome(OUTCOME_AWAITING)
        # Completed before the token could be stored (or cancelled): this step holds the token, so
        # it resumes the execution itself, and the run that follows returns what was sent.
        self._resume(task_token)
        done = (outcome.record.steps.get(key) or {}).get("state") == "done"
        return _outcome(OUTCOME_AWAITING if done and outcome.record.status == WORKING else OUTCOME_OVERTAKEN)

    def _parked_until(self, token_wait: Mapping[str, Any]) -> float | None:
        """When this step's wait on its token times out (it began just now): the parked task's deadline."""
        timeout = token_wait.get("timeoutSeconds")
        return None if timeout is None else self._wall_clock() + float(timeout)

    def _resume(self, task_token: str) -> None:
        try:
            self.executor.resume(task_token)
        except (ExecutorUnavailable, ExecutorRefused) as exc:
            log.warning("could not end a wait with its own token (%s); the execution's timeout will", exc)

    # ---- fail ---------------------------------------------------------------------------------
    def fail(self, task_id: str, failure: Mapping[str, Any], execution: str = "") -> dict[str, Any]:
        """MarkFailed: what Step Functions caught (`Error`, `Cause`) goes to the log; the task gets the
        generic error (an error name such as Runtime.ExitError means nothing to a client). Only for
        the execution that carries the task now: an older one's failure leaves the task to it."""
        log.error("task %s: execution failed with %s: %s", task_id, failure.get("Error"), _cause(failure))
        try:
            if execution:
                settled = self.store.settle_lost(task_id, execution, dict(EXECUTION_FAILED_ERROR))
            else:
                settled = self.store.finish(task_id, FAILED, dict(EXECUTION_FAILED_ERROR))
        except TaskNotFound:
            return _outcome(OUTCOME_GONE)
        except TaskConflict:
            return _outcome(OUTCOME_OVERTAKEN)  # already terminal: that write stands
        report_settled(self.telemetry, settled)
        return _outcome(OUTCOME_FAILED)


# The most of a failure's reason kept on the task item (the log has all of it).
MAX_FAILURE_REASON_CHARS: Final = 1000


def failure_error(reason: str, spec: ToolSpec) -> dict[str, Any]:
    """A failed task's error: the generic one for the client, with the reason kept on the item for the
    operator (`make task ID=`; `OPERATOR_REASON`, never on the wire), and in the message too when the
    tool's server shows error details (`mask_error_details=False`)."""
    kept = reason if len(reason) <= MAX_FAILURE_REASON_CHARS else f"{reason[:MAX_FAILURE_REASON_CHARS]}..."
    error: dict[str, Any] = {**EXECUTION_FAILED_ERROR, OPERATOR_REASON: kept}
    if spec.show_error_details:
        error["message"] = f"{EXECUTION_FAILED_ERROR['message']}: {kept}"
    return error


def _cause(failure: Mapping[str, Any]) -> str:
    """The caught error's cause: Lambda's error payload (a JSON text) told as its message and trace."""
    cause = failure.get("Cause")
    try:
        payload = json.loads(cause) if isinstance(cause, str) else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        return str(cause or "")
    told = str(payload.get("errorMessage") or "")
    trace = payload.get("stackTrace")
    if isinstance(trace, list) and trace:
        told += "\n" + "".join(str(line) for line in trace)
    return told


def _readable(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)


def _outcome(outcome: WorkerOutcome) -> dict[str, Any]:
    # Every key is always present: the state machine's paths must resolve on every outcome.
    return {"outcome": outcome, "tokenWait": None, "settle": None, "wait": None}
