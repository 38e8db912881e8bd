"""The Lambda functions of the MCP endpoint (API) and the task worker, on one Docker-free asset.

Each function gets its own role holding only what its code calls; the grants live here, next to
the action lists, so a reviewer reads one file. `tests/infra` checks the lists against the code.
Everything the functions are told (environment) and allowed (grants) is given to the constructor:
the stack builds what they use first, and names the state machine, built after them, by its ARN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities._lambda import (
    API_HANDLER,
    WORKER_HANDLER,
    FunctionDefaults,
    TableGrant,
    grant,
    grant_table,
)
from infra.nag import acknowledge
from mcp_runtime.tasks import schema

if TYPE_CHECKING:
    from infra.capabilities.http_front import HttpFront
    from infra.capabilities.payloads import TaskPayloads
    from infra.capabilities.sealing_secret import SealingSecret
    from infra.capabilities.workflow import StateMachineIdentity

# The task store reads, creates and conditionally updates task items (a task's hot item and its two
# parts); handles are minted (put), resolved (get), updated and deleted. A task's items are deleted
# only to take back a create whose answer was lost (`TaskStore.discard`), its parts and step items also
# once a task without a TTL is cancelled (25 a BatchWriteItem); handles when the tool says so.
API_TABLE_GRANTS: tuple[TableGrant, ...] = (
    TableGrant(("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")),
    TableGrant(("dynamodb:DeleteItem",), (schema.HANDLE_KEY_PREFIX, schema.TASK_KEY_PREFIX, schema.PART_KEY_PREFIX)),
    TableGrant(("dynamodb:BatchWriteItem",), (schema.PART_KEY_PREFIX,)),
)
# Task history (a tool): the caller's own tasks, newest first, from the owner index, and only there.
API_INDEX_ACTIONS: tuple[str, ...] = ("dynamodb:Query",)
# The worker reads its task's items (BatchGetItem: the hot item, its parts, its step items) and updates
# them (run, store_token, progress, finish; a step item is created by its first UpdateItem), deletes a
# step item holding a running mark it takes back, and the parts and step items of a task without a TTL
# it settles (25 a BatchWriteItem); the tool it runs may use handles like any tool, so it may also mint
# and delete those, and only those.
WORKER_TABLE_GRANTS: tuple[TableGrant, ...] = (
    TableGrant(("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem")),
    TableGrant(("dynamodb:PutItem", "dynamodb:DeleteItem"), (schema.HANDLE_KEY_PREFIX,)),
    TableGrant(("dynamodb:BatchWriteItem", "dynamodb:DeleteItem"), (schema.PART_KEY_PREFIX,)),
)
# Right after the write that asks for it, the API starts a task's execution, resumes it with the
# stored token once the answers are recorded, and stops it once a cancel is recorded (the supervisor,
# `infra/capabilities/supervisor.py`, makes the same calls again from the table's stream).
API_STATE_MACHINE_ACTIONS: tuple[str, ...] = ("states:StartExecution", "states:SendTaskSuccess")
API_EXECUTION_ACTIONS: tuple[str, ...] = ("states:StopExecution",)
# SendTaskSuccess: the authorization reference lists no resource type, yet IAM evaluates it against
# the state machine that issued the token (AccessDenied names that ARN) and CDK's own
# `grantTaskResponse` scopes it there: so do we, instead of "*".
# The worker ends a wait with its own task token (the task was cancelled before the token was
# stored, or answered while its WaitForToken step was retried).
WORKER_STATE_MACHINE_ACTIONS: tuple[str, ...] = ("states:SendTaskSuccess",)
# Results and durable records too large for the item: the worker writes and reads them back, the API
# reads a result to inline it in tasks/get.
API_BUCKET_ACTIONS: tuple[str, ...] = ("s3:GetObject",)
WORKER_BUCKET_ACTIONS: tuple[str, ...] = ("s3:GetObject", "s3:PutObject")


class TaskFunctions(Construct):
    """The API function (MCP endpoint) and the worker function (one step of a task's execution)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        table: dynamodb.ITable,
        front: HttpFront,
        secret: SealingSecret,
        payloads: TaskPayloads,
        state_machine: StateMachineIdentity,
        callback_url: str,
        rounds_per_execution: int,
        task_ttl_hours: int,
        api_memory_mb: int,
        worker_memory_mb: int,
        api_timeout: Duration,
        worker_timeout: Duration,
        allowed_origins: tuple[str, ...] = (),
        function_url: bool = False,
        api_reserved_concurrency: int | None = None,
        worker_reserved_concurrency: int | None = None,
    ) -> None:
        """`state_machine` names the state machine by its fixed name (`StateMachineIdentity`), not by a
        reference: the state machine invokes the worker, so a reference back would be a cycle."""
        super().__init__(scope, construct_id)
        self.api = defaults.function(
            self,
            "Api",
            description="MCP endpoint: one stateless JSON-RPC call per invocation",
            handler=API_HANDLER,
            memory_mb=api_memory_mb,
            timeout=api_timeout,  # at most 29 s: the HTTP API integration gives up at 30 s
            reserved_concurrency=api_reserved_concurrency,
            environment={
                # Behind the JWT authorizer or IAM auth: a request that reaches the function without an
                # authenticated principal is refused rather than served anonymously.
                "MCP_REQUIRE_PRINCIPAL": "true",
                # Browser origins allowed to call (the HTTP API's CORS origins); any other Origin gets 403.
                **({"MCP_ALLOWED_ORIGINS": ",".join(allowed_origins)} if allowed_origins else {}),
                # Tasks run on this workflow: the function serves the tasks extension.
                "TASK_STATE_MACHINE_ARN": state_machine.arn,
                "MCP_STATE_SECRET_ARN": secret.secret.secret_arn,
                # Which tokens it accepts and what it publishes as Protected Resource Metadata (RFC 9728).
                **front.function_environment,
                # The bucket for what does not fit in an item, and the TTL its lifecycle is set from.
                "TASK_PAYLOAD_BUCKET": payloads.bucket.bucket_name,
                "TASK_DEFAULT_TTL_MS": str(task_ttl_hours * 3_600_000),
            },
        )
        self.worker = defaults.function(
            self,
            "Worker",
            description="Task worker: runs one step of a durable task for its Step Functions execution",
            handler=WORKER_HANDLER,
            memory_mb=worker_memory_mb,
            timeout=worker_timeout,
            # A cap on the tool runs at once: a task burst is throttled (and waits), the API is not starved.
            reserved_concurrency=worker_reserved_concurrency,
            environment={
                "TASK_PAYLOAD_BUCKET": payloads.bucket.bucket_name,
                # Where it tells external systems to complete a callback; when it renews an execution.
                "TASK_CALLBACK_URL": callback_url,
                "TASK_ROUNDS_PER_EXECUTION": str(rounds_per_execution),
            },
        )
        grant_table(self.api.role, API_TABLE_GRANTS, table)
        grant(self.api.role, API_INDEX_ACTIONS, [f"{table.table_arn}/index/{schema.OWNER_INDEX}"])
        grant(self.api.role, API_STATE_MACHINE_ACTIONS, [state_machine.arn])
        grant(self.api.role, API_EXECUTION_ACTIONS, [state_machine.executions_arn])
        acknowledge(
            self.api.role,
            f"AwsSolutions-IAM5[Resource::{state_machine.executions_arn_for_nag}]",
            "Executions are named by task at run time; the grant covers executions of this one state machine.",
        )
        secret.grant_read(self.api.role)
        payloads.grant(self.api.role, API_BUCKET_ACTIONS)
        grant_table(self.worker.role, WORKER_TABLE_GRANTS, table)
        # The worker answers its own callback.
        grant(self.worker.role, WORKER_STATE_MACHINE_ACTIONS, [state_machine.arn])
        payloads.grant(self.worker.role, WORKER_BUCKET_ACTIONS)
        front.serve_mcp(self.api.function, function_url=function_url)

    @property
    def api_function(self) -> lambda_.Function:
        return self.api.function

    @property
    def worker_function(self) -> lambda_.Function:
        return self.worker.function
