"""IAM for the embedded moto, as the deployed template declares it: each caller gets what its role allows.

moto 5.2.5 can check every request against IAM, but as shipped it evaluates against resource ``*``
for every service but SQS, IAM and STS (so statements naming a table or a state machine never
match), ignores conditions in identity policies (or denies on one that does not hold), checks
Lambda Invoke as ``lambda:Invoke`` against ``*``, signs Lambda's bodiless requests wrongly, has
the Step Functions interpreter call other services with the fake keys ``ak``/``sk``, and crashes
on ``sts:AssumeRole`` for a role only a service may assume. The patches of moto that fix those
points are in ``local_stack.moto_patches`` (group "iam"); this module is the enforcement layer they
ask: which resources and condition keys a request has, how conditions evaluate, which error to
answer, and the switches and helpers below.

Public API
----------
``install() -> None``
    Patch moto (idempotent, moto 5.2.5 only: ``local_stack.moto_patches`` fails loudly otherwise).
``enforce() -> None``, ``relax() -> None``, ``relaxed()`` (a context manager), ``enforcing() -> bool``
    Switch enforcement on or off for every later request to this process's moto, the way moto's
    own ``enable_iam_authentication`` does. Set the stack up relaxed, then enforce.
``authorize(access_key_id, action, resource, context=None) -> None``
    Raise ``AccessDenied`` (message ``User: <arn> is not authorized to perform: <action> on
    resource: <resource> because ...``) unless the policies of those credentials allow it; raise
    ``InvalidCredentials`` for keys moto never issued. For checks outside moto's request handling,
    such as the local stack's in-process Lambda invoke path (an Invoke request itself is already
    checked once this is installed). ``context`` supplies condition keys of the call.
``access_key_id_from_authorization(header) -> str | None``
    The access key id of a SigV4 ``Authorization`` header.
``create_admin_user(endpoint, user_name="local-admin", region="us-east-1") -> dict[str, str]``
    An IAM user with an inline ``Action: *`` policy (moto ships no managed policies); its keys as
    ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``.
``assume_role_credentials(endpoint, role_arn, session_name, region="us-east-1") -> dict[str, str]``
    Credentials of a role session, env-ready (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``), the way Lambda gives its function the role's session. Assumed with
    enforcement relaxed for that one call, since the caller is the Lambda service, not a user.

What ``install()`` patches
--------------------------
It applies ``local_stack.moto_patches``'s "iam" group (README.md there lists each patch) with this
module as the decider. Requests are checked by the patched ``IAMRequest``, which asks this module
(1) the resource(s) of the request: DynamoDB table and index ARNs (per item for batch and
transaction calls, with the per-item actions), Step Functions state machine, execution and
callback-token owner ARNs, Secrets Manager secret ARNs resolved through moto's backend, Lambda
function ARNs (with qualifier), EventBridge bus and rule ARNs, Cognito user pool ARNs, KMS key ARNs; moto's own
resources for S3, SQS, IAM and STS; ``*`` otherwise; (2) to evaluate conditions (see below) and
trust policies; (3) the answer in each service's own error shape (DynamoDB, Step Functions,
Secrets Manager, EventBridge: HTTP 400 ``AccessDeniedException``; Lambda: 403
``AccessDeniedException``; query services: 403 ``AccessDenied``). The interpreter calls Lambda,
DynamoDB and the rest with a session of the role in its ``StateCredentials``.

Conditions
----------
A statement whose condition does not hold does not apply (neither allows nor denies); an explicit
Deny wins; otherwise an Allow is needed. Operators: the ``String*`` family (``Like`` with ``*``
and ``?``), ``Arn*``, ``Bool``, ``Null``, each with ``ForAllValues:``/``ForAnyValue:`` and
``IfExists``. Keys: ``dynamodb:LeadingKeys`` (the partition key value(s) of GetItem, PutItem,
UpdateItem, DeleteItem, batch and transaction items, and Query on the table),
``aws:PrincipalArn``, ``aws:PrincipalAccount``, ``aws:RequestedRegion``, ``sts:ExternalId`` (trust
policies). Keys of other services are absent, as in AWS. A condition this module cannot evaluate
(another operator, another key of the called service or ``aws:``, a policy variable) fails
closed: an Allow with it does not apply, a Deny with it does.

Where this still differs from AWS
---------------------------------
``local_stack/IAM.md`` has the list with what to expect of each. In short: conditions
beyond the operators and keys above fail closed, and ``dynamodb:LeadingKeys`` is not read for
Scan or Query on an index; resource-based policies, SCPs, permission boundaries and session
policies are not evaluated, nor KMS key use, nor ``iam:PassRole``; a task token no execution
holds is not authorized at all (the backend answers ``InvalidToken``/``TaskTimedOut``); the trust
policies of the state machine's and the functions' roles are not checked; nothing calls CloudWatch
Logs or X-Ray locally, so those grants are never exercised; credentials never expire; services
other than those resolved above are checked against ``*``; the interpreter names a denied Lambda
call ``Lambda.AccessDeniedException`` where AWS says ``Lambda.AWSLambdaException``; ``relaxed()``
is process-wide.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Final
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.iam.access_control import (
    AssumedRoleAccessKey,
    CreateAccessKeyFailure,
    IAMUserAccessKey,
    PermissionResult,
    create_access_key,
)
from moto.iam.exceptions import IAMException
from moto.iam.models import get_account_id_from
from moto.sts.models import sts_backends
from werkzeug.exceptions import HTTPException

from local_stack import moto_patches
from local_stack.clients import aws_client
from local_stack.moto_patches import MOTO_VERSION, STATE_MACHINE_SESSION_NAME, Policy, PolicyStatement, RequestFacts

__all__ = [
    "LEADING_KEYS",
    "MOTO_VERSION",
    "STATE_MACHINE_SESSION_NAME",
    "AccessDenied",
    "AuthorizationError",
    "InvalidCredentials",
    "access_key_id_from_authorization",
    "assume_role_credentials",
    "authorize",
    "create_admin_user",
    "enforce",
    "enforcing",
    "install",
    "relax",
    "relaxed",
]

LEADING_KEYS: Final = "dynamodb:LeadingKeys"
DEFAULT_REGION: Final = "us-east-1"
ADMIN_POLICY: Final[dict[str, Any]] = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}


# --------------------------------------------------------------------------------------------- errors

# JSON-protocol services: (status for a caller's mistake, Content-Type). Others answer in XML, 403.
_JSON_PROTOCOL: Final[dict[str, tuple[int, str]]] = {
    "dynamodb": (400, "application/x-amz-json-1.0"),
    "states": (400, "application/x-amz-json-1.0"),
    "secretsmanager": (400, "application/x-amz-json-1.1"),
    "events": (400, "application/x-amz-json-1.1"),
    "logs": (400, "application/x-amz-json-1.1"),
    "lambda": (403, "application/json"),
}


class AuthorizationError(HTTPException):
    """A refusal in the called service's own error shape; moto's response code sends it as it is."""

    json_code: ClassVar[str] = ""
    query_code: ClassVar[str] = ""

    def __init__(self, service: str, message: str) -> None:
        shape = _JSON_PROTOCOL.get(service)
        if shape is None:
            status, self.content_type, self.error_code = 403, "text/xml", self.query_code
            body = (
                f"<ErrorResponse><Error><Type>Sender</Type><Code>{self.error_code}</Code>"
                f"<Message>{escape(message)}</Message></Error><RequestId>local</RequestId></ErrorResponse>"
            )
        else:
            (status, self.content_type), self.error_code = shape, self.json_code
            body = json.dumps({"__type": self.error_code, "message": message})
        super().__init__(description=body)
        self.code = status
        self.service = service
        self.message = message

    def get_headers(self, environ: Any = None, scope: Any = None) -> list[tuple[str, str]]:
        return [("Content-Type", self.content_type), ("x-amzn-ErrorType", self.error_code)]

    def __str__(self) -> str:
        return f"{self.error_code}: {self.message}"


class AccessDenied(AuthorizationError):
    """The caller's policies do not allow the action on the resource (or a statement denies it)."""

    json_code = "AccessDeniedException"
    query_code = "AccessDenied"

    def __init__(self, principal_arn: str, action: str, resource: str, *, explicit: bool = False) -> None:
        reason = (
            "with an explicit deny in an identity-based policy"
            if explicit
            else f"because no identity-based policy allows the {action} action"
        )
        super().__init__(
            action.split(":", 1)[0],
            f"User: {principal_arn} is not authorized to perform: {action} on resource: {resource} {reason}",
        )
        self.principal_arn = principal_arn
        self.action = action
        self.resource = resource
        self.explicit = explicit


class InvalidCredentials(AuthorizationError):
    """moto never issued these keys (or the session token does not belong to them)."""

    json_code = "UnrecognizedClientException"
    query_code = "InvalidClientTokenId"

    def __init__(self, service: str) -> None:
        super().__init__(service, "The security token included in the request is invalid.")


class _SignatureMismatch(AuthorizationError):
    json_code = "InvalidSignatureException"
    query_code = "SignatureDoesNotMatch"

    def __init__(self, service: str) -> None:
        super().__init__(
            service,
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.",
        )


# ------------------------------------------------------------------------------------------ matching


@lru_cache(maxsize=1024)
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    # IAM wildcards: * is any run, ? one character; everything else is literal (moto's own matcher
    # reads the pattern as a regex, so "." matches anything and "?" breaks it).
    regex = "".join(".*" if char == "*" else "." if char == "?" else re.escape(char) for char in glob)
    return re.compile(regex, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _like(glob: str, value: str, ignore_case: bool = False) -> bool:
    return _pattern(glob, ignore_case).fullmatch(value) is not None


def _equals(expected: str, actual: str) -> bool:
    return expected == actual


def _equals_ignore_case(expected: str, actual: str) -> bool:
    return expected.casefold() == actual.casefold()


def _bool_equals(expected: str, actual: str) -> bool:
    return expected.lower() == actual.lower()


# Operator -> (match of one policy value against one request value, negated?)
_OPERATORS: Final[dict[str, tuple[Callable[[str, str], bool], bool]]] = {
    "StringEquals": (_equals, False),
    "StringNotEquals": (_equals, True),
    "StringEqualsIgnoreCase": (_equals_ignore_case, False),
    "StringNotEqualsIgnoreCase": (_equals_ignore_case, True),
    "StringLike": (_like, False),
    "StringNotLike": (_like, True),
    "ArnEquals": (_like, False),
    "ArnLike": (_like, False),
    "ArnNotEquals": (_like, True),
    "ArnNotLike": (_like, True),
    "Bool": (_bool_equals, False),
}


class _Context:
    """The condition keys of one request: present ones, known-absent ones, and unknown ones."""

    def __init__(self, action: str, values: Mapping[str, Sequence[str]], modelled: Iterable[str] = ()) -> None:
        self._service = action.split(":", 1)[0].lower()
        self._values = {key.lower(): [str(value) for value in found] for key, found in values.items()}
        self._modelled = {key.lower() for key in modelled} | set(self._values)

    def lookup(self, key: str) -> list[str] | None:
        """The key's values ([] when the request has none), or None when they cannot be known here."""
        name = key.lower()
        if name in self._modelled:
            return self._values.get(name, [])
        if name.split(":", 1)[0] not in ("aws", self._service):
            return []  # another service's key is never in this request's context
        return None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _operator_holds(operator: str, key: str, expected: Any, context: _Context) -> bool | None:
    """One operator on one key; None when it cannot be evaluated here."""
    qualifier, _, name = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        return None
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    wanted = [_text(value) for value in (expected if isinstance(expected, list) else [expected])]
    if any("${" in value for value in wanted):
        return None  # policy variables are not substituted
    actual = context.lookup(key)
    if actual is None:
        return None
    if name == "Null":
        return None if qualifier or if_exists else any((not actual) == (value.lower() == "true") for value in wanted)
    if name not in _OPERATORS:
        return None
    match, negated = _OPERATORS[name]
    if not actual:
        if qualifier == "ForAllValues":
            return True  # true of every value of an empty set
        if qualifier == "ForAnyValue":
            return False
        return if_exists or negated  # a missing key matches nothing: only a negated operator holds

    def value_holds(value: str) -> bool:
        return any(match(policy_value, value) for policy_value in wanted) != negated

    if qualifier == "ForAllValues" or (not qualifier and negated):
        return all(value_holds(value) for value in actual)
    return any(value_holds(value) for value in actual)


def _condition_holds(block: Any, context: _Context) -> bool | None:
    """All operators and keys of a Condition block (AND); False wins over unknown."""
    if not isinstance(block, Mapping):
        return None
    verdict: bool | None = True
    for operator, entries in block.items():
        if not isinstance(entries, Mapping):
            return None
        for key, expected in entries.items():
            outcome = _operator_holds(str(operator), str(key), expected, context)
            if outcome is False:
                return False
            if outcome is None:
                verdict = None
    return verdict


def _principal_matches(statement: Mapping[str, Any], principal_arn: str) -> bool:
    """Trust-policy principal match. moto crashes on a Principal without "AWS" (a service principal)
    and denies outright on a mismatch, which would also block another statement naming the caller."""
    if "NotPrincipal" in statement:
        return False  # not supported: the statement does not apply
    expected = statement.get("Principal")
    if expected is None or expected == "*":
        return True
    aws = expected.get("AWS") if isinstance(expected, Mapping) else None
    if aws is None:
        return False  # only service or federated principals: never an IAM caller
    parts = principal_arn.split(":")
    partition, account = parts[1], parts[4]
    names = {principal_arn, account, f"arn:{partition}:iam::{account}:root"}
    session = re.fullmatch(r"arn:[^:]+:sts::\d+:assumed-role/([^/]+)/.+", principal_arn)
    if session:
        names.add(f"arn:{partition}:iam::{account}:role/{session.group(1)}")
    candidates = [aws] if isinstance(aws, str) else list(aws)
    return any(candidate == "*" or candidate in names for candidate in candidates)


def _matches_any(patterns: Any, value: str, ignore_case: bool) -> bool:
    candidates = [patterns] if isinstance(patterns, str) else list(patterns)
    return any(_like(str(pattern), value, ignore_case) for pattern in candidates)


def _statement_applies(raw: Mapping[str, Any], context: _Context, resource: str, principal: str | None) -> bool:
    """Whether a statement applies to the request at all (NotResource, Principal, Condition)."""
    if "NotResource" in raw and _matches_any(raw["NotResource"], resource, False):
        return False
    if principal is not None and not _principal_matches(raw, principal):
        return False
    if "Condition" not in raw:
        return True
    holds = _condition_holds(raw["Condition"], context)
    # moto answers DENIED for a failed condition, so a conditioned Allow would deny the whole
    # request: a statement whose condition does not hold simply does not apply. One that cannot
    # be evaluated here fails closed: an Allow does not apply, a Deny does.
    return raw.get("Effect") == "Deny" if holds is None else holds


def _policy(document: Any, context: _Context) -> Policy:
    """moto's evaluator (adapted in `local_stack.moto_patches`) with this module's statement rules."""

    def applies(raw: Mapping[str, Any], resource: str, principal: str | None) -> bool:
        return _statement_applies(raw, context, resource, principal)

    return Policy(document, lambda raw: PolicyStatement(raw, applies, _matches_any))


# ------------------------------------------------------------------------------------------ requests


@dataclass(frozen=True, slots=True)
class _Check:
    """One (action, resource) the request needs, with the condition keys it carries."""

    action: str
    resource: str
    context: Mapping[str, Sequence[str]] = field(default_factory=dict)
    modelled: frozenset[str] = frozenset()


_Request = RequestFacts


# DynamoDB ---------------------------------------------------------------------------------------

_ITEM_KEY_FIELD: Final = {"GetItem": "Key", "DeleteItem": "Key", "UpdateItem": "Key", "PutItem": "Item"}
_TRANSACT_ACTIONS: Final = {
    "Put": ("PutItem", "Item"),
    "Update": ("UpdateItem", "Key"),
    "Delete": ("DeleteItem", "Key"),
    "ConditionCheck": ("ConditionCheckItem", "Key"),
    "Get": ("GetItem", "Key"),
}


def _table_arn(request: _Request, table: str, index: str | None = None) -> str:
    arn = table if table.startswith("arn:") else request.arn("dynamodb", f"table/{table}")
    return f"{arn}/index/{index}" if index else arn


def _partition_key(request: _Request, table: str) -> str | None:
    from moto.dynamodb.exceptions import ResourceNotFoundException
    from moto.dynamodb.models import dynamodb_backends

    try:
        return dynamodb_backends[request.account][request.region].get_table(table).hash_key_attr or None
    except ResourceNotFoundException:
        return None


def _attribute_text(value: Any) -> str | None:
    """The string form of a typed attribute value ({"S": "x"} -> "x", {"N": "1"} -> "1")."""
    if isinstance(value, Mapping) and len(value) == 1:
        (inner,) = value.values()
        if isinstance(inner, str | int | float):
            return str(inner)
    return None


def _query_partition_value(body: Mapping[str, Any], partition_key: str) -> Any:
    """The typed value a Query's key condition binds the partition key to, if it can be read."""
    legacy = (body.get("KeyConditions") or {}).get(partition_key)
    if isinstance(legacy, Mapping) and legacy.get("ComparisonOperator") == "EQ":
        values = legacy.get("AttributeValueList") or []
        return values[0] if values else None
    expression = body.get("KeyConditionExpression")
    if not isinstance(expression, str):
        return None
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    for left, right in re.findall(r"([#:]?[\w.-]+)\s*=\s*([#:]?[\w.-]+)", expression):
        for name, placeholder in ((left, right), (right, left)):
            if names.get(name, name) == partition_key and placeholder in values:
                return values[placeholder]
    return None


def _table_check(
    request: _Request, action: str, table: str, items: Sequence[Any], *, query: Mapping[str, Any] | None = None
) -> _Check:
    """A check on a table carrying dynamodb:LeadingKeys (from the items, or from the body of a
    Query), or without the key (unknown) if it cannot be read."""
    resource = _table_arn(request, table)
    partition_key = _partition_key(request, table)
    if partition_key is None:
        return _Check(action, resource)
    typed = (
        [_query_partition_value(query, partition_key)]
        if query is not None
        else [item.get(partition_key) if isinstance(item, Mapping) else None for item in items]
    )
    texts = [_attribute_text(value) for value in typed]
    if not texts or any(text is None for text in texts):
        return _Check(action, resource)
    leading = sorted({text for text in texts if text is not None})
    return _Check(action, resource, {LEADING_KEYS: leading}, frozenset({LEADING_KEYS}))


def _dynamodb_checks(request: _Request) -> list[_Check] | None:
    body = request.json()
    operation = request.operation
    if operation in ("BatchGetItem", "BatchWriteItem"):
        checks = []
        for table, spec in (body.get("RequestItems") or {}).items():
            if operation == "BatchGetItem":
                items = list((spec or {}).get("Keys") or [])
            else:
                items = [
                    (entry.get("PutRequest") or {}).get("Item") or (entry.get("DeleteRequest") or {}).get("Key")
                    for entry in spec or []
                ]
            checks.append(_table_check(request, request.action, str(table), items))
        return checks
    if operation in ("TransactWriteItems", "TransactGetItems"):
        checks = []
        for entry in body.get("TransactItems") or []:
            for kind, spec in entry.items():
                if kind in _TRANSACT_ACTIONS and isinstance(spec, Mapping):
                    action, key_field = _TRANSACT_ACTIONS[kind]
                    table = str(spec.get("TableName", ""))
                    checks.append(_table_check(request, f"dynamodb:{action}", table, [spec.get(key_field)]))
        return checks
    if operation == "ListStreams":
        return [_Check(request.action, "*")]  # no resource-level permission
    stream = body.get("StreamArn")
    if isinstance(stream, str) and stream:
        return [_Check(request.action, stream)]
    iterator = body.get("ShardIterator")
    if isinstance(iterator, str) and "|" in iterator:  # moto's iterators begin with the stream's ARN
        return [_Check(request.action, iterator.split("|", 1)[0])]
    table = body.get("TableName")
    if not isinstance(table, str) or not table:
        arn = body.get("ResourceArn")
        return [_Check(request.action, arn)] if isinstance(arn, str) and arn else None
    index = body.get("IndexName") if operation in ("Query", "Scan") else None
    if operation in _ITEM_KEY_FIELD:
        return [_table_check(request, request.action, table, [body.get(_ITEM_KEY_FIELD[operation])])]
    if operation == "Query" and not index:
        return [_table_check(request, request.action, table, [], query=body)]
    # Scan, Query on an index, table operations: dynamodb:LeadingKeys is not modelled (unknown).
    return [_Check(request.action, _table_arn(request, table, index if isinstance(index, str) else None))]


# Step Functions -----------------------------------------------------------------------------------

_TOKEN_OPERATIONS: Final = frozenset({"SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"})
_STATES_ARN_FIELDS: Final = (
    "stateMachineArn",
    "executionArn",
    "stateMachineAliasArn",
    "stateMachineVersionArn",
    "mapRunArn",
    "activityArn",
    "resourceArn",
)


def _state_machine_holding(request: _Request, token: str) -> str | None:
    """The ARN of the state machine whose execution holds this task token, if any does."""
    from moto.core.config import default_user_config

    if not token or not default_user_config.get("stepfunctions", {}).get("execute_state_machine", False):
        return None
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    for execution in list(stepfunctions_parser_backends[request.account][request.region]._get_executions()):
        worker = getattr(execution, "exec_worker", None)
        if worker is not None and worker.env.callback_pool_manager.get(token) is not None:
            return str(execution.state_machine_arn)
    return None


def _states_checks(request: _Request) -> list[_Check] | None:
    body = request.json()
    if request.operation in _TOKEN_OPERATIONS:
        # IAM evaluates these against the state machine that issued the token. When no execution
        # holds it (unknown, finished, timed out) there is nothing to authorize against: the call
        # goes through and the backend answers InvalidToken or TaskTimedOut.
        owner = _state_machine_holding(request, str(body.get("taskToken") or ""))
        return [] if owner is None else [_Check(request.action, owner)]
    for name in _STATES_ARN_FIELDS:
        value = body.get(name)
        if isinstance(value, str) and value:
            return [_Check(request.action, value)]
    if request.operation == "CreateStateMachine" and isinstance(body.get("name"), str):
        return [_Check(request.action, request.arn("states", f"stateMachine:{body['name']}"))]
    return None


# Secrets Manager ----------------------------------------------------------------------------------


def _secret_arn(request: _Request, secret_id: str) -> str:
    from moto.secretsmanager.models import secretsmanager_backends

    secret = secretsmanager_backends[request.account][request.region].secrets.get(secret_id)
    if secret is not None:
        return str(secret.arn)
    return secret_id if secret_id.startswith("arn:") else request.arn("secretsmanager", f"secret:{secret_id}")


def _secretsmanager_checks(request: _Request) -> list[_Check] | None:
    body = request.json()
    if request.operation == "CreateSecret" and isinstance(body.get("Name"), str):
        return [_Check(request.action, _secret_arn(request, body["Name"]))]
    ids = [body["SecretId"]] if isinstance(body.get("SecretId"), str) else list(body.get("SecretIdList") or [])
    return [_Check(request.action, _secret_arn(request, str(secret_id))) for secret_id in ids] or None


# EventBridge --------------------------------------------------------------------------------------

_RULE_FIELD: Final = {
    "PutRule": "Name",
    "DeleteRule": "Name",
    "DescribeRule": "Name",
    "EnableRule": "Name",
    "DisableRule": "Name",
    "PutTargets": "Rule",
    "RemoveTargets": "Rule",
    "ListTargetsByRule": "Rule",
}


def _bus_arn(request: _Request, bus: str) -> str:
    return bus if bus.startswith("arn:") else request.arn("events", f"event-bus/{bus}")


def _events_checks(request: _Request) -> list[_Check] | None:
    body = request.json()
    operation = request.operation
    if operation == "PutEvents":
        buses = {str(entry.get("EventBusName") or "default") for entry in body.get("Entries") or []}
        return [_Check(request.action, _bus_arn(request, bus)) for bus in sorted(buses)] or None
    if operation in ("CreateEventBus", "DescribeEventBus", "DeleteEventBus"):
        return [_Check(request.action, _bus_arn(request, str(body.get("Name") or "default")))]
    rule = body.get(_RULE_FIELD.get(operation, ""))
    if not isinstance(rule, str) or not rule:
        return None
    bus = str(body.get("EventBusName") or "default").rsplit("/", 1)[-1]
    return [_Check(request.action, request.arn("events", f"rule/{rule}" if bus == "default" else f"rule/{bus}/{rule}"))]


# Lambda -------------------------------------------------------------------------------------------


def _function_arn(request: _Request, name: str, qualifier: str | None) -> str:
    if name.startswith("arn:"):
        arn = name
    elif re.fullmatch(r"\d{12}:function:.+", name):
        arn = f"arn:{request.partition}:lambda:{request.region}:{name}"
    else:
        arn = request.arn("lambda", f"function:{name}")
    return f"{arn}:{qualifier}" if qualifier and arn.count(":") == 6 else arn


def _lambda_checks(request: _Request) -> list[_Check] | None:
    url = urlsplit(request.path)
    segments = [unquote(segment) for segment in url.path.split("/") if segment]
    qualifiers = parse_qs(url.query).get("Qualifier")
    qualifier = qualifiers[0] if qualifiers else None
    if len(segments) >= 3 and segments[1] == "functions":
        return [_Check(request.action, _function_arn(request, segments[2], qualifier))]
    if len(segments) >= 3 and segments[1] == "tags":
        return [_Check(request.action, segments[2])]
    name = request.json().get("FunctionName")
    if request.operation == "CreateFunction" and isinstance(name, str):
        return [_Check(request.action, _function_arn(request, name, None))]
    return None


# Cognito user pools ------------------------------------------------------------------------------


def _cognito_checks(request: _Request) -> list[_Check] | None:
    """User pool operations are authorized against the pool's ARN (`userpool/<id>`)."""
    pool = request.json().get("UserPoolId")
    if not isinstance(pool, str) or not pool:
        return None
    return [_Check(request.action, request.arn("cognito-idp", f"userpool/{pool}"))]


# KMS keys ----------------------------------------------------------------------------------------


def _kms_checks(request: _Request) -> list[_Check] | None:
    """Key operations are authorized against the key's ARN (a bare key id or a key ARN; aliases as `*`)."""
    key = request.json().get("KeyId")
    if not isinstance(key, str) or not key or key.startswith("alias/"):
        return None
    return [_Check(request.action, key if key.startswith("arn:") else request.arn("kms", f"key/{key}"))]


_RESOLVERS: Final[dict[str, Callable[[_Request], list[_Check] | None]]] = {
    "kms": _kms_checks,
    "cognito-idp": _cognito_checks,
    "dynamodb": _dynamodb_checks,
    "states": _states_checks,
    "secretsmanager": _secretsmanager_checks,
    "events": _events_checks,
    "lambda": _lambda_checks,
}


def _checks(request: _Request, moto_resource: str) -> list[_Check]:
    resolver = _RESOLVERS.get(request.service)
    checks = resolver(request) if resolver is not None else None
    return [_Check(request.action, moto_resource)] if checks is None else checks


# ---------------------------------------------------------------------------------------- evaluation

_AccessKey = IAMUserAccessKey | AssumedRoleAccessKey


def _principal_keys(principal_arn: str, region: str) -> dict[str, list[str]]:
    parts = principal_arn.split(":")
    partition, account = parts[1], parts[4]
    session = re.fullmatch(r"arn:[^:]+:sts::\d+:assumed-role/([^/]+)/.+", principal_arn)
    arn = f"arn:{partition}:iam::{account}:role/{session.group(1)}" if session else principal_arn
    keys = {"aws:PrincipalArn": [arn], "aws:PrincipalAccount": [account]}
    if region:
        keys["aws:RequestedRegion"] = [region]
    return keys


def _verdict(access_key: _AccessKey, check: _Check, region: str) -> PermissionResult:
    values: dict[str, Sequence[str]] = {**_principal_keys(access_key.arn, region), **check.context}
    context = _Context(check.action, values, check.modelled)
    try:
        policies: Sequence[Any] = access_key.collect_policies()
    except IAMException:  # the user or role is gone: no policies, nothing allowed
        policies = []
    permitted = False
    for policy in policies:
        result = _policy(policy, context).is_action_permitted(check.action, check.resource)
        if result == PermissionResult.DENIED:
            return result
        permitted = permitted or result == PermissionResult.PERMITTED
    return PermissionResult.PERMITTED if permitted else PermissionResult.NEUTRAL


def _first_refusal(access_key: _AccessKey, checks: Iterable[_Check], region: str) -> AccessDenied | None:
    for check in checks:
        verdict = _verdict(access_key, check, region)
        if verdict != PermissionResult.PERMITTED:
            explicit = verdict == PermissionResult.DENIED
            return AccessDenied(access_key.arn, check.action, check.resource, explicit=explicit)
    return None


class _Decisions:
    """What `local_stack.moto_patches`'s request check asks this module (its `Enforcement`)."""

    def refusal(self, access_key: _AccessKey, request: RequestFacts, moto_resource: str) -> Exception | None:
        return _first_refusal(access_key, _checks(request, moto_resource), request.region)

    def trust_refusal(
        self, access_key: _AccessKey, role: Any, action: str, external_id: str | None, region: str, role_arn: str
    ) -> Exception | None:
        values: dict[str, Sequence[str]] = dict(_principal_keys(access_key.arn, region))
        if external_id:
            values["sts:ExternalId"] = [external_id]
        trust = _policy(role.assume_role_policy_document, _Context(action, values, {"sts:ExternalId"}))
        if trust.is_action_permitted(action, role_arn, access_key.arn) == PermissionResult.PERMITTED:
            return None
        return AccessDenied(access_key.arn, action, role_arn)

    def s3_permitted(self, access_key: _AccessKey, action: str, resource: str, region: str) -> bool:
        return _first_refusal(access_key, [_Check(action, resource)], region) is None

    def credentials_error(self, service: str, signature: bool) -> Exception | None:
        if service not in _JSON_PROTOCOL:
            return None
        return _SignatureMismatch(service) if signature else InvalidCredentials(service)


# ------------------------------------------------------------------------------------------- install


def install() -> None:
    """Patch moto for this process (`local_stack.moto_patches`, group "iam"; later calls do nothing)."""
    moto_patches.use_enforcement(_Decisions())
    moto_patches.apply("iam")


# ------------------------------------------------------------------------------------------- switches

_switch_lock = threading.RLock()


def enforce() -> None:
    """Check every later request to this process's moto against IAM (installs the patches first)."""
    install()
    with _switch_lock:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
        ActionAuthenticatorMixin.request_count = 0


def relax() -> None:
    """Let every later request through unchecked (moto's default)."""
    with _switch_lock:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
        ActionAuthenticatorMixin.request_count = 0


def enforcing() -> bool:
    return ActionAuthenticatorMixin.request_count >= settings.INITIAL_NO_AUTH_ACTION_COUNT


@contextmanager
def relaxed() -> Iterator[None]:
    """Enforcement off inside the block, then back as it was. The switch is process-wide: requests
    from other threads in the meantime are not checked either, so use it for setup."""
    with _switch_lock:
        saved = settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count
        relax()
        try:
            yield
        finally:
            settings.INITIAL_NO_AUTH_ACTION_COUNT, ActionAuthenticatorMixin.request_count = saved


# -------------------------------------------------------------------------------------------- helpers

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/")


def access_key_id_from_authorization(header: str | None) -> str | None:
    """The access key id of a SigV4 Authorization header (``AWS4-HMAC-SHA256 Credential=AKID/...``)."""
    match = _CREDENTIAL.search(header or "")
    return match.group(1) if match else None


def _access_key(access_key_id: str, partition: str, service: str) -> _AccessKey:
    account = get_account_id_from(access_key_id)
    session = sts_backends[account][partition].get_assumed_role_from_access_key(access_key_id)
    headers = {"X-Amz-Security-Token": session.session_token} if session is not None else {}
    try:
        return create_access_key(account, partition, access_key_id, headers)
    except CreateAccessKeyFailure:
        raise InvalidCredentials(service) from None


def authorize(
    access_key_id: str, action: str, resource: str, context: Mapping[str, Sequence[str]] | None = None
) -> None:
    """Raise AccessDenied unless the policies of these credentials allow ``action`` on ``resource``.

    ``context`` holds condition keys of the call (for example ``{LEADING_KEYS: ["handle#1"]}``);
    the principal keys are added. Unknown keys raise InvalidCredentials.
    """
    parts = resource.split(":")
    arn = resource.startswith("arn:") and len(parts) > 4
    partition, region = (parts[1], parts[3]) if arn else ("aws", "")
    key = _access_key(access_key_id, partition, action.split(":", 1)[0])
    supplied = dict(context or {})
    refusal = _first_refusal(key, [_Check(action, resource, supplied, frozenset(supplied))], region)
    if refusal is not None:
        raise refusal


def _setup_client(service: str, endpoint: str, region: str) -> Any:
    return aws_client(
        service,
        endpoint=endpoint,
        region=region,
        credentials={"AWS_ACCESS_KEY_ID": "local-setup", "AWS_SECRET_ACCESS_KEY": "local-setup"},
    )


def create_admin_user(endpoint: str, user_name: str = "local-admin", region: str = DEFAULT_REGION) -> dict[str, str]:
    """An IAM user allowed everything (inline ``Action: *``: moto has no AdministratorAccess) and new keys of it."""
    with relaxed():
        iam = _setup_client("iam", endpoint, region)
        with suppress(iam.exceptions.EntityAlreadyExistsException):
            iam.create_user(UserName=user_name)
        iam.put_user_policy(UserName=user_name, PolicyName="local-admin", PolicyDocument=json.dumps(ADMIN_POLICY))
        key = iam.create_access_key(UserName=user_name)["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": str(key["AccessKeyId"]), "AWS_SECRET_ACCESS_KEY": str(key["SecretAccessKey"])}


def assume_role_credentials(
    endpoint: str, role_arn: str, session_name: str, region: str = DEFAULT_REGION
) -> dict[str, str]:
    """A session of the role as the Lambda service would get it, env-ready.

    Assumed with enforcement relaxed for the call: the trust policies of function roles name only
    ``lambda.amazonaws.com``, which no local caller is. The role must exist (moto would not check).
    """
    with relaxed():
        _setup_client("iam", endpoint, region).get_role(RoleName=role_arn.rsplit("/", 1)[-1])
        sts = _setup_client("sts", endpoint, region)
        credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name)["Credentials"]
    return {
        "AWS_ACCESS_KEY_ID": str(credentials["AccessKeyId"]),
        "AWS_SECRET_ACCESS_KEY": str(credentials["SecretAccessKey"]),
        "AWS_SESSION_TOKEN": str(credentials["SessionToken"]),
    }
