"""API Gateway HTTP API (payload 2.0) and Lambda Function URL events <-> the transport's HTTP types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .bearer import escape_principal_part, jwt_principal
from .context import ANONYMOUS, Principal
from .proxy_event import InvalidBase64Body, event_body, event_headers
from .transport import HttpRequest, HttpResponse

DEV_BEARER_PREFIX = "bearer dev:"


def principal_from_event(
    event: Mapping[str, Any], headers: Mapping[str, str], *, dev_auth: bool, require_principal: bool = False
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
        return iam_principal(iam)
    return None if require_principal or dev_auth else ANONYMOUS


def iam_principal(iam: Mapping[str, Any]) -> Principal | None:
    """`iam:<caller ARN>`, and for temporary credentials (an assumed role, a federated user: `arn:...:sts::`)
    `|<access key id>` too: two role sessions with one session name have one ARN, but each AssumeRole
    gives its own access key. A caller that renews its credentials is therefore a new principal."""
    caller = iam.get("userArn") or iam.get("callerId")
    if not isinstance(caller, str) or not caller:
        return None
    access_key = iam.get("accessKey")
    if ":sts::" in caller or caller.startswith("ARO"):
        if not isinstance(access_key, str) or not access_key:
            return None  # a session that cannot be told from another is not authenticated
        return Principal(f"iam:{escape_principal_part(caller)}|{escape_principal_part(access_key)}", "iam")
    return Principal(f"iam:{caller}", "iam")


def request_from_event(
    event: Mapping[str, Any], *, dev_auth: bool = False, require_principal: bool = False
) -> HttpRequest:
    headers = event_headers(event)
    http = (event.get("requestContext") or {}).get("http") or {}
    method = str(http.get("method") or event.get("httpMethod") or "GET")
    path = str(event.get("rawPath") or http.get("path") or "/")
    try:
        body = event_body(event)
    except InvalidBase64Body:
        body = b"\x00invalid base64 body"  # surfaces as a parse error, never as a crash
    principal = principal_from_event(event, headers, dev_auth=dev_auth, require_principal=require_principal)
    return HttpRequest(method, path, headers, body, principal)


def response_to_proxy(response: HttpResponse) -> dict[str, Any]:
    return {
        "statusCode": response.status,
        "headers": response.headers,
        "body": response.body,
        "isBase64Encoded": False,
    }
