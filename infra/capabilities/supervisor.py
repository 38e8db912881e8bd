"""The supervisor: one function that carries out what task writes ask of their executions, and settles
tasks whose executions ended without a word.

- The task table's stream, filtered to writes that leave an `effect` on the item, invokes it in
  batches; it starts, resumes or stops the execution and reports the first call Step Functions did
  not take, so Lambda retries the stream from that record, in order, until the record expires. A
  burst of creates above Step Functions' start rate waits in the stream instead of failing.
- An EventBridge rule on this state machine's execution status changes (ended ones) invokes it to
  settle, in the background, a task its execution left active.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
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
SUPERVISOR_TABLE_GRANTS: tuple[TableGrant, ...] = (TableGrant(("dynamodb:GetItem", "dynamodb:UpdateItem")),)
SUPERVISOR_STATE_MACHINE_ACTIONS: tuple[str, ...] = ("states:StartExecution", "states:SendTaskSuccess")
SUPERVISOR_EXECUTION_ACTIONS: tuple[str, ...] = ("states:StopExecution",)
# Every Step Functions call it makes is a few hundred milliseconds at most; a batch of 100 with
# retries fits well inside this.
TIMEOUT = Duration.seconds(60)
BATCH_SIZE = 100
# Delivered twice at most by Lambda's asynchronous retries (EventBridge's own retries cover delivery).
ASYNC_RETRY_ATTEMPTS = 2


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
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = defaults.function(
            self,
            "Supervisor",
            description="Task supervisor: starts, resumes and stops executions as task writes ask; settles lost ones",
            handler=SUPERVISOR_HANDLER,
            memory_mb=memory_mb,
            timeout=TIMEOUT,
            environment={"TASK_STATE_MACHINE_ARN": workflow.state_machine.state_machine_arn},
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

        self.stream_source = sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=BATCH_SIZE,
            # Retried until the record leaves the stream (24 hours): a start is never given up.
            retry_attempts=-1,
            bisect_batch_on_error=False,
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
            targets=[targets.LambdaFunction(fn, retry_attempts=ASYNC_RETRY_ATTEMPTS)],
        )
        fn.configure_async_invoke(retry_attempts=ASYNC_RETRY_ATTEMPTS)
