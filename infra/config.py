"""Deployment settings, read from CDK context (`cdk.json` or `cdk deploy -c key=value`).

Values given with `-c` arrive as strings, so every reader accepts a string form too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import RemovalPolicy
from constructs import Construct

_REMOVAL_POLICIES = {
    "retain": RemovalPolicy.RETAIN,
    "destroy": RemovalPolicy.DESTROY,
    "snapshot": RemovalPolicy.SNAPSHOT,
}


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"context {key!r} must be true or false, got {value!r}")


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(item) for item in value if str(item)]
    text = str(value).strip()
    if text.startswith("["):
        return [str(item) for item in json.loads(text)]
    return [item.strip() for item in text.split(",") if item.strip()]


def _int(value: Any, key: str, low: int, high: int) -> int:
    number = int(value)
    if not low <= number <= high:
        raise ValueError(f"context {key!r} must be between {low} and {high}, got {number}")
    return number


@dataclass(frozen=True)
class DeploymentConfig:
    server_name: str = "serverless-mcp-tasks"
    # Table and log groups: "retain" (default, data outlives the stack), "destroy" or "snapshot".
    removal_policy: str = "retain"
    # JWT authorizer: a given issuer and audience, or a Cognito user pool created for a quick start.
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    create_user_pool: bool = True
    # Optional Lambda Function URL with AWS_IAM auth, next to the HTTP API.
    function_url: bool = False
    # CORS is off unless origins are listed (browser clients only; MCP clients do not need it).
    cors_allow_origins: tuple[str, ...] = ()
    throttle_rate_limit: int = 50
    throttle_burst_limit: int = 100
    log_retention_days: int = 30
    api_memory_mb: int = 512
    worker_memory_mb: int = 1024
    worker_timeout_seconds: int = 300
    # How long a task stays retrievable (its ttlMs); the payload bucket keeps objects a day longer.
    task_ttl_hours: int = 24
    # Tool runs per execution before a new execution takes over (Step Functions' history limit).
    execution_round_limit: int = 1000
    alarm_email: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def removal(self) -> RemovalPolicy:
        return _REMOVAL_POLICIES[self.removal_policy]

    @classmethod
    def from_context(cls, scope: Construct) -> DeploymentConfig:
        def get(key: str) -> Any:
            return scope.node.try_get_context(key)

        removal = str(get("removalPolicy") or "retain").lower()
        if removal not in _REMOVAL_POLICIES:
            raise ValueError(f"context 'removalPolicy' must be one of {sorted(_REMOVAL_POLICIES)}, got {removal!r}")
        issuer = get("jwtIssuer") or None
        audience = tuple(_list(get("jwtAudience")))
        create_pool_raw = get("createUserPool")
        create_pool = issuer is None if create_pool_raw is None else _bool(create_pool_raw, "createUserPool")
        if issuer and create_pool:
            raise ValueError("set either 'jwtIssuer' (with 'jwtAudience') or 'createUserPool', not both")
        if issuer and not audience:
            raise ValueError("'jwtIssuer' needs 'jwtAudience' (the client ids or audiences the API accepts)")
        if not issuer and not create_pool:
            raise ValueError("the HTTP API needs a JWT issuer: set 'jwtIssuer' and 'jwtAudience', or 'createUserPool'")
        rate = _int(get("throttleRateLimit") or 50, "throttleRateLimit", 1, 10_000)
        burst = _int(get("throttleBurstLimit") or 100, "throttleBurstLimit", 1, 5_000)
        return cls(
            server_name=str(get("serverName") or cls.server_name),
            removal_policy=removal,
            jwt_issuer=str(issuer) if issuer else None,
            jwt_audience=audience,
            create_user_pool=create_pool,
            function_url=_bool(get("functionUrl") or False, "functionUrl"),
            cors_allow_origins=tuple(_list(get("corsAllowOrigins"))),
            throttle_rate_limit=rate,
            throttle_burst_limit=burst,
            log_retention_days=int(get("logRetentionDays") or 30),
            api_memory_mb=_int(get("apiMemoryMb") or 512, "apiMemoryMb", 128, 10_240),
            worker_memory_mb=_int(get("workerMemoryMb") or 1024, "workerMemoryMb", 128, 10_240),
            worker_timeout_seconds=_int(get("workerTimeoutSeconds") or 300, "workerTimeoutSeconds", 1, 900),
            task_ttl_hours=_int(get("taskTtlHours") or 24, "taskTtlHours", 1, 24 * 365),
            execution_round_limit=_int(get("executionRoundLimit") or 1000, "executionRoundLimit", 1, 1200),
            alarm_email=str(get("alarmEmail")) if get("alarmEmail") else None,
        )
