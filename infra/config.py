"""Deployment settings, read from CDK context (`cdk.json` or `cdk deploy -c key=value`).

Values given with `-c` arrive as strings, so every reader accepts a string form too.
"""

from __future__ import annotations

import difflib
import json
import re
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
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"context {key!r} must be a whole number between {low} and {high}, got {value!r}") from None
    if not low <= number <= high:
        raise ValueError(f"context {key!r} must be between {low} and {high}, got {number}")
    return number


def _optional_int(value: Any, key: str, low: int, high: int, default: int | None) -> int | None:
    """An integer, or None when the value is "none" (a missing key takes `default`)."""
    if value is None:
        return default
    if str(value).strip().lower() in ("none", "null", "off", ""):
        return None
    return _int(value, key, low, high)


# Lambda keeps at least this many concurrent executions unreserved in an account and region
# ("configuration-concurrency" in the Lambda developer guide).
UNRESERVED_CONCURRENCY_MINIMUM = 100
# A new account's default limit; a young account may have as few as 10 until it grows or asks.
DEFAULT_ACCOUNT_CONCURRENCY = 1000


@dataclass(frozen=True)
class ConcurrencyConfig:
    """Reserved concurrency per function (None: unreserved, it shares the account's pool).

    The worker's reservation caps the task runs at once, so a task burst cannot take the
    concurrency the API and the supervisor need; the supervisor's reservation keeps stream
    processing going under an API burst. A capped worker is throttled, and the workflow waits the
    throttle out (`ThrottleRetry`), so a burst delays tasks and fails none.
    """

    api: int | None = None
    worker: int | None = 50
    supervisor: int | None = 10
    bridge: int | None = None
    # The account's "Concurrent executions" quota in the deployment region, as Service Quotas shows it.
    account: int = DEFAULT_ACCOUNT_CONCURRENCY

    @property
    def reserved(self) -> int:
        return sum(value for value in (self.api, self.worker, self.supervisor, self.bridge) if value is not None)

    def check(self) -> None:
        left = self.account - self.reserved
        if self.reserved and left < UNRESERVED_CONCURRENCY_MINIMUM:
            raise ValueError(
                f"reserved concurrency {self.reserved} leaves {left} of the account's {self.account} "
                f"(lambdaAccountConcurrency) unreserved; Lambda keeps at least {UNRESERVED_CONCURRENCY_MINIMUM} "
                "unreserved, so the deploy would fail. Ask for a higher 'Concurrent executions' quota "
                "(Service Quotas, AWS Lambda) and set lambdaAccountConcurrency to it, or lower "
                'workerReservedConcurrency and supervisorReservedConcurrency ("none" reserves nothing: '
                "then a task burst can take the concurrency the API needs)"
            )


def _concurrency_from_context(get: Any) -> ConcurrencyConfig:
    defaults = ConcurrencyConfig()
    config = ConcurrencyConfig(
        api=_optional_int(get("apiReservedConcurrency"), "apiReservedConcurrency", 1, 10_000, defaults.api),
        worker=_optional_int(get("workerReservedConcurrency"), "workerReservedConcurrency", 1, 10_000, defaults.worker),
        supervisor=_optional_int(
            get("supervisorReservedConcurrency"), "supervisorReservedConcurrency", 1, 10_000, defaults.supervisor
        ),
        bridge=_optional_int(get("bridgeReservedConcurrency"), "bridgeReservedConcurrency", 1, 10_000, defaults.bridge),
        account=_int(
            get("lambdaAccountConcurrency") or DEFAULT_ACCOUNT_CONCURRENCY, "lambdaAccountConcurrency", 1, 1_000_000
        ),
    )
    config.check()
    return config


@dataclass(frozen=True)
class ThrottleRetry:
    """How the workflow waits out a throttled worker (Lambda.TooManyRequestsException): full-jitter
    exponential backoff, each wait a random time up to min(interval * 2^n, max delay), `attempts` times.
    Deployed: up to 2 s, 4 s, 8 s, ... 8.5 min, then 15 min each; at most about 3 h in all. The first
    waits are short because a worker slot may free in a second."""

    interval_seconds: int = 2
    max_delay_seconds: int = 900
    attempts: int = 20


def _throttle_retry_from_context(get: Any) -> ThrottleRetry:
    interval = _int(
        get("throttleRetryIntervalSeconds") or ThrottleRetry.interval_seconds, "throttleRetryIntervalSeconds", 1, 3_600
    )
    max_delay = _int(get("throttleRetryMaxDelaySeconds") or 900, "throttleRetryMaxDelaySeconds", 1, 86_400)
    if max_delay < interval:
        raise ValueError(
            f"context 'throttleRetryMaxDelaySeconds' ({max_delay}) must be at least "
            f"'throttleRetryIntervalSeconds' ({interval})"
        )
    attempts = _int(get("throttleRetryMaxAttempts") or 20, "throttleRetryMaxAttempts", 1, 100)
    return ThrottleRetry(interval, max_delay, attempts)


AUTH_MODES = ("cognito", "client-credentials", "issuer")


@dataclass(frozen=True)
class AuthConfig:
    """Who issues the access tokens the API function accepts (validated in the function, `tokens.py`).

    - "cognito": a Cognito user pool with managed login (authorization code + PKCE) and the OAuth
      bridge (`oauth_bridge`), so MCP clients discover, register and sign in; plus a machine client.
    - "client-credentials": the same pool with only the machine client (no user sign-in, no bridge).
    - "issuer": your own OpenID provider: its issuer URL, the audiences it puts in `aud` (default:
      the endpoint's canonical URI, what MCP clients ask for with `resource`) and the scopes required.
    """

    mode: str = "cognito"
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    jwt_scopes: tuple[str, ...] = ()
    jwt_jwks_url: str | None = None
    # The Cognito domain prefix (globally unique in a region); default "<stack name>-<account id>".
    cognito_domain_prefix: str | None = None
    # The bridge: registrations per source address per hour, registered clients at most, and the
    # days after which a client that never exchanged a code again is deleted.
    registrations_per_hour: int = 10
    # First uses of Client ID Metadata Documents served from one host, per hour.
    registrations_per_host_per_hour: int = 10
    max_registered_clients: int = 200
    unused_client_days: int = 30

    @property
    def uses_cognito(self) -> bool:
        return self.mode in ("cognito", "client-credentials")

    @property
    def bridge(self) -> bool:
        return self.mode == "cognito"


def _auth_from_context(get: Any) -> AuthConfig:
    if get("createUserPool") is not None:
        raise ValueError(
            "context 'createUserPool' was replaced by 'auth': auth=cognito (the default), auth=client-credentials, "
            "or auth=issuer with 'jwtIssuer'"
        )
    issuer = get("jwtIssuer") or None
    mode = str(get("auth") or ("issuer" if issuer else "cognito")).strip().lower()
    if mode not in AUTH_MODES:
        raise ValueError(f"context 'auth' must be one of {list(AUTH_MODES)}, got {mode!r}")
    if mode == "issuer" and not issuer:
        raise ValueError("auth=issuer needs 'jwtIssuer' (your OpenID provider's issuer URL)")
    if mode != "issuer" and issuer:
        raise ValueError(f"'jwtIssuer' is for auth=issuer; auth={mode} issues tokens from its own Cognito user pool")
    if issuer and not (str(issuer).startswith("https://") or _LOOPBACK_ISSUER.match(str(issuer))):
        # Plain http only for a provider on this machine (the local stack's development provider).
        raise ValueError(f"'jwtIssuer' must be an https URL, got {issuer!r}")
    prefix = get("cognitoDomainPrefix") or None
    if prefix is not None:
        check_domain_prefix(str(prefix))
    return AuthConfig(
        mode=mode,
        jwt_issuer=str(issuer) if issuer else None,
        jwt_audience=tuple(_list(get("jwtAudience"))),
        jwt_scopes=tuple(_list(get("jwtScopes"))),
        jwt_jwks_url=str(get("jwtJwksUrl")) if get("jwtJwksUrl") else None,
        cognito_domain_prefix=str(prefix) if prefix else None,
        registrations_per_hour=_int(get("registrationsPerHour") or 10, "registrationsPerHour", 1, 10_000),
        registrations_per_host_per_hour=_int(
            get("registrationsPerHostPerHour") or 10, "registrationsPerHostPerHour", 1, 10_000
        ),
        max_registered_clients=_int(get("maxRegisteredClients") or 200, "maxRegisteredClients", 1, 1_000),
        unused_client_days=_int(get("unusedClientDays") or 30, "unusedClientDays", 1, 3650),
    )


_DOMAIN_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
_LOOPBACK_ISSUER = re.compile(r"^http://(127\.0\.0\.1|localhost)(:\d+)?(/|$)")
_DOMAIN_PREFIX = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def check_domain_prefix(prefix: str) -> None:
    """Cognito's rules for a prefix domain: lower-case letters, digits and hyphens, no reserved words."""
    if not _DOMAIN_PREFIX.match(prefix) or any(word in prefix for word in ("aws", "amazon", "cognito")):
        raise ValueError(
            f"Cognito domain prefix {prefix!r} is not allowed: use 1-63 lower-case letters, digits and hyphens, "
            "without 'aws', 'amazon' or 'cognito' (set 'cognitoDomainPrefix')"
        )


# Context keys read outside DeploymentConfig.from_context (every key it reads is known by reading it).
OTHER_CONTEXT_KEYS = ("stackName", "nagAcknowledge", "createUserPool")
# Keys the CDK and its CLI keep in the context themselves, beside those with ':' or '@' in their names.
CDK_CONTEXT_KEYS = ("acknowledged-issue-numbers",)


def check_context_keys(context: Mapping[str, Any], known: set[str]) -> None:
    """A key the app does not read is a mistake (a misspelt one would be silently ignored): name it."""
    allowed = sorted(known | set(OTHER_CONTEXT_KEYS))
    for key in sorted(context):
        if key in allowed or key in CDK_CONTEXT_KEYS or ":" in key or key.startswith("@"):
            continue
        close = difflib.get_close_matches(key, allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown context key {key!r}{hint}: the keys are {', '.join(allowed)}")


@dataclass(frozen=True)
class DeploymentConfig:
    server_name: str = "serverless-mcp-tasks"
    # Table and log groups: "retain" (default, data outlives the stack), "destroy" or "snapshot".
    removal_policy: str = "retain"
    auth: AuthConfig = field(default_factory=AuthConfig)
    # The endpoint's canonical URI when it is served under a custom domain (default: the request's host).
    resource_url: str | None = None
    # A custom domain for the HTTP API, mapped at its root (no base path: clients look for the
    # /.well-known documents at the domain's root) with an ACM certificate of this region.
    custom_domain_name: str | None = None
    custom_domain_certificate_arn: str | None = None
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
    # None: as many as the workflow's worst case (every retry taken) fits in 25,000 events.
    execution_round_limit: int | None = None
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    throttle_retry: ThrottleRetry = field(default_factory=ThrottleRetry)
    # The sweeper (tasks left active by a lost status event or start): how long a task may go without
    # a write before its execution is looked at, how often the sweeper runs, and how many executions
    # one run asks Step Functions about. A lost event is repaired within lease + interval (+ the run).
    task_lease_seconds: int = 600
    sweep_interval_minutes: int = 5
    sweep_max_checks: int = 100
    alarm_email: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def removal(self) -> RemovalPolicy:
        return _REMOVAL_POLICIES[self.removal_policy]

    @classmethod
    def from_context(cls, scope: Construct) -> DeploymentConfig:
        read: set[str] = set()

        def get(key: str) -> Any:
            read.add(key)
            return scope.node.try_get_context(key)

        config = cls._read(get)
        check_context_keys(scope.node.get_all_context(), read)
        return config

    @classmethod
    def _read(cls, get: Any) -> DeploymentConfig:
        removal = str(get("removalPolicy") or "retain").lower()
        if removal not in _REMOVAL_POLICIES:
            raise ValueError(f"context 'removalPolicy' must be one of {sorted(_REMOVAL_POLICIES)}, got {removal!r}")
        resource_url = str(get("resourceUrl")) if get("resourceUrl") else None
        if resource_url is not None and (not resource_url.startswith("https://") or "#" in resource_url):
            raise ValueError(f"'resourceUrl' must be an https URL without a fragment, got {resource_url!r}")
        domain = str(get("customDomainName")).strip().lower() if get("customDomainName") else None
        certificate = str(get("customDomainCertificateArn")) if get("customDomainCertificateArn") else None
        if (domain is None) != (certificate is None):
            raise ValueError("'customDomainName' and 'customDomainCertificateArn' are set together")
        if domain is not None:
            if not _DOMAIN_NAME.match(domain):
                raise ValueError(f"'customDomainName' must be a host name such as mcp.example.com, got {domain!r}")
            if not str(certificate).startswith("arn:aws") or ":acm:" not in str(certificate):
                raise ValueError(f"'customDomainCertificateArn' must be an ACM certificate ARN, got {certificate!r}")
            resource_url = resource_url or f"https://{domain}/mcp"
        rate = _int(get("throttleRateLimit") or 50, "throttleRateLimit", 1, 10_000)
        burst = _int(get("throttleBurstLimit") or 100, "throttleBurstLimit", 1, 5_000)
        return cls(
            server_name=str(get("serverName") or cls.server_name),
            removal_policy=removal,
            auth=_auth_from_context(get),
            resource_url=resource_url,
            custom_domain_name=domain,
            custom_domain_certificate_arn=certificate,
            function_url=_bool(get("functionUrl") or False, "functionUrl"),
            cors_allow_origins=tuple(_list(get("corsAllowOrigins"))),
            throttle_rate_limit=rate,
            throttle_burst_limit=burst,
            log_retention_days=_int(get("logRetentionDays") or 30, "logRetentionDays", 1, 3653),
            api_memory_mb=_int(get("apiMemoryMb") or 512, "apiMemoryMb", 128, 10_240),
            worker_memory_mb=_int(get("workerMemoryMb") or 1024, "workerMemoryMb", 128, 10_240),
            worker_timeout_seconds=_int(get("workerTimeoutSeconds") or 300, "workerTimeoutSeconds", 1, 900),
            task_ttl_hours=_int(get("taskTtlHours") or 24, "taskTtlHours", 1, 24 * 365),
            execution_round_limit=_optional_int(get("executionRoundLimit"), "executionRoundLimit", 1, 1200, None),
            concurrency=_concurrency_from_context(get),
            throttle_retry=_throttle_retry_from_context(get),
            task_lease_seconds=_int(get("taskLeaseSeconds") or 600, "taskLeaseSeconds", 1, 86_400),
            sweep_interval_minutes=_int(get("sweepIntervalMinutes") or 5, "sweepIntervalMinutes", 1, 1440),
            sweep_max_checks=_int(get("sweepMaxChecks") or 100, "sweepMaxChecks", 1, 1000),
            alarm_email=str(get("alarmEmail")) if get("alarmEmail") else None,
        )
