"""Property-based fuzzing of the deployed handler, `app.handlers.api_handler`.

Properties, for every generated event: no exception escapes, no 5xx and no -32603, the status is one
the ladder can give, and the body is empty (202), the resource metadata document, or a well-formed
JSON-RPC response (one SSE stream or one JSON object) whose id echoes the request's readable id.
Inputs range from garbage bytes to mutations of valid requests, so the MRTR and tool paths stay
reachable. Runs are derandomized and use no example database, so CI sees the same cases every time.
"""

from __future__ import annotations

import base64
import copy
import json
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit import meta

from mcp_runtime import wire
from mcp_runtime.cursors import encode_cursor
from mcp_runtime.lambda_http import request_from_event
from mcp_runtime.legacy._leg import SESSION_NOT_FOUND
from mcp_runtime.limits import MAX_JSON_COLLECTION_ITEMS, MAX_JSON_DEPTH, MAX_JSON_STRING_CHARS
from mcp_runtime.settings import Settings
from mcp_runtime.transport import PROTECTED_RESOURCE_PATH
from tests.unit.conftest import loggers_kept

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
AUTH = {"authorization": "Bearer dev:fuzz"}
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
EXPECTED_STATUSES = {200, 202, 400, 401, 403, 404, 405, 413}
RESULT_TYPES = {wire.RESULT_COMPLETE, wire.RESULT_INPUT_REQUIRED, wire.RESULT_TASK}
ABSENT = object()


# ---- the handler under test, configured once for the module ---------------------------------------------------------
@pytest.fixture(scope="module")
def handler() -> Iterator[Any]:
    from app import handlers

    with pytest.MonkeyPatch.context() as patch, loggers_kept():
        for model_field in Settings.model_fields.values():
            if model_field.alias:
                patch.delenv(model_field.alias, raising=False)
        patch.setenv("MCP_TOOL_PACKAGES", "fixtures.conformance,fixtures.patterns")
        patch.setenv("MCP_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
        patch.setenv("DEV_AUTH", "1")
        patch.setenv("POWERTOOLS_LOG_LEVEL", "ERROR")
        handlers.reset()
        yield handlers.api_handler
        handlers.reset()


def request(method: str, params: dict[str, Any] | None = None, request_id: Any = 1, caps: Any = None) -> dict[str, Any]:
    body = dict(params or {})
    body["_meta"] = meta(caps if caps is not None else ALL_CAPS)
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


def headers_for(message: Any) -> dict[str, str]:
    """The headers a conforming client derives from a message, as far as the message allows."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **AUTH}
    if not isinstance(message, dict):
        return headers
    params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
    meta_value: dict[str, Any] = params["_meta"] if isinstance(params.get("_meta"), dict) else {}
    version = meta_value.get(wire.META_PROTOCOL_VERSION)
    if isinstance(version, str) and version.isprintable():
        headers["mcp-protocol-version"] = version
    if isinstance(message.get("method"), str):
        headers["mcp-method"] = message["method"]
    for key in ("name", "uri", "taskId"):
        value = params.get(key)
        if isinstance(value, str):
            plain = value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?")
            headers["mcp-name"] = value if plain else wrap(value)
            break
    arguments: dict[str, Any] = params["arguments"] if isinstance(params.get("arguments"), dict) else {}
    if params.get("name") == "test_x_mcp_header" and isinstance(arguments.get("region"), str):
        headers["mcp-param-region"] = wrap(arguments["region"])
    return headers


def wrap(value: str) -> str:
    """The `=?base64?…?=` form of a header value; text that UTF-8 cannot encode is sent as it is."""
    try:
        return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
    except UnicodeEncodeError:
        return value


def event_for(
    body: str,
    headers: dict[str, str],
    *,
    method: str = "POST",
    path: str = "/mcp",
    is_base64: Any = False,
) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}},
        "body": body,
        "isBase64Encoded": is_base64,
    }


def json_event(message: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return event_for(json.dumps(message), headers if headers is not None else headers_for(message))


# ---- the oracle -----------------------------------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name} in a response")


def strict_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def readable_id(event: dict[str, Any]) -> Any:
    body = request_from_event(event, dev_auth=True).body
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return ABSENT
    if isinstance(message, dict):
        candidate = message.get("id")
        if isinstance(candidate, str | int) and not isinstance(candidate, bool):
            return candidate
    return ABSENT


def check_message(message: Any, expected_id: Any) -> None:
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == wire.JSONRPC_VERSION, message
    assert ("result" in message) != ("error" in message), message
    assert "method" not in message
    if expected_id is ABSENT:
        assert "id" not in message, message
    else:
        assert message.get("id") == expected_id and type(message.get("id")) is type(expected_id), message
    if "error" in message:
        error = message["error"]
        assert isinstance(error, dict) and set(error) <= {"code", "message", "data"}, error
        assert isinstance(error["code"], int) and not isinstance(error["code"], bool), error
        assert isinstance(error["message"], str) and error["message"], error
        assert error["code"] != wire.INTERNAL_ERROR, f"an internal error escaped as {error}"
        if error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY:
            assert isinstance(error["data"]["requiredCapabilities"], dict)
        if error["code"] == wire.UNSUPPORTED_PROTOCOL_VERSION:
            assert error["data"]["supported"] == list(wire.SUPPORTED_PROTOCOL_VERSIONS)
            assert isinstance(error["data"]["requested"], str)
    else:
        result = message["result"]
        assert isinstance(result, dict), result
        assert result.get("resultType") in RESULT_TYPES, result
        assert expected_id is not ABSENT
        if result["resultType"] == wire.RESULT_INPUT_REQUIRED:
            assert result.get("inputRequests") or result.get("requestState"), result


STATUS_OF_CODE = {
    wire.PARSE_ERROR: {400},
    wire.INVALID_REQUEST: {400},
    wire.METHOD_NOT_FOUND: {404},
    wire.HEADER_MISMATCH: {400},
    wire.MISSING_REQUIRED_CLIENT_CAPABILITY: {400},
    wire.UNSUPPORTED_PROTOCOL_VERSION: {400},
    wire.INVALID_PARAMS: {200, 400},
}


def check(handle: Any, event: dict[str, Any]) -> dict[str, Any]:
    """Serve one event and assert every property; returns the last JSON-RPC message (or {})."""
    proxy = handle(event, None)
    assert set(proxy) == {"statusCode", "headers", "body", "isBase64Encoded"}
    status = proxy["statusCode"]
    assert status in EXPECTED_STATUSES, proxy
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in proxy["headers"].items())
    body = proxy["body"]
    assert isinstance(body, str)
    body.encode("utf-8")  # every body must be sendable as UTF-8 (no lone surrogates)
    if status == 202:
        assert body == ""
        return {}
    assert body, proxy
    content_type = proxy["headers"].get("content-type", "")
    # GET and DELETE are the legacy leg's stream and session requests: their refusals are HTTP-level.
    stream_request = event["requestContext"]["http"]["method"].upper() in ("GET", "DELETE")
    # A path other than the endpoint (a Function URL sends every path) is refused before JSON-RPC: 404.
    off_endpoint = event["rawPath"].rstrip("/") != "/mcp" and not event["rawPath"].startswith(PROTECTED_RESOURCE_PATH)
    refused = (
        status in (401, 403, 405, 413) or (stream_request and status in (400, 404)) or (off_endpoint and status == 404)
    )
    if refused or (status == 200 and event["rawPath"].startswith(PROTECTED_RESOURCE_PATH)):
        if status == 405:
            assert proxy["headers"]["allow"]
        if status == 401:
            assert proxy["headers"]["www-authenticate"].startswith("Bearer ")
        document = strict_json(body)
        assert isinstance(document, dict)
        if status != 200:
            check_message(document, ABSENT)
        return {}
    expected_id = readable_id(event)
    if content_type.startswith("text/event-stream"):
        assert status == 200
        frames = [strict_json(line[5:]) for line in body.splitlines() if line.startswith("data:")]
        assert frames, body
        *notifications, final = frames
        for note in notifications:
            assert note.get("jsonrpc") == wire.JSONRPC_VERSION and isinstance(note.get("method"), str)
            assert note["method"].startswith("notifications/") and "id" not in note
        message = final
    else:
        assert content_type == "application/json", proxy
        message = strict_json(body)
    check_message(message, expected_id)
    if "error" in message:
        allowed = STATUS_OF_CODE.get(message["error"]["code"], {200})
        if message["error"]["message"] == SESSION_NOT_FOUND and _names_a_session(event):
            allowed = {404}  # the 2025-11-25 transport: an unknown session is a 404, after which clients re-initialize
        assert status in allowed, (status, message)
    else:
        assert status == 200
    result: dict[str, Any] = message
    return result


def _names_a_session(event: dict[str, Any]) -> bool:
    return any(name.lower() == wire.HEADER_SESSION_ID.lower() for name in event["headers"])


# ---- generators -----------------------------------------------------------------------------------------------------
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["", " ", "\x00", "\ud7ff", "=?base64?", "=?base64?AA==?=", "tools/call", "2026-07-28"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
header_names = st.sampled_from(
    [
        "mcp-method",
        "mcp-name",
        "mcp-protocol-version",
        "mcp-param-region",
        "MCP-METHOD",
        "Mcp-Name",
        "host",
        "origin",
        "authorization",
        "content-type",
        "accept",
        "mcp-session-id",
        "last-event-id",
        "x-forwarded-proto",
    ]
) | st.text(string.ascii_letters + string.digits + "-_", min_size=1, max_size=20)


@st.composite
def header_values(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.text(max_size=40))
    if kind == 1:
        return "=?base64?" + base64.b64encode(draw(st.text(max_size=20)).encode()).decode() + "?="
    if kind == 2:
        return "=?base64?" + draw(st.text(max_size=20)) + "?="
    if kind == 3:
        return draw(st.sampled_from(["localhost", "127.0.0.1:3000", "[::1]", "http://localhost:3000", "evil.example"]))
    padding = draw(st.sampled_from(["", " ", "\t", "  "]))
    return padding + draw(st.sampled_from(["tools/call", "tools/list", "count_words", "2026-07-28", "Bearer dev:x"]))


def _templates() -> list[dict[str, Any]]:
    progress = request("tools/call", {"name": "test_tool_with_progress", "arguments": {}})
    progress["params"]["_meta"]["progressToken"] = "tok"
    logging = request("tools/call", {"name": "test_logging_tool", "arguments": {}})
    logging["params"]["_meta"][wire.META_LOG_LEVEL] = "debug"
    return [
        request("server/discover"),
        request("tools/list"),
        request("tools/list", {"cursor": encode_cursor("offset", 1)}),
        request("prompts/list"),
        request("resources/list"),
        request("resources/templates/list"),
        request("tools/call", {"name": "count_words", "arguments": {"text": "a b"}}),
        request("tools/call", {"name": "test_x_mcp_header", "arguments": {"region": "eu"}}),
        request("tools/call", {"name": "archive_project", "arguments": {"project": "p"}}),
        request("tools/call", {"name": "test_input_required_result_multiple_inputs", "arguments": {}}),
        request("tools/call", {"name": "test_missing_capability", "arguments": {}}),
        request("tools/call", {"name": "test_error_handling", "arguments": {}}),
        request("tools/call", {"name": "json_schema_2020_12_tool", "arguments": {"name": "n", "email": "e"}}),
        progress,
        logging,
        request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
        request("prompts/get", {"name": "test_input_required_result_prompt"}),
        request("resources/read", {"uri": "test://template/1/data"}),
        request("resources/read", {"uri": "test://static-binary"}),
        request(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": {"name": "arg1", "value": "h"},
            },
        ),
        request("tasks/get", {"taskId": "t-1"}, caps={"extensions": {wire.TASKS_EXTENSION: {}}}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": meta()}},
    ]


TEMPLATES = _templates()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


@st.composite
def mutated_requests(draw: st.DrawFn) -> dict[str, Any]:
    message: Any = copy.deepcopy(draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.integers(0, 3))):
        paths: list[tuple[Any, ...]] = [p for p in _paths(message) if p]
        deep = [p for p in paths if len(p) >= 2 and p[0] == "params"]
        below_params: bool = draw(st.integers(0, 3)) > 0  # mostly, so the deeper rungs and handlers run
        if deep and below_params:
            paths = deep
        operation = draw(st.sampled_from(["set", "set", "set", "delete", "delete", "add", "add", "id"]))
        if not paths:
            continue
        if operation == "id":
            if isinstance(message, dict):
                message["id"] = draw(json_values)
            continue
        path = draw(st.sampled_from(paths[::-1]))  # Hypothesis favours the first choice: make that a leaf
        parent = _parent(message, path)
        if operation == "set":
            parent[path[-1]] = draw(json_values)
        elif operation == "delete":
            del parent[path[-1]]
        else:
            target = parent[path[-1]]
            if isinstance(target, dict):
                target[draw(st.text(max_size=8))] = draw(json_values)
            elif isinstance(target, list):
                target.append(draw(json_values))
    headers = headers_for(message) if draw(st.integers(0, 4)) else headers_for(draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        if draw(st.booleans()) and headers:
            headers.pop(draw(st.sampled_from(sorted(headers))))
        else:
            headers[draw(header_names)] = draw(header_values())
    return json_event(message, headers)


# ---- properties -----------------------------------------------------------------------------------------------------
@settings(FUZZ, max_examples=1500)
@given(
    body=st.binary(max_size=300),
    encoded=st.sampled_from([True, False, "true", 1, 0, None]),
    method=st.sampled_from(["POST", "POST", "GET", "DELETE", "post", "OPTIONS"]),
)
def test_arbitrary_bytes_never_crash_the_handler(handler: Any, body: bytes, encoded: Any, method: str) -> None:
    text_body = base64.b64encode(body).decode() if encoded else body.decode("utf-8", "replace")
    check(handler, event_for(text_body, {"content-type": "application/json", **AUTH}, method=method, is_base64=encoded))


@settings(FUZZ, max_examples=1500)
@given(message=json_values, base=st.sampled_from(TEMPLATES), use_base_headers=st.booleans())
def test_arbitrary_json_values_are_answered_with_well_formed_json_rpc(
    handler: Any, message: Any, base: dict[str, Any], use_base_headers: bool
) -> None:
    check(handler, json_event(message, headers_for(base) if use_base_headers else headers_for(message)))


@settings(FUZZ, max_examples=2500)
@given(event=mutated_requests())
def test_mutations_of_valid_requests_keep_every_property(handler: Any, event: dict[str, Any]) -> None:
    check(handler, event)


@settings(FUZZ, max_examples=1000)
@given(
    base=st.sampled_from(TEMPLATES),
    extra=st.dictionaries(header_names, header_values(), max_size=4),
    path=st.sampled_from(["/mcp", "/", PROTECTED_RESOURCE_PATH, PROTECTED_RESOURCE_PATH + "/mcp", "/mcp/x"]),
    method=st.sampled_from(["POST", "POST", "POST", "GET", "HEAD", "DELETE"]),
    encoded=st.booleans(),
)
def test_odd_headers_paths_and_encodings_keep_every_property(
    handler: Any, base: dict[str, Any], extra: dict[str, str], path: str, method: str, encoded: bool
) -> None:
    headers = {**headers_for(base), **extra}
    body = json.dumps(base)
    if encoded:
        body = base64.b64encode(body.encode()).decode()
    check(handler, event_for(body, headers, method=method, path=path, is_base64=encoded))


# ---- MRTR: retries with genuine, tampered and missing state and every kind of answer --------------------------------
MRTR_TOOLS = {
    "archive_project": ({"project": "p"}, ["confirm", "reason"]),
    "test_input_required_result_elicitation": ({}, ["user_name"]),
    "test_input_required_result_multi_round": ({}, ["step1", "step2"]),
    "test_input_required_result_multiple_inputs": ({}, ["user_name", "greeting", "client_roots"]),
    "test_input_required_result_request_state": ({}, ["confirm"]),
}
GOOD_ANSWERS: dict[str, Any] = {
    "confirm": {"action": "accept", "content": {"confirm": True, "ok": True}},
    "reason": {"action": "accept", "content": {"reason": "done"}},
    "user_name": {"action": "accept", "content": {"name": "Alice"}},
    "step1": {"action": "accept", "content": {"name": "Alice"}},
    "step2": {"action": "accept", "content": {"color": "blue"}},
    "greeting": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    "client_roots": {"roots": [{"uri": "file:///w"}]},
}


@pytest.fixture(scope="module")
def first_states(handler: Any) -> dict[str, str]:
    states = {}
    for tool, (arguments, _) in MRTR_TOOLS.items():
        message = check(handler, json_event(request("tools/call", {"name": tool, "arguments": arguments})))
        states[tool] = message["result"]["requestState"]
    return states


@settings(FUZZ, max_examples=1200)
@given(data=st.data())
def test_mrtr_retries_keep_every_property_and_never_accept_a_bad_state(
    handler: Any, first_states: dict[str, str], data: st.DataObject
) -> None:
    tool = data.draw(st.sampled_from(sorted(MRTR_TOOLS)))
    arguments, keys = MRTR_TOOLS[tool]
    responses: dict[str, Any] = {}
    for key in data.draw(st.lists(st.sampled_from([*keys, "extra"]), unique=True)):
        responses[key] = GOOD_ANSWERS.get(key) if data.draw(st.booleans()) else data.draw(json_values)
    genuine = first_states[tool]
    state_kind = data.draw(st.sampled_from(["genuine", "none", "tampered", "other-tool", "random"]))
    state: Any = {
        "genuine": genuine,
        "none": None,
        "other-tool": first_states[data.draw(st.sampled_from(sorted(set(MRTR_TOOLS) - {tool})))],
        "tampered": None,
        "random": None,
    }[state_kind]
    if state_kind == "tampered":
        index = data.draw(st.integers(0, len(genuine) - 1))
        replacement = data.draw(st.characters(codec="utf-8").filter(lambda c: c != genuine[index]))
        state = genuine[:index] + replacement + genuine[index + 1 :]
    elif state_kind == "random":
        state = data.draw(json_values.filter(lambda v: v is not None))
    params: dict[str, Any] = {"name": tool, "arguments": arguments, "inputResponses": responses}
    if state is not None:
        params["requestState"] = state
    message = check(handler, json_event(request("tools/call", params)))
    if state_kind in ("tampered", "other-tool", "random"):
        assert message["error"]["code"] == wire.INVALID_PARAMS, message
    else:
        result = message["result"]
        if result["resultType"] == wire.RESULT_INPUT_REQUIRED:
            assert set(result["inputRequests"]) <= set(keys)
            asked_for_answered = {k for k in result["inputRequests"] if responses.get(k) == GOOD_ANSWERS.get(k)}
            assert not asked_for_answered, "a well-formed answer was asked for again"


# ---- huge and deep values, at and beyond each limit -----------------------------------------------------------------
def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def _count_words(text: Any) -> dict[str, Any]:
    return request("tools/call", {"name": "count_words", "arguments": {"text": text}})


@pytest.mark.parametrize(
    ("event", "status", "code"),
    [
        (json_event(_count_words(_nested(MAX_JSON_DEPTH))), 400, wire.INVALID_REQUEST),
        (json_event(_count_words(_nested(MAX_JSON_DEPTH - 6))), 200, None),
        (event_for("[" * 100_000 + "]" * 100_000, AUTH), 400, None),
        (event_for('{"a":' * 50_000 + "1" + "}" * 50_000, AUTH), 400, None),
        (json_event(_count_words("x" * (MAX_JSON_STRING_CHARS + 1))), 400, wire.INVALID_REQUEST),
        (json_event(_count_words(["x"] * (MAX_JSON_COLLECTION_ITEMS + 1))), 400, wire.INVALID_REQUEST),
        (json_event(_count_words("word " * 20_000)), 200, None),
        (event_for(" " * 1_048_577, {**AUTH, "content-type": "application/json"}), 413, None),
        (event_for('{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"method":"tools/list"}', AUTH), 400, wire.PARSE_ERROR),
        (json_event(request("tools/list", request_id=10**4000)), 200, None),
        (json_event(_count_words("\ud800")), 400, wire.INVALID_REQUEST),
        (json_event(request("no/such/\ud800")), 400, wire.INVALID_REQUEST),
        (json_event(request("tools/call", {"name": "\udfff", "arguments": {}})), 400, wire.INVALID_REQUEST),
        (json_event(request("resources/read", {"uri": "test://template/\ud800/data"})), 400, wire.INVALID_REQUEST),
        (json_event(request("tools/list", request_id="\ud800")), 400, wire.INVALID_REQUEST),
        (json_event(_count_words("caf\u00e9 \U0001f600")), 200, None),
    ],
    ids=[
        "too-deep",
        "deep-but-allowed",
        "deep-array-text",
        "deep-object-text",
        "long-string",
        "many-items",
        "many-words",
        "oversize-body",
        "huge-integer-id",
        "very-long-integer-id",
        "lone-surrogate-argument",
        "lone-surrogate-method",
        "lone-surrogate-tool-name",
        "lone-surrogate-uri",
        "lone-surrogate-id",
        "paired-surrogates-are-fine",
    ],
)
def test_huge_deep_and_unpaired_values_are_answered_at_their_limits(
    handler: Any, event: dict[str, Any], status: int, code: int | None
) -> None:
    proxy = handler(event, None)
    assert proxy["statusCode"] == status, proxy["body"][:300]
    message = check(handler, event)
    if code is not None:
        assert message["error"]["code"] == code


def test_a_session_request_whose_id_cannot_be_read_is_answered_without_an_id(handler: Any) -> None:
    """Found by the mutation test with other tools registered: the 2025 leg answered `"id": null`."""
    event = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "authorization": "Bearer dev:fuzz",
            "mcp-session-id": "0",
        },
        "requestContext": {"http": {"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}},
        "body": '{"jsonrpc": "2.0", "id": null, "method": null}',
        "isBase64Encoded": False,
    }
    answer = handler(event, None)
    assert json.loads(answer["body"]) == {
        "jsonrpc": "2.0",
        "error": {"code": wire.INVALID_REQUEST, "message": "Invalid request: method must be a non-empty string"},
    }
