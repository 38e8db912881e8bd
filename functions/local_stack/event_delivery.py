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
  `EventInvokeConfig` says (Lambda waits a minute, then two, between those retries; here 1 s, 2 s).
  AWS delivers these events best effort; locally every one is delivered.
Pattern matching (filter criteria and rules alike) is moto's EventBridge pattern matcher.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from local_stack.provision import EventRule, StreamMapping
from local_stack.runtime import MAX_PAYLOAD_BYTES

# (function logical id, event bytes) -> (payload bytes, function error or None)
Invoke = Callable[[str, bytes], tuple[bytes, str | None]]

POLL_SECONDS: Final = 0.05
FIRST_RETRY_SECONDS: Final = 0.1
LAST_RETRY_SECONDS: Final = 2.0
ASYNC_RETRY_SECONDS: Final = (1.0, 2.0)
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
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT_ID,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": REGION,
        "resources": [execution.exec_arn],
        "detail": detail,
    }


class ExecutionEvents:
    """The default bus for Step Functions' status changes, with the template's rules on it."""

    def __init__(self, rules: list[EventRule], invoke: Invoke, async_retries: Mapping[str, int]) -> None:
        self.rules = [(rule, _matcher((rule.pattern,))) for rule in rules if rule.enabled]
        self.invoke = invoke
        self.async_retries = dict(async_retries)
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
        for rule, matches in self.rules:
            if matches(event):
                for target in rule.targets:
                    with self._lock:
                        self._busy += 1
                    self._queue.put((target.function_logical_id, json.dumps(event).encode()))

    def _deliver(self) -> None:
        while (item := self._queue.get()) is not None:
            function, payload = item
            try:
                for attempt in range(self.async_retries.get(function, 2) + 1):
                    _, error = self.invoke(function, payload)
                    if error is None:
                        break
                    if attempt < len(ASYNC_RETRY_SECONDS):
                        time.sleep(ASYNC_RETRY_SECONDS[attempt])
            except Exception:
                log.exception("event delivery to %s", function)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._busy == 0, timeout)


class EventDelivery:
    """Every event source of a provisioned template, running: its stream pollers and its rules."""

    def __init__(self, pollers: list[StreamPoller], events: ExecutionEvents) -> None:
        self.pollers = pollers
        self.events = events
        self._unsubscribe: Callable[[], None] | None = None

    @classmethod
    def start(cls, provisioned: Any, invoke: Invoke, streams_client: Callable[[str], Any]) -> EventDelivery:
        """`streams_client(function logical id)`: a dynamodbstreams client with that function's credentials."""
        from local_stack.aws import on_execution_status

        pollers = [
            StreamPoller(mapping, streams_client(mapping.function_logical_id), invoke)
            for mapping in provisioned.stream_mappings
        ]
        events = ExecutionEvents(provisioned.event_rules, invoke, provisioned.async_retry_attempts)
        delivery = cls(pollers, events)
        events.start()
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
        for poller in self.pollers:
            poller.stop()
        self.events.stop()
