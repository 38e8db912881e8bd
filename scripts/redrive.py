"""`make redrive`: replay the stream records the supervisor's mapping gave up, then forget them.

Lambda sends to the mapping's on-failure queue a pointer, not the records: `DDBStreamBatchInfo`
(stream, shard, first and last sequence number, batch size). For each message this reads those
records from the table's stream again, invokes the supervisor with them exactly as the mapping would
(`{"Records": [...]}`, synchronously), and deletes the message once the supervisor took every one.
The supervisor's effects are idempotent (a start of a started execution, a stop of a stopped one and
a token nobody waits on are "already done"), so a replay is safe however often it runs.

A message stays in the queue (and is reported) when the supervisor still fails a record (fix the
cause, run again), or when its records left the stream (24 h after their write): those tasks need a
hand (`tasks/get` shows them; cancel or re-create). Stream records are kept 24 hours; the mapping
gives up after at most an hour, so there are 23 hours to run this.

    make redrive                      # the local stack `make run` started (newest, or PORT=...)
    make redrive STACK=ServerlessMcpTasks   # a deployed stack, with boto3's default credentials
    python scripts/redrive.py --dry-run ... # show what would be replayed, change nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_stack, for the local state

BATCH_SIZE: Final = 100  # the mapping's own batch size: one replay invocation is one batch Lambda could send
VISIBILITY_SECONDS: Final = 300  # hidden from another redrive while this one replays it
STREAM_FAILURES_PREFIX: Final = "SupervisorStreamFailures"
SUPERVISOR_PREFIX: Final = "Supervisor"
DRY_RUN: Final = "dry run"


@dataclass(frozen=True)
class Target:
    """Where to read and replay: the queue, the supervisor, and the clients to reach them."""

    queue_url: str
    function_name: str
    sqs: Any
    streams: Any
    lambda_: Any


@dataclass(frozen=True)
class Outcome:
    message_id: str
    replayed: int
    left: str | None  # why the message stays, or None when it was deleted


def local_target(port: int | None) -> Target:
    """The running local stack: its moto endpoint, as its administrator (`build/local-stack/run/<port>.json`)."""
    from local_stack.sam_env import admin_client, local_state

    state = local_state(port)
    (queue_url,) = [url for lid, url in state["queues"].items() if lid.startswith(STREAM_FAILURES_PREFIX)]
    (function,) = [f["name"] for lid, f in state["functions"].items() if lid.startswith(SUPERVISOR_PREFIX)]
    return Target(
        queue_url,
        function,
        admin_client(state, "sqs"),
        admin_client(state, "dynamodbstreams"),
        admin_client(state, "lambda"),
    )


def deployed_target(stack_name: str) -> Target:
    """A deployed stack: its outputs name the queue and the supervisor (boto3's default credentials)."""
    import boto3

    session = boto3.session.Session()
    stack = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs") or ()}
    return Target(
        outputs["StreamFailureQueueUrl"],
        outputs["SupervisorFunctionName"],
        session.client("sqs"),
        session.client("dynamodbstreams"),
        session.client("lambda"),
    )


def lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record as GetRecords returns it, in the shape Lambda hands the function (epoch timestamps)."""
    dynamodb = dict(record.get("dynamodb") or {})
    created = dynamodb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion"),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def records_of(streams: Any, info: Any) -> list[dict[str, Any]]:
    """The records from `startSequenceNumber` to `endSequenceNumber` of the pointer's shard."""
    first, last = int(info.start_sequence_number), int(info.end_sequence_number)
    iterator = streams.get_shard_iterator(
        StreamArn=info.stream_arn,
        ShardId=info.shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        SequenceNumber=info.start_sequence_number,
    )["ShardIterator"]
    found: list[dict[str, Any]] = []
    while iterator:
        answer = streams.get_records(ShardIterator=iterator, Limit=1000)
        records = answer.get("Records") or []
        for record in records:
            number = int(record["dynamodb"]["SequenceNumber"])
            if number > last:
                return found
            if number >= first:
                found.append(lambda_record(record, info.stream_arn))
        if not records:
            return found
        iterator = answer.get("NextShardIterator")
    return found


def replay(target: Target, records: Sequence[dict[str, Any]]) -> str | None:
    """Invoke the supervisor with the records, a batch at a time; why not all were taken, or None."""
    for start in range(0, len(records), BATCH_SIZE):
        batch = list(records[start : start + BATCH_SIZE])
        answer = target.lambda_.invoke(
            FunctionName=target.function_name,
            InvocationType="RequestResponse",
            Payload=json.dumps({"Records": batch}).encode(),
        )
        body = answer["Payload"].read()
        if answer.get("FunctionError"):
            return f"the supervisor failed ({answer['FunctionError']}): {body[:500]!r}"
        failures = (json.loads(body or b"{}") or {}).get("batchItemFailures") or []
        if failures:
            numbers = ", ".join(str(failure.get("itemIdentifier")) for failure in failures)
            return f"the supervisor still fails record(s) {numbers} (see its log for the task)"
    return None


def messages(target: Target) -> Iterator[dict[str, Any]]:
    """Every message in the queue once (each hidden for `VISIBILITY_SECONDS` while it is handled)."""
    while True:
        answer = target.sqs.receive_message(
            QueueUrl=target.queue_url, MaxNumberOfMessages=10, VisibilityTimeout=VISIBILITY_SECONDS, WaitTimeSeconds=1
        )
        received = answer.get("Messages") or []
        if not received:
            return
        yield from received


def redrive(target: Target, *, dry_run: bool = False, out: Any = sys.stdout) -> list[Outcome]:
    from aws_lambda_powertools.utilities.parser.models import DynamoDBStreamLambdaOnFailureDestinationModel
    from pydantic import ValidationError

    outcomes: list[Outcome] = []
    kept: list[str] = []
    for message in messages(target):
        message_id = str(message["MessageId"])
        try:
            pointer = DynamoDBStreamLambdaOnFailureDestinationModel.model_validate_json(message["Body"])
        except ValidationError as exc:
            outcomes.append(Outcome(message_id, 0, f"not a stream pointer Lambda writes ({exc.error_count()} errors)"))
            continue
        info = pointer.ddb_stream_batch_info
        span = f"{info.start_sequence_number}..{info.end_sequence_number} ({info.batch_size} given up)"
        try:
            records = records_of(target.streams, info)
        except target.streams.exceptions.TrimmedDataAccessException:
            records = []
        left: str | None
        if not records:
            left = f"records {span} are no longer in the stream (24 h): settle their tasks by hand"
        elif dry_run:
            left = DRY_RUN
        else:
            left = replay(target, records)
        if left is None:
            target.sqs.delete_message(QueueUrl=target.queue_url, ReceiptHandle=message["ReceiptHandle"])
        else:
            kept.append(message["ReceiptHandle"])
        outcomes.append(Outcome(message_id, len(records), left))
        if left == DRY_RUN:
            verdict = f"would replay {len(records)} record{'' if len(records) == 1 else 's'} (dry run: nothing changed)"
        else:
            verdict = "replayed and deleted" if left is None else f"kept: {left}"
        out.write(
            f"{message_id}: records {span}, {len(records)} read, {pointer.request_context.condition}; {verdict}\n"
        )
    for receipt in kept:  # visible again at once: the next run (once the cause is fixed) sees them
        target.sqs.change_message_visibility(QueueUrl=target.queue_url, ReceiptHandle=receipt, VisibilityTimeout=0)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--stack", help="a deployed stack's name (default: the running local stack)")
    parser.add_argument("--port", type=int, help="the local stack's port (default: the newest one running)")
    parser.add_argument("--dry-run", action="store_true", help="read and show the pointers; replay nothing")
    args = parser.parse_args(argv)
    target = deployed_target(args.stack) if args.stack else local_target(args.port)
    outcomes = redrive(target, dry_run=args.dry_run)
    if args.dry_run:
        records = sum(outcome.replayed for outcome in outcomes if outcome.left == DRY_RUN)
        print(f"dry run: would replay {records} records of {len(outcomes)} given-up batches; nothing changed")
        return 0
    kept = [outcome for outcome in outcomes if outcome.left is not None]
    print(f"{len(outcomes) - len(kept)} of {len(outcomes)} given-up batches replayed; {len(kept)} kept in the queue")
    return 1 if kept and not args.dry_run else 0


if __name__ == "__main__":
    sys.exit(main())
