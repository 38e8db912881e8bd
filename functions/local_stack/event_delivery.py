"""The template's event sources, delivered to its functions the way Lambda and EventBridge deliver them.

moto stores a table's stream records and runs executions, but delivers neither to our functions
(its own event source mappings invoke through Docker, its EventBridge has no Lambda targets), so
the local stack does it, from what the template declares (`local_stack.provision`):

- `StreamPoller`, one per `AWS::Lambda::EventSourceMapping` on a DynamoDB stream: reads the stream
  with the function's own role (IAM enforced), drops records the mapping's filter criteria do not
  match, invokes the function with batches of at most `BatchSize` records (and 6 MB) in stream order, and on a
  function error retries the same batch (with `ReportBatchItemFailures`, from the first record the
  function reported) until it succeeds, `MaximumRetryAttempts` is used up, or the record is older
  than `MaximumRecordAgeInSeconds`. Lambda polls a stream shard about four times a second; this
  poller reads every 50 ms, and waits between retries of a failed batch from 0.1 s up to 2 s
  doubling (Lambda's own waits are not documented as figures).
- `ExecutionEvents`: every status change of a Step Functions execution (`local_stack.aws` reports
  them from moto's interpreter) becomes the "Step Functions Execution Status Change" event AWS puts
  on the default bus; each `AWS::Events::Rule` whose pattern matches it sends it to its function
  targets as an asynchronous invocation, retried on a function error as often as the function's
  `EventInvokeConfig` says, after Lambda's waits: about a minute, then two (`ASYNC_RETRY_SECONDS`),
  divided by the `LOCAL_TIME_SCALE` setting. AWS delivers these events best effort; locally every
  one is delivered unless `LOCAL_DROP_STATUS_EVENTS` drops it (`StatusEventDrops`).
- `ScheduledRules`: each `AWS::Events::Rule` with a rate expression sends EventBridge's "Scheduled
  Event" (or its target's constant `Input`) to its function targets every period (divided by
  `LOCAL_TIME_SCALE`), the first one period after the stack starts, as asynchronous invocations
  retried like the status events.
Pattern matching (filter criteria and rules alike) is moto's EventBridge pattern matcher.
"""

from __future__ import annotations

import json
import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from local_stack.provision import EventRule, ScheduledRule, StreamMapping
from local_stack.runtime import MAX_PAYLOAD_BYTES

# (function logical id, event bytes) -> (payload bytes, function error or None)
Invoke = Callable[[str, bytes], tuple[bytes, str | None]]

POLL_SECONDS: Final = 0.05
FIRST_RETRY_SECONDS: Final = 0.1
LAST_RETRY_SECONDS: Final = 2.0
# Lambda's waits between the retries of a failed asynchronous invocation (about 1 and 2 minutes).
ASYNC_RETRY_SECONDS: Final = (60.0, 120.0)
EXECUTION_STATUS_CHANGE: Final = "Step Functions Execution Status Change"
REGION: Final = "us-east-1"
ACCOUNT_ID: Final = "123456789012"

log = logging.getLogger(__name__)


def _matcher(patterns: tuple[str, ...]) -> Callable[[Mapping[str, Any]], bool]:
    from moto.events.models import EventPattern

    loaded = [EventPattern.load(pattern) for pattern in patterns]
    if not loaded:
        return lambda event: True
    return lambda event: any(pattern.matches_event(dict(event)) for pattern in loaded)  # type: ignore[arg-type]


def _epoch(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


def lambda_record(record: Mapping[str, Any], stream_arn: str) -> dict[str, Any]:
    """A stream record as Lambda hands it to a function (timestamps as epoch seconds, the source ARN)."""
    dynamodb = dict(record.get("dynamodb") or {})
    if "ApproximateCreationDateTime" in dynamodb:
        dynamodb["ApproximateCreationDateTime"] = _epoch(dynamodb["ApproximateCreationDateTime"])
    return {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", REGION),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


class StreamPoller:
    """Lambda's poller for one stream event source mapping (one shard, as moto keeps one)."""

    def __init__(self, mapping: StreamMapping, streams: Any, invoke: Invoke) -> None:
        self.mapping = mapping
        self.streams = streams  # a dynamodbstreams client signed with the function's role
        self.invoke = invoke
        self._matches = _matcher(mapping.filter_patterns)
        self._pending: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stream-{mapping.logical_id}", daemon=True)
        self.delivered = 0

    def start(self) -> None:
        if self.mapping.enabled:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        iterator = None
        while not self._stop.is_set():
            try:
                if iterator is None:
                    iterator = self._first_iterator()
                answer = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = answer.get("NextShardIterator")
                for raw in answer.get("Records") or ():
                    record = lambda_record(raw, self.mapping.stream_arn)
                    if self._matches(record):
                        self._pending.append(record)
                if self._pending:
                    self._idle.clear()
                    self._deliver()
                else:
                    self._idle.set()
            except Exception:  # the poller outlives anything a poll meets, as Lambda's does
                log.exception("stream poller %s", self.mapping.logical_id)
                iterator = None
            self._stop.wait(POLL_SECONDS)

    def _first_iterator(self) -> str:
        description = self.streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]
        (shard,) = description["Shards"]
        kind = "TRIM_HORIZON" if self.mapping.starting_position == "TRIM_HORIZON" else "LATEST"
        answer = self.streams.get_shard_iterator(
            StreamArn=self.mapping.stream_arn, ShardId=shard["ShardId"], ShardIteratorType=kind
        )
        return str(answer["ShardIterator"])

    def _deliver(self) -> None:
        """Batches in order until the pending records are done (or given up on)."""
        attempts = 0
        while self._pending and not self._stop.is_set():
            self._drop_expired()
            batch = self._batch()
            if not batch:
                return
            payload, error = self.invoke(self.mapping.function_logical_id, json.dumps({"Records": batch}).encode())
            done = self._done_count(batch, payload, error)
            if done == len(batch):
                del self._pending[: len(batch)]
                self.delivered += len(batch)
                attempts = 0
                continue
            del self._pending[:done]
            self.delivered += done
            attempts += 1
            if 0 <= self.mapping.maximum_retry_attempts < attempts:
                log.warning("stream mapping %s: batch given up after %d retries", self.mapping.logical_id, attempts - 1)
                del self._pending[: len(batch) - done]
                attempts = 0
                continue
            self._stop.wait(min(LAST_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (attempts - 1)))

    def _batch(self) -> list[dict[str, Any]]:
        """At most `BatchSize` records, and no more than fit in one invocation's 6 MB payload (as Lambda does)."""
        batch: list[dict[str, Any]] = []
        size = len(b'{"Records": []}')
        for record in self._pending[: self.mapping.batch_size]:
            size += len(json.dumps(record).encode()) + 2
            if batch and size > MAX_PAYLOAD_BYTES:
                break
            batch.append(record)
        return batch

    def _done_count(self, batch: list[dict[str, Any]], payload: bytes, error: str | None) -> int:
        """How many records of the batch count as processed."""
        if error is not None:
            return 0
        if not self.mapping.report_batch_item_failures:
            return len(batch)
        try:
            failures = json.loads(payload or b"{}").get("batchItemFailures") or []
            failed = {str(failure["itemIdentifier"]) for failure in failures}
        except (ValueError, AttributeError, KeyError, TypeError):
            return 0  # an answer Lambda cannot read fails the whole batch
        for index, record in enumerate(batch):
            if str(record["dynamodb"].get("SequenceNumber")) in failed:
                return index
        return len(batch)

    def _drop_expired(self) -> None:
        if self.mapping.maximum_record_age_seconds < 0:
            return
        oldest = time.time() - self.mapping.maximum_record_age_seconds
        self._pending = [
            r for r in self._pending if float(r["dynamodb"].get("ApproximateCreationDateTime") or 0) >= oldest
        ]

    def wait_idle(self, timeout: float) -> bool:
        """Until every record read so far was delivered (for tests and benchmarks)."""
        return self._idle.wait(timeout)


def execution_status_event(execution: Any) -> dict[str, Any]:
    """The event Step Functions puts on the default bus for a status change of `execution` (moto's)."""

    def millis(value: Any) -> int | None:
        return None if value is None else int(_epoch(value) * 1000)

    status = str(getattr(execution.exec_status, "value", execution.exec_status))
    output = getattr(execution, "output", None)
    detail = {
        "executionArn": execution.exec_arn,
        "stateMachineArn": execution.state_machine_arn,
        "name": execution.name,
        "status": status,
        "startDate": millis(execution.start_date),
        "stopDate": millis(execution.stop_date),
        "input": json.dumps(execution.input_data),
        "output": json.dumps(output) if status == "SUCCEEDED" and output is not None else None,
        "inputDetails": {"included": True},
        "outputDetails": {"included": True} if status == "SUCCEEDED" else None,
        "error": getattr(execution, "error", None),
        "cause": getattr(execution, "cause", None),
    }
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": EXECUTION_STATUS_CHANGE,
        "source": "aws.states",
        "account": ACCOUNT_ID,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": REGION,
        "resources": [execution.exec_arn],
        "detail": detail,
    }


class StatusEventDrops:
    """Which status events the local bus loses, as Step Functions' best-effort delivery may:
    `LOCAL_DROP_STATUS_EVENTS` is unset or "0" (none), "all", or a probability "0.3", optionally
    seeded "0.3@7" (the same seed drops the same events of the same run order)."""

    def __init__(self, setting: str | None = None) -> None:
        text = (setting or "").strip().lower()
        self.setting = text
        self._probability = 0.0
        self._random = random.Random(0)
        self._lock = threading.Lock()
        if text in ("", "0", "off", "none"):
            return
        if text in ("all", "1"):
            self._probability = 1.0
            return
        probability, _, seed = text.partition("@")
        try:
            self._probability = float(probability)
            self._random = random.Random(int(seed or 0))
        except ValueError:
            raise ValueError(
                f"LOCAL_DROP_STATUS_EVENTS must be all, a probability or probability@seed, got {setting!r}"
            ) from None
        if not 0.0 <= self._probability <= 1.0:
            raise ValueError(f"LOCAL_DROP_STATUS_EVENTS: a probability is between 0 and 1, got {setting!r}")

    def drops(self) -> bool:
        if self._probability <= 0.0:
            return False
        if self._probability >= 1.0:
            return True
        with self._lock:
            return self._random.random() < self._probability


class ExecutionEvents:
    """The default bus for Step Functions' status changes, with the template's rules on it."""

    def __init__(
        self,
        rules: list[EventRule],
        invoke: Invoke,
        async_retries: Mapping[str, int],
        *,
        time_scale: float = 1.0,
        drops: StatusEventDrops | None = None,
    ) -> None:
        self.rules = [(rule, _matcher((rule.pattern,))) for rule in rules if rule.enabled]
        self.invoke = invoke
        self.async_retries = dict(async_retries)
        self.time_scale = time_scale
        self.drops = drops or StatusEventDrops()
        self.dropped = 0
        self._queue: queue.Queue[tuple[str, bytes] | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._deliver, name=f"events-{n}", daemon=True) for n in range(4)]
        self._busy = 0
        self._lock = threading.Condition()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def publish(self, event: dict[str, Any]) -> None:
        if event.get("detail-type") == EXECUTION_STATUS_CHANGE and self.drops.drops():
            self.dropped += 1
            detail = event.get("detail") or {}
            log.info(
                "dropped the status event of execution %s (%s; LOCAL_DROP_STATUS_EVENTS)",
                detail.get("name"),
                detail.get("status"),
            )
            return
        for rule, matches in self.rules:
            if matches(event):
                for target in rule.targets:
                    self.send(target.function_logical_id, json.dumps(event).encode())

    def send(self, function: str, payload: bytes) -> None:
        """One asynchronous invocation of `function`, retried as its EventInvokeConfig says."""
        with self._lock:
            self._busy += 1
        self._queue.put((function, payload))

    def _deliver(self) -> None:
        while (item := self._queue.get()) is not None:
            function, payload = item
            try:
                for attempt in range(self.async_retries.get(function, 2) + 1):
                    _, error = self.invoke(function, payload)
                    if error is None:
                        break
                    if attempt < len(ASYNC_RETRY_SECONDS):
                        time.sleep(ASYNC_RETRY_SECONDS[attempt] / self.time_scale)
            except Exception:
                log.exception("event delivery to %s", function)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._busy == 0, timeout)


def scheduled_event(rule: ScheduledRule) -> dict[str, Any]:
    """The event EventBridge sends a scheduled rule's targets."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": REGION,
        "resources": [f"arn:aws:events:{REGION}:{ACCOUNT_ID}:rule/{rule.logical_id}"],
        "detail": {},
    }


class ScheduledRules:
    """EventBridge's scheduler for the template's rate-expression rules, on the same bus as `ExecutionEvents`."""

    def __init__(self, rules: list[ScheduledRule], events: ExecutionEvents, *, time_scale: float = 1.0) -> None:
        self.rules = [rule for rule in rules if rule.enabled and rule.targets]
        self.events = events
        self.time_scale = time_scale
        self.fired: dict[str, int] = {rule.logical_id: 0 for rule in self.rules}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="schedules", daemon=True)

    def start(self) -> None:
        if self.rules:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        started = time.monotonic()
        due = {rule.logical_id: started + rule.period_seconds / self.time_scale for rule in self.rules}
        while not self._stop.is_set():
            now = time.monotonic()
            for rule in self.rules:
                if due[rule.logical_id] > now:
                    continue
                due[rule.logical_id] += rule.period_seconds / self.time_scale
                self.fired[rule.logical_id] += 1
                event = json.dumps(scheduled_event(rule)).encode()
                for target, constant in zip(rule.targets, rule.inputs or (None,) * len(rule.targets), strict=True):
                    self.events.send(target.function_logical_id, constant.encode() if constant else event)
            self._stop.wait(max(0.0, min(due.values()) - time.monotonic()))


class EventDelivery:
    """Every event source of a provisioned template, running: its stream pollers, its rules and schedules."""

    def __init__(self, pollers: list[StreamPoller], events: ExecutionEvents, schedules: ScheduledRules) -> None:
        self.pollers = pollers
        self.events = events
        self.schedules = schedules
        self._unsubscribe: Callable[[], None] | None = None

    @classmethod
    def start(
        cls,
        provisioned: Any,
        invoke: Invoke,
        streams_client: Callable[[str], Any],
        *,
        time_scale: float = 1.0,
        drops: StatusEventDrops | None = None,
    ) -> EventDelivery:
        """`streams_client(function logical id)`: a dynamodbstreams client with that function's credentials.
        `time_scale`: AWS's delivery periods (async retry waits, schedules) divided by this."""
        from local_stack.aws import on_execution_status

        pollers = [
            StreamPoller(mapping, streams_client(mapping.function_logical_id), invoke)
            for mapping in provisioned.stream_mappings
        ]
        events = ExecutionEvents(
            provisioned.event_rules, invoke, provisioned.async_retry_attempts, time_scale=time_scale, drops=drops
        )
        schedules = ScheduledRules(provisioned.scheduled_rules, events, time_scale=time_scale)
        delivery = cls(pollers, events, schedules)
        events.start()
        schedules.start()
        for poller in pollers:
            poller.start()
        if events.rules:
            delivery._unsubscribe = on_execution_status(
                lambda execution: events.publish(execution_status_event(execution))
            )
        return delivery

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self.schedules.stop()
        for poller in self.pollers:
            poller.stop()
        self.events.stop()
