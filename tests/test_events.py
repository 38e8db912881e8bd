"""Every sample event in `events/` through its handler, exactly as `sam local invoke` calls it:
import the handler named in the template, call it with the event and a context object, read the
proxy response. AWS is the embedded moto server; the environment is the one the template sets.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime import wire

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "events"
_spec = importlib.util.spec_from_file_location("events_generate", EVENTS / "generate.py")
assert _spec is not None and _spec.loader is not None
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

API_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("[hf]*/*.json"))
EXAMPLE_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("examples/*.json"))
WORKER_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("worker/*.json"))
NOT_FOUND_TASK = {"code": wire.INVALID_PARAMS, "message": "Failed to retrieve task: Task not found"}
# The example server has tools and tasks but no prompts or resources: those methods are not served.
NOT_SERVED = (
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
)


class LambdaContext:
    """The attributes the Python runtime's context object has (what `sam local invoke` passes)."""

    function_name = "ServerlessMcpTasks-FunctionsApiFunction"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:ServerlessMcpTasks-FunctionsApiFunction"
    memory_limit_in_mb = 512
    aws_request_id = "6f1c2d3e-0000-4000-8000-000000000000"
    log_group_name = "/aws/lambda/ServerlessMcpTasks-FunctionsApiFunction"
    log_stream_name = "2026/11/29/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@pytest.fixture(scope="module")
def deployed_like(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Table, state machine and sealing secret on moto; the API function's environment as deployed."""
    from local_stack.aws import start_embedded_aws

    # start_embedded_aws() points the process-wide MOTO_PORT at this server; put it back afterwards
    # so a moto server another test module started keeps working.
    previous_moto_port = os.environ.get("MOTO_PORT")
    aws = start_embedded_aws()
    resources = aws.provision(
        table_name="events-tasks", state_machine_name="events-tasks", worker_function_name="events-worker"
    )
    secret = aws.client("secretsmanager").create_secret(Name="events-sealing", SecretString="x" * 64)
    for name, value in {
        **aws.app_environment(resources),
        "MCP_SERVER_NAME": "serverless-mcp-tasks",
        "MCP_STATE_SECRET_ARN": secret["ARN"],
        "MCP_REQUIRE_PRINCIPAL": "true",
        "MCP_AUTHORIZATION_SERVERS": generate.USER_POOL,
        "MCP_SCOPES_SUPPORTED": "mcp/invoke",
        "POWERTOOLS_SERVICE_NAME": "serverless-mcp-tasks",
        "POWERTOOLS_METRICS_NAMESPACE": "serverless-mcp-tasks",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }.items():
        monkeypatch_module.setenv(name, value)
    monkeypatch_module.delenv("TASK_RELEASE_PARKED_ON_STOP", raising=False)  # not set in AWS
    from app import composition, task_wiring

    composition.reset()
    task_wiring.task_worker.cache_clear()
    yield {"aws": aws, "resources": resources}
    composition.reset()
    task_wiring.task_worker.cache_clear()
    aws.stop()
    if previous_moto_port is None:
        os.environ.pop("MOTO_PORT", None)
    else:
        os.environ["MOTO_PORT"] = previous_moto_port


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _load(relative: str) -> dict[str, Any]:
    return json.loads((EVENTS / relative).read_text(encoding="utf-8"))


def test_the_files_are_what_the_generator_writes() -> None:
    expected = generate.all_events()
    on_disk = {p.relative_to(EVENTS).as_posix() for p in EVENTS.rglob("*.json")}
    assert on_disk == set(expected)
    for relative, event in expected.items():
        assert (EVENTS / relative).read_text(encoding="utf-8") == generate.render(event), relative


def test_one_event_per_method_and_front() -> None:
    assert len(generate.METHODS) == 12
    for front in ("http-api", "function-url"):
        assert {f"{front}/{generate.slug(m)}.json" for m in generate.METHODS} <= set(API_EVENTS)
    assert WORKER_EVENTS == ["worker/fail.json", "worker/park.json", "worker/run.json"]


@pytest.mark.parametrize("relative", API_EVENTS + EXAMPLE_EVENTS)
def test_event_headers_mirror_the_body(relative: str) -> None:
    event = _load(relative)
    body = json.loads(event["body"])
    headers = event["headers"]
    assert headers["mcp-protocol-version"] == body["params"]["_meta"][wire.META_PROTOCOL_VERSION] == "2026-07-28"
    assert headers["mcp-method"] == body["method"]
    name_field = wire.NAME_HEADER_SOURCES.get(body["method"])
    assert headers.get("mcp-name") == (body["params"][name_field] if name_field else None)
    assert int(headers["content-length"]) == len(event["body"].encode())
    authorizer = event["requestContext"]["authorizer"]
    assert set(authorizer) == ({"iam"} if relative.startswith("function-url/") else {"jwt"})


def _expected(method: str, request_id: int) -> tuple[int, dict[str, Any]]:
    from app.composition import build_server
    from mcp_runtime.settings import get_settings

    if method in NOT_SERVED:
        return 404, {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": wire.METHOD_NOT_FOUND, "message": f"Method not found: {method}"},
        }
    if method.startswith("tasks/"):
        return 200, {"jsonrpc": "2.0", "id": request_id, "error": NOT_FOUND_TASK}
    if method == "server/discover":
        return 200, {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "resultType": "complete",
                "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}, "extensions": {wire.TASKS_EXTENSION: {}}},
                "ttlMs": 3_600_000,
                "cacheScope": "public",
                "_meta": {wire.META_SERVER_INFO: {"name": "serverless-mcp-tasks", "version": "0.1.0"}},
            },
        }
    if method == "tools/list":
        tools = [spec.to_wire() for spec in build_server(get_settings()).tools]
        assert "count_words" in {tool["name"] for tool in tools}
        return 200, {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"resultType": "complete", "tools": tools, "ttlMs": 60_000, "cacheScope": "public"},
        }
    if method == "tools/call":  # count_words on "the quick brown fox"
        return 200, {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": json.dumps({"words": 4, "characters": 19})}],
                "structuredContent": {"words": 4, "characters": 19},
            },
        }
    raise AssertionError(f"no expectation for {method}")


@pytest.mark.parametrize("relative", API_EVENTS)
def test_api_event_through_the_handler(deployed_like: dict[str, Any], relative: str) -> None:
    from app.api_handler import lambda_handler

    event = _load(relative)
    body = json.loads(event["body"])
    response = lambda_handler(event, LambdaContext())
    assert set(response) == {"statusCode", "headers", "body", "isBase64Encoded"}
    assert response["isBase64Encoded"] is False
    assert response["headers"]["content-type"] == "application/json"
    status, expected = _expected(body["method"], body["id"])
    assert (response["statusCode"], json.loads(response["body"])) == (status, expected)


@pytest.mark.parametrize("relative", WORKER_EVENTS)
def test_worker_event_through_the_handler(deployed_like: dict[str, Any], relative: str) -> None:
    """Each step the state machine sends, for a task that does not exist: the worker stops cleanly
    (the execution then ends) instead of raising into Step Functions' retries."""
    from app.worker_handler import lambda_handler

    assert lambda_handler(_load(relative), LambdaContext()) == {"outcome": "stopped", "park": None}


def test_every_example_tool_module_has_an_event_calling_it() -> None:
    import tools

    called = {json.loads(_load(relative)["body"])["params"]["name"] for relative in EXAMPLE_EVENTS}
    for module in (*tools.MODULES, *tools.TABLE_BACKED_MODULES):
        module_tools = {
            name
            for name, value in vars(module).items()
            if getattr(value, "__module__", None) == module.__name__ and hasattr(value, "__mcp_tool__")
        }
        assert module_tools & called, f"no event calls a tool of {module.__name__}"


def _call_example(relative: str) -> dict[str, Any]:
    from app.api_handler import lambda_handler

    response = lambda_handler(_load(relative), LambdaContext())
    assert response["statusCode"] == 200
    message: dict[str, Any] = json.loads(response["body"])
    assert message["id"] == json.loads(_load(relative)["body"])["id"]
    result: dict[str, Any] = message["result"]
    return result


def test_the_plain_example_answers_at_once(deployed_like: dict[str, Any]) -> None:
    assert _call_example("examples/count-words.json")["structuredContent"] == {"words": 4, "characters": 19}


def test_the_mrtr_example_asks_for_confirmation_first(deployed_like: dict[str, Any]) -> None:
    result = _call_example("examples/archive-project.json")
    assert result["resultType"] == wire.RESULT_INPUT_REQUIRED
    assert result["inputRequests"]["confirm"]["params"]["message"] == "Archive project 'apollo'? It becomes read-only."
    assert result["requestState"].startswith("v1.")


def test_the_task_example_creates_a_durable_task(deployed_like: dict[str, Any]) -> None:
    result = _call_example("examples/deploy-release.json")
    assert (result["resultType"], result["status"]) == (wire.RESULT_TASK, "working")
    assert set(result) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}


def test_the_handle_example_mints_a_cart_and_the_history_lists_the_callers_tasks(deployed_like: dict[str, Any]) -> None:
    opened = _call_example("examples/cart-open.json")
    assert opened["content"][0]["text"].startswith("Opened cart cart_")
    history = _call_example("examples/list-my-tasks.json")["structuredContent"]
    assert [task["tool"] for task in history["tasks"]][:1] == ["deploy_release"]
