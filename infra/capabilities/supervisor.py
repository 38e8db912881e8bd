"""The supervisor: one function that carries out what task writes ask of their executions, and settles
tasks whose executions ended without a word.

- The task table's stream, filtered to writes that leave an `effect` on the item, invokes it in
  batches; it starts, resumes or stops the execution and reports each record it could not carry out,
  so Lambda retries from the lowest of them. The mapping bounds that: it bisects a failing batch,
  retries `RETRY_ATTEMPTS` times within `MAX_RECORD_AGE`, then sends a pointer to the records it
  gave up to the `stream_failures` queue (alarmed; `make redrive` replays them), and the shard goes
  on. `PARALLELIZATION_FACTOR` batches of a shard run at once, each task's records in order.
- An EventBridge rule on this state machine's execution status changes (ended ones) invokes it to
  settle, in the background, a task its execution left active. What neither EventBridge nor Lambda's
  asynchronous retries could deliver lands in the `status_event_failures` queue (alarmed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.capabilities._lambda import (
    SUPERVISOR_HANDLER,
    FunctionDefaults,
    TableGrant,
    grant,
    grant_table,
)
from infra.nag import acknowledge
from mcp_runtime.tasks import schema

if TYPE_CHECKING:
    from infra.capabilities.workflow import TaskWorkflow

# It reads the task whose execution ended and settles it; it reads nothing else and writes nothing else.
# It settles a task whose execution ended unseen, and deletes the parts and step items of such a task
# without a TTL (25 a BatchWriteItem).
SUPERVISOR_TABLE_GRANTS: tuple[TableGrant, ...] = (
    TableGrant(("dynamodb:GetItem", "dynamodb:UpdateItem")),
    TableGrant(("dynamodb:BatchWriteItem",), (schema.PART_KEY_PREFIX,)),
)
SUPERVISOR_STATE_MACHINE_ACTIONS: tuple[str, ...] = ("states:StartExecution", "states:SendTaskSuccess")
SUPERVISOR_EXECUTION_ACTIONS: tuple[str, ...] = ("states:StopExecution",)
# Every Step Functions call it makes is a few hundred milliseconds at most; a batch of 100 with
# retries fits well inside this.
TIMEOUT = Duration.seconds(60)
BATCH_SIZE = 100
# Delivered twice at most by Lambda's asynchronous retries (EventBridge's own retries cover delivery).
ASYNC_RETRY_ATTEMPTS = 2
# The stream mapping's bounds. A record lives 24 h in the stream; one the supervisor cannot carry out
# is given up after an hour at most, so an operator has 23 h to replay it (the on-failure message only
# points into the stream). Retries are budgeted in time, not attempts: inside each invocation the
# supervisor retries a throttled or failing Step Functions call for `supervisorRetrySeconds` (40 s by
# default, `DEFAULT_RETRY_SECONDS`) however many attempts that takes, so the mapping's ten retries ride
# out about seven minutes of throttling, where attempts alone (six, backing off to 2 s) spent them in
# under a minute. A record whose failure is not transient (a poison record) fails at once: it costs ten
# quick invocations of its batch's tail, and bisection (which does not use retries) narrows it to
# itself. What is given up anyway is repaired by the sweeper within a lease and a sweep (`tasks.sweeper`).
RETRY_ATTEMPTS = 10
DEFAULT_RETRY_SECONDS = 40
MAX_RECORD_AGE = Duration.hours(1)
# Five batches of a shard at once, each task's records in order: a task whose record fails holds
# back only the tasks hashed to its fifth of the shard, and a burst of creates starts five times as
# fast as one batch at a time. Each batch is one supervisor invocation, so a shard takes five of the
# supervisor's reserved concurrency (`supervisorReservedConcurrency` in cdk.json, 10): a second shard,
# or the status events, still fit. Raise both together. No batching window: a start waits for no other.
PARALLELIZATION_FACTOR = 5
# What the queues keep: the stream pointers are useless after 24 h, but the record of what was given
# up is evidence; 14 days is SQS's maximum.
FAILURE_RETENTION = Duration.days(14)
# EventBridge's own delivery to the function (throttled, not permitted) gives up after this age.
STATUS_EVENT_MAX_AGE = Duration.hours(6)


class TaskSupervisor(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        table: dynamodb.ITable,
        workflow: TaskWorkflow,
        memory_mb: int = 512,
        reserved_concurrency: int | None = None,
        retry_seconds: int = DEFAULT_RETRY_SECONDS,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = defaults.function(
            self,
            "Supervisor",
            description="Task supervisor: starts, resumes and stops executions as task writes ask; settles lost ones",
            handler=SUPERVISOR_HANDLER,
            memory_mb=memory_mb,
            timeout=TIMEOUT,
            environment={
                "TASK_STATE_MACHINE_ARN": workflow.state_machine.state_machine_arn,
                "TASK_SUPERVISOR_RETRY_SECONDS": str(retry_seconds),
            },
            reserved_concurrency=reserved_concurrency,
            wildcard_reason="dynamodb:ListStreams has no resource-level permission either (CDK's grantStreamRead "
            "adds it for the event source mapping).",
        )
        fn = self.function.function
        grant_table(self.function.role, SUPERVISOR_TABLE_GRANTS, table)
        grant(self.function.role, SUPERVISOR_STATE_MACHINE_ACTIONS, [workflow.identity.arn])
        grant(self.function.role, SUPERVISOR_EXECUTION_ACTIONS, [workflow.identity.executions_arn])
        acknowledge(
            self.function.role,
            f"AwsSolutions-IAM5[Resource::{workflow.identity.executions_arn_for_nag}]",
            "Executions are named by task at run time; the grant covers executions of this one state machine.",
        )

        self.stream_failures = self._failure_queue(
            "StreamFailures", "the table stream's records the supervisor gave up on (pointers into the stream)"
        )
        self.status_event_failures = self._failure_queue(
            "StatusEventFailures", "execution status changes EventBridge or Lambda could not deliver to the supervisor"
        )
        self.stream_source = sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=BATCH_SIZE,
            retry_attempts=RETRY_ATTEMPTS,
            max_record_age=MAX_RECORD_AGE,
            bisect_batch_on_error=True,
            parallelization_factor=PARALLELIZATION_FACTOR,
            on_failure=sources.SqsDlq(self.stream_failures),
            report_batch_item_failures=True,
            filters=[
                lambda_.FilterCriteria.filter(
                    {"dynamodb": {"NewImage": {schema.EFFECT_ATTRIBUTE: {"S": list(schema.EFFECTS)}}}}
                )
            ],
        )
        fn.add_event_source(self.stream_source)

        self.execution_ended = events.Rule(
            self,
            "ExecutionEnded",
            description="Task executions that ended: the supervisor settles a task its execution left active",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=[schema.EXECUTION_STATUS_CHANGE],
                detail={"stateMachineArn": [workflow.identity.arn], "status": list(schema.ENDED_STATUSES)},
            ),
            targets=[
                targets.LambdaFunction(
                    fn,
                    retry_attempts=ASYNC_RETRY_ATTEMPTS,
                    max_event_age=STATUS_EVENT_MAX_AGE,
                    dead_letter_queue=self.status_event_failures,
                )
            ],
        )
        fn.configure_async_invoke(
            retry_attempts=ASYNC_RETRY_ATTEMPTS, on_failure=destinations.SqsDestination(self.status_event_failures)
        )

    def _failure_queue(self, construct_id: str, what: str) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            construct_id,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=FAILURE_RETENTION,
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            f"This queue is itself a dead-letter queue: it keeps {what}, read by an operator.",
        )
        return queue
