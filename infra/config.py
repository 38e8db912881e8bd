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

from infra.naming import TEMPLATE_PROJECT_NAME, check_project_name

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
    # The OAuth bridge (auth=cognito) serves strangers before they sign in: its own reservation caps
    # it, so a flood of slow metadata fetches cannot take the concurrency the API needs.
    bridge: int | None = 20
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
                'workerReservedConcurrency, supervisorReservedConcurrency and bridgeReservedConcurrency ("none" '
                "reserves nothing: then a task burst or a flood of sign-ins can take the concurrency the API needs)"
            )


def _concurrency_from_context(get: Any, *, with_bridge: bool) -> ConcurrencyConfig:
    """The reservations; the bridge's only counts (and applies) where the stack has a bridge."""
    defaults = ConcurrencyConfig()
    bridge = _optional_int(get("bridgeReservedConcurrency"), "bridgeReservedConcurrency", 1, 10_000, defaults.bridge)
    config = ConcurrencyConfig(
        api=_optional_int(get("apiReservedConcurrency"), "apiReservedConcurrency", 1, 10_000, defaults.api),
        worker=_optional_int(get("workerReservedConcurrency"), "workerReservedConcurrency", 1, 10_000, defaults.worker),
        supervisor=_optional_int(
            get("supervisorReservedConcurrency"), "supervisorReservedConcurrency", 1, 10_000, defaults.supervisor
        ),
        bridge=bridge if with_bridge else None,
        account=_int(
            get("lambdaAccountConcurrency") or DEFAULT_ACCOUNT_CONCURRENCY, "lambdaAccountConcurrency", 1, 1_000_000
        ),
    )
    config.check()
    return config


@dataclass(frozen=True)
class RouteThrottle:
    """API Gateway's token bucket for one route key of the HTTP API stage: `rate` requests a second
    steady, `burst` at once. Each route key has a bucket of its own (API Gateway counts per route), so a
    flood of one route throttles that route only."""

    rate: int
    burst: int


def _route_throttle(get: Any, prefix: str, default: RouteThrottle) -> RouteThrottle:
    # The same bounds as the stage's own limits (throttleRateLimit, throttleBurstLimit).
    return RouteThrottle(
        rate=_int(get(f"{prefix}ThrottleRateLimit") or default.rate, f"{prefix}ThrottleRateLimit", 1, 10_000),
        burst=_int(get(f"{prefix}ThrottleBurstLimit") or default.burst, f"{prefix}ThrottleBurstLimit", 1, 5_000),
    )


def _sign_in_waf(get: Any) -> int | None:
    enabled = _bool(True if get("signInWaf") is None else get("signInWaf"), "signInWaf")
    # WAF's bounds for a rate-based rule's limit.
    limit = _int(get("signInWafRateLimit") or 300, "signInWafRateLimit", 10, 2_000_000_000)
    return limit if enabled else None


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
# cdk.json's `iamPrincipal` -> the API function's MCP_IAM_PRINCIPAL (mcp_runtime.lambda_http.iam_principal).
IAM_PRINCIPALS = {"session": "session", "accessKey": "access-key"}


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
    # The bridge: per source address (an IPv6 /64), a token bucket of `registration_burst`
    # registrations and metadata fetches refilled at `registrations_per_hour`; new clients one signed-in
    # person may approve per hour; the days after which a client that never exchanged a code again is deleted.
    registrations_per_hour: int = 10
    registration_burst: int = 30
    # New clients from Client ID Metadata Documents on one registrable domain (eTLD+1), per hour.
    registrations_per_host_per_hour: int = 10
    clients_per_person_per_hour: int = 10
    unused_client_days: int = 30
    # Who a Function URL (IAM, SigV4) caller is: "session", its user or role session ARN (kept across
    # credential refreshes), or "accessKey", that ARN plus the access key id of temporary credentials.
    iam_principal: str = "session"

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
    iam_principal = str(get("iamPrincipal") or "session").strip()
    if iam_principal not in IAM_PRINCIPALS:
        raise ValueError(f"context 'iamPrincipal' must be one of {list(IAM_PRINCIPALS)}, got {iam_principal!r}")
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
        registration_burst=_int(get("registrationBurst") or 30, "registrationBurst", 1, 10_000),
        registrations_per_host_per_hour=_int(
            get("registrationsPerHostPerHour") or 10, "registrationsPerHostPerHour", 1, 10_000
        ),
        clients_per_person_per_hour=_int(get("clientsPerPersonPerHour") or 10, "clientsPerPersonPerHour", 1, 10_000),
        unused_client_days=_int(get("unusedClientDays") or 30, "unusedClientDays", 1, 3650),
        iam_principal=iam_principal,
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


# ---- the tools' own configuration: environment, secrets, IAM statements, VPC ----------------------
# (docs/configuration.md, "Configure your tools"). Applied to the functions that run tools, the API
# and the worker, by `infra/capabilities/tool_access.py`.

# Lambda's rule for environment variable names.
_VARIABLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]+$")
# The template's own variables, and those Lambda reserves or boto3 reads (which would change the
# template's own AWS calls): a tool variable may not take any of them.
TEMPLATE_VARIABLE_PREFIXES = ("MCP_", "TASK_", "BRIDGE_", "POWERTOOLS_", "AWS_", "LAMBDA_")
TEMPLATE_VARIABLES = ("DEV_AUTH", "PYDANTIC_DISABLE_PLUGINS")
# Lambda's limit on a function's variables, names and values together (the template's own among them).
ENVIRONMENT_LIMIT_BYTES = 4096
# What `ctx.secret(name)` takes, and what Secrets Manager accepts as a secret's name or ARN.
_TOOL_SECRET_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SECRET_NAME = re.compile(r"^[A-Za-z0-9/_+=.@-]{1,512}$")
_SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$")
_STATEMENT_KEYS = ("Sid", "Effect", "Action", "Resource", "Condition", "reason")
_IAM_ACTION = re.compile(r"^(\*|[a-z0-9-]+:[A-Za-z0-9*?]+)$")
# cdk-nag needs a reason for a wildcard grant (AwsSolutions-IAM5); `acknowledge` wants this many characters.
REASON_MINIMUM = 40
_VPC_KEYS = ("subnetIds", "securityGroupIds", "vpcId", "routeTableIds", "createEndpoints")
_AWS_ID = {
    "subnetIds": re.compile(r"^subnet-[0-9a-f]{8,17}$"),
    "securityGroupIds": re.compile(r"^sg-[0-9a-f]{8,17}$"),
    "routeTableIds": re.compile(r"^rtb-[0-9a-f]{8,17}$"),
    "vpcId": re.compile(r"^vpc-[0-9a-f]{8,17}$"),
}


@dataclass(frozen=True)
class ToolPolicyStatement:
    """One IAM statement of `toolPolicyStatements` (IAM's JSON), and why its wildcards are needed."""

    statement: Mapping[str, Any]
    reason: str | None = None

    @property
    def wildcards(self) -> tuple[str, ...]:
        """cdk-nag's finding ids for an Allow's wildcards (`Action::s3:Get*`, `Resource::arn:...:b/*`)."""
        if self.statement.get("Effect") != "Allow":
            return ()
        found = [f"Action::{action}" for action in _strings(self.statement["Action"]) if "*" in action]
        found += [f"Resource::{resource}" for resource in _strings(self.statement["Resource"]) if "*" in resource]
        return tuple(found)


@dataclass(frozen=True)
class ToolVpc:
    """The subnets and security groups the tool-running functions are placed in (imported, never looked up),
    and whether the stack creates the VPC endpoints the template's own calls need."""

    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    vpc_id: str | None = None
    route_table_ids: tuple[str, ...] = ()
    create_endpoints: bool = True


@dataclass(frozen=True)
class ToolConfig:
    # Variables set on the functions that run tools.
    environment: Mapping[str, str] = field(default_factory=dict)
    # name (what `ctx.secret(name)` takes) -> the Secrets Manager secret's name or ARN.
    secrets: Mapping[str, str] = field(default_factory=dict)
    policy_statements: tuple[ToolPolicyStatement, ...] = ()
    vpc: ToolVpc | None = None


def _strings(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _json_context(value: Any, key: str, kind: type) -> Any:
    """A JSON value of `kind` (dict or list): as cdk.json holds it, or as text (`-c key='{...}'`)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"context {key!r} must be a JSON {_KIND_NAMES[kind]}, got {value!r}") from None
    if not isinstance(value, kind):
        raise ValueError(f"context {key!r} must be a JSON {_KIND_NAMES[kind]}, got {value!r}")
    return value


_KIND_NAMES: dict[type, str] = {dict: "object", list: "list"}


def check_tool_variable(name: str) -> None:
    """A name `toolEnvironment` may set: Lambda's rule, and none of the template's own."""
    if not isinstance(name, str) or not _VARIABLE_NAME.match(name):
        raise ValueError(
            f"context 'toolEnvironment': {name!r} is not a variable name Lambda accepts "
            "(a letter, then letters, digits or '_'; two characters at least)"
        )
    if name.startswith(TEMPLATE_VARIABLE_PREFIXES) or name in TEMPLATE_VARIABLES:
        raise ValueError(
            f"context 'toolEnvironment': {name!r} is one of the template's own variables: names starting "
            f"{', '.join(TEMPLATE_VARIABLE_PREFIXES)} and {', '.join(TEMPLATE_VARIABLES)} are the template's, "
            "Lambda's or boto3's; choose another name"
        )


def _tool_environment(value: Any) -> dict[str, str]:
    environment = _json_context(value, "toolEnvironment", dict) if value is not None else {}
    for name, setting in environment.items():
        check_tool_variable(name)
        if not isinstance(setting, str):
            raise ValueError(
                f"context 'toolEnvironment': the value of {name!r} must be a string, got {setting!r} "
                f"(quote it: {json.dumps(json.dumps(setting))})"
            )
    size = sum(len(name.encode()) + len(setting.encode()) for name, setting in environment.items())
    if size > ENVIRONMENT_LIMIT_BYTES:
        raise ValueError(
            f"context 'toolEnvironment' holds {size} bytes; Lambda allows {ENVIRONMENT_LIMIT_BYTES} for all of a "
            "function's variables, the template's own included: put large values in a secret (toolSecrets) or S3"
        )
    return dict(environment)


def _tool_secrets(value: Any) -> dict[str, str]:
    secrets = _json_context(value, "toolSecrets", dict) if value is not None else {}
    for name, secret in secrets.items():
        if not _TOOL_SECRET_NAME.match(name):
            raise ValueError(
                f"context 'toolSecrets': {name!r} is not a secret's name for tools "
                "(1-64 letters, digits, '_', '.' or '-': what ctx.secret takes)"
            )
        if not isinstance(secret, str) or not (_SECRET_ARN.match(secret) or _SECRET_NAME.match(secret)):
            raise ValueError(
                f"context 'toolSecrets': the secret of {name!r} must be a Secrets Manager secret's name "
                f"(letters, digits and /_+=.@-) or its ARN (arn:aws:secretsmanager:...:secret:...), got {secret!r}"
            )
    return dict(secrets)


def _tool_policy_statements(value: Any) -> tuple[ToolPolicyStatement, ...]:
    statements = _json_context(value, "toolPolicyStatements", list) if value is not None else []
    parsed = []
    for index, statement in enumerate(statements):
        where = f"context 'toolPolicyStatements'[{index}]"
        if not isinstance(statement, dict):
            raise ValueError(f"{where} must be an IAM statement (a JSON object), got {statement!r}")
        unknown = sorted(set(statement) - set(_STATEMENT_KEYS))
        if unknown:
            raise ValueError(f"{where} has {unknown}: a statement takes {', '.join(_STATEMENT_KEYS)}")
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise ValueError(f'{where}: \'Effect\' must be "Allow" or "Deny", got {statement.get("Effect")!r}')
        for key in ("Action", "Resource"):
            items = statement.get(key)
            if not items or not all(isinstance(item, str) and item for item in _strings(items)):
                raise ValueError(f"{where}: {key!r} must be a string or a non-empty list of strings, got {items!r}")
        bad = [action for action in _strings(statement["Action"]) if not _IAM_ACTION.match(action)]
        if bad:
            raise ValueError(f"{where}: {bad} are not IAM actions (service:Action, such as s3:GetObject)")
        if "Condition" in statement and not isinstance(statement["Condition"], dict):
            raise ValueError(f"{where}: 'Condition' must be a JSON object, got {statement['Condition']!r}")
        reason = statement.get("reason")
        if reason is not None and (not isinstance(reason, str) or len(reason.strip()) < REASON_MINIMUM):
            raise ValueError(f"{where}: 'reason' must say why in {REASON_MINIMUM} characters or more, got {reason!r}")
        parsed_statement = ToolPolicyStatement(
            {key: item for key, item in statement.items() if key != "reason"}, reason.strip() if reason else None
        )
        if parsed_statement.wildcards and reason is None:
            raise ValueError(
                f"{where} allows wildcards ({', '.join(w.split('::', 1)[1] for w in parsed_statement.wildcards)}), "
                'which cdk-nag (AwsSolutions-IAM5) refuses unless you say why: add "reason": "..." to the '
                "statement (it is not part of the policy), or name the actions and resources exactly"
            )
        parsed.append(parsed_statement)
    return tuple(parsed)


def _id_list(vpc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    items = vpc.get(key)
    if items is None:
        return ()
    if not isinstance(items, list) or not all(isinstance(item, str) and _AWS_ID[key].match(item) for item in items):
        example = _AWS_ID[key].pattern.split("-", 1)[0].lstrip("^")
        raise ValueError(
            f"context 'vpc': {key!r} must be a list of ids such as {example}-0123456789abcdef0, got {items!r}"
        )
    return tuple(items)


def _tool_vpc(value: Any) -> ToolVpc | None:
    if value is None:
        return None
    vpc = _json_context(value, "vpc", dict)
    unknown = sorted(set(vpc) - set(_VPC_KEYS))
    if unknown:
        raise ValueError(f"context 'vpc' has {unknown}: it takes {', '.join(_VPC_KEYS)}")
    subnets, groups = _id_list(vpc, "subnetIds"), _id_list(vpc, "securityGroupIds")
    if not subnets or not groups:
        raise ValueError("context 'vpc' needs 'subnetIds' and 'securityGroupIds' (at least one of each)")
    vpc_id = vpc.get("vpcId")
    if vpc_id is not None and not (isinstance(vpc_id, str) and _AWS_ID["vpcId"].match(vpc_id)):
        raise ValueError(f"context 'vpc': 'vpcId' must be an id such as vpc-0123456789abcdef0, got {vpc_id!r}")
    create = _bool(vpc.get("createEndpoints", True), "vpc.createEndpoints")
    routes = _id_list(vpc, "routeTableIds")
    if create and (vpc_id is None or not routes):
        raise ValueError(
            "context 'vpc': creating the endpoints (createEndpoints, true by default) needs 'vpcId' and "
            "'routeTableIds' (the route tables of the subnets, for the DynamoDB and S3 gateway endpoints); set "
            '"createEndpoints": false if the VPC has those endpoints already or its subnets route to a NAT gateway'
        )
    return ToolVpc(subnets, groups, vpc_id, routes, create)


def _tools_from_context(get: Any) -> ToolConfig:
    return ToolConfig(
        environment=_tool_environment(get("toolEnvironment")),
        secrets=_tool_secrets(get("toolSecrets")),
        policy_statements=_tool_policy_statements(get("toolPolicyStatements")),
        vpc=_tool_vpc(get("vpc")),
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


_SNS_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")


def _alarm_topic_arn(value: Any) -> str | None:
    if not value:
        return None
    arn = str(value).strip()
    if not _SNS_TOPIC_ARN.match(arn):
        raise ValueError(
            f"context 'alarmTopicArn' must be an SNS topic ARN such as arn:aws:sns:eu-west-1:111122223333:pager, "
            f"got {value!r}"
        )
    return arn


DEFAULT_ASSET_SIZE_LIMIT_MB = 50
# Lambda's limit for a function's code, unzipped (layers included): a ceiling above it could never deploy.
LAMBDA_UNZIPPED_LIMIT_MB = 250


def _asset_size_limit(value: Any) -> int:
    if value is None:
        return DEFAULT_ASSET_SIZE_LIMIT_MB
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(
            f"context 'assetSizeLimitMb' must be a whole number between 1 and {LAMBDA_UNZIPPED_LIMIT_MB}, got {value!r}"
        )
    return _int(value, "assetSizeLimitMb", 1, LAMBDA_UNZIPPED_LIMIT_MB)


@dataclass(frozen=True)
class DeploymentConfig:
    # The project's name (`projectName`, kebab case): the stack's (Pascal case), the server's and the metrics'.
    project_name: str = TEMPLATE_PROJECT_NAME
    server_name: str = TEMPLATE_PROJECT_NAME
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
    # The stage's default limits (every route without its own: the protected resource metadata, the
    # task callbacks), and the per-route limits of `/mcp` and of the sign-in routes (the bridge's).
    throttle_rate_limit: int = 50
    throttle_burst_limit: int = 100
    mcp_throttle: RouteThrottle = RouteThrottle(50, 100)
    sign_in_throttle: RouteThrottle = RouteThrottle(10, 20)
    # A per-source rate rule (AWS WAF) on the Cognito user pool: requests one address may send in five
    # minutes; None: no web ACL (`signInWaf` false). WAF cannot be put on an HTTP API (sign_in_firewall.py).
    sign_in_waf_rate_limit: int | None = 300
    log_retention_days: int = 30
    api_memory_mb: int = 512
    # The API function's timeout: at most 29 s, since the HTTP API's integration gives up at 30 s. A task
    # tool called by a client without tasks support runs inline and ends, with a tool error, before it.
    api_timeout_seconds: int = 29
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
    # How long the supervisor retries a throttled Step Functions call inside one invocation (its timeout is 60 s).
    supervisor_retry_seconds: int = 40
    alarm_email: str | None = None
    # An SNS topic the team already has (a pager's, a chat's): every alarm notifies it too.
    alarm_topic_arn: str | None = None
    # A sanity ceiling on the functions' asset, unzipped with its bytecode, checked at synth (`infra.bundling`).
    # Not a performance budget: that is the packaged asset's cold start (bench/coldstart.py).
    asset_size_limit_mb: int = DEFAULT_ASSET_SIZE_LIMIT_MB
    # What the tools are given: environment, secrets, IAM statements, VPC (`toolEnvironment`, ...).
    tools: ToolConfig = field(default_factory=ToolConfig)
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
        auth = _auth_from_context(get)
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
        project = check_project_name(str(get("projectName") or TEMPLATE_PROJECT_NAME))
        return cls(
            project_name=project,
            server_name=str(get("serverName") or project),
            removal_policy=removal,
            auth=auth,
            resource_url=resource_url,
            custom_domain_name=domain,
            custom_domain_certificate_arn=certificate,
            function_url=_bool(get("functionUrl") or False, "functionUrl"),
            cors_allow_origins=tuple(_list(get("corsAllowOrigins"))),
            throttle_rate_limit=rate,
            throttle_burst_limit=burst,
            mcp_throttle=_route_throttle(get, "mcp", cls.mcp_throttle),
            sign_in_throttle=_route_throttle(get, "signIn", cls.sign_in_throttle),
            sign_in_waf_rate_limit=_sign_in_waf(get),
            log_retention_days=_int(get("logRetentionDays") or 30, "logRetentionDays", 1, 3653),
            api_memory_mb=_int(get("apiMemoryMb") or 512, "apiMemoryMb", 128, 10_240),
            api_timeout_seconds=_int(get("apiTimeoutSeconds") or 29, "apiTimeoutSeconds", 3, 29),
            worker_memory_mb=_int(get("workerMemoryMb") or 1024, "workerMemoryMb", 128, 10_240),
            worker_timeout_seconds=_int(get("workerTimeoutSeconds") or 300, "workerTimeoutSeconds", 1, 900),
            task_ttl_hours=_int(get("taskTtlHours") or 24, "taskTtlHours", 1, 24 * 365),
            execution_round_limit=_optional_int(get("executionRoundLimit"), "executionRoundLimit", 1, 1200, None),
            concurrency=_concurrency_from_context(get, with_bridge=auth.bridge),
            throttle_retry=_throttle_retry_from_context(get),
            task_lease_seconds=_int(get("taskLeaseSeconds") or 600, "taskLeaseSeconds", 1, 86_400),
            sweep_interval_minutes=_int(get("sweepIntervalMinutes") or 5, "sweepIntervalMinutes", 1, 1440),
            sweep_max_checks=_int(get("sweepMaxChecks") or 100, "sweepMaxChecks", 1, 1000),
            supervisor_retry_seconds=_int(
                40 if get("supervisorRetrySeconds") is None else get("supervisorRetrySeconds"),
                "supervisorRetrySeconds",
                0,
                50,
            ),
            alarm_email=str(get("alarmEmail")) if get("alarmEmail") else None,
            alarm_topic_arn=_alarm_topic_arn(get("alarmTopicArn")),
            asset_size_limit_mb=_asset_size_limit(get("assetSizeLimitMb")),
            tools=_tools_from_context(get),
        )
