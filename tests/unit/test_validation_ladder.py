"""The validation ladder of the HTTP transport (docs/architecture.md): every rung, its code and its status."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from testkit import api_event, meta, rpc, standard_headers

from mcp_runtime import wire
from mcp_runtime.context import RequestContext
from mcp_runtime.lambda_http import request_from_event
from mcp_runtime.server import McpServer
from mcp_runtime.tools import ToolSpec
from mcp_runtime.transport import HttpRequest, McpHttpTransport
from tests.support import project_catalog
from tests.unit.conftest import ALICE, Client, make_server, make_settings, result_of

TASKS_CAPS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}}


def b64_header(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


class FakeTasks:
    """A task backend that records what reached it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def create(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any) -> dict[str, Any]:
        raise AssertionError("no task tool is called in these tests")

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        self.seen.append(("get", task_id))
        return {"resultType": wire.RESULT_COMPLETE, "taskId": task_id, "status": "working"}

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: RequestContext) -> None:
        self.seen.append(("update", task_id))

    def cancel(self, task_id: str, ctx: RequestContext) -> None:
        self.seen.append(("cancel", task_id))


def assert_error(response: Any, code: int, status: int, request_id: Any = "absent") -> dict[str, Any]:
    assert response.status == status, response.body
    assert response.headers["content-type"].startswith("application/json")
    message = response.json()
    assert message["jsonrpc"] == wire.JSONRPC_VERSION
    assert "result" not in message
    assert message["error"]["code"] == code, message
    assert isinstance(message["error"]["message"], str) and message["error"]["message"]
    if request_id == "absent":
        assert "id" not in message, message
    else:
        assert message["id"] == request_id
    error: dict[str, Any] = message["error"]
    return error


# ---- rung 1: HTTP method ------------------------------------------------------------------------------
@pytest.mark.parametrize("http_method", ["GET", "DELETE", "PUT"])
def test_anything_but_post_is_answered_405_with_an_allow_post_header(client: Client, http_method: str) -> None:
    response = client.post(rpc("tools/list"), method=http_method)
    assert response.status == 405
    assert response.headers["allow"] == "POST"


# ---- rung 2: Host and Origin against DNS rebinding ---------------------------------------------------------
@pytest.fixture
def local_client() -> Client:
    return Client(McpHttpTransport(make_server(settings=make_settings(MCP_ALLOWED_HOSTS="localhost,127.0.0.1,[::1]"))))


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "evil.example.com"},
        {"host": "evil.example.com:3000"},
        {"host": "localhost.evil.example.com"},
        {"host": "127.0.0.1.nip.io"},
        {"host": "localhost", "origin": "http://evil.example.com"},
        {"host": "localhost", "origin": "http://localhost.evil.example.com:3000"},
        {"host": "localhost", "origin": "null"},
        # Same origin is scheme, host and port: a page on https://localhost is not this http endpoint.
        {"host": "localhost", "origin": "https://localhost"},
        {"host": "localhost:3000", "origin": "https://localhost:3000"},
        {"host": "localhost:3000", "origin": "http://localhost:3001"},
    ],
)
def test_a_host_not_allowed_or_an_origin_neither_its_own_nor_allowed_is_forbidden(
    local_client: Client, headers: dict[str, str]
) -> None:
    response = local_client.post(rpc("server/discover"), headers=headers)
    assert response.status == 403
    assert "id" not in response.json()


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "localhost"},
        {"host": "localhost:3000"},
        {"host": "127.0.0.1"},
        {"host": "127.0.0.1:8080"},
        {"host": "[::1]"},
        {"host": "[::1]:3000"},
        {"host": "localhost:3000", "origin": "http://localhost:3000"},
        {"host": "127.0.0.1:3000", "origin": "http://127.0.0.1:3000"},
        {"host": "[::1]:3000", "origin": "http://[::1]:3000"},
        {"host": "LOCALHOST:3000", "origin": "http://localhost:3000"},
        {"host": "localhost", "origin": "http://localhost:80"},
    ],
)
def test_allowed_hosts_with_or_without_a_port_and_their_own_origins_are_served(
    local_client: Client, headers: dict[str, str]
) -> None:
    result = result_of(local_client.post(rpc("server/discover"), headers=headers))
    assert result["resultType"] == wire.RESULT_COMPLETE


def test_host_is_not_restricted_behind_the_cloud_front(client: Client) -> None:
    response = client.post(rpc("server/discover"), headers={"host": "abc.execute-api.eu-west-1.amazonaws.com"})
    assert response.status == 200


def test_a_browser_origin_is_forbidden_behind_the_cloud_front_unless_allowed() -> None:
    host = {"host": "abc.execute-api.eu-west-1.amazonaws.com"}
    page = {**host, "origin": "https://console.example.com"}
    default = Client(McpHttpTransport(make_server()))
    assert default.post(rpc("server/discover"), headers=page).status == 403
    assert default.post(rpc("server/discover"), headers={**host, "origin": f"https://{host['host']}"}).status == 200
    # The front reports the scheme (X-Forwarded-Proto); without it the cloud host's is https.
    assert default.post(rpc("server/discover"), headers={**host, "origin": f"http://{host['host']}"}).status == 403
    forwarded = {**host, "x-forwarded-proto": "https", "origin": f"https://{host['host']}:443"}
    assert default.post(rpc("server/discover"), headers=forwarded).status == 200
    allowing = Client(
        McpHttpTransport(make_server(settings=make_settings(MCP_ALLOWED_ORIGINS="https://console.example.com")))
    )
    assert allowing.post(rpc("server/discover"), headers=page).status == 200


# ---- rung 3: parse and JSON-RPC shape ---------------------------------------------------------------------
@pytest.mark.parametrize("body", [b"", b"{", b"not json", b'{"jsonrpc":"2.0",', b"\xff\xfe\x00", b"[1,2"])
def test_a_body_that_is_not_json_is_a_parse_error_400_without_an_id(client: Client, body: bytes) -> None:
    assert_error(client.post(body, headers={"mcp-method": "tools/list"}), wire.PARSE_ERROR, 400)


def test_a_batch_array_is_an_invalid_request_400_without_an_id(client: Client) -> None:
    batch = [rpc("tools/list", request_id=1), rpc("server/discover", request_id=2)]
    assert_error(client.post(batch), wire.INVALID_REQUEST, 400)


@pytest.mark.parametrize("body", [1, "tools/list", None, True, 2.5])
def test_a_json_value_that_is_not_an_object_is_an_invalid_request_400(client: Client, body: Any) -> None:
    assert_error(client.post(json.dumps(body).encode()), wire.INVALID_REQUEST, 400)


@pytest.mark.parametrize("jsonrpc", ["1.0", 2.0, 2, None, "absent"])
def test_a_wrong_or_missing_jsonrpc_version_is_an_invalid_request_400_that_echoes_the_id(
    client: Client, jsonrpc: Any
) -> None:
    message = rpc("tools/list", request_id=9)
    if jsonrpc == "absent":
        del message["jsonrpc"]
    else:
        message["jsonrpc"] = jsonrpc
    assert_error(client.post(message), wire.INVALID_REQUEST, 400, request_id=9)


@pytest.mark.parametrize("bad_id", [None, True, False, 1.5, {"n": 1}, [1]])
def test_an_id_that_is_not_a_string_or_integer_is_an_invalid_request_400_without_an_id(
    client: Client, bad_id: Any
) -> None:
    message = rpc("tools/list")
    message["id"] = bad_id
    assert_error(client.post(message), wire.INVALID_REQUEST, 400)


@pytest.mark.parametrize(
    "posted",
    [
        {"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": "boom"}},
    ],
)
def test_a_posted_json_rpc_response_is_an_invalid_request_400(client: Client, posted: dict[str, Any]) -> None:
    assert_error(client.post(posted), wire.INVALID_REQUEST, 400, request_id=7)


@pytest.mark.parametrize("method", ["", 42, None, ["tools/list"]])
def test_a_request_whose_method_is_not_a_non_empty_string_is_an_invalid_request(client: Client, method: Any) -> None:
    message = rpc("tools/list", request_id="m1")
    message["method"] = method
    assert_error(client.post(message), wire.INVALID_REQUEST, 400, request_id="m1")


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["params"].update(name="\ud800"),
        lambda m: m["params"]["arguments"].update(text="a\udfffb"),
        lambda m: m["params"]["arguments"].update({"\ud83d": "key"}),
        lambda m: m["params"]["_meta"].update({wire.META_CLIENT_INFO: {"name": "\udc00", "version": "1"}}),
    ],
    ids=["tool-name", "argument", "key", "client-info"],
)
def test_a_string_with_an_unpaired_surrogate_is_an_invalid_request_wherever_it_is(client: Client, change: Any) -> None:
    message = rpc("tools/call", {"name": "count_words", "arguments": {"text": "x"}}, request_id="s1")
    change(message)
    response = client.post(message, headers={"mcp-name": "count_words"})
    assert_error(response, wire.INVALID_REQUEST, 400, request_id="s1")


def test_an_unpaired_surrogate_id_is_echoed_in_a_body_that_is_still_valid_utf8(client: Client) -> None:
    response = client.post(rpc("tools/list", request_id="\ud800"))
    response.body.encode("utf-8")
    assert_error(response, wire.INVALID_REQUEST, 400, request_id="\ud800")


def test_non_ascii_text_round_trips_through_a_tool_call(client: Client) -> None:
    text = "caf\u00e9 \U0001f600 \u65e5\u672c"
    result = result_of(client.call_tool("count_words", {"text": text}))
    assert result["structuredContent"] == {"words": 3, "characters": len(text)}


@pytest.mark.parametrize("method", ["notifications/cancelled", "notifications/initialized", "notifications/whatever"])
def test_a_notification_is_accepted_with_202_and_an_empty_body(client: Client, method: str) -> None:
    notification = {"jsonrpc": "2.0", "method": method, "params": {"_meta": meta()}}
    response = client.post(notification)
    assert response.status == 202
    assert response.body == ""


# ---- rung 4: required _meta fields ------------------------------------------------------------------------
def _without_meta_key(key: str) -> dict[str, Any]:
    message = rpc("tools/list", request_id="meta-1")
    del message["params"]["_meta"][key]
    return message


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": "meta-1", "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": "meta-1", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "meta-1", "method": "tools/list", "params": {"_meta": "2026-07-28"}},
        _without_meta_key(wire.META_PROTOCOL_VERSION),
        _without_meta_key(wire.META_CLIENT_CAPABILITIES),
        {
            "jsonrpc": "2.0",
            "id": "meta-1",
            "method": "tools/list",
            "params": {"_meta": {wire.META_PROTOCOL_VERSION: wire.PROTOCOL_VERSION, wire.META_CLIENT_CAPABILITIES: []}},
        },
    ],
    ids=["no-meta", "no-params", "meta-not-object", "no-protocol-version", "no-client-capabilities", "caps-not-object"],
)
def test_missing_meta_fields_are_invalid_params_400_even_with_the_version_header(
    client: Client, message: dict[str, Any]
) -> None:
    response = client.post(message, headers={"mcp-protocol-version": wire.PROTOCOL_VERSION, "mcp-method": "tools/list"})
    assert_error(response, wire.INVALID_PARAMS, 400, request_id="meta-1")


def test_a_request_without_client_info_is_still_served(client: Client) -> None:
    message = rpc("tools/list")
    del message["params"]["_meta"][wire.META_CLIENT_INFO]
    assert result_of(client.post(message))["tools"]


# ---- rungs 5 and 6: header/body version cross-check, then version support ------------------------------------
def test_a_header_body_version_mismatch_is_a_header_mismatch_not_an_unsupported_version(client: Client) -> None:
    message = rpc("tools/list", request_id=5)
    message["params"]["_meta"][wire.META_PROTOCOL_VERSION] = "v999.0.0"
    response = client.post(message, headers={"mcp-protocol-version": wire.PROTOCOL_VERSION})
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=5)


def test_a_missing_version_header_with_a_valid_body_is_a_header_mismatch(client: Client) -> None:
    response = client.post(rpc("tools/list", request_id=5), drop=["mcp-protocol-version"])
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=5)


def test_an_agreed_unsupported_version_is_rejected_naming_the_supported_and_requested_versions(client: Client) -> None:
    message = rpc("tools/list", request_id=6)
    message["params"]["_meta"][wire.META_PROTOCOL_VERSION] = "1900-01-01"
    response = client.post(message, headers={"mcp-protocol-version": "1900-01-01"})
    error = assert_error(response, wire.UNSUPPORTED_PROTOCOL_VERSION, 400, request_id=6)
    assert error["data"] == {"supported": list(wire.SUPPORTED_PROTOCOL_VERSIONS), "requested": "1900-01-01"}


def test_a_legacy_initialize_without_meta_or_version_header_is_answered_with_the_supported_versions(
    client: Client,
) -> None:
    legacy = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    response = client.post(legacy, drop=["mcp-protocol-version", "mcp-method"])
    error = assert_error(response, wire.UNSUPPORTED_PROTOCOL_VERSION, 400, request_id=0)
    assert error["data"] == {"supported": list(wire.SUPPORTED_PROTOCOL_VERSIONS), "requested": "2025-11-25"}


# ---- rung 7: Mcp-Method and Mcp-Name ------------------------------------------------------------------------
def test_a_missing_mcp_method_header_is_a_header_mismatch(client: Client) -> None:
    assert_error(client.post(rpc("tools/list", request_id=3), drop=["mcp-method"]), wire.HEADER_MISMATCH, 400, 3)


@pytest.mark.parametrize("value", ["tools/call", "TOOLS/LIST", "Tools/List", "tools/list/", ""])
def test_an_mcp_method_value_that_differs_from_the_body_is_a_header_mismatch(client: Client, value: str) -> None:
    response = client.post(rpc("tools/list", request_id=3), headers={"mcp-method": value})
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=3)


@pytest.mark.parametrize("value", [" tools/list", "tools/list ", "\ttools/list\t", "  tools/list  "])
def test_optional_whitespace_around_a_header_value_is_trimmed(client: Client, value: str) -> None:
    assert result_of(client.post(rpc("tools/list"), headers={"mcp-method": value}))["tools"]


@pytest.mark.parametrize("name", ["MCP-METHOD", "Mcp-Method", "mCp-MeThOd"])
def test_header_names_are_case_insensitive_through_the_lambda_adapter(server: McpServer, name: str) -> None:
    message = rpc("tools/list", request_id=4)
    event = api_event(message)
    del event["headers"]["mcp-method"]
    event["headers"][name] = "tools/list"
    event["headers"]["MCP-Protocol-Version"] = event["headers"].pop("mcp-protocol-version")
    request = request_from_event(event)
    request.principal = ALICE
    response = McpHttpTransport(server).handle(request)
    assert response.status == 200
    assert response.json()["id"] == 4


def test_an_mcp_name_that_differs_from_the_tool_name_is_a_header_mismatch(client: Client) -> None:
    response = client.call_tool("count_words", {"text": "a b"}, headers={"mcp-name": "archive_project"}, request_id=8)
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=8)


def test_a_missing_mcp_name_on_tools_call_is_a_header_mismatch(client: Client) -> None:
    response = client.call_tool("count_words", {"text": "a b"}, drop=["mcp-name"], request_id=8)
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=8)


def test_a_base64_wrapped_mcp_name_is_decoded_before_it_is_compared(client: Client) -> None:
    response = client.call_tool("count_words", {"text": "a b c"}, headers={"mcp-name": b64_header("count_words")})
    assert result_of(response)["structuredContent"] == {"words": 3, "characters": 5}


def test_a_base64_wrapped_non_ascii_resource_uri_is_decoded_before_it_is_compared(client: Client) -> None:
    uri = "test://template/caf\u00e9 \u2615/data"
    response = client.request("resources/read", {"uri": uri}, headers={"mcp-name": b64_header(uri)})
    assert result_of(response)["contents"][0]["uri"] == uri


@pytest.mark.parametrize("value", ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?//79?="])
def test_a_malformed_base64_header_value_is_rejected(client: Client, value: str) -> None:
    response = client.request("resources/read", {"uri": "Hello"}, headers={"mcp-name": value}, request_id=11)
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=11)


@pytest.mark.parametrize("literal", ["=?base64?SGVsbG8=", "?base64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="])
def test_a_value_without_the_exact_base64_wrapper_is_compared_literally(client: Client, literal: str) -> None:
    # The header passes the cross-check (so the lookup runs and finds nothing) ...
    same = client.request("resources/read", {"uri": literal}, headers={"mcp-name": literal}, request_id=12)
    error = assert_error(same, wire.INVALID_PARAMS, 200, request_id=12)
    assert error["data"] == {"uri": literal}
    # ... and is not decoded: it does not match the decoded text.
    decoded = client.request("resources/read", {"uri": "Hello"}, headers={"mcp-name": literal}, request_id=13)
    assert_error(decoded, wire.HEADER_MISMATCH, 400, request_id=13)


# ---- tasks/*: only with a task backend; Mcp-Name optional there -----------------------------------------------
@pytest.fixture
def tasks_client() -> tuple[Client, FakeTasks]:
    backend = FakeTasks()
    return Client(McpHttpTransport(make_server(tasks=backend))), backend


@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
def test_a_missing_mcp_name_is_tolerated_on_task_methods(tasks_client: tuple[Client, FakeTasks], method: str) -> None:
    client, backend = tasks_client
    response = client.request(method, {"taskId": "t-1"}, capabilities=TASKS_CAPS, drop=["mcp-name"])
    assert result_of(response)["resultType"] == wire.RESULT_COMPLETE
    assert backend.seen == [(method.split("/")[1], "t-1")]


def test_a_mismatched_mcp_name_on_a_task_method_is_still_a_header_mismatch(
    tasks_client: tuple[Client, FakeTasks],
) -> None:
    client, backend = tasks_client
    response = client.request(
        "tasks/get", {"taskId": "t-1"}, capabilities=TASKS_CAPS, headers={"mcp-name": "t-2"}, request_id=14
    )
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=14)
    assert backend.seen == []


def test_task_methods_without_the_declared_extension_need_that_capability(
    tasks_client: tuple[Client, FakeTasks],
) -> None:
    client, backend = tasks_client
    response = client.request("tasks/get", {"taskId": "t-1"}, request_id=15)
    error = assert_error(response, wire.MISSING_REQUIRED_CLIENT_CAPABILITY, 400, request_id=15)
    assert error["data"] == {"requiredCapabilities": {"extensions": {wire.TASKS_EXTENSION: {}}}}
    assert backend.seen == []


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_do_not_exist_without_a_task_backend(client: Client, method: str) -> None:
    params: dict[str, Any] = {"taskId": "t-1"}
    if method == "tasks/update":
        params["inputResponses"] = {}
    response = client.request(method, params, capabilities=TASKS_CAPS, request_id=16)
    assert_error(response, wire.METHOD_NOT_FOUND, 404, request_id=16)


# ---- rung 8: removed and unknown methods ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "tasks/result",
        "tasks/list",
        "no/such/method",
        "tools/List",
    ],
)
def test_removed_and_unknown_methods_are_method_not_found_404(
    tasks_client: tuple[Client, FakeTasks], client: Client, method: str
) -> None:
    params = {"uri": "test://static-text"} if method.startswith("resources/") else {"taskId": "t-1"}
    for each in (client, tasks_client[0]):
        response = each.request(method, params, capabilities=TASKS_CAPS, request_id="gone")
        assert_error(response, wire.METHOD_NOT_FOUND, 404, request_id="gone")


# ---- rung 9: capability gate ------------------------------------------------------------------------------------
def test_a_tool_that_needs_sampling_names_it_as_a_required_capability_object(client: Client) -> None:
    response = client.call_tool("test_missing_capability", {}, capabilities={"elicitation": {}}, request_id=21)
    error = assert_error(response, wire.MISSING_REQUIRED_CLIENT_CAPABILITY, 400, request_id=21)
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


def test_the_same_tool_is_served_when_the_request_declares_sampling(client: Client) -> None:
    result = result_of(client.call_tool("test_missing_capability", {}, capabilities={"sampling": {}}))
    assert result.get("isError") is not True


# ---- rung 10: Mcp-Param-* --------------------------------------------------------------------------------------
def test_a_mirrored_argument_with_its_matching_header_is_served(client: Client) -> None:
    response = client.call_tool("test_x_mcp_header", {"region": "eu-west-1"}, headers={"Mcp-Param-Region": "eu-west-1"})
    assert result_of(response)["content"][0]["text"] == "region=eu-west-1"


def test_a_base64_wrapped_mirrored_header_is_decoded(client: Client) -> None:
    region = " north \u00e9 "
    response = client.call_tool(
        "test_x_mcp_header", {"region": region}, headers={"Mcp-Param-Region": b64_header(region)}
    )
    assert result_of(response)["content"][0]["text"] == f"region={region}"


def test_a_missing_mirrored_header_is_a_header_mismatch(client: Client) -> None:
    response = client.call_tool("test_x_mcp_header", {"region": "eu-west-1"}, request_id=22)
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=22)


@pytest.mark.parametrize("value", ["us-east-1", "EU-WEST-1", "=?base64?ZXUtd2VzdC0x?", "=?base64?not base64?="])
def test_a_mismatched_or_malformed_mirrored_header_is_a_header_mismatch(client: Client, value: str) -> None:
    response = client.call_tool(
        "test_x_mcp_header", {"region": "eu-west-1"}, headers={"Mcp-Param-Region": value}, request_id=23
    )
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=23)


def test_a_null_mirrored_argument_needs_no_header_and_fails_as_a_tool_error(client: Client) -> None:
    result = result_of(client.call_tool("test_x_mcp_header", {"region": None}))
    assert result["isError"] is True


@pytest.mark.parametrize("value", [10**400, -(10**400)], ids=["huge", "-huge"])
def test_a_huge_integer_in_a_mirrored_argument_is_a_header_mismatch_not_an_internal_error(
    client: Client, value: int
) -> None:
    response = client.call_tool(
        "test_x_mcp_header", {"region": value}, headers={"Mcp-Param-Region": "1"}, request_id=24
    )
    assert_error(response, wire.HEADER_MISMATCH, 400, request_id=24)


# ---- rung 11: handler-level errors, in-band ----------------------------------------------------------------------
def test_an_unknown_tool_is_an_in_band_invalid_params_error_naming_the_tool(client: Client) -> None:
    response = client.call_tool("no_such_tool", {}, request_id=31)
    error = assert_error(response, wire.INVALID_PARAMS, 200, request_id=31)
    assert error["message"] == "Unknown tool: no_such_tool"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"text": 12345}, "Invalid arguments: 'text' must be a string"),
        ({}, "Invalid arguments: 'text' is required"),
        ({"text": ["a"]}, "Invalid arguments: 'text' must be a string"),
    ],
)
def test_bad_argument_values_are_a_tool_error_in_our_own_words(
    client: Client, arguments: dict[str, Any], expected: str
) -> None:
    result = result_of(client.call_tool("count_words", arguments))
    assert result["resultType"] == wire.RESULT_COMPLETE
    assert result["isError"] is True
    said = result["content"][0]["text"]
    assert said == expected
    for pydantic_wording in ("Input should", "pydantic", "type=", "input_value", "errors.pydantic.dev"):
        assert pydantic_wording not in said


def test_a_tools_call_without_a_name_is_an_in_band_invalid_params_error(client: Client) -> None:
    response = client.request("tools/call", {"arguments": {}}, request_id=32)
    assert_error(response, wire.INVALID_PARAMS, 200, request_id=32)


def test_a_missing_resource_is_invalid_params_carrying_the_uri(client: Client) -> None:
    response = client.request("resources/read", {"uri": "test://nonexistent.txt"}, request_id=33)
    error = assert_error(response, wire.INVALID_PARAMS, 200, request_id=33)
    assert error["data"] == {"uri": "test://nonexistent.txt"}


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "\u00e9t\u00e9",
        base64.urlsafe_b64encode(b"offset:0").decode(),
        base64.urlsafe_b64encode(b"offset:999999").decode(),
        base64.urlsafe_b64encode(b"page:1").decode(),
        12,
    ],
)
@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"])
def test_an_invalid_cursor_is_invalid_params(client: Client, method: str, cursor: Any) -> None:
    response = client.request(method, {"cursor": cursor}, request_id=34)
    assert_error(response, wire.INVALID_PARAMS, 200, request_id=34)


# ---- every error echoes its id -------------------------------------------------------------------------------------
def _mutated(change: Any) -> dict[str, Any]:
    message = rpc("tools/call", {"name": "count_words", "arguments": {"text": "x"}}, request_id="echo-\u00e9")
    change(message)
    return message


@pytest.mark.parametrize("request_id", ["echo-\u00e9", 0, -7, 2**53, ""])
@pytest.mark.parametrize(
    ("change", "headers", "code"),
    [
        (lambda m: m.update(jsonrpc="1.0"), {}, wire.INVALID_REQUEST),
        (lambda m: m["params"].pop("_meta"), {}, wire.INVALID_PARAMS),
        (lambda m: m["params"]["_meta"].update({wire.META_PROTOCOL_VERSION: "x"}), {}, wire.HEADER_MISMATCH),
        (lambda m: None, {"mcp-name": "other"}, wire.HEADER_MISMATCH),
        (lambda m: m.update(method="ping"), {"mcp-method": "ping"}, wire.METHOD_NOT_FOUND),
        (lambda m: m["params"].update(name="nope"), {"mcp-name": "nope"}, wire.INVALID_PARAMS),
        (
            lambda m: m["params"].update(name="test_missing_capability", arguments={}),
            {"mcp-name": "test_missing_capability"},
            wire.MISSING_REQUIRED_CLIENT_CAPABILITY,
        ),
        (
            lambda m: m["params"].update(name="count_words", requestState="v1.k1.AAAA.AAAA"),
            {},
            wire.INVALID_PARAMS,
        ),
    ],
    ids=["jsonrpc", "meta", "version", "name", "removed", "unknown-tool", "capability", "state"],
)
def test_every_error_echoes_the_request_id(
    client: Client, request_id: Any, change: Any, headers: dict[str, str], code: int
) -> None:
    message = _mutated(change)
    message["id"] = request_id
    response = client.post(message, headers=headers)
    body = response.json()
    assert body["error"]["code"] == code
    assert body["id"] == request_id


# ---- results: resultType everywhere, caching hints where required ----------------------------------------------
CACHEABLE = ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        *((m, {}) for m in CACHEABLE),
        ("resources/read", {"uri": "test://static-text"}),
        ("resources/read", {"uri": "test://static-binary"}),
        ("resources/read", {"uri": "test://template/42/data"}),
    ],
)
def test_list_results_resource_reads_and_discover_carry_caching_hints(
    client: Client, method: str, params: dict[str, Any]
) -> None:
    result = result_of(client.request(method, params))
    assert result["resultType"] == wire.RESULT_COMPLETE
    assert isinstance(result["ttlMs"], int) and not isinstance(result["ttlMs"], bool) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "count_words", "arguments": {"text": "one two"}}),
        ("tools/call", {"name": "test_error_handling", "arguments": {}}),
        ("tools/call", {"name": "archive_project", "arguments": {"project": "p"}}),
        ("prompts/get", {"name": "test_simple_prompt"}),
        ("prompts/get", {"name": "test_input_required_result_prompt"}),
        (
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": {"name": "arg1", "value": "he"},
            },
        ),
    ],
)
def test_every_other_result_carries_a_result_type(client: Client, method: str, params: dict[str, Any]) -> None:
    result = result_of(client.request(method, params, capabilities={"elicitation": {}}))
    assert result["resultType"] in (wire.RESULT_COMPLETE, wire.RESULT_INPUT_REQUIRED)


def test_input_required_results_carry_no_caching_hints(client: Client) -> None:
    result = result_of(client.call_tool("archive_project", {"project": "p"}, capabilities={"elicitation": {}}))
    assert result["resultType"] == wire.RESULT_INPUT_REQUIRED
    assert "ttlMs" not in result and "cacheScope" not in result


# ---- discover tells the truth --------------------------------------------------------------------------------------
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "tools": ("tools/list", {}),
    "prompts": ("prompts/list", {}),
    "resources": ("resources/list", {}),
    "completions": (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "test_simple_prompt"}, "argument": {"name": "a", "value": ""}},
    ),
}


def _assert_capabilities_match_handlers(client: Client) -> dict[str, Any]:
    discovered = result_of(client.request("server/discover"))
    assert discovered["supportedVersions"] == list(wire.SUPPORTED_PROTOCOL_VERSIONS)
    capabilities: dict[str, Any] = discovered["capabilities"]
    for capability, (method, params) in PROBES.items():
        response = client.request(method, params)
        if capability in capabilities:
            assert response.status == 200, (capability, response.body)
        else:
            assert_error(response, wire.METHOD_NOT_FOUND, 404, request_id=response.json()["id"])
    return capabilities


def test_a_server_with_only_tools_advertises_only_tools() -> None:
    client = Client(McpHttpTransport(make_server(fixtures=False)))
    assert _assert_capabilities_match_handlers(client) == {"tools": {}}
    listed = result_of(client.request("tools/list"))["tools"]
    assert sorted(tool["name"] for tool in listed) == ["archive_project", "count_words", "deploy_release"]


def test_a_server_with_the_fixtures_advertises_exactly_what_it_serves(client: Client) -> None:
    assert set(_assert_capabilities_match_handlers(client)) == {"tools", "prompts", "resources", "completions"}


def test_a_server_with_a_task_backend_advertises_the_tasks_extension(tasks_client: tuple[Client, FakeTasks]) -> None:
    capabilities = result_of(tasks_client[0].request("server/discover"))["capabilities"]
    assert capabilities["extensions"] == {wire.TASKS_EXTENSION: {}}


def test_the_composition_root_serves_the_projects_tools_and_no_fixtures() -> None:
    from app import composition

    server = composition.build_server(make_settings())
    cold = server.capabilities()  # before the tool modules load: what their sources declare
    project = project_catalog(table_backed=False)

    assert sorted(spec.name for spec in server.tools) == sorted(spec.name for spec in project.tools)
    assert [spec.name for spec in server.prompts] == [spec.name for spec in project.prompts]
    assert [spec.uri for spec in server.tools.resources()] == [spec.uri for spec in project.tools.resources()]
    assert ("prompts" in cold, "resources" in cold) == (len(project.prompts) > 0, len(project.resources) > 0)


# ---- one endpoint path, and who answers (issue 15, defect 10) ----------------------------------------------------
@pytest.mark.parametrize("path", ["/", "/other", "/mcp/extra", "/MCP", "/mcpx"])
def test_a_path_other_than_the_endpoint_is_404_even_where_every_path_reaches_the_function(
    client: Client, path: str
) -> None:
    """A Function URL sends every path to the function; only the endpoint (and the metadata) is served."""
    message = rpc("server/discover")
    response = client.transport.handle(
        HttpRequest("POST", path, standard_headers(message), json.dumps(message).encode(), client.principal)
    )
    assert response.status == 404
    assert response.json()["error"] == {"code": wire.INVALID_REQUEST, "message": "Not found: the MCP endpoint is /mcp"}


@pytest.mark.parametrize(
    ("method", "params"),
    [("server/discover", {}), ("tools/list", {}), ("tools/call", {"name": "test_simple_text"}), ("prompts/list", {})],
)
def test_every_result_names_the_server_in_its_meta(client: Client, method: str, params: dict[str, Any]) -> None:
    result = result_of(client.request(method, params))
    assert result["_meta"][wire.META_SERVER_INFO] == {"name": "serverless-mcp-tasks", "version": "0.1.0"}


# ---- a tool that will ask is refused up front to a client that cannot answer (issue 15, defect 8) ---------------
@pytest.mark.parametrize("capabilities", [TASKS_CAPS, {}])
def test_a_tool_that_may_ask_for_elicitation_is_refused_before_any_work_without_that_capability(
    tasks_client: tuple[Client, FakeTasks], capabilities: dict[str, Any]
) -> None:
    """deploy_release asks for an approval at the end: a client without elicitation used to get a task that
    ran every stage and only then failed."""
    client, backend = tasks_client
    response = client.call_tool(
        "deploy_release", {"service": "web", "version": "1", "seconds_per_stage": 0}, capabilities=capabilities
    )
    error = assert_error(response, wire.MISSING_REQUIRED_CLIENT_CAPABILITY, 400, request_id=response.json()["id"])
    assert error["data"] == {"requiredCapabilities": {"elicitation": {}}}
    assert error["message"] == "Tool deploy_release may ask the user (elicitation)"
    assert backend.seen == []  # no task was created


def test_a_tool_may_declare_only_what_a_client_can_be_asked() -> None:
    from mcp_runtime import tool
    from mcp_runtime.tools import Registry

    @tool(description="x", asks=("telepathy",))
    def odd(args: None, ctx: Any) -> str:
        return ""

    registry = Registry()
    registry.admit(odd.__mcp_tool__, odd)  # type: ignore[attr-defined]
    assert len(registry) == 0
    (problem,) = registry.left_out
    assert problem.reason == (
        "ValueError: tool 'odd' asks for ['telepathy']; a client can be asked for ['elicitation', 'roots', 'sampling']"
    )
