"""API Gateway HTTP API (payload 2.0) and Lambda Function URL events <-> the transport's HTTP types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from .bearer import escape_principal_part, jwt_principal
from .context import ANONYMOUS, Principal
from .proxy_event import InvalidBase64Body, event_body, event_headers
from .transport import HttpRequest, HttpResponse

DEV_BEARER_PREFIX = "bearer dev:"
IamBinding = Literal["session", "access-key"]
IAM_SESSION: Final[IamBinding] = "session"
IAM_ACCESS_KEY: Final[IamBinding] = "access-key"


def principal_from_event(
    event: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    dev_auth: bool,
    require_principal: bool = False,
    iam_binding: IamBinding = IAM_SESSION,
) -> Principal | None:
    """The caller as the front authenticated it; None means not authenticated yet: the transport then
    validates the bearer token itself (`bearer.py`) or answers 401.

    Only the authorizer context set by API Gateway or the Function URL is trusted; nothing in the
    body or `_meta` is. With DEV_AUTH (local development only), `Bearer dev:<name>` is also
    accepted, as the development user `<name>`; everything else is judged as without it.
    """
    if dev_auth:
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith(DEV_BEARER_PREFIX):
            name = authorization[len(DEV_BEARER_PREFIX) :].strip()
            if not name or len(name) > 128 or not name.isprintable():
                return None
            return Principal(f"dev:{name}", "dev")
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    jwt = authorizer.get("jwt") if isinstance(authorizer, dict) else None
    if isinstance(jwt, dict):
        claims = jwt.get("claims") or {}
        subject = claims.get("sub")
        client = claims.get("client_id") or claims.get("azp") or claims.get("aud") or "-"
        if isinstance(subject, str) and subject:
            # "|" separates the parts, so it is escaped inside them: ("a|b", "c") and ("a", "b|c") differ.
            return jwt_principal(str(claims.get("iss") or "-"), subject, str(client))
        return None
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    if isinstance(iam, dict):
        return iam_principal(iam, iam_binding)
    return None if require_principal or dev_auth else ANONYMOUS


def iam_principal(iam: Mapping[str, Any], binding: IamBinding = IAM_SESSION) -> Principal | None:
    """`iam:<caller ARN>`: the IAM user, or the role session (`arn:aws:sts::<account>:assumed-role/<role>/<session>`),
    which stays the same when the session's temporary credentials are refreshed (SSO, EC2 and ECS roles,
    assumed roles all refresh every few hours), so a caller keeps its tasks and handles across refreshes.
    Two callers that assume one role with one session name are one principal, as they are to AWS itself
    (CloudTrail, `aws:userid`): give each caller its own session name.

    With `binding="access-key"` (opt-in, `iamPrincipal: "accessKey"` in cdk.json) temporary credentials
    add `|<access key id>`: each AssumeRole is its own principal, and a refresh starts a new one."""
    caller = iam.get("userArn") or iam.get("callerId")
    if not isinstance(caller, str) or not caller:
        return None
    if binding == IAM_ACCESS_KEY and (":sts::" in caller or caller.startswith("ARO")):
        access_key = iam.get("accessKey")
        if not isinstance(access_key, str) or not access_key:
            return None  # a session that cannot be told from another is not authenticated
        return Principal(f"iam:{escape_principal_part(caller)}|{escape_principal_part(access_key)}", "iam")
    return Principal(f"iam:{escape_principal_part(caller)}", "iam")


def request_from_event(
    event: Mapping[str, Any],
    *,
    dev_auth: bool = False,
    require_principal: bool = False,
    iam_binding: IamBinding = IAM_SESSION,
) -> HttpRequest:
    headers = event_headers(event)
    http = (event.get("requestContext") or {}).get("http") or {}
    method = str(http.get("method") or event.get("httpMethod") or "GET")
    path = str(event.get("rawPath") or http.get("path") or "/")
    try:
        body = event_body(event)
    except InvalidBase64Body:
        body = b"\x00invalid base64 body"  # surfaces as a parse error, never as a crash
    principal = principal_from_event(
        event, headers, dev_auth=dev_auth, require_principal=require_principal, iam_binding=iam_binding
    )
    return HttpRequest(method, path, headers, body, principal)


def response_to_proxy(response: HttpResponse) -> dict[str, Any]:
    return {
        "statusCode": response.status,
        "headers": response.headers,
        "body": response.body,
        "isBase64Encoded": False,
    }
