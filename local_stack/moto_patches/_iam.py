"""IAM: moto's request check (moto.iam.access_control) asks the enforcement layer what to decide.

The decisions (resources, condition keys, conditions, error shapes) are `local_stack.iam_enforcement`'s,
given here through `use_enforcement`; what lives here is every place that overrides moto's request
check or evaluator: the two replaced `ActionAuthenticatorMixin` methods, the `IAMRequest` subclasses
they use, and the `IAMPolicy`/`IAMPolicyStatement` adapters the enforcement layer evaluates with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from botocore.awsrequest import AWSRequest
from moto.core.authorization import ActionAuthenticatorMixin
from moto.iam.access_control import IAMPolicy, IAMPolicyStatement, IAMRequest, PermissionResult, S3IAMRequest
from moto.utilities.utils import get_partition

from local_stack.moto_patches._registry import Patch, Patcher, register


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the enforcement layer is told of one request."""

    service: str  # the signing name of the credential scope: dynamodb, states, lambda, ...
    operation: str  # the API operation: PutItem, Invoke, ...
    action: str  # the IAM action: dynamodb:PutItem, lambda:InvokeFunction, ...
    account: str
    partition: str
    region: str
    path: str
    body: bytes | str

    def json(self) -> dict[str, Any]:
        try:
            parsed = json.loads(self.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"


class Enforcement(Protocol):
    """The decisions the patched request check asks for (`local_stack.iam_enforcement` gives them)."""

    def refusal(self, access_key: Any, request: RequestFacts, moto_resource: str) -> Exception | None:
        """The error to answer the request with, or None when its policies allow it."""

    def trust_refusal(
        self, access_key: Any, role: Any, action: str, external_id: str | None, region: str, role_arn: str
    ) -> Exception | None:
        """For AssumeRole: the error when the role's trust policy does not let the caller in."""

    def s3_permitted(self, access_key: Any, action: str, resource: str, region: str) -> bool: ...

    def credentials_error(self, service: str, signature: bool) -> Exception | None:
        """The service's answer to unknown keys (or, `signature`, a bad signature); None: moto's."""


_enforcement: list[Enforcement] = []


def use_enforcement(enforcement: Enforcement) -> None:
    """Who decides for the patched request check (set before the "iam" patches are applied)."""
    _enforcement[:] = [enforcement]


def _decider() -> Enforcement:
    if not _enforcement:
        raise RuntimeError("moto_patches: the iam patches are applied but use_enforcement() was never called")
    return _enforcement[0]


# IAM action names that differ from the operation name (moto checks the operation name).
_IAM_ACTIONS: Final[dict[tuple[str, str], str]] = {
    ("lambda", "Invoke"): "InvokeFunction",
    ("lambda", "InvokeWithResponseStream"): "InvokeFunction",
}


def iam_action(service: str, operation: str) -> str:
    return f"{service}:{_IAM_ACTIONS.get((service, operation), operation)}"


class _EnforcedRequest(IAMRequest):
    """moto's request check for every service but S3, deciding through the enforcement layer."""

    def __init__(
        self,
        account_id: str,
        method: str,
        path: str,
        data: dict[str, str],
        body: bytes,
        headers: dict[str, str],
        action: str,
    ) -> None:
        self._operation = action
        super().__init__(account_id, method, path, data, body, headers, action)
        self._action = iam_action(self._service, self._operation)

    def check_action_permitted(self, resource: str) -> None:
        if self._action == "sts:GetCallerIdentity":  # always allowed, as in AWS
            return
        request = RequestFacts(
            service=self._service,
            operation=self._operation,
            action=self._action,
            account=self.account_id,
            partition=get_partition(self._region),
            region=self._region,
            path=self._path,
            body=self._body,
        )
        refusal = _decider().refusal(self._access_key, request, resource)
        if refusal is not None:
            raise refusal
        if self._is_assuming_role_operation(resource):
            role = self.backend.get_role_by_arn(resource)
            external_id: Any = self._data.get("ExternalId")  # moto's querystring: a list of values
            value = external_id[0] if isinstance(external_id, list) else external_id
            refusal = _decider().trust_refusal(
                self._access_key, role, self._action, value or None, self._region, resource
            )
            if refusal is not None:
                raise refusal

    def _create_aws_request(self) -> AWSRequest:
        request = super()._create_aws_request()
        form = "x-www-form-urlencoded" in str(self._headers.get("Content-Type", ""))
        if not self._body and not form:
            # With no raw body moto signs its parsed querystring: right for a form POST (werkzeug
            # consumed the body), wrong for a bodiless REST call, where it is the request's headers,
            # so every Lambda GET failed with SignatureDoesNotMatch. Such a client signed an empty
            # payload (its query string is part of the URL).
            request.data = b""
        return request

    def _raise_invalid_access_key(self, _: str) -> None:
        error = _decider().credentials_error(self._service, False)
        if error is None:
            super()._raise_invalid_access_key(_)
        raise error  # type: ignore[misc]

    def _raise_signature_does_not_match(self) -> None:
        error = _decider().credentials_error(self._service, True)
        if error is None:
            super()._raise_signature_does_not_match()
        raise error  # type: ignore[misc]


class _EnforcedS3Request(S3IAMRequest):
    """S3 keeps moto's resources and error shapes; only the evaluation is the enforcement layer's."""

    def check_action_permitted(self, resource: str) -> None:
        if not _decider().s3_permitted(self._access_key, self._action, resource, self._region):
            self._raise_access_denied()


def _authorize_normal_action(self: ActionAuthenticatorMixin, resource: str = "*") -> None:
    self._authenticate_and_authorize_action(_EnforcedRequest, resource)


def _authorize_s3_action(
    self: ActionAuthenticatorMixin, bucket_name: str | None = None, key_name: str | None = None
) -> None:
    path = f"{bucket_name or '*'}/{key_name}" if key_name else (bucket_name or "*")
    resource = f"arn:{get_partition(self.region)}:s3:::{path}"  # type: ignore[attr-defined]
    self._authenticate_and_authorize_action(_EnforcedS3Request, resource)


def _request_check(patcher: Patcher) -> None:
    patcher.require(ActionAuthenticatorMixin, "_authenticate_and_authorize_action")
    patcher.require(IAMRequest, "_create_aws_request", "_is_assuming_role_operation", "_raise_access_denied")
    patcher.replace(ActionAuthenticatorMixin, "_authenticate_and_authorize_normal_action", _authorize_normal_action)


def _s3_request_check(patcher: Patcher) -> None:
    patcher.require(ActionAuthenticatorMixin, "_authenticate_and_authorize_action")
    patcher.replace(ActionAuthenticatorMixin, "_authenticate_and_authorize_s3_action", _authorize_s3_action)


# ------------------------------------------------------------------------------ evaluator adapters

# (raw statement, resource, principal or None) -> does the statement apply to this request at all
Applies = Callable[[Mapping[str, Any], str, "str | None"], bool]
# (Action/Resource patterns, value, ignore case) -> does any pattern match
Matches = Callable[[Any, str, bool], bool]


class PolicyStatement(IAMPolicyStatement):
    """moto's statement evaluator, fed what it gets right (Effect, Action/NotAction, Resource).
    Whether the statement applies (Condition, Principal, NotResource) is `applies`'s to say, and
    patterns match by `matches` (moto reads them as regular expressions)."""

    def __init__(self, statement: Mapping[str, Any], applies: Applies, matches: Matches) -> None:
        self._raw = statement
        self._applies = applies
        self._matches = matches
        evaluated = {
            key: value
            for key, value in statement.items()
            if key not in ("Condition", "Principal", "NotPrincipal", "NotResource")
        }
        if "Resource" not in statement:
            # moto calls a statement without Resource PERMITTED whatever its Effect (a trust-policy
            # shortcut that makes a Deny allow); "*" lets its own Effect decide.
            evaluated["Resource"] = "*"
        super().__init__(evaluated)

    def is_action_permitted(
        self,
        action: str,
        resource: str = "*",
        principal: str | None = None,
        incoming_condition_values: dict[str, str] | None = None,
    ) -> PermissionResult:
        if not self._applies(self._raw, resource, principal):
            return PermissionResult.NEUTRAL
        return super().is_action_permitted(action, resource)

    def _check_element_matches(self, statement_element: Any, value: str) -> bool:
        # Actions match case-insensitively in IAM, resources case-sensitively.
        ignore_case = statement_element in ("Action", "NotAction")
        return self._matches(self._statement[statement_element], value, ignore_case)


class Policy(IAMPolicy):
    """moto's policy walk (any Deny wins, else any Allow) over statements made by `statement`."""

    def __init__(self, policy: Any, statement: Callable[[Mapping[str, Any]], PolicyStatement]) -> None:
        super().__init__(policy)
        self._statement_of = statement

    def is_action_permitted(
        self,
        action: str,
        resource: str = "*",
        principal: str | None = None,
        incoming_condition_values: dict[str, str] | None = None,
    ) -> PermissionResult:
        statements = self._policy_json.get("Statement", [])
        if isinstance(statements, Mapping):
            statements = [statements]
        permitted = False
        for statement in statements:
            result = self._statement_of(statement).is_action_permitted(action, resource, principal)
            if result == PermissionResult.DENIED:
                return result
            permitted = permitted or result == PermissionResult.PERMITTED
        return PermissionResult.PERMITTED if permitted else PermissionResult.NEUTRAL


register(
    Patch(
        name="iam_authorizes_the_resources_a_request_names",
        group="iam",
        aws="A request is authorized as its IAM action (Invoke is lambda:InvokeFunction) on the resources "
        "it names (table, index, state machine, secret, function ARNs), a statement whose Condition does "
        "not hold does not apply, and a refusal is the service's own AccessDeniedException naming them.",
        moto="Every service but SQS, IAM and STS is checked against resource '*', so a statement naming "
        "an ARN never matches and the call is denied (HTTP 403 with an XML AccessDenied body, which a "
        "JSON client reads as error code '403'); Invoke is checked as "
        "lambda:Invoke; conditions deny; bodiless requests are signed wrongly; a trust policy naming a "
        "service crashes AssumeRole.",
        reference="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
        install=_request_check,
    )
)
register(
    Patch(
        name="iam_s3_conditions_are_evaluated",
        group="iam",
        aws="For S3 as elsewhere, a statement applies only where its Condition holds: an Allow "
        "conditioned on aws:RequestedRegion being another region allows nothing (HTTP 403 AccessDenied).",
        moto="A condition on a key moto does not supply (aws:RequestedRegion, aws:PrincipalArn, ...) is "
        "ignored, so the statement applies and allows; one that it can evaluate and that fails denies "
        "the request outright, even where another statement allows it.",
        reference="https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition.html",
        install=_s3_request_check,
    )
)
