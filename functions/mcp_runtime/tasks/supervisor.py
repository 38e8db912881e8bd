"""The supervisor: makes the Step Functions calls task writes ask for, and settles what executions leave behind.

Two event sources, both declared in the template (`infra/capabilities/supervisor.py`):
- The task table's stream, filtered to writes that left an `effect` on the item (`models.EFFECTS`):
  start the execution, resume it with the stored task token, stop it. Each call is safe to repeat, so a
  record delivered twice does no harm. Every record is taken on its own (Powertools' `BatchProcessor`):
  whatever one record raises (a call Step Functions did not take, an item that does not parse, a
  refused write, AccessDenied) is logged with its task and reported as that record's failure, and
  the records of other tasks go on. The records of different tasks run concurrently, each task's in
  stream order; once a record of a task fails, that task's later records in the batch wait with it
  (reported failed too), so a task's effects never run out of order. Lambda retries from the lowest
  failed record (bisecting, a bounded number of times, within a bounded record age) and then sends a
  pointer to what it gave up to the mapping's on-failure queue (`scripts/redrive.py` replays it).
- EventBridge's "Step Functions Execution Status Change" events for executions that ended: a task
  still active whose current execution ended (killed, aborted from outside, failed before its Catch
  could write) is settled `failed`, in the background. The read path never asks Step Functions.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from ..observability import NO_TELEMETRY, TASK_WRITES_REFUSED, Telemetry
from . import schema
from .errors import (
    ExecutorRefused,
    ExecutorUnavailable,
    TaskConflict,
    TaskNotFound,
    TaskStoreRefused,
    TaskStoreUnavailable,
)
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
# Tasks of one batch processed at once (each a few Step Functions calls of a few hundred ms at most).
STREAM_WORKERS: Final = 8


class TaskSupervisor:
    def __init__(
        self,
        store: TaskStore,
        executor: TaskExecutor,
        *,
        telemetry: Telemetry = NO_TELEMETRY,
        workers: int = STREAM_WORKERS,
    ) -> None:
        self.store = store
        self.executor = executor
        self.telemetry = telemetry
        self.workers = workers

    def handle(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(event.get("Records"), list):
            return self.process_stream_batch(event["Records"])
        if event.get("detail-type") == EXECUTION_STATUS_CHANGE and isinstance(event.get("detail"), Mapping):
            self.reconcile(event["detail"])
            return {}
        raise ValueError("the supervisor takes task table stream batches and execution status changes")

    # ---- the table's stream -------------------------------------------------------------------------
    def process_stream_batch(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Each record's effect, each record on its own: the ones that failed are reported (Lambda
        retries from the lowest of them, and the effects before it are not repeated)."""
        processor = TaskOrderedProcessor(EventType.DynamoDBStreams, raise_on_entire_batch_failure=False)
        processor.workers = self.workers
        batch = [dict(record) for record in records]
        with processor(records=batch, handler=lambda record: self._process_stream_record(record.raw_event, batch)):
            processor.process()
        return dict(processor.response())

    def _process_stream_record(self, record: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]) -> None:
        """One record's effect; any exception is this record's failure (logged with its task)."""
        task_id = _task_id_in(record)
        try:
            task = _task_of(record)
            if task is None or _superseded(record, batch):
                return
            self._apply_effect(task)
        except (ExecutorUnavailable, TaskStoreUnavailable) as exc:
            log.warning("task %s: %s not done yet (%s); retried from this record", task_id, _effect_of(record), exc)
            raise
        except Exception:
            log.exception("task %s: its stream record %s could not be processed", task_id, _sequence_of(record))
            raise

    def _apply_effect(self, task: TaskRecord) -> None:
        """The Step Functions call the task's `effect` asks for (start, resume or stop its execution)."""
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
        except TaskStoreRefused as exc:
            # Retrying cannot help: this task's failure, counted; the sweeper looks at it again.
            log.error(
                "task %s: the task table refused its write (%s); the sweeper looks at it again", task.task_id, exc
            )
            self.telemetry.count(TASK_WRITES_REFUSED, by="supervisor")
            return
        report_settled(self.telemetry, settled)


def _task_of(record: Mapping[str, Any]) -> TaskRecord | None:
    """The task a record's new image shows; None for a record of anything else (a task's parts, whose
    records the mapping's filter drops already: they never carry an effect)."""
    image = (record.get("dynamodb") or {}).get("NewImage")
    key = ((record.get("dynamodb") or {}).get("Keys") or {}).get(schema.PARTITION_KEY) or {}
    if not image or "taskId" not in image or not str(key.get("S") or "").startswith(schema.TASK_KEY_PREFIX):
        return None
    return from_item(image)


def _task_key(record: Mapping[str, Any]) -> str:
    """The item the record is of (its table key): records of one item keep their order."""
    return json.dumps((record.get("dynamodb") or {}).get("Keys") or {}, sort_keys=True)


def _task_id_in(record: Mapping[str, Any]) -> str:
    """The task id, read without parsing the item (for logs, even of a record that does not parse)."""
    dynamodb = record.get("dynamodb") or {}
    for image in (dynamodb.get("NewImage") or {}, dynamodb.get("Keys") or {}):
        for name in ("taskId", schema.PARTITION_KEY):
            value = image.get(name)
            if isinstance(value, Mapping) and isinstance(value.get("S"), str):
                return str(value["S"]).removeprefix(schema.TASK_KEY_PREFIX)
    return "?"


def _effect_of(record: Mapping[str, Any]) -> str:
    value = ((record.get("dynamodb") or {}).get("NewImage") or {}).get(schema.EFFECT_ATTRIBUTE)
    return str(value.get("S") or "") if isinstance(value, Mapping) else ""


def _sequence_of(record: Mapping[str, Any]) -> str:
    return str((record.get("dynamodb") or {}).get("SequenceNumber") or "")


def _superseded(record: Mapping[str, Any], batch: Sequence[Mapping[str, Any]]) -> bool:
    """A start or resume the same batch already cancels (a stop of the same task comes later in order)."""
    if _effect_of(record) == EFFECT_STOP:
        return False
    key, later = _task_key(record), False
    for other in batch:
        if other is record:
            later = True
        elif later and _task_key(other) == key and _effect_of(other) == EFFECT_STOP:
            return True
    return False


class TaskOrderBroken(Exception):
    """A record not taken because an earlier record of its task in the batch failed."""


class TaskOrderedProcessor(BatchProcessor):
    """Powertools' `BatchProcessor`, with the records of different tasks processed concurrently
    (each task's in order, stopping at its first failure) and the outcome kept in stream order."""

    workers: int = STREAM_WORKERS

    def process(self) -> list[tuple[Any, ...]]:
        groups: dict[str, list[int]] = {}
        for index, record in enumerate(self.records):
            groups.setdefault(_task_key(record), []).append(index)
        outcomes: dict[int, tuple[Any, ...]] = {}

        def run(indexes: list[int]) -> None:
            for position, index in enumerate(indexes):
                outcome = self._process_record(self.records[index])
                outcomes[index] = outcome
                if outcome[0] == "fail":
                    for skipped in indexes[position + 1 :]:
                        outcomes[skipped] = self._skip(self.records[skipped])
                    return

        if len(groups) == 1 or self.workers <= 1:
            for indexes in groups.values():
                run(indexes)
        else:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(groups))) as pool:
                # Each worker runs in a copy of this context: the invocation's deadline goes with it.
                futures = [pool.submit(contextvars.copy_context().run, run, g) for g in groups.values()]
                for future in futures:
                    future.result()
        # Reported (and counted) in stream order, whatever order the tasks finished in.
        order = {id(record): n for n, record in enumerate(self.records)}
        self.fail_messages.sort(key=lambda message: order.get(id(getattr(message, "raw_event", message)), 0))
        self.success_messages.sort(key=lambda message: order.get(id(message), 0))
        return [outcomes[index] for index in range(len(self.records))]

    def _skip(self, record: dict[str, Any]) -> tuple[Any, ...]:
        log.warning(
            "task %s: stream record %s waits for an earlier record of its task",
            _task_id_in(record),
            _sequence_of(record),
        )
        error = TaskOrderBroken("an earlier record of this task in the batch failed")
        return tuple(self.failure_handler(self._to_batch_type(record, self.event_type), (TaskOrderBroken, error, None)))


def _task_id_of(detail: Mapping[str, Any]) -> str:
    try:
        document = json.loads(str(detail.get("input") or "{}"))
    except ValueError:
        return ""
    return str(document.get("taskId") or "") if isinstance(document, dict) else ""
