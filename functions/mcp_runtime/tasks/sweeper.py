"""The sweeper: the bounded repair of tasks that look active although their execution ended.

Step Functions delivers its "Execution Status Change" events best effort, so the supervisor's
settling on them (`tasks.supervisor`) can miss one, and a start can be lost before any execution
exists. Every write that leaves a task active renews its lease (`tasks.store`), so a task nothing
wrote for a whole lease period is one to look at. An EventBridge schedule runs the sweeper every
few minutes; each run takes at most `max_checks` of those tasks from the sparse `ActiveTasks`
index, oldest lease first, and asks Step Functions about each (one DescribeExecution: its quota is
low, and the read path never makes it):

- the execution ended: settle the task `failed` with the lost-execution error (the supervisor's own
  conditional write: nothing is settled twice, and a newer execution is never settled for an old one);
- it still runs and the task is working with a resume still due (`effect` resume: an answer, or an
  external system's callback completion, was recorded but the direct SendTaskSuccess and the
  supervisor's retries from the stream were all lost): send the stored token now (idempotent: a token
  answered meanwhile is "already done"), so the task resumes within one lease and one schedule period
  of the lost resume (`TasksRepaired` repair `resumed`);
- it still runs (a quiet task, or one parked on input, a callback or a timer past its deadline: a
  parked task's lease runs to its wait's deadline, so it is not asked about while it waits): renew
  the lease, so it is asked about again one lease later; a `working` one is also reported stale
  (`TasksStale`): its tool wrote nothing for a whole lease, so it may hang (`make tasks STALE=10m`
  lists such tasks);
- it does not exist (its start was lost): a working task is started again, idempotently (the same
  name and input, so a start that did happen meanwhile is the same execution); the tool resumes
  from its recorded steps, so the client's task goes on instead of failing. A task waiting for input
  without an execution has nothing that could resume it, and is settled `failed`;
- the task is past its expiry: it reads as absent, so it only leaves the index (no Step Functions call).

A write the table refuses for good (validation, access: an item it will not take) is that task's
failure, never the run's: it is logged, counted (`TaskWritesRefused`, which alarms), and the task's
lease is moved `REFUSED_RECHECK_SECONDS` ahead, so the tasks behind it are repaired in this run and
the next; the sweeper looks at it again then.

The bound: a task whose execution ended is settled at most one lease plus one schedule period
after its execution ended (plus the run itself), while each run's stale leases fit in `max_checks`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..observability import NO_TELEMETRY, SWEEP_BEHIND, TASK_WRITES_REFUSED, TASKS_REPAIRED, TASKS_STALE, Telemetry
from .errors import (
    ExecutorRefused,
    ExecutorUnavailable,
    TaskConflict,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
)
from .models import EFFECT_RESUME, EXECUTION_FAILED_ERROR, EXECUTION_LOST_ERROR, WORKING, TaskRecord
from .store import Lease
from .telemetry import report_settled

log = logging.getLogger(__name__)

SCHEDULED_EVENT: Final = "Scheduled Event"
RUNNING: Final = "RUNNING"
DEFAULT_MAX_CHECKS: Final = 100
# The `repair` dimension of TasksRepaired.
REPAIR_SETTLED: Final = "settled"
REPAIR_RESTARTED: Final = "restarted"
REPAIR_RESUMED: Final = "resumed"
# The `cause` dimension of SweepBehind.
BEHIND_CAP: Final = "cap"
BEHIND_UNAVAILABLE: Final = "unavailable"
RESTART_REFUSED_ERROR: Final[dict[str, Any]] = {**EXECUTION_FAILED_ERROR, "message": "Task could not be started"}
# A task the sweeper cannot repair (the table refuses its writes, Step Functions refuses to describe its
# execution) has its lease moved this far ahead: the runs that follow take the tasks behind it, and it
# is looked at again an hour later (TaskWritesRefused alarms meanwhile).
REFUSED_RECHECK_SECONDS: Final = 3600
# The `by` dimension of TaskWritesRefused.
REFUSED_BY_SWEEPER: Final = "sweeper"


class LeaseStore(Protocol):
    """What the sweeper needs of the task store (`DynamoTaskStore` implements it)."""

    def stale_leases(self, now: float, limit: int) -> list[Lease]: ...

    def extend_lease(self, task_id: str, seen: int) -> bool: ...

    def drop_lease(self, task_id: str, seen: int) -> bool: ...

    def clear_settled_lease(self, task_id: str, seen: int) -> bool: ...

    def set_lease_aside(self, task_id: str, seen: int, seconds: int) -> bool: ...

    def settle_lost(self, task_id: str, execution_name: str, error: dict[str, Any]) -> TaskRecord: ...

    def get(self, task_id: str, owner: str | None = None) -> TaskRecord: ...


class ExecutionLookup(Protocol):
    """What the sweeper needs of the executor (`StepFunctionsExecutor` implements it)."""

    def describe(self, execution_name: str) -> str | None: ...

    def start(self, task_id: str, execution_name: str) -> None: ...

    def resume(self, task_token: str, output: dict[str, Any] | None = None) -> bool: ...


@dataclass
class SweepReport:
    checked: int = 0  # DescribeExecution calls made
    settled: int = 0
    restarted: int = 0
    resumed: int = 0  # lost resumes (an answer's or a callback completion's) made by the sweeper
    extended: int = 0
    dropped: int = 0
    stale: int = 0  # working tasks whose execution runs although nothing was written for a lease
    refused: int = 0  # tasks whose writes the table refused: counted, set aside, the run goes on
    # Why stale leases were left for the next run (None: none were): BEHIND_CAP or BEHIND_UNAVAILABLE.
    behind: str | None = None

    @property
    def left(self) -> bool:
        return self.behind is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "settled": self.settled,
            "restarted": self.restarted,
            "resumed": self.resumed,
            "extended": self.extended,
            "dropped": self.dropped,
            "stale": self.stale,
            "refused": self.refused,
            "left": self.left,
        }


class TaskSweeper:
    def __init__(
        self,
        store: LeaseStore,
        executor: ExecutionLookup,
        *,
        max_checks: int = DEFAULT_MAX_CHECKS,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self.store = store
        self.executor = executor
        self.max_checks = max_checks
        self._clock = clock
        self.telemetry = telemetry

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if event.get("detail-type") != SCHEDULED_EVENT:
            raise ValueError("the sweeper takes its EventBridge schedule's events")
        return self.sweep().to_json()

    def sweep(self) -> SweepReport:
        report = SweepReport()
        now = self._clock()
        # One more than the cap: tells whether the run leaves stale leases behind.
        stale = self.store.stale_leases(now, self.max_checks + 1)
        if len(stale) > self.max_checks:
            report.behind = BEHIND_CAP
        for lease in stale[: self.max_checks]:
            self.telemetry.correlate(task_id=lease.task_id, execution_name=lease.execution)
            try:
                self._repair(lease, now, report)
            except (ExecutorUnavailable, TaskStoreUnavailable) as exc:
                log.warning("sweep stopped at task %s (%s); the next run goes on", lease.task_id, exc)
                report.behind = BEHIND_UNAVAILABLE
                break
            except TaskStoreRefused as exc:  # this task's failure, never the run's
                log.error(
                    "task %s: the task table refused its write; looked at again in %d s (%s)",
                    lease.task_id,
                    REFUSED_RECHECK_SECONDS,
                    exc,
                )
                report.refused += 1
                self._set_aside(lease)
        if report.settled:
            self.telemetry.count(TASKS_REPAIRED, report.settled, repair=REPAIR_SETTLED)
        if report.restarted:
            self.telemetry.count(TASKS_REPAIRED, report.restarted, repair=REPAIR_RESTARTED)
        if report.resumed:
            self.telemetry.count(TASKS_REPAIRED, report.resumed, repair=REPAIR_RESUMED)
        if report.stale:
            self.telemetry.count(TASKS_STALE, report.stale, status=WORKING)
        if report.refused:
            self.telemetry.count(TASK_WRITES_REFUSED, report.refused, by=REFUSED_BY_SWEEPER)
        if report.behind is not None:
            self.telemetry.count(SWEEP_BEHIND, cause=report.behind)
        repaired = report.settled or report.restarted or report.resumed
        noteworthy = repaired or report.stale or report.refused or report.left
        level = logging.WARNING if noteworthy else logging.INFO
        log.log(level, "sweep: %s", report.to_json())
        return report

    def _repair(self, lease: Lease, now: float, report: SweepReport) -> None:
        if lease.is_expired(now):
            report.dropped += self.store.drop_lease(lease.task_id, lease.lease_expires_at)
            return
        report.checked += 1
        try:
            status = self.executor.describe(lease.execution)
        except ExecutorRefused as exc:
            log.error("task %s: its execution could not be described (%s)", lease.task_id, exc)
            self._set_aside(lease)
            return
        if status == RUNNING:
            if lease.status == WORKING and self._resume_due(lease, report):
                pass  # a lost resume, made now: not a hang
            elif lease.status == WORKING:
                log.warning(
                    "task %s: working, its execution %s runs, and nothing was written for a whole lease "
                    "(a tool that hangs without reporting?)",
                    lease.task_id,
                    lease.execution,
                )
                report.stale += 1
            if self.store.extend_lease(lease.task_id, lease.lease_expires_at):
                report.extended += 1
            else:
                report.dropped += self.store.clear_settled_lease(lease.task_id, lease.lease_expires_at)
        elif status is None and lease.status == WORKING:
            self._restart(lease, report)
        else:
            why = "does not exist" if status is None else f"ended {status}"
            log.warning(
                "task %s: execution %s %s without a terminal write; settling failed",
                lease.task_id,
                lease.execution,
                why,
            )
            if self._settle(lease, EXECUTION_LOST_ERROR):
                report.settled += 1
            else:
                report.dropped += self.store.clear_settled_lease(lease.task_id, lease.lease_expires_at)

    def _resume_due(self, lease: Lease, report: SweepReport) -> bool:
        """Send the token of a resume the task still asks for (its `effect`): True when one was due."""
        try:
            task = self.store.get(lease.task_id)
        except TaskNotFound:
            return False
        if task.effect != EFFECT_RESUME or not task.task_token or task.execution != lease.execution:
            return False
        log.warning("task %s: its resume was never made (answer or callback recorded); resuming it", lease.task_id)
        try:
            if self.executor.resume(task.task_token):
                report.resumed += 1
        except ExecutorRefused as exc:
            log.error("task %s: its execution could not be resumed (%s)", lease.task_id, exc)
        return True

    def _set_aside(self, lease: Lease) -> None:
        """Move the lease out of the way of the next runs (a write of the lease alone, which a table
        refusing the task's other writes for their size still takes)."""
        try:
            self.store.set_lease_aside(lease.task_id, lease.lease_expires_at, REFUSED_RECHECK_SECONDS)
        except (TaskStoreRefused, TaskStoreUnavailable) as exc:
            log.error("task %s: its lease could not be set aside (%s)", lease.task_id, exc)

    def _restart(self, lease: Lease, report: SweepReport) -> None:
        log.warning("task %s: execution %s never started; starting it", lease.task_id, lease.execution)
        try:
            self.executor.start(lease.task_id, lease.execution)
        except ExecutorRefused as exc:
            log.error("task %s: its execution could not be started (%s)", lease.task_id, exc)
            report.settled += self._settle(lease, RESTART_REFUSED_ERROR)
            return
        report.restarted += 1
        self.store.extend_lease(lease.task_id, lease.lease_expires_at)

    def _settle(self, lease: Lease, error: Mapping[str, Any]) -> bool:
        try:
            settled = self.store.settle_lost(lease.task_id, lease.execution, dict(error))
        except (TaskConflict, TaskNotFound):
            return False  # settled by its own write meanwhile, or carried on by a newer execution
        report_settled(self.telemetry, settled)
        return True
