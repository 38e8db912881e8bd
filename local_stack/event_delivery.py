"""The template's event sources, delivered to its functions the way Lambda and EventBridge deliver them.

moto stores a table's stream records and runs executions, but delivers neither to our functions
(its own event source mappings invoke through Docker, its EventBridge has no Lambda targets), so
the local stack does it, from what the template declares (`local_stack.provision`):

- `StreamPoller`, one per `AWS::Lambda::EventSourceMapping` on a DynamoDB stream: reads the stream
  with the function's own role (IAM enforced), drops records the mapping's filter criteria do not
  match, and delivers the rest as Lambda does: late (`StreamTiming`: seen 100 ms after the write at
  the earliest, polled every 250 ms), in batches of at most `BatchSize` records (and 6 MB) after the
  batching window, `ParallelizationFactor` batches at once with each key's records in order; a
  failed batch is bisected, retried from the lowest reported record (`ReportBatchItemFailures`), and
  given up after `MaximumRetryAttempts` or `MaximumRecordAgeInSeconds`, with a `DDBStreamBatchInfo`
  pointer sent to the mapping's on-failure SQS queue (`FailureDestinations`).
- `ExecutionEvents`: every status change of a Step Functions execution (`local_stack.aws` reports
  them from moto's interpreter) becomes the "Step Functions Execution Status Change" event AWS puts
  on the default bus; each `AWS::Events::Rule` whose pattern matches it sends it to its function
  targets as an asynchronous invocation, retried on a function error as often as the function's
  `EventInvokeConfig` says, after Lambda's waits: about a minute, then two (`ASYNC_RETRY_SECONDS`),
  divided by the `LOCAL_TIME_SCALE` setting; an event that failed every attempt goes, as Lambda's
  invocation record, to the function's on-failure destination (`FailureDestinations`). AWS delivers
  these events best effort; locally every one is delivered unless `LOCAL_DROP_STATUS_EVENTS` drops
  it (`StatusEventDrops`).
- `ScheduledRules`: each `AWS::Events::Rule` with a rate expression sends EventBridge's "Scheduled
  Event" (or its target's constant `Input`) to its function targets every period (divided by
  `LOCAL_TIME_SCALE`), the first one period after the stack starts, as asynchronous invocations
  retried like the status events.
Pattern matching (filter criteria and rules alike) is moto's EventBridge pattern matcher.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from local_stack.provision import EventRule, ScheduledRule, StreamMapping
from local_stack.runtime import MAX_PAYLOAD_BYTES

# (function logical id, event bytes) -> (payload bytes, function error or None)
Invoke = Callable[[str, bytes], tuple[bytes, str | None]]

STREAM_POLL_SECONDS: Final = 0.25
STREAM_DELAY_SECONDS: Final = 0.1
FIRST_RETRY_SECONDS: Final = 0.1
LAST_RETRY_SECONDS: Final = 2.0
# Lambda's waits between the retries of a failed asynchronous invocation (about 1 and 2 minutes).
ASYNC_RETRY_SECONDS: Final = (60.0, 120.0)
EXECUTION_STATUS_CHANGE: Final = "Step Functions Execution Status Change"
THROTTLED_ERROR: Final = "TooManyRequestsException"
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


@dataclass(frozen=True, slots=True)
class StreamTiming:
    """How late stream records reach the function. AWS publishes no propagation figure (DynamoDB
    Streams is "near real time"); Lambda polls each shard about four times a second. Defaults:
    LOCAL_STREAM_DELAY_MS=100 (a record is seen that long after its write, at the earliest) and
    LOCAL_STREAM_POLL_MS=250, so a record waits 100-350 ms before its batch is invoked."""

    delay_seconds: float = STREAM_DELAY_SECONDS
    poll_seconds: float = STREAM_POLL_SECONDS

    @classmethod
    def from_environ(cls, env: Mapping[str, str] | None = None) -> StreamTiming:
        env = os.environ if env is None else env
        delay, poll = env.get("LOCAL_STREAM_DELAY_MS"), env.get("LOCAL_STREAM_POLL_MS")
        return cls(
            float(delay) / 1000 if delay else STREAM_DELAY_SECONDS,
            float(poll) / 1000 if poll else STREAM_POLL_SECONDS,
        )


class FailureDestinations:
    """The template's SQS queues, as Lambda sends to them what it gave up (signed as the function's
    role, which is what Lambda uses): the stream mappings' on-failure pointers, and (for the event
    rules' dead-letter queues and asynchronous invocations' on-failure destinations) the events."""

    def __init__(self, provisioned: Any, sqs_client: Callable[[str], Any] | None) -> None:
        self.provisioned = provisioned
        self.sqs_client = sqs_client
        self.sent: list[tuple[str, dict[str, Any]]] = []  # (queue ARN, message), for tests

    def send(self, queue_arn: str, function_logical_id: str, message: Mapping[str, Any]) -> None:
        queue = self.provisioned.queue_by_arn(queue_arn)
        if queue is None or self.sqs_client is None:
            log.error("no queue %s to send what %s gave up: %s", queue_arn, function_logical_id, json.dumps(message))
            return
        self.sqs_client(function_logical_id).send_message(QueueUrl=queue.url, MessageBody=json.dumps(message))
        self.sent.append((queue_arn, dict(message)))


def _iso(epoch: float, millis: bool = False) -> str:
    moment = datetime.fromtimestamp(epoch, tz=UTC)
    if millis:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def stream_batch_info(records: list[dict[str, Any]], shard_id: str, stream_arn: str) -> dict[str, Any]:
    """`DDBStreamBatchInfo`: where in the stream the given-up records are (not the records)."""
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    return {
        "shardId": shard_id,
        "startSequenceNumber": str(first["SequenceNumber"]),
        "endSequenceNumber": str(last["SequenceNumber"]),
        "approximateArrivalOfFirstRecord": _iso(float(first.get("ApproximateCreationDateTime") or time.time())),
        "approximateArrivalOfLastRecord": _iso(float(last.get("ApproximateCreationDateTime") or time.time())),
        "batchSize": len(records),
        "streamArn": stream_arn,
    }


def _sequence(record: Mapping[str, Any]) -> int:
    return int(str(record["dynamodb"].get("SequenceNumber") or 0))


class StreamPoller:
    """Lambda's poller for one stream event source mapping (one shard, as moto keeps one).

    A reader polls the shard every `StreamTiming.poll_seconds` and hands each record the filter
    admits, once it is `delay_seconds` old, to one of `ParallelizationFactor` lanes by its key (so a
    key's records keep their order). Each lane invokes the function with batches of at most
    `BatchSize` records (and 6 MB), after gathering for `MaximumBatchingWindowInSeconds`, one batch
    at a time. A function error bisects the batch (when `BisectBatchOnFunctionError`; halves do not
    use the retry quota) or retries it; `batchItemFailures` checkpoint before the lowest reported
    record and retry from it. A batch retried more than `MaximumRetryAttempts` times, or records
    older than `MaximumRecordAgeInSeconds`, are given up: a pointer to them (`DDBStreamBatchInfo`,
    as Lambda writes it) goes to the mapping's on-failure queue, and the lane goes on. Retries of a
    failed batch wait from 0.1 s up to 2 s, doubling (Lambda's own waits are not documented as figures).
    """

    def __init__(
        self,
        mapping: StreamMapping,
        streams: Any,
        invoke: Invoke,
        *,
        timing: StreamTiming | None = None,
        destinations: FailureDestinations | None = None,
        function_arn: str = "",
        give_up_batches: int = 0,
    ) -> None:
        self.mapping = mapping
        # LOCAL_GIVE_UP_STREAM_BATCHES: this many first batches are given up unread, to rehearse `make redrive`.
        self._give_up_batches = give_up_batches
        self.streams = streams  # a dynamodbstreams client signed with the function's role
        self.invoke = invoke
        self.timing = timing or StreamTiming()
        self.destinations = destinations
        self.function_arn = function_arn
        self._matches = _matcher(mapping.filter_patterns)
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._outstanding = 0  # read and matched, not yet done or given up
        self._read_once = False
        self._lanes = [_Lane(self, n) for n in range(max(1, mapping.parallelization_factor))]
        self._thread = threading.Thread(target=self._run, name=f"stream-{mapping.logical_id}", daemon=True)
        self.shard_id = ""
        self.delivered = 0
        self.given_up: list[dict[str, Any]] = []  # the on-failure messages, for tests

    def start(self) -> None:
        if self.mapping.enabled:
            self._thread.start()
            for lane in self._lanes:
                lane.thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        for thread in (self._thread, *(lane.thread for lane in self._lanes)):
            if thread.is_alive():
                thread.join(timeout=5)

    def _run(self) -> None:
        iterator = None
        while not self._stop.is_set():
            try:
                if iterator is None:
                    iterator = self._first_iterator()
                answer = self.streams.get_records(ShardIterator=iterator, Limit=1000)
                iterator = answer.get("NextShardIterator")
                seen = time.monotonic()
                for raw in answer.get("Records") or ():
                    record = lambda_record(raw, self.mapping.stream_arn)
                    if self._matches(record):
                        self._lane_of(record).add(record, seen + self.timing.delay_seconds)
            except Exception:  # the poller outlives anything a poll meets, as Lambda's does
                log.exception("stream poller %s", self.mapping.logical_id)
                iterator = None
            with self._lock:
                self._read_once = True
                self._lock.notify_all()
            self._stop.wait(self.timing.poll_seconds)

    def _lane_of(self, record: Mapping[str, Any]) -> _Lane:
        key = json.dumps(record["dynamodb"].get("Keys") or {}, sort_keys=True).encode()
        return self._lanes[zlib.crc32(key) % len(self._lanes)]

    def _first_iterator(self) -> str:
        description = self.streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]
        (shard,) = description["Shards"]
        self.shard_id = str(shard["ShardId"])
        kind = "TRIM_HORIZON" if self.mapping.starting_position == "TRIM_HORIZON" else "LATEST"
        answer = self.streams.get_shard_iterator(
            StreamArn=self.mapping.stream_arn, ShardId=shard["ShardId"], ShardIteratorType=kind
        )
        return str(answer["ShardIterator"])

    def _count(self, read: int = 0, done: int = 0) -> None:
        with self._lock:
            self._outstanding += read - done
            self.delivered += done
            self._lock.notify_all()

    def rehearsing_give_up(self) -> bool:
        """Whether the next batch is one of the first LOCAL_GIVE_UP_STREAM_BATCHES, given up unread."""
        with self._lock:
            if self._give_up_batches <= 0 or not self.mapping.on_failure_arn:
                return False
            self._give_up_batches -= 1
            return True

    def give_up(self, records: list[dict[str, Any]], condition: str, invocations: int, error: str | None) -> None:
        """Send a pointer to `records` to the on-failure destination (Lambda discards them either way)."""
        log.warning(
            "stream mapping %s: %d records (sequence %s to %s) given up: %s after %d invocations",
            self.mapping.logical_id,
            len(records),
            records[0]["dynamodb"].get("SequenceNumber"),
            records[-1]["dynamodb"].get("SequenceNumber"),
            condition,
            invocations,
        )
        response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if error is not None:
            response["functionError"] = error
        message = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.function_arn,
                "condition": condition,
                "approximateInvokeCount": invocations,
            },
            "responseContext": response,
            "version": "1.0",
            "timestamp": _iso(time.time(), millis=True),
            "DDBStreamBatchInfo": stream_batch_info(records, self.shard_id, self.mapping.stream_arn),
        }
        self.given_up.append(message)
        if self.mapping.on_failure_arn and self.destinations is not None:
            try:
                self.destinations.send(self.mapping.on_failure_arn, self.mapping.function_logical_id, message)
            except Exception:
                log.exception("stream mapping %s: the on-failure queue refused", self.mapping.logical_id)

    def wait_idle(self, timeout: float) -> bool:
        """Until every record read so far was delivered or given up (for tests and benchmarks)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._read_once and self._outstanding == 0, timeout)


class _Lane:
    """One of a mapping's concurrent batches of the shard: its records, in stream order."""

    def __init__(self, poller: StreamPoller, number: int) -> None:
        self.poller = poller
        self.mapping = poller.mapping
        self._pending: list[tuple[float, dict[str, Any]]] = []  # (visible at, record)
        self._ready = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"stream-{self.mapping.logical_id}-{number}", daemon=True)

    def add(self, record: dict[str, Any], visible_at: float) -> None:
        self.poller._count(read=1)
        with self._ready:
            self._pending.append((visible_at, record))
            self._ready.notify_all()

    def _run(self) -> None:
        stop = self.poller._stop
        while not stop.is_set():
            batch = self._next_batch()
            if batch:
                try:
                    if self.poller.rehearsing_give_up():
                        self.poller.give_up(batch, "RetryAttemptsExhausted", 0, "Unhandled")
                        self.poller._count(done=len(batch))
                        continue
                    self._deliver(batch, attempts=0, invocations=0)
                except Exception:
                    log.exception("stream mapping %s", self.mapping.logical_id)
                    self.poller._count(done=len(batch))

    def _next_batch(self) -> list[dict[str, Any]]:
        """The next batch: visible records, gathered for the batching window, at most BatchSize and 6 MB."""
        window = float(self.mapping.maximum_batching_window_seconds)
        with self._ready:
            while not self.poller._stop.is_set():
                now = time.monotonic()
                visible = [record for at, record in self._pending if at <= now]
                if visible and (
                    len(visible) >= self.mapping.batch_size or window <= 0 or now - self._pending[0][0] >= window
                ):
                    batch = _sized(visible[: self.mapping.batch_size])
                    del self._pending[: len(batch)]
                    return batch
                if self._pending:
                    first = self._pending[0][0]
                    wake = first + window if visible else first
                    self._ready.wait(max(0.005, wake - now))
                else:
                    self._ready.wait(0.5)
        return []

    def _deliver(self, batch: list[dict[str, Any]], attempts: int, invocations: int) -> None:
        """Until `batch` is done or given up; halves of a bisected batch go in order, first half first."""
        poller, mapping = self.poller, self.mapping
        while batch and not poller._stop.is_set():
            batch = self._drop_expired(batch, invocations)
            if not batch:
                return
            payload, error = poller.invoke(mapping.function_logical_id, json.dumps({"Records": batch}).encode())
            if _throttled(payload, error):  # not invoked: retried until the records age out, no retry used
                poller._stop.wait(FIRST_RETRY_SECONDS)
                continue
            invocations += 1
            done = _done_count(mapping, batch, payload, error)
            if done == len(batch):
                poller._count(done=len(batch))
                return
            if done == 0 and error is not None and mapping.bisect_batch_on_function_error and len(batch) > 1:
                half = len(batch) // 2
                self._deliver(batch[:half], attempts, invocations)
                self._deliver(batch[half:], attempts, invocations)
                return
            poller._count(done=done)
            batch = batch[done:]  # checkpointed before the lowest failed record; retried from it
            attempts += 1
            if 0 <= mapping.maximum_retry_attempts < attempts:
                poller.give_up(batch, "RetryAttemptsExhausted", invocations, error)
                poller._count(done=len(batch))
                return
            poller._stop.wait(min(LAST_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (attempts - 1)))

    def _drop_expired(self, batch: list[dict[str, Any]], invocations: int) -> list[dict[str, Any]]:
        if self.mapping.maximum_record_age_seconds < 0:
            return batch
        oldest = time.time() - self.mapping.maximum_record_age_seconds
        expired = [r for r in batch if float(r["dynamodb"].get("ApproximateCreationDateTime") or 0) < oldest]
        if expired:
            self.poller.give_up(expired, "RecordAgeExceeded", invocations, None)
            self.poller._count(done=len(expired))
        return [r for r in batch if r not in expired]


def _sized(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """No more than fit in one invocation's 6 MB payload (as Lambda does)."""
    batch: list[dict[str, Any]] = []
    size = len(b'{"Records": []}')
    for record in records:
        size += len(json.dumps(record).encode()) + 2
        if batch and size > MAX_PAYLOAD_BYTES:
            break
        batch.append(record)
    return batch


def _throttled(payload: bytes, error: str | None) -> bool:
    """Lambda's own 429 (the function at its concurrency limit), not an error of the function."""
    if error is None:
        return False
    try:
        return bool(json.loads(payload or b"{}").get("errorType") == THROTTLED_ERROR)
    except (ValueError, AttributeError):
        return False


def _done_count(mapping: StreamMapping, batch: list[dict[str, Any]], payload: bytes, error: str | None) -> int:
    """How many records of the batch count as processed: those before the lowest reported failure."""
    if error is not None:
        return 0
    if not mapping.report_batch_item_failures:
        return len(batch)
    try:
        failures = json.loads(payload or b"{}").get("batchItemFailures") or []
        failed = {int(str(failure["itemIdentifier"])) for failure in failures}
    except (ValueError, AttributeError, KeyError, TypeError):
        return 0  # an answer Lambda cannot read fails the whole batch
    for index, record in enumerate(batch):
        if _sequence(record) in failed:
            return index
    return len(batch)


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
        on_failure: Mapping[str, str] | None = None,
        destinations: FailureDestinations | None = None,
        function_arns: Mapping[str, str] | None = None,
    ) -> None:
        self.rules = [(rule, _matcher((rule.pattern,))) for rule in rules if rule.enabled]
        self.invoke = invoke
        self.async_retries = dict(async_retries)
        self.time_scale = time_scale
        self.drops = drops or StatusEventDrops()
        self.dropped = 0
        self.on_failure = dict(on_failure or {})  # function logical id -> its on-failure queue's ARN
        self.destinations = destinations
        self.function_arns = dict(function_arns or {})
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
                attempts = self.async_retries.get(function, 2) + 1
                for attempt in range(attempts):
                    answer, error = self.invoke(function, payload)
                    if error is None:
                        break
                    if attempt + 1 < attempts and attempt < len(ASYNC_RETRY_SECONDS):
                        time.sleep(ASYNC_RETRY_SECONDS[attempt] / self.time_scale)
                else:
                    self._give_up(function, payload, answer, error, attempts)
            except Exception:
                log.exception("event delivery to %s", function)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._lock.notify_all()

    def _give_up(self, function: str, payload: bytes, answer: bytes, error: str | None, invocations: int) -> None:
        """Lambda's invocation record of an event that failed every attempt, to the function's
        on-failure destination (Lambda discards the event either way)."""
        log.warning("asynchronous invocation of %s given up after %d attempts: %s", function, invocations, error)
        destination = self.on_failure.get(function)
        if destination is None or self.destinations is None:
            return
        response: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if error is not None:
            response["functionError"] = error
        record = {
            "version": "1.0",
            "timestamp": _iso(time.time(), millis=True),
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": self.function_arns.get(function, function),
                "condition": "RetriesExhausted",
                "approximateInvokeCount": invocations,
            },
            "requestPayload": json.loads(payload),
            "responseContext": response,
            "responsePayload": _json_or_text(answer),
        }
        try:
            self.destinations.send(destination, function, record)
        except Exception:
            log.exception("the on-failure destination of %s refused", function)

    def wait_idle(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._busy == 0, timeout)


def _json_or_text(payload: bytes) -> Any:
    try:
        return json.loads(payload or b"null")
    except ValueError:
        return payload.decode(errors="replace")


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

    def __init__(
        self,
        pollers: list[StreamPoller],
        events: ExecutionEvents,
        schedules: ScheduledRules,
        destinations: FailureDestinations | None = None,
    ) -> None:
        self.pollers = pollers
        self.events = events
        self.schedules = schedules
        self.destinations = destinations
        self._unsubscribe: Callable[[], None] | None = None

    @classmethod
    def start(
        cls,
        provisioned: Any,
        invoke: Invoke,
        streams_client: Callable[[str], Any],
        sqs_client: Callable[[str], Any] | None = None,
        timing: StreamTiming | None = None,
        *,
        time_scale: float = 1.0,
        drops: StatusEventDrops | None = None,
        give_up_stream_batches: int = 0,
    ) -> EventDelivery:
        """`streams_client(function logical id)`: a dynamodbstreams client with that function's credentials;
        `sqs_client(function logical id)` likewise, for what Lambda gives up to the template's queues.
        `time_scale`: AWS's delivery periods (async retry waits, schedules) divided by this.
        `give_up_stream_batches`: each stream mapping with an on-failure destination gives up this many
        first batches unread, as if every retry had failed (LOCAL_GIVE_UP_STREAM_BATCHES: rehearses `make redrive`)."""
        from local_stack.aws import on_execution_status

        destinations = FailureDestinations(provisioned, sqs_client)
        timing = timing or StreamTiming.from_environ()
        pollers = [
            StreamPoller(
                mapping,
                streams_client(mapping.function_logical_id),
                invoke,
                timing=timing,
                destinations=destinations,
                function_arn=provisioned.functions[mapping.function_logical_id].arn,
                give_up_batches=give_up_stream_batches,
            )
            for mapping in provisioned.stream_mappings
        ]
        events = ExecutionEvents(
            provisioned.event_rules,
            invoke,
            provisioned.async_retry_attempts,
            time_scale=time_scale,
            drops=drops,
            on_failure=provisioned.async_on_failure,
            destinations=destinations,
            function_arns={logical_id: spec.arn for logical_id, spec in provisioned.functions.items()},
        )
        schedules = ScheduledRules(provisioned.scheduled_rules, events, time_scale=time_scale)
        delivery = cls(pollers, events, schedules, destinations)
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
