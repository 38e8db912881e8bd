"""`scripts/redrive.py` against the template's queue, stream and supervisor on moto (the supervisor
invoked through moto's Lambda Invoke, as the script invokes it on AWS). The template-driven run of
the same command is in `tests/local_stack/test_poison_records.py`."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from local_stack.aws import EmbeddedAws, register_function, unregister_function
from local_stack.event_delivery import lambda_record, stream_batch_info
from local_stack.provision import ProvisionedStack

from tests.integration.task_harness import TaskResources
from tests.support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import redrive


class Replay:
    def __init__(self, aws: EmbeddedAws, deployed: ProvisionedStack) -> None:
        self.aws = aws
        (self.mapping,) = deployed.stream_mappings
        assert self.mapping.on_failure_arn is not None
        queue = deployed.queue_by_arn(self.mapping.on_failure_arn)
        assert queue is not None
        supervisor = deployed.functions[TaskResources.of(deployed).supervisor_logical_id]
        self.function_name = supervisor.name
        self.function_arn = supervisor.arn
        self.target = redrive.Target(
            queue.url, supervisor.name, aws.client("sqs"), aws.client("dynamodbstreams"), aws.client("lambda")
        )
        self.invocations: list[list[str]] = []
        self.fail: set[str] = set()

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        sequences = [str(record["dynamodb"]["SequenceNumber"]) for record in event["Records"]]
        self.invocations.append(sequences)
        return {"batchItemFailures": [{"itemIdentifier": s} for s in sequences if s in self.fail]}

    def stream_records(self) -> list[dict[str, Any]]:
        streams = self.aws.client("dynamodbstreams")
        (shard,) = streams.describe_stream(StreamArn=self.mapping.stream_arn)["StreamDescription"]["Shards"]
        iterator = streams.get_shard_iterator(
            StreamArn=self.mapping.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        self.shard_id = str(shard["ShardId"])
        return [lambda_record(record, self.mapping.stream_arn) for record in records]

    def give_up(self, records: list[dict[str, Any]]) -> None:
        """The message Lambda writes for records it gave up (`local_stack.event_delivery` writes the same)."""
        message = {
            "requestContext": {
                "requestId": "r",
                "functionArn": self.function_arn,
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": 11,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": None},
            "version": "1.0",
            "timestamp": "2026-12-02T07:00:00.000Z",
            "DDBStreamBatchInfo": stream_batch_info(records, self.shard_id, self.mapping.stream_arn),
        }
        self.target.sqs.send_message(QueueUrl=self.target.queue_url, MessageBody=json.dumps(message))

    def queued(self) -> int:
        attributes = self.target.sqs.get_queue_attributes(
            QueueUrl=self.target.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def visible(self) -> int:
        attributes = self.target.sqs.get_queue_attributes(
            QueueUrl=self.target.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


@pytest.fixture
def replay(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> Iterator[Replay]:
    setup = Replay(embedded_aws, deployed)
    register_function(setup.function_name, setup.handler)
    yield setup
    unregister_function(setup.function_name)


def write(aws: EmbeddedAws, deployed: ProvisionedStack, *keys: str) -> None:
    table = TaskResources.of(deployed).table_name
    for key in keys:
        aws.client("dynamodb").put_item(TableName=table, Item={"pk": {"S": f"task#{key}"}, "effect": {"S": "start"}})


def test_the_given_up_records_are_replayed_to_the_supervisor_and_their_message_deleted(
    replay: Replay, embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    write(embedded_aws, deployed, "a", "b", "c", "d")
    records = replay.stream_records()
    replay.give_up(records[1:3])
    out = io.StringIO()

    (outcome,) = redrive.redrive(replay.target, out=out)

    assert outcome.left is None and outcome.replayed == 2
    assert replay.invocations == [[str(r["dynamodb"]["SequenceNumber"]) for r in records[1:3]]]
    assert replay.queued() == 0
    assert "replayed and deleted" in out.getvalue()


def test_a_record_the_supervisor_still_fails_keeps_its_message_visible_for_the_next_run(
    replay: Replay, embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    write(embedded_aws, deployed, "a", "b")
    records = replay.stream_records()
    replay.fail = {str(records[1]["dynamodb"]["SequenceNumber"])}
    replay.give_up(records)

    (outcome,) = redrive.redrive(replay.target, out=io.StringIO())

    assert outcome.left is not None and "still fails" in outcome.left
    assert replay.visible() == 1
    replay.fail = set()
    (again,) = redrive.redrive(replay.target, out=io.StringIO())
    assert again.left is None and replay.queued() == 0


def test_records_no_longer_in_the_stream_are_reported_and_their_message_kept(
    replay: Replay, embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    write(embedded_aws, deployed, "a")
    (record,) = replay.stream_records()
    gone = json.loads(json.dumps(record))
    gone["dynamodb"]["SequenceNumber"] = str(int(record["dynamodb"]["SequenceNumber"]) + 1000)
    replay.give_up([gone])

    (outcome,) = redrive.redrive(replay.target, out=io.StringIO())

    assert outcome.left is not None and "no longer in the stream" in outcome.left
    assert replay.invocations == [] and replay.visible() == 1


def test_a_dry_run_replays_nothing_and_leaves_the_queue_as_it_was(
    replay: Replay, embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    write(embedded_aws, deployed, "a")
    replay.give_up(replay.stream_records())

    out = io.StringIO()
    (outcome,) = redrive.redrive(replay.target, dry_run=True, out=out)

    assert (outcome.left, outcome.replayed) == ("dry run", 1)
    assert out.getvalue().endswith("would replay 1 record (dry run: nothing changed)\n")
    assert replay.invocations == [] and replay.visible() == 1
