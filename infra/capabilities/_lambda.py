"""What the capabilities build their functions from; it imports no capability, so any of them may use it.

`McpFunction` is one Lambda function with its own role, log group and tracing; `FunctionDefaults`
is what the task functions share (the asset, the environment every handler reads, log retention
and removal policy); the grant helpers put one statement on a role; the handler names are the
entry points in `functions/app/handlers.py` and `functions/oauth_bridge/handler.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.nag import acknowledge
from infra.packaging import LAMBDA_TARGET

# The runtime the asset is built for (its wheels and bytecode): one setting, infra/packaging.py's.
LAMBDA_RUNTIME: lambda_.Runtime = getattr(lambda_.Runtime, f"PYTHON_{LAMBDA_TARGET.python_version.replace('.', '_')}")

API_HANDLER = "app.handlers.api_handler"
WORKER_HANDLER = "app.handlers.worker_handler"
SUPERVISOR_HANDLER = "app.handlers.supervisor_handler"
SWEEPER_HANDLER = "app.handlers.sweeper_handler"
CALLBACK_HANDLER = "app.handlers.callback_handler"
BRIDGE_HANDLER = "oauth_bridge.handler.handle"

RETENTION = {days.value: days for days in logs.RetentionDays}


def retention(days: int) -> logs.RetentionDays:
    by_days = {
        1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
        60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
        365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1827: "FIVE_YEARS",
        3653: "TEN_YEARS",
    }  # fmt: skip
    if days not in by_days:
        raise ValueError(f"log retention must be one of {sorted(by_days)} days, got {days}")
    return RETENTION[by_days[days]]


@dataclass(frozen=True, slots=True)
class FunctionDefaults:
    """What every task function (API, worker, supervisor, callbacks) is built with."""

    code: lambda_.Code
    environment: Mapping[str, str]
    log_retention_days: int
    removal_policy: RemovalPolicy

    def function(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        handler: str,
        memory_mb: int,
        timeout: Duration,
        environment: Mapping[str, str] | None = None,
        wildcard_reason: str = "",
        reserved_concurrency: int | None = None,
    ) -> McpFunction:
        """A task function built with these defaults; `environment` adds to the one every handler reads."""
        return McpFunction(
            scope,
            construct_id,
            description=description,
            handler=handler,
            code=self.code,
            memory_mb=memory_mb,
            timeout=timeout,
            environment={**self.environment, **(environment or {})},
            log_retention_days=self.log_retention_days,
            removal_policy=self.removal_policy,
            wildcard_reason=wildcard_reason,
            reserved_concurrency=reserved_concurrency,
        )


def task_environment(server_name: str, table: dynamodb.ITable, *, lease_seconds: int) -> dict[str, str]:
    """The environment every task function reads: which server it is, its table (and the lease every
    write that leaves a task active renews), Powertools' settings."""
    return {
        "MCP_SERVER_NAME": server_name,
        "TASK_TABLE_NAME": table.table_name,
        "TASK_LEASE_SECONDS": str(lease_seconds),
        "POWERTOOLS_SERVICE_NAME": server_name,
        "POWERTOOLS_METRICS_NAMESPACE": server_name,
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "POWERTOOLS_LOGGER_LOG_EVENT": "false",
        # No pydantic plugin ships in the asset: skip pydantic's scan for them (app/cold_start.py).
        "PYDANTIC_DISABLE_PLUGINS": "__all__",
    }


@dataclass(frozen=True, slots=True)
class TableGrant:
    """Actions on the task table, optionally only on items whose partition key has a prefix."""

    actions: tuple[str, ...]
    key_prefixes: tuple[str, ...] = ()


def grant(role: iam.IRole, actions: tuple[str, ...], resources: list[str]) -> None:
    role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=resources))


def grant_table(role: iam.IRole, table_grants: Iterable[TableGrant], table: dynamodb.ITable) -> None:
    """One statement per grant, in order."""
    for table_grant in table_grants:
        conditions = None
        if table_grant.key_prefixes:
            prefixes = [f"{prefix}*" for prefix in table_grant.key_prefixes]
            conditions = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": prefixes}}
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(table_grant.actions), resources=[table.table_arn], conditions=conditions)
        )


class McpFunction(Construct):
    """One function with its own role, its own log group and X-Ray tracing."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        description: str,
        handler: str,
        code: lambda_.Code,
        memory_mb: int,
        timeout: Duration,
        environment: Mapping[str, str],
        log_retention_days: int,
        removal_policy: RemovalPolicy,
        wildcard_reason: str = "",
        reserved_concurrency: int | None = None,
    ) -> None:
        """`reserved_concurrency`: this many concurrent executions kept for it, and never more (None: it
        shares the account's unreserved pool)."""
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(log_retention_days), removal_policy=removal_policy
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description}: only the calls its code makes",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=LAMBDA_RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=handler,
            code=code,
            memory_size=memory_mb,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE,
            environment=dict(environment),
            reserved_concurrent_executions=reserved_concurrency,
        )
        # The log group exists before the function runs, so no logs:CreateLogGroup is needed.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            " ".join(
                (
                    "X-Ray PutTraceSegments/PutTelemetryRecords, added by tracing ACTIVE, have no resource-level "
                    "permissions.",
                    wildcard_reason,
                )
            ).strip(),
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            f"Pinned to {LAMBDA_RUNTIME.name}, the version the asset's wheels (pydantic_core) and bytecode are "
            "built for: infra/packaging.py's LAMBDA_TARGET sets both.",
        )
