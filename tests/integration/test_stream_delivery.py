"""The local stack's stream poller delivers as Lambda's event source mapping does: late, in batches,
bisecting a failing batch, retrying a bounded number of times, and pointing to what it gave up from
the mapping's on-failure queue, while the rest of the shard goes on.

The template's own mapping and queue (moto), with a handler standing in for the function: the poller,
not the supervisor, is under test here.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from local_stack.aws import EmbeddedAws
from local_stack.event_delivery import FailureDestinations, StreamPoller, StreamTiming
from local_stack.provision import ProvisionedStack, StreamMapping

from mcp_runtime.tasks import schema
from tests.integration.task_harness import TaskResources, wait_until

FAST = StreamTiming(delay_seconds=0.0, poll_seconds=0.05)


class Shard:
    def __init__(self, aws: EmbeddedAws, deployed: ProvisionedStack) -> None:
        self.aws = aws
        self.deployed = deployed
        self.table = TaskResources.of(deployed).table_name
        (self.mapping,) = deployed.stream_mappings
        assert self.mapping.on_failure_arn is not None
        queue = deployed.queue_by_arn(self.mapping.on_failure_arn)
        assert queue is not None
        self.queue_url = queue.url
        self.seen: list[list[str]] = []  # the keys of each invocation's batch
        self._lock = threading.Lock()

    def write(self, *keys: str) -> None:
        for n, key in enumerate(keys):
            item = {
                schema.PARTITION_KEY: {"S": f"{schema.TASK_KEY_PREFIX}{key}"},
                schema.EFFECT_ATTRIBUTE: {"S": schema.EFFECT_START},
                "n": {"N": str(n)},
            }
            self.aws.client("dynamodb").put_item(TableName=self.table, Item=item)

    def poller(
        self, handler: Callable[[list[dict[str, Any]]], dict[str, Any]], give_up_batches: int = 0, **changes: Any
    ) -> StreamPoller:
        def invoke(logical_id: str, payload: bytes) -> tuple[bytes, str | None]:
            records = json.loads(payload)["Records"]
            with self._lock:
                self.seen.append([key_of(record) for record in records])
            try:
                return json.dumps(handler(records)).encode(), None
            except Exception as exc:
                return json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}).encode(), "Unhandled"

        mapping: StreamMapping = dataclasses.replace(self.mapping, **changes)
        return StreamPoller(
            mapping,
            self.aws.client("dynamodbstreams"),
            invoke,
            timing=FAST,
            destinations=FailureDestinations(self.deployed, lambda logical_id: self.aws.client("sqs")),
            function_arn=self.deployed.functions[mapping.function_logical_id].arn,
            give_up_batches=give_up_batches,
        )

    def given_up(self) -> list[dict[str, Any]]:
        answer = self.aws.client("sqs").receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
        return [json.loads(message["Body"]) for message in answer.get("Messages") or ()]


def key_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"][schema.PARTITION_KEY]["S"]).removeprefix(schema.TASK_KEY_PREFIX)


@pytest.fixture
def shard(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> Iterator[Shard]:
    yield Shard(embedded_aws, deployed)


def running(poller: StreamPoller) -> StreamPoller:
    poller.start()
    return poller


def test_a_record_that_always_fails_the_function_is_bisected_out_retried_and_pointed_to_from_the_queue(
    shard: Shard,
) -> None:
    done: list[str] = []
    sequences: dict[str, str] = {}

    def handler(records: list[dict[str, Any]]) -> dict[str, Any]:
        for record in records:
            sequences[key_of(record)] = str(record["dynamodb"]["SequenceNumber"])
        if any(key_of(record) == "poison" for record in records):
            raise RuntimeError("cannot take this one")
        done.extend(key_of(record) for record in records)
        return {"batchItemFailures": []}

    shard.write("a", "b", "poison", "c", "d")
    poller = running(shard.poller(handler, report_batch_item_failures=False, maximum_retry_attempts=2))
    try:
        assert poller.wait_idle(60)
    finally:
        poller.stop()

    assert sorted(done) == ["a", "b", "c", "d"]
    (message,) = shard.given_up()
    info = message["DDBStreamBatchInfo"]
    assert info["batchSize"] == 1
    assert info["startSequenceNumber"] == info["endSequenceNumber"] == sequences["poison"]
    assert info["streamArn"] == shard.mapping.stream_arn and info["shardId"]
    assert message["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert message["requestContext"]["functionArn"] == shard.deployed.functions[shard.mapping.function_logical_id].arn
    assert message["responseContext"]["functionError"] == "Unhandled"
    # The 1-record batch was invoked once and retried twice; bisecting used no retry.
    assert sum(batch == ["poison"] for batch in shard.seen) == 3


def test_the_redrive_rehearsal_knob_gives_up_the_first_batch_unread_and_delivers_the_rest(shard: Shard) -> None:
    done: list[str] = []

    def handler(records: list[dict[str, Any]]) -> dict[str, Any]:
        done.extend(key_of(record) for record in records)
        return {"batchItemFailures": []}

    shard.write("first")
    poller = running(shard.poller(handler, give_up_batches=1))
    try:
        assert poller.wait_idle(60)
        shard.write("second")
        assert wait_until(lambda: list(done), lambda keys: keys == ["second"]) == ["second"]
    finally:
        poller.stop()

    assert shard.seen == [["second"]]  # the given-up batch was never invoked
    (message,) = shard.given_up()
    assert message["DDBStreamBatchInfo"]["batchSize"] == 1
    assert message["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert message["requestContext"]["approximateInvokeCount"] == 0


def test_a_reported_record_is_retried_from_and_what_follows_it_is_given_up_with_it(shard: Shard) -> None:
    sequences: dict[str, str] = {}

    def handler(records: list[dict[str, Any]]) -> dict[str, Any]:
        for record in records:
            sequences[key_of(record)] = str(record["dynamodb"]["SequenceNumber"])
        failed = [sequences["poison"]] if "poison" in sequences and any(key_of(r) == "poison" for r in records) else []
        return {"batchItemFailures": [{"itemIdentifier": s} for s in failed]}

    shard.write("a", "poison", "b")
    poller = running(shard.poller(handler, maximum_retry_attempts=1, parallelization_factor=1))
    try:
        assert poller.wait_idle(60)
    finally:
        poller.stop()

    (message,) = shard.given_up()
    info = message["DDBStreamBatchInfo"]
    assert (info["startSequenceNumber"], info["endSequenceNumber"]) == (sequences["poison"], sequences["b"])
    assert info["batchSize"] == 2
    assert shard.seen[0] == ["a", "poison", "b"] and shard.seen[1:] == [["poison", "b"]]


def test_each_keys_records_arrive_in_order_across_concurrent_batches(shard: Shard) -> None:
    order: dict[str, list[int]] = {}
    lock = threading.Lock()

    def handler(records: list[dict[str, Any]]) -> dict[str, Any]:
        with lock:
            for record in records:
                order.setdefault(key_of(record), []).append(int(record["dynamodb"]["NewImage"]["n"]["N"]))
        return {"batchItemFailures": []}

    keys = [f"k{n % 4}" for n in range(24)]
    poller = running(shard.poller(handler, parallelization_factor=4, batch_size=3))
    try:
        shard.write(*keys)
        wait_until(lambda: sum(len(v) for v in order.values()), lambda count: count == len(keys), timeout=60)
        assert poller.wait_idle(60)
    finally:
        poller.stop()

    for key, numbers in order.items():
        assert numbers == sorted(numbers), key
    assert shard.given_up() == []
