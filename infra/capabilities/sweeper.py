"""The sweeper: a function on an EventBridge schedule that repairs tasks left active by a lost
execution status event or a lost start (`mcp_runtime.tasks.sweeper`).

A function of its own rather than a third event type of the supervisor: its role alone may query the
`ActiveTasks` index and call DescribeExecution (the supervisor, fed by the stream, needs neither); a
run working through a backlog of stale leases never holds a concurrency slot the stream's batches
wait for; and its errors, metrics and logs read apart from the supervisor's.

Each run is one scheduled invocation; a failed run is not retried (the next one, an interval later,
is its retry, with the leases as they are then).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from constructs import Construct

from infra.capabilities._lambda import SWEEPER_HANDLER, FunctionDefaults, TableGrant, grant, grant_table
from infra.nag import acknowledge
from mcp_runtime.tasks import schema

if TYPE_CHECKING:
    from infra.capabilities.workflow import TaskWorkflow

# It reads the index of active tasks and settles or renews their leases (and deletes the parts and
# step items of a task without a TTL it settles, 25 a BatchWriteItem); it reads a working task whose
# execution runs, for a resume it still asks for (GetItem); nothing else.
SWEEPER_TABLE_GRANTS: tuple[TableGrant, ...] = (
    TableGrant(("dynamodb:GetItem", "dynamodb:UpdateItem")),
    TableGrant(("dynamodb:BatchWriteItem",), (schema.PART_KEY_PREFIX,)),
)
SWEEPER_INDEX_ACTIONS: tuple[str, ...] = ("dynamodb:Query",)
# StartExecution: a task whose start was lost is started again (same name and input).
SWEEPER_STATE_MACHINE_ACTIONS: tuple[str, ...] = ("states:StartExecution",)
SWEEPER_EXECUTION_ACTIONS: tuple[str, ...] = ("states:DescribeExecution",)
# One run: at most max_checks DescribeExecution calls and their writes, well inside this.
TIMEOUT = Duration.seconds(60)
ASYNC_RETRY_ATTEMPTS = 0


class TaskSweeper(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        table: dynamodb.ITable,
        workflow: TaskWorkflow,
        interval_minutes: int,
        max_checks: int,
        memory_mb: int = 512,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = defaults.function(
            self,
            "Sweeper",
            description="Task sweeper: settles tasks whose execution ended unseen, starts those whose start was lost",
            handler=SWEEPER_HANDLER,
            memory_mb=memory_mb,
            timeout=TIMEOUT,
            environment={
                "TASK_STATE_MACHINE_ARN": workflow.state_machine.state_machine_arn,
                "TASK_SWEEP_MAX_CHECKS": str(max_checks),
            },
        )
        fn = self.function.function
        grant_table(self.function.role, SWEEPER_TABLE_GRANTS, table)
        grant(self.function.role, SWEEPER_INDEX_ACTIONS, [f"{table.table_arn}/index/{schema.ACTIVE_INDEX}"])
        grant(self.function.role, SWEEPER_STATE_MACHINE_ACTIONS, [workflow.identity.arn])
        grant(self.function.role, SWEEPER_EXECUTION_ACTIONS, [workflow.identity.executions_arn])
        acknowledge(
            self.function.role,
            f"AwsSolutions-IAM5[Resource::{workflow.identity.executions_arn_for_nag}]",
            "Executions are named by task at run time; the grant covers executions of this one state machine.",
        )
        fn.configure_async_invoke(retry_attempts=ASYNC_RETRY_ATTEMPTS)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Runs the task sweeper: tasks whose lease ran out are checked against their execution",
            schedule=events.Schedule.rate(Duration.minutes(interval_minutes)),
            targets=[targets.LambdaFunction(fn, retry_attempts=ASYNC_RETRY_ATTEMPTS)],
        )
