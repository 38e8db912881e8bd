"""The supervisor: makes the Step Functions calls task writes ask for, and settles what executions leave behind.

Two event sources, both declared in the template (`infra/capabilities/supervisor.py`):
- The task table's stream, filtered to writes that left an `effect` on the item (`models.EFFECTS`):
  start the execution, resume it with the stored task token, stop it. Each call is safe to repeat, so a
  record delivered twice does no harm; a call Step Functions did not take (throttled, failing) is
  reported as the batch's first failure, and Lambda retries the stream from that record on, in
  order. That is how a throttled start, resume or stop is never lost: it is retried until it is
  done, and a burst of creates above Step Functions' start rate waits in the stream.
- EventBridge's "Step Functions Execution Status Change" events for executions that ended: a task
  still active whose current execution ended (killed, aborted from outside, failed before its Catch
  could write) is settled `failed`, in the background. The read path never asks Step Functions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..observability import NO_TELEMETRY, Telemetry
from . import schema
from .errors import ExecutorRefused, ExecutorUnavailable, TaskConflict, TaskNotFound, TaskStoreUnavailable
from .executor import TaskExecutor
from .models import (
    ACTIVE_STATUSES,
    EFFECT_RESUME,
    EFFECT_START,
    EFFECT_STOP,
    EXECUTION_FAILED_ERROR,
    EXECUTION_LOST_ERROR,
    WORKING,
    TaskRecord,
)
from .store import TaskStore, from_item
from .telemetry import report_settled

log = logging.getLogger(__name__)

EXECUTION_STATUS_CHANGE: Final = schema.EXECUTION_STATUS_CHANGE
ENDED_STATUSES: Final[frozenset[str]] = frozenset(schema.ENDED_STATUSES)
START_REFUSED_ERROR: Final[dict[str, Any]] = {**EXECUTION_FAILED_ERROR, "message": "Task could not be started"}
RESUME_REFUSED_ERROR: Final[dict[str, Any]] = {**EXECUTION_FAILED_ERROR, "message": "Task could not be resumed"}


class TaskSupervisor:
    def __init__(self, store: TaskStore, executor: TaskExecutor, *, telemetry: Telemetry = NO_TELEMETRY) -> None:
        self.store = store
        self.executor = executor
        self.telemetry = telemetry

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(event.get("Records"), list):
            return self.carry_out(event["Records"])
        if event.get("detail-type") == EXECUTION_STATUS_CHANGE and isinstance(event.get("detail"), Mapping):
            self.reconcile(event["detail"])
            return {}
        raise ValueError("the supervisor takes task table stream batches and execution status changes")

    # ---- the table's stream -------------------------------------------------------------------------
    def carry_out(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Each record's effect, in order; the first one Step Functions did not take is reported, and
        Lambda delivers it and every later record again."""
        tasks = [_task_of(record) for record in records]
        for index, (record, task) in enumerate(zip(records, tasks, strict=True)):
            if task is None or _superseded(task, tasks[index + 1 :]):
                continue
            self.telemetry.correlate(task_id=task.task_id, execution_name=task.execution)
            try:
                self._carry_out(task)
            except (ExecutorUnavailable, TaskStoreUnavailable) as exc:
                log.warning("task %s: %s not done yet (%s); retried from this record", task.task_id, task.effect, exc)
                return {"batchItemFailures": [{"itemIdentifier": str(record["dynamodb"]["SequenceNumber"])}]}
        return {"batchItemFailures": []}

    def _carry_out(self, task: TaskRecord) -> None:
        if task.effect == EFFECT_STOP:
            try:
                self.executor.stop(task.execution)
            except ExecutorRefused as exc:
                log.error("task %s: its execution could not be stopped (%s)", task.task_id, exc)
        elif task.effect == EFFECT_START and task.status in ACTIVE_STATUSES:
            try:
                self.executor.start(task.task_id, task.execution)
            except ExecutorRefused as exc:
                log.error("task %s: its execution could not be started (%s)", task.task_id, exc)
                self._settle(task, START_REFUSED_ERROR)
        elif task.effect == EFFECT_RESUME and task.status == WORKING and task.task_token:
            try:
                if not self.executor.resume(task.task_token):
                    log.info("task %s: its token was answered already", task.task_id)
            except ExecutorRefused as exc:
                log.error("task %s: its execution could not be resumed (%s)", task.task_id, exc)
                self._settle(task, RESUME_REFUSED_ERROR)

    # ---- execution status changes -----------------------------------------------------------------
    def reconcile(self, detail: Mapping[str, Any]) -> None:
        status, name = str(detail.get("status") or ""), str(detail.get("name") or "")
        task_id = _task_id_of(detail)
        if status not in ENDED_STATUSES or not task_id:
            return
        self.telemetry.correlate(task_id=task_id, execution_name=name)
        try:
            task = self.store.get(task_id)
        except TaskNotFound:
            return
        if task.is_terminal or task.execution != name:
            return  # settled by its own writes, or carried on by a newer execution
        log.warning("task %s: execution %s ended %s without a terminal write; settling failed", task_id, name, status)
        self._settle(task, dict(EXECUTION_LOST_ERROR))

    def _settle(self, task: TaskRecord, error: dict[str, Any]) -> None:
        try:
            settled = self.store.settle_lost(task.task_id, task.execution, dict(error))
        except (TaskConflict, TaskNotFound):
            return
        report_settled(self.telemetry, settled)


def _task_of(record: Mapping[str, Any]) -> TaskRecord | None:
    image = (record.get("dynamodb") or {}).get("NewImage")
    if not image or "taskId" not in image:
        return None
    return from_item(image)


def _superseded(task: TaskRecord, later: Sequence[TaskRecord | None]) -> bool:
    """A start or resume the same batch already cancels (its stop comes later in order)."""
    return task.effect != EFFECT_STOP and any(
        other is not None and other.task_id == task.task_id and other.effect == EFFECT_STOP for other in later
    )


def _task_id_of(detail: Mapping[str, Any]) -> str:
    try:
        document = json.loads(str(detail.get("input") or "{}"))
    except ValueError:
        return ""
    return str(document.get("taskId") or "") if isinstance(document, dict) else ""
