"""Hardening through the deployed handler path with real (moto) task, handle and history backends.

1. Each limit answers with its exact JSON-RPC code and HTTP status: body size, JSON depth, string
   length, array and object size, inputResponses count on tools/call and on tasks/update, the size
   of task answers and task arguments, and requestState size. Task limits are checked before any
   lookup, so they answer the same for another principal's task as for an unknown id.
2. No response, whatever the input and whatever AWS does, carries internal detail: stack traces,
   Python exception names, pydantic wording, or AWS error text. Many bad inputs are driven through
   the handler against a working backend, a missing table, a missing state machine and an AWS
   endpoint that refuses connections, and every body is checked.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from local_stack.aws import DUMMY_CREDENTIALS, REGION, EmbeddedAws, register_function, unregister_function
from local_stack.provision import ProvisionedStack
from testkit import api_event, free_port, rpc, standard_headers

from app.composition import build_server, build_supervisor, build_worker
from mcp_runtime import wire
from mcp_runtime.lambda_http import request_from_event, response_to_proxy
from mcp_runtime.limits import (
    MAX_INPUT_RESPONSES,
    MAX_JSON_COLLECTION_ITEMS,
    MAX_JSON_DEPTH,
    MAX_JSON_STRING_CHARS,
    MAX_REQUEST_STATE_CHARS,
    MAX_TASK_ANSWERS,
    MAX_TASK_ANSWERS_BYTES,
    MAX_TASK_ARGUMENTS_BYTES,
)
from mcp_runtime.settings import Settings
from mcp_runtime.tasks.service import TASK_NOT_FOUND_MESSAGE
from mcp_runtime.transport import McpHttpTransport
from tests.integration.task_harness import TaskResources, delivered_events

CAPS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}, "sampling": {}, "roots": {}}
NOT_FOUND = {"code": wire.INVALID_PARAMS, "message": TASK_NOT_FOUND_MESSAGE}

# What must never reach a client. Case-sensitive names, case-insensitive phrases.
LEAK_NAMES = re.compile(
    r"Traceback|File \"|\.py\b|line \d+|Error\(|"
    r"\b(ValueError|TypeError|KeyError|IndexError|AttributeError|AssertionError|RuntimeError|RecursionError|"
    r"OverflowError|UnicodeDecodeError|UnicodeEncodeError|JSONDecodeError|ValidationError|NameError|"
    r"ClientError|EndpointConnectionError|ParamValidationError|NoCredentialsError|BotoCoreError|"
    r"ConditionalCheckFailed\w*|ResourceNotFoundException|ValidationException|StateMachineDoesNotExist|"
    r"TaskNotFound|TaskConflict|TaskStoreUnavailable|ExecutorUnavailable|HandleNotFound|HandleConflict|"
    r"HandleStoreUnavailable|StateRejected|InputNeeded|McpError)\b"
)
LEAK_PHRASES = re.compile(
    r"input should be|validation error|pydantic|botocore|boto3|\bmoto\b|arn:aws|dynamodb|step ?functions|"
    r"states\.|amazonaws|exception|stack trace|mcp_runtime|site-packages|__\w+__",
    re.IGNORECASE,
)


def assert_no_internal_detail(proxy: dict[str, Any], context: Any = "") -> None:
    body = proxy.get("body") or ""
    headers = json.dumps(proxy.get("headers") or {})
    for text in (body, headers):
        found = LEAK_NAMES.search(text) or LEAK_PHRASES.search(text)
        assert found is None, f"{found.group(0)!r} leaked for {context!r}: {text[:400]}"
    assert proxy["statusCode"] < 500, (context, body[:300])


# ---- the handler under test --------------------------------------------------------------------------------------
@dataclass
class Backend:
    """One composition-root transport on a set of task resources, served the way the Lambda handler serves."""

    transport: McpHttpTransport

    def serve(self, event: dict[str, Any]) -> dict[str, Any]:
        request = request_from_event(event, dev_auth=True)
        proxy = response_to_proxy(self.transport.handle(request))
        assert_no_internal_detail(proxy, event.get("body", "")[:200])
        return proxy

    def post(self, message: Any, who: str | None = "alice", headers: dict[str, str] | None = None) -> dict[str, Any]:
        extra = dict(headers or {})
        if who is not None:
            extra["authorization"] = f"Bearer dev:{who}"
        return self.serve(api_event(message, extra))

    def call(
        self, method: str, params: dict[str, Any], who: str = "alice", **kwargs: Any
    ) -> tuple[int, dict[str, Any]]:
        proxy = self.post(rpc(method, params, 9, CAPS), who, **kwargs)
        return proxy["statusCode"], json.loads(proxy["body"])

    def result(self, method: str, params: dict[str, Any], who: str = "alice") -> dict[str, Any]:
        status, message = self.call(method, params, who)
        assert status == 200 and "result" in message, message
        result: dict[str, Any] = message["result"]
        return result


def _settings(**overrides: str) -> Settings:
    return Settings.from_environ(
        {
            "TASK_PROGRESS_INTERVAL_MS": "0",
            "MCP_STATE_KEY": "test-only-requestState-key-0123456789abcdef",
            "MCP_TOOL_PACKAGES": "fixtures.patterns",
            **overrides,
        }
    )


@pytest.fixture
def aws_environment(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> Iterator[dict[str, str]]:
    resources = TaskResources.of(deployed)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
            patch.setenv(name, value)
        patch.delenv("AWS_PROFILE", raising=False)
        environment = {
            "TASK_TABLE_NAME": resources.table_name,
            "TASK_STATE_MACHINE_ARN": resources.state_machine_arn,
            "AWS_ENDPOINT_URL": embedded_aws.endpoint,
        }
        worker = build_worker(_settings(**environment))
        supervisor = build_supervisor(_settings(**environment))
        register_function(resources.worker_function_name, lambda event, context: worker.handle(event))
        with delivered_events(embedded_aws, deployed, lambda event, context: supervisor.handle(event)):
            yield environment
        unregister_function(resources.worker_function_name)


@pytest.fixture
def backend(aws_environment: dict[str, str]) -> Backend:
    return Backend(McpHttpTransport(build_server(_settings(**aws_environment))))


@pytest.fixture
def alice_awaiting(backend: Backend) -> str:
    created = backend.result(
        "tools/call", {"name": "deploy_release", "arguments": {"service": "a", "version": "1", "seconds_per_stage": 0}}
    )
    task_id: str = created["taskId"]
    deadline = time.monotonic() + 20
    while backend.result("tasks/get", {"taskId": task_id})["status"] != "input_required":
        assert time.monotonic() < deadline, "the task never asked for input"
        time.sleep(0.05)
    return task_id


def _error(status_and_message: tuple[int, dict[str, Any]]) -> tuple[int, int, str]:
    status, message = status_and_message
    assert "result" not in message, message
    return status, message["error"]["code"], message["error"]["message"]


def _count_words(text: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": "count_words", "arguments": {"text": text}}, 9, CAPS)


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


# ---- 1. one test per limit, with its exact code and status ---------------------------------------------------------
def test_a_body_over_the_limit_is_413_and_one_at_the_limit_is_served(backend: Backend) -> None:
    limit = Settings().max_body_bytes
    message = _count_words("")
    padding = limit - len(json.dumps(message))
    at_limit = json.dumps(message)[:-1] + " " * padding + "}"
    assert len(at_limit.encode()) == limit
    assert (
        backend.serve(api_event(at_limit, {**standard_headers(message), "authorization": "Bearer dev:alice"}))[
            "statusCode"
        ]
        == 200
    )
    over = backend.serve(api_event(at_limit + " ", {**standard_headers(message), "authorization": "Bearer dev:alice"}))
    assert over["statusCode"] == 413
    assert json.loads(over["body"])["error"] == {"code": wire.INVALID_REQUEST, "message": "Request body too large"}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_nested(MAX_JSON_DEPTH), "nested too deeply"),
        ("x" * (MAX_JSON_STRING_CHARS + 1), "a string is too long"),
        (["x"] * (MAX_JSON_COLLECTION_ITEMS + 1), "an array has too many items"),
        ({f"k{i}": 1 for i in range(MAX_JSON_COLLECTION_ITEMS + 1)}, "an object has too many members"),
    ],
    ids=["depth", "string-length", "array-length", "object-members"],
)
def test_structural_limits_are_invalid_request_400(backend: Backend, value: Any, reason: str) -> None:
    proxy = backend.post(_count_words(value))
    assert proxy["statusCode"] == 400
    error = json.loads(proxy["body"])["error"]
    assert error == {"code": wire.INVALID_REQUEST, "message": f"Invalid request: {reason}"}


@pytest.mark.parametrize(
    "value",
    [_nested(MAX_JSON_DEPTH - 6), "x" * 100_000, ["x"] * 1000],
    ids=["depth", "string-length", "array-length"],
)
def test_values_inside_the_structural_limits_reach_the_tool(backend: Backend, value: Any) -> None:
    status, message = backend.call("tools/call", {"name": "count_words", "arguments": {"text": value}})
    assert status == 200 and "result" in message  # a tool error for the wrong type, or a count


def test_too_many_input_responses_on_tools_call_are_invalid_params(backend: Backend) -> None:
    responses = {f"k{i}": {"action": "decline"} for i in range(MAX_INPUT_RESPONSES + 1)}
    params = {"name": "archive_project", "arguments": {"project": "x"}, "inputResponses": responses}
    assert _error(backend.call("tools/call", params)) == (
        200,
        wire.INVALID_PARAMS,
        f"Invalid params: at most {MAX_INPUT_RESPONSES} inputResponses are accepted",
    )
    responses.pop("k0")
    assert (
        backend.result("tools/call", {**params, "inputResponses": responses})["resultType"]
        == wire.RESULT_INPUT_REQUIRED
    )


@pytest.mark.parametrize("who", ["alice", "mallory"])
@pytest.mark.parametrize("target", ["alices", "unknown"])
def test_too_many_input_responses_on_tasks_update_are_invalid_params_for_any_task_id(
    backend: Backend, alice_awaiting: str, who: str, target: str
) -> None:
    task_id = alice_awaiting if target == "alices" else secrets.token_urlsafe(24)
    responses = {f"k{i}": {"action": "decline"} for i in range(MAX_TASK_ANSWERS + 1)}
    assert _error(backend.call("tasks/update", {"taskId": task_id, "inputResponses": responses}, who)) == (
        200,
        wire.INVALID_PARAMS,
        f"Invalid params: at most {MAX_TASK_ANSWERS} inputResponses are accepted",
    )
    assert backend.result("tasks/get", {"taskId": alice_awaiting})["status"] == "input_required"


@pytest.mark.parametrize("who", ["alice", "mallory"])
def test_task_answers_over_the_size_limit_are_invalid_params(backend: Backend, alice_awaiting: str, who: str) -> None:
    answer = {"promote": {"action": "accept", "content": {"approve": True, "note": "x" * MAX_TASK_ANSWERS_BYTES}}}
    assert _error(backend.call("tasks/update", {"taskId": alice_awaiting, "inputResponses": answer}, who)) == (
        200,
        wire.INVALID_PARAMS,
        f"Invalid params: inputResponses may be at most {MAX_TASK_ANSWERS_BYTES} bytes",
    )
    assert backend.result("tasks/get", {"taskId": alice_awaiting})["status"] == "input_required"


def test_the_limit_on_answers_allows_exactly_the_limit(backend: Backend) -> None:
    """At the limit the request reaches the store: for an unknown id that is the not-found answer."""
    answer: dict[str, Any] = {"promote": {"action": "accept", "content": {"note": ""}}}
    size = len(json.dumps(answer, separators=(",", ":")))
    answer["promote"]["content"]["note"] = "x" * (MAX_TASK_ANSWERS_BYTES - size)
    status, message = backend.call("tasks/update", {"taskId": secrets.token_urlsafe(24), "inputResponses": answer})
    assert (status, message["error"]) == (200, NOT_FOUND)


def test_an_empty_answer_key_is_ignored_not_sent_to_dynamodb(backend: Backend, alice_awaiting: str) -> None:
    status, message = backend.call(
        "tasks/update", {"taskId": alice_awaiting, "inputResponses": {"": {"action": "decline"}}}
    )
    assert (status, message["result"]["resultType"], set(message["result"])) == (
        200,
        wire.RESULT_COMPLETE,
        {"resultType", "_meta"},
    )
    assert backend.result("tasks/get", {"taskId": alice_awaiting})["status"] == "input_required"
    status, message = backend.call(
        "tasks/update", {"taskId": alice_awaiting, "inputResponses": {"": {"action": "decline"}}}, "mallory"
    )
    assert (status, message["error"]) == (200, NOT_FOUND)


def test_task_arguments_over_the_size_limit_are_invalid_params_and_create_nothing(backend: Backend) -> None:
    before = backend.result("tools/call", {"name": "list_my_tasks", "arguments": {"limit": 50}}, "bulky")
    arguments = {"service": "a", "version": "1", "padding": "x" * MAX_TASK_ARGUMENTS_BYTES}
    assert _error(backend.call("tools/call", {"name": "deploy_release", "arguments": arguments}, "bulky")) == (
        200,
        wire.INVALID_PARAMS,
        f"Invalid params: arguments of a task may be at most {MAX_TASK_ARGUMENTS_BYTES} bytes",
    )
    after = backend.result("tools/call", {"name": "list_my_tasks", "arguments": {"limit": 50}}, "bulky")
    assert after["structuredContent"] == before["structuredContent"] == {"tasks": [], "nextCursor": None}


def test_a_request_state_over_the_size_limit_is_invalid_params(backend: Backend) -> None:
    params = {
        "name": "archive_project",
        "arguments": {"project": "x"},
        "requestState": "v1." + "A" * MAX_REQUEST_STATE_CHARS,
    }
    assert _error(backend.call("tools/call", params)) == (200, wire.INVALID_PARAMS, "Invalid requestState: too large")


def test_a_huge_integer_is_a_parse_error_400(backend: Backend) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":' + "9" * 5000 + "}}"
    proxy = backend.serve(api_event(body, {"authorization": "Bearer dev:alice"}))
    assert proxy["statusCode"] == 400 and json.loads(proxy["body"])["error"]["code"] == wire.PARSE_ERROR


# ---- 2. no internal detail on the wire -----------------------------------------------------------------------------
def _bad_requests(awaiting: str) -> list[tuple[str, dict[str, Any]]]:
    ids: list[Any] = [
        awaiting,
        secrets.token_urlsafe(24),
        "",
        "x" * 300,
        123,
        None,
        [],
        {},
        "\u0000",
        "' OR 1=1 --",
        "../x",
    ]
    answers: list[Any] = [
        None,
        [],
        "yes",
        123,
        {"promote": None},
        {"promote": "yes"},
        {"promote": {"action": "accept", "content": {"approve": "yes"}}},
        {"promote": {"action": "maybe"}},
        {"promote": {"action": "accept", "content": {"approve": 1e308 * 10}}},
        {"promote": _nested(50)},
        {"x" * 1000: 1},
        {"#n0": 1, ":v0": 2, "a.b": 3, "a[0]": 4, "answers": 5, "status": 6},
    ]
    requests: list[tuple[str, dict[str, Any]]] = []
    for task_id in ids:
        requests += [("tasks/get", {"taskId": task_id}), ("tasks/cancel", {"taskId": task_id})]
        requests += [("tasks/update", {"taskId": task_id, "inputResponses": a}) for a in answers]
    tool_calls: list[tuple[str, Any]] = [
        ("count_words", {"text": 1}),
        ("count_words", {"text": None}),
        ("count_words", {}),
        ("count_words", {"text": "x", "extra": {"deep": [1, 2]}}),
        ("count_words", "not an object"),
        ("count_words", [1]),
        ("cart_open", {"extra": 1}),
        ("cart_add", {"cart": 1, "sku": "apple"}),
        ("cart_add", {"cart": "cart_" + "A" * 32, "sku": "apple", "quantity": 0}),
        ("cart_add", {"cart": "cart_" + "A" * 32, "sku": "apple", "quantity": "1"}),
        ("cart_add", {"cart": "cart_" + "A" * 32, "sku": "apple", "quantity": 1.5}),
        ("cart_add", {"cart": "cart_" + "A" * 32, "sku": "caviar"}),
        ("cart_add", {"cart": "x" * 200, "sku": "apple"}),
        ("cart_add", {"cart": awaiting, "sku": "apple"}),
        ("cart_checkout", {"cart": None}),
        ("cart_checkout", {"cart": "cart_\u0000"}),
        ("deploy_release", {"service": "", "version": 1}),
        ("deploy_release", {"service": "a", "version": "1", "seconds_per_stage": -1}),
        ("deploy_release", {"service": "a", "version": "1", "seconds_per_stage": 1e308 * 10}),
        ("list_my_tasks", {"limit": 0}),
        ("list_my_tasks", {"limit": "all"}),
        ("list_my_tasks", {"cursor": 5}),
        ("list_my_tasks", {"cursor": "garbage"}),
        ("list_my_tasks", {"cursor": "x" * 600}),
        ("list_my_tasks", {"cursor": "WyIyMDI2LTAxLTAxVDAwOjAwOjAwWiIsIi4uLy4uIl0"}),
        ("archive_project", {"project": ""}),
        ("archive_project", {"project": {"$ne": None}}),
        ("no_such_tool", {}),
    ]
    for name, arguments in tool_calls:
        requests.append(("tools/call", {"name": name, "arguments": arguments}))
    requests += [
        ("tools/call", {"name": "archive_project", "arguments": {"project": "x"}, "requestState": state})
        for state in ("v1.k1.e30.AAAA", "v1.dev.e30.AAAA", "v1...", 5, ["v1"], "v1." + "." * 20)
    ]
    requests += [
        ("tools/call", {"name": 5}),
        ("tools/call", {}),
        ("tools/list", {"cursor": 5}),
        ("tools/list", {"cursor": "bm90LWFuLW9mZnNldA"}),
        ("prompts/get", {"name": "nope", "arguments": {"a": 1}}),
        ("resources/read", {"uri": 5}),
        ("completion/complete", {"ref": {"type": "ref/nothing"}, "argument": {"name": "a", "value": "b"}}),
        ("completion/complete", {"ref": 1}),
        ("server/discover", {"unexpected": True}),
    ]
    return requests


@pytest.mark.parametrize("who", ["alice", "mallory"])
def test_no_bad_request_against_a_working_backend_leaks_internal_detail(
    backend: Backend, alice_awaiting: str, who: str
) -> None:
    for method, params in _bad_requests(alice_awaiting):
        status, message = backend.call(method, params, who)  # the check runs inside serve()
        assert status in (200, 400, 404), (method, params, message)
        assert ("error" in message) != ("result" in message)
        if "error" in message:
            assert message["error"]["code"] != wire.INTERNAL_ERROR, (method, params, message)


def test_tasks_answered_badly_by_their_owner_are_asked_again_not_failed(backend: Backend) -> None:
    created = backend.result(
        "tools/call",
        {"name": "deploy_release", "arguments": {"service": "b", "version": "2", "seconds_per_stage": 0}},
        "owner",
    )
    task_id = created["taskId"]

    def status() -> dict[str, Any]:
        return backend.result("tasks/get", {"taskId": task_id}, "owner")

    def awaiting() -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while (task := status())["status"] != "input_required":
            assert task["status"] == "working" and time.monotonic() < deadline, task
            time.sleep(0.05)
        return task

    asked: list[str] = []
    for answer in ({"action": "accept", "content": {"approve": "yes"}}, {"action": "maybe"}, None, "yes"):
        (key,) = awaiting()["inputRequests"]  # one question, re-asked under a fresh key each time
        asked.append(key)
        backend.result("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}}, "owner")
    (last,) = awaiting()["inputRequests"]
    assert len(set([*asked, last])) == 5 and all(key.startswith("promote") for key in asked)


@pytest.fixture
def broken_backends(aws_environment: dict[str, str], embedded_aws: EmbeddedAws) -> dict[str, Backend]:
    """The same application over AWS resources that fail: every AWS error path is taken."""
    return {
        "missing-table": Backend(
            McpHttpTransport(build_server(_settings(**{**aws_environment, "TASK_TABLE_NAME": "no-such-table"})))
        ),
        "missing-state-machine": Backend(
            McpHttpTransport(
                build_server(
                    _settings(
                        **{
                            **aws_environment,
                            "TASK_STATE_MACHINE_ARN": aws_environment["TASK_STATE_MACHINE_ARN"] + "-gone",
                        }
                    )
                )
            )
        ),
        "refused-endpoint": Backend(
            McpHttpTransport(
                build_server(_settings(**{**aws_environment, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"}))
            )
        ),
    }


BROKEN_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("tasks/get", {"taskId": "A" * 32}),
    ("tasks/update", {"taskId": "A" * 32, "inputResponses": {"promote": {"action": "decline"}}}),
    ("tasks/update", {"taskId": "A" * 32, "inputResponses": {}}),
    ("tasks/cancel", {"taskId": "A" * 32}),
    ("tools/call", {"name": "deploy_release", "arguments": {"service": "a", "version": "1", "seconds_per_stage": 0}}),
    ("tools/call", {"name": "cart_open", "arguments": {}}),
    ("tools/call", {"name": "cart_add", "arguments": {"cart": "cart_" + "A" * 32, "sku": "apple"}}),
    ("tools/call", {"name": "list_my_tasks", "arguments": {}}),
]


@pytest.mark.parametrize("failure", ["missing-table", "missing-state-machine"])
def test_aws_failures_become_plain_errors_without_aws_text(broken_backends: dict[str, Backend], failure: str) -> None:
    for method, params in BROKEN_CALLS:
        status, message = broken_backends[failure].call(method, params)
        assert status == 200, message
        if "error" in message:
            assert message["error"]["message"] in {
                TASK_NOT_FOUND_MESSAGE,
                "Failed to retrieve task",
                "Failed to update task",
                "Failed to cancel task",
                "Failed to create task",
                "Failed to start task",
                "Internal error",
            }, message


def test_an_unreachable_aws_endpoint_becomes_a_plain_internal_error(broken_backends: dict[str, Backend]) -> None:
    for method, params in (BROKEN_CALLS[0], BROKEN_CALLS[5]):
        status, message = broken_backends["refused-endpoint"].call(method, params)
        assert status == 200 and message["error"]["code"] == wire.INTERNAL_ERROR, message


# ---- property-based: task requests with arbitrary params against the real store -----------------------------------
_json_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
_json_values = st.recursive(
    _json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)


@settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    method=st.sampled_from(["tasks/get", "tasks/update", "tasks/cancel"]),
    task_id=st.one_of(_json_values, st.just("AWAITING"), st.text(min_size=1, max_size=300)),
    responses=st.one_of(_json_values, st.dictionaries(st.text(max_size=20), _json_values, max_size=8)),
    who=st.sampled_from(["alice", "mallory"]),
)
def test_arbitrary_task_params_never_leak_or_fail_internally(
    backend: Backend, alice_awaiting: str, method: str, task_id: Any, responses: Any, who: str
) -> None:
    params: dict[str, Any] = {"taskId": alice_awaiting if task_id == "AWAITING" else task_id}
    if method == "tasks/update":
        params["inputResponses"] = responses
    status, message = backend.call(method, params, who)
    assert status in (200, 400), message
    if "error" in message:
        assert message["error"]["code"] in (wire.INVALID_PARAMS, wire.INVALID_REQUEST, wire.HEADER_MISMATCH), message
    if who == "mallory" and "result" in message:
        pytest.fail(f"mallory got a result: {message}")
