"""The Lambda adapter: HTTP API (payload 2.0) and Function URL events in, proxy results out, principals."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from testkit import api_event, rpc, standard_headers

from app import handlers
from mcp_runtime import wire
from mcp_runtime.context import ANONYMOUS, Principal
from mcp_runtime.lambda_http import principal_from_event, request_from_event, response_to_proxy
from mcp_runtime.server import McpServer
from mcp_runtime.transport import SSE_CONTENT_TYPE, HttpResponse, McpHttpTransport, sse_messages


def function_url_event(
    message: dict[str, Any], *, iam: dict[str, Any] | None = None, b64: bool = True
) -> dict[str, Any]:
    """A Lambda Function URL event (payload 2.0, IAM auth) as AWS delivers it."""
    raw = json.dumps(message)
    context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "abcdefghij",
        "domainName": "abcdefghij.lambda-url.eu-west-1.on.aws",
        "http": {"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9", "userAgent": "t"},
        "requestId": "r-1",
        "routeKey": "$default",
        "stage": "$default",
        "timeEpoch": 1_800_000_000_000,
    }
    if iam is not None:
        context["authorizer"] = {"iam": iam}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {**standard_headers(message), "host": "abcdefghij.lambda-url.eu-west-1.on.aws"},
        "requestContext": context,
        "body": base64.b64encode(raw.encode()).decode() if b64 else raw,
        "isBase64Encoded": b64,
    }


def with_jwt(event: dict[str, Any], claims: dict[str, Any]) -> dict[str, Any]:
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": ["mcp"]}}
    return event


def serve(server: McpServer, event: dict[str, Any], **options: Any) -> dict[str, Any]:
    return response_to_proxy(McpHttpTransport(server).handle(request_from_event(event, **options)))


# ---- events in ------------------------------------------------------------------------------------------------------
def test_an_http_api_event_is_served_and_mapped_to_a_proxy_result(server: McpServer) -> None:
    proxy = serve(server, api_event(rpc("tools/list", request_id="h1")))
    assert proxy["statusCode"] == 200
    assert proxy["isBase64Encoded"] is False
    assert proxy["headers"]["content-type"] == "application/json"
    body = json.loads(proxy["body"])
    assert body["id"] == "h1"
    assert body["result"]["resultType"] == wire.RESULT_COMPLETE


@pytest.mark.parametrize("b64", [True, False])
def test_a_function_url_event_with_iam_auth_is_served(server: McpServer, b64: bool) -> None:
    event = function_url_event(rpc("server/discover", request_id=3), iam={"userArn": "arn:aws:iam::1:user/a"}, b64=b64)
    proxy = serve(server, event, require_principal=True)
    assert proxy["statusCode"] == 200
    assert json.loads(proxy["body"])["id"] == 3


def test_a_base64_body_is_decoded_including_non_ascii_text(server: McpServer) -> None:
    message = rpc("tools/call", {"name": "count_words", "arguments": {"text": "caf\u00e9 \u2615 ok"}}, request_id=4)
    event = api_event(message)
    event["body"] = base64.b64encode(json.dumps(message, ensure_ascii=False).encode()).decode()
    event["isBase64Encoded"] = True
    body = json.loads(serve(server, event)["body"])
    assert body["result"]["structuredContent"] == {"words": 3, "characters": 9}


@pytest.mark.parametrize("body", ["not base64!!", "eyJqc29u", "=" * 3, "\u00e9t\u00e9"])
def test_an_invalid_base64_body_is_a_parse_error_not_a_crash(server: McpServer, body: str) -> None:
    event = api_event(rpc("tools/list"))
    event["body"] = body
    event["isBase64Encoded"] = True
    proxy = serve(server, event)
    assert proxy["statusCode"] == 400
    assert json.loads(proxy["body"])["error"]["code"] == wire.PARSE_ERROR


def test_a_base64_body_that_is_not_utf8_json_is_a_parse_error(server: McpServer) -> None:
    event = api_event(rpc("tools/list"))
    event["body"] = base64.b64encode(b"\xff\xfe\xfd{}").decode()
    event["isBase64Encoded"] = True
    assert json.loads(serve(server, event)["body"])["error"]["code"] == wire.PARSE_ERROR


def test_header_names_are_lower_cased_and_values_kept() -> None:
    event = api_event(rpc("tools/list"), headers={"MCP-Method": "Tools/List", "X-Custom": " Value "})
    event["headers"]["Content-Length"] = 12  # not a string: a hand-written test event
    headers = request_from_event(event).headers
    assert headers["mcp-method"] == "Tools/List"
    assert headers["x-custom"] == " Value "
    assert headers["content-length"] == "12"
    assert all(name == name.lower() for name in headers)


@pytest.mark.parametrize(("field", "value"), [("headers", None), ("body", None), ("body", 12), ("headers", ["a"])])
def test_missing_or_odd_event_fields_become_an_empty_request_not_a_crash(field: str, value: Any) -> None:
    event = api_event(rpc("tools/list"))
    event[field] = value
    request = request_from_event(event)
    assert request.method == "POST"
    if field == "body":
        assert request.body == b""
    else:
        assert request.headers == {}


def test_method_and_path_come_from_the_request_context() -> None:
    request = request_from_event(api_event(rpc("tools/list"), method="GET", path="/mcp"))
    assert (request.method, request.path) == ("GET", "/mcp")


def test_a_get_event_is_answered_405_through_the_adapter(server: McpServer) -> None:
    proxy = serve(server, api_event(rpc("tools/list"), method="GET"))
    assert proxy["statusCode"] == 405
    assert proxy["headers"]["allow"] == "POST"


# ---- proxy results out ----------------------------------------------------------------------------------------------
def test_status_headers_and_body_map_one_to_one_onto_the_proxy_result() -> None:
    response = HttpResponse(202, {"x-a": "1", "content-type": "text/plain"}, "")
    assert response_to_proxy(response) == {
        "statusCode": 202,
        "headers": {"x-a": "1", "content-type": "text/plain"},
        "body": "",
        "isBase64Encoded": False,
    }


def test_a_notification_is_an_empty_202_through_the_adapter(server: McpServer) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}
    proxy = serve(server, api_event(json.dumps(notification), headers={"mcp-method": "notifications/cancelled"}))
    assert (proxy["statusCode"], proxy["body"]) == (202, "")


def test_progress_is_streamed_as_server_sent_events_before_the_result(server: McpServer) -> None:
    message = rpc("tools/call", {"name": "test_tool_with_progress", "arguments": {}}, request_id="p")
    message["params"]["_meta"]["progressToken"] = "tok-1"
    proxy = serve(server, api_event(message))
    assert proxy["statusCode"] == 200
    assert proxy["headers"]["content-type"].startswith(SSE_CONTENT_TYPE)
    assert proxy["headers"]["x-accel-buffering"] == "no"
    assert not any(line.startswith("id:") for line in proxy["body"].splitlines())
    frames = sse_messages(proxy["body"])
    *progress, final = frames
    assert [f["method"] for f in progress] == ["notifications/progress"] * 3
    assert all(f["params"]["progressToken"] == "tok-1" for f in progress)
    values = [f["params"]["progress"] for f in progress]
    assert values == sorted(set(values))
    assert final["id"] == "p" and final["result"]["resultType"] == wire.RESULT_COMPLETE
    assert "id" not in progress[0]


def test_without_a_progress_token_the_same_tool_answers_plain_json(server: McpServer) -> None:
    proxy = serve(server, api_event(rpc("tools/call", {"name": "test_tool_with_progress", "arguments": {}})))
    assert proxy["headers"]["content-type"] == "application/json"


# ---- principals -----------------------------------------------------------------------------------------------------
def test_dev_auth_reads_the_principal_from_a_dev_bearer_token() -> None:
    event = api_event(rpc("tools/list"), headers={"authorization": "Bearer dev:alice"})
    assert request_from_event(event, dev_auth=True).principal == Principal("dev:alice", "dev")


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer dev:",
        "Bearer dev:   ",
        "Bearer alice",
        "Basic ZGV2OmFsaWNl",
        "dev:alice",
        "Bearer dev:a\x00b",
        "Bearer dev:" + "a" * 129,
    ],
)
def test_dev_auth_without_a_valid_dev_bearer_is_unauthenticated(authorization: str | None) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    assert request_from_event(api_event(rpc("tools/list"), headers=headers), dev_auth=True).principal is None


def test_dev_auth_adds_development_users_and_still_trusts_the_fronts_authorizer_context() -> None:
    # Only API Gateway or the Function URL writes requestContext; DEV_AUTH adds `dev:` bearers to it.
    event = with_jwt(api_event(rpc("tools/list")), {"sub": "someone", "client_id": "app"})
    assert request_from_event(event, dev_auth=True).principal == Principal("jwt:-|someone|app", "jwt")
    event["headers"]["authorization"] = "Bearer dev:alice"
    assert request_from_event(event, dev_auth=True).principal == Principal("dev:alice", "dev")


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"iss": "https://idp.example", "sub": "u-1", "client_id": "app"}, "jwt:https://idp.example|u-1|app"),
        ({"sub": "u-1", "client_id": "app"}, "jwt:-|u-1|app"),
        ({"sub": "u-1", "azp": "web"}, "jwt:-|u-1|web"),
        ({"sub": "u-1", "aud": "api"}, "jwt:-|u-1|api"),
        ({"sub": "u-1"}, "jwt:-|u-1|-"),
    ],
)
def test_a_jwt_authorizer_gives_a_principal_of_issuer_subject_and_client(claims: dict[str, Any], expected: str) -> None:
    principal = principal_from_event(with_jwt(api_event(rpc("tools/list")), claims), {}, dev_auth=False)
    assert principal == Principal(expected, "jwt")


@pytest.mark.parametrize("claims", [{}, {"sub": ""}, {"sub": 5}, {"client_id": "app"}])
def test_a_jwt_without_a_subject_is_unauthenticated(claims: dict[str, Any]) -> None:
    assert principal_from_event(with_jwt(api_event(rpc("tools/list")), claims), {}, dev_auth=False) is None


@pytest.mark.parametrize(
    ("iam", "binding", "expected"),
    [
        (
            {"userArn": "arn:aws:iam::1:user/a", "callerId": "AIDA1", "accessKey": "AKIA1"},
            "session",
            "iam:arn:aws:iam::1:user/a",
        ),
        ({"callerId": "AIDA1"}, "session", "iam:AIDA1"),
        (
            {"userArn": "arn:aws:sts::1:assumed-role/r/s", "callerId": "AROA1:s", "accessKey": "ASIA1"},
            "session",
            "iam:arn:aws:sts::1:assumed-role/r/s",
        ),
        ({"userArn": "arn:aws:sts::1:assumed-role/r/s"}, "session", "iam:arn:aws:sts::1:assumed-role/r/s"),
        ({"callerId": "AROA1:s", "accessKey": "ASIA2"}, "session", "iam:AROA1:s"),
        (
            {"userArn": "arn:aws:iam::1:user/a", "callerId": "AIDA1", "accessKey": "AKIA1"},
            "access-key",
            "iam:arn:aws:iam::1:user/a",
        ),
        (
            {"userArn": "arn:aws:sts::1:assumed-role/r/s", "callerId": "AROA1:s", "accessKey": "ASIA1"},
            "access-key",
            "iam:arn:aws:sts::1:assumed-role/r/s|ASIA1",
        ),
        ({"callerId": "AROA1:s", "accessKey": "ASIA2"}, "access-key", "iam:AROA1:s|ASIA2"),
        ({"userArn": "arn:aws:sts::1:assumed-role/r/s"}, "access-key", None),  # a session that cannot be told apart
        ({}, "session", None),
        ({"userArn": ""}, "session", None),
    ],
)
def test_an_iam_authorizer_gives_the_caller_arn_and_bound_to_the_key_a_role_sessions_key_too(
    iam: dict[str, Any], binding: Any, expected: str | None
) -> None:
    event = function_url_event(rpc("tools/list"), iam=iam)
    principal = principal_from_event(event, {}, dev_auth=False, iam_binding=binding)
    assert principal == (None if expected is None else Principal(expected, "iam"))


def test_without_an_authorizer_the_caller_is_anonymous_unless_a_principal_is_required() -> None:
    event = api_event(rpc("tools/list"))
    assert principal_from_event(event, {}, dev_auth=False) == ANONYMOUS
    assert principal_from_event(event, {}, dev_auth=False, require_principal=True) is None


# ---- the deployed handler, configured from the environment ----------------------------------------------------------
def test_the_handler_with_dev_auth_answers_401_with_a_challenge_without_a_dev_bearer(
    configure_app: Callable[..., None],
) -> None:
    configure_app(DEV_AUTH="1")
    proxy = handlers.api_handler(api_event(rpc("tools/list")))
    assert proxy["statusCode"] == 401
    challenge = proxy["headers"]["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert "resource_metadata=" in challenge


def test_the_handler_with_dev_auth_serves_a_dev_bearer(configure_app: Callable[..., None]) -> None:
    configure_app(DEV_AUTH="1")
    proxy = handlers.api_handler(api_event(rpc("tools/list"), headers={"authorization": "Bearer dev:alice"}))
    assert proxy["statusCode"] == 200


def test_the_handler_requiring_a_principal_refuses_an_event_without_an_authorizer(
    configure_app: Callable[..., None],
) -> None:
    configure_app(MCP_REQUIRE_PRINCIPAL="1")
    assert handlers.api_handler(api_event(rpc("tools/list")))["statusCode"] == 401
    event = with_jwt(api_event(rpc("tools/list")), {"sub": "u-1", "client_id": "app"})
    assert handlers.api_handler(event)["statusCode"] == 200


def test_a_state_sealed_for_one_jwt_subject_is_refused_for_another(configure_app: Callable[..., None]) -> None:
    configure_app(MCP_TOOL_PACKAGES="fixtures.conformance")
    caps: dict[str, Any] = {"elicitation": {}}
    first = rpc("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {}}, 1, caps)
    round1 = json.loads(handlers.api_handler(with_jwt(api_event(first), {"sub": "alice"}))["body"])
    state = round1["result"]["requestState"]
    params = {
        "name": "test_input_required_result_elicitation",
        "arguments": {},
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "A"}}},
        "requestState": state,
    }
    retry = rpc("tools/call", params, 2, caps)
    stolen = json.loads(handlers.api_handler(with_jwt(api_event(retry), {"sub": "mallory"}))["body"])
    assert stolen["error"]["code"] == wire.INVALID_PARAMS
    owned = json.loads(handlers.api_handler(with_jwt(api_event(retry), {"sub": "alice"}))["body"])
    assert owned["result"]["content"][0]["text"] == "Hello, A!"


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_both_protected_resource_documents_are_served_on_a_function_url(server: McpServer, path: str) -> None:
    """A Function URL sends every path to the function: the path-suffixed and the root document a
    client probes when no challenge reaches it (Function URLs rename WWW-Authenticate) are both there."""
    event = function_url_event(rpc("tools/list"), iam={"userArn": "arn:aws:iam::1:user/a"})
    event["rawPath"] = path
    event["requestContext"]["http"].update(method="GET", path=path)
    event["headers"]["x-forwarded-proto"] = "https"
    event.pop("body")
    event["isBase64Encoded"] = False
    proxy = serve(server, event)
    assert proxy["statusCode"] == 200, proxy["body"]
    assert json.loads(proxy["body"])["resource"] == "https://abcdefghij.lambda-url.eu-west-1.on.aws/mcp"
