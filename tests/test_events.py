"""Every sample event in `events/` through its function, as `sam local invoke` would run it: the
template-driven local stack runs the handler named in the template in an interpreter of its own,
with the template's environment and the function role's credentials; the event goes in through
Lambda's Invoke API and the proxy response comes back.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from testkit import RunningStack

from mcp_runtime import wire
from mcp_runtime.tasks.callbacks import REFUSED
from tests.support import deployed_server_name

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "events"
_spec = importlib.util.spec_from_file_location("events_generate", EVENTS / "generate.py")
assert _spec is not None and _spec.loader is not None
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

API_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("[hf]*/*.json"))
WORKER_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("worker/*.json"))
SUPERVISOR_EVENTS = sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("supervisor/*.json"))
SERVER_INFO_META = {wire.META_SERVER_INFO: {"name": deployed_server_name(), "version": "0.1.0"}}
API_FUNCTION = "FunctionsApiFunction"
WORKER_FUNCTION = "FunctionsWorkerFunction"
SUPERVISOR_FUNCTION = "SupervisorFunction"
CALLBACK_FUNCTION = "CallbacksFunction"
SWEEPER_FUNCTION = "SweeperFunction"
NOT_FOUND_TASK = {"code": wire.INVALID_PARAMS, "message": "Failed to retrieve task: Task not found"}
# The test stacks serve the platform's pattern fixtures (tests.support.local_stack_process), never the
# project's tools: tools and tasks, no prompts or resources, so those methods are not served.
NOT_SERVED = (
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
)


@dataclass
class DeployedLike:
    """The template-driven local stack: each function in its own interpreter with its template
    environment and role, invoked through Lambda's Invoke API (as `sam local invoke` would run it)."""

    stack: RunningStack

    def function_name(self, prefix: str) -> str:
        return self.stack.physical_id(prefix, "AWS::Lambda::Function")

    def invoke(self, prefix: str, event: dict[str, Any]) -> Any:
        response = self.stack.aws_client("lambda").invoke(
            FunctionName=self.function_name(prefix), Payload=json.dumps(event).encode()
        )
        assert "FunctionError" not in response, response["Payload"].read()
        return json.loads(response["Payload"].read())


@pytest.fixture(scope="module")
def deployed_like(template_stack: RunningStack) -> DeployedLike:
    return DeployedLike(template_stack)


def _load(relative: str) -> dict[str, Any]:
    return json.loads((EVENTS / relative).read_text(encoding="utf-8"))


def test_the_files_are_what_the_generator_writes() -> None:
    # events/examples/ holds the project's events (for its own tools; tests/tools checks them).
    expected = {name: event for name, event in generate.all_events().items() if not name.startswith("examples/")}
    on_disk = {p.relative_to(EVENTS).as_posix() for p in EVENTS.rglob("*.json") if p.parent.name != "examples"}
    assert on_disk == set(expected)
    for relative, event in expected.items():
        assert (EVENTS / relative).read_text(encoding="utf-8") == generate.render(event), relative


def test_one_event_per_method_and_front() -> None:
    assert len(generate.METHODS) == 12
    for front in ("http-api", "function-url"):
        assert {f"{front}/{generate.slug(m)}.json" for m in generate.METHODS} <= set(API_EVENTS)
    assert WORKER_EVENTS == ["worker/fail.json", "worker/run.json", "worker/settle.json", "worker/store_token.json"]
    assert SUPERVISOR_EVENTS == ["supervisor/execution-ended.json", "supervisor/stream-batch.json"]
    assert sorted(p.relative_to(EVENTS).as_posix() for p in EVENTS.glob("callbacks/*.json")) == [
        "callbacks/complete.json"
    ]


@pytest.mark.parametrize("relative", API_EVENTS)
def test_event_headers_mirror_the_body(relative: str) -> None:
    event = _load(relative)
    body = json.loads(event["body"])
    headers = event["headers"]
    assert headers["mcp-protocol-version"] == body["params"]["_meta"][wire.META_PROTOCOL_VERSION] == "2026-07-28"
    assert headers["mcp-method"] == body["method"]
    name_field = wire.NAME_HEADER_SOURCES.get(body["method"])
    assert headers.get("mcp-name") == (body["params"][name_field] if name_field else None)
    assert int(headers["content-length"]) == len(event["body"].encode())
    if relative.startswith("function-url/"):
        assert set(event["requestContext"]["authorizer"]) == {"iam"}
    else:  # no API Gateway authorizer: the function validates the bearer (a development one here)
        assert "authorizer" not in event["requestContext"]
        assert headers["authorization"] == "Bearer dev:sample-user"


def _expected(method: str, request_id: int) -> tuple[int, dict[str, Any]]:
    from app.composition import build_catalog
    from mcp_runtime.settings import Settings

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
                "_meta": SERVER_INFO_META,
            },
        }
    if method == "tools/list":
        # The test stack serves the pattern fixtures, not the project's tools (tests.support.local_stack_process).
        served = build_catalog(Settings(TASK_TABLE_NAME="any", MCP_TOOL_PACKAGES="fixtures.patterns"))
        tools = [spec.to_wire() for spec in served.tools]
        assert "count_words" in {tool["name"] for tool in tools}
        return 200, {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "resultType": "complete",
                "tools": tools,
                "ttlMs": 60_000,
                "cacheScope": "public",
                "_meta": SERVER_INFO_META,
            },
        }
    if method == "tools/call":  # count_words on "the quick brown fox"
        return 200, {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "resultType": "complete",
                "content": [{"type": "text", "text": json.dumps({"words": 4, "characters": 19})}],
                "structuredContent": {"words": 4, "characters": 19},
                "_meta": SERVER_INFO_META,
            },
        }
    raise AssertionError(f"no expectation for {method}")


@pytest.mark.parametrize("relative", API_EVENTS)
def test_api_event_through_the_handler(deployed_like: DeployedLike, relative: str) -> None:
    event = _load(relative)
    body = json.loads(event["body"])
    response = deployed_like.invoke(API_FUNCTION, event)
    assert set(response) == {"statusCode", "headers", "body", "isBase64Encoded"}
    assert response["isBase64Encoded"] is False
    assert response["headers"]["content-type"] == "application/json"
    status, expected = _expected(body["method"], body["id"])
    assert (response["statusCode"], json.loads(response["body"])) == (status, expected)


# A read finds no task item (gone); a conditional write on none loses, as to a write that removed it.
WORKER_OUTCOMES_FOR_NO_TASK = {
    "worker/fail.json": "overtaken",
    "worker/run.json": "gone",
    "worker/settle.json": "overtaken",
    "worker/store_token.json": "gone",
}


@pytest.mark.parametrize("relative", WORKER_EVENTS)
def test_worker_event_through_the_handler(deployed_like: DeployedLike, relative: str) -> None:
    """Each step the state machine sends, for a task that does not exist: the worker stops cleanly
    (the execution then ends) instead of raising into Step Functions' retries."""
    assert deployed_like.invoke(WORKER_FUNCTION, _load(relative)) == {
        "outcome": WORKER_OUTCOMES_FOR_NO_TASK[relative],
        "tokenWait": None,
        "settle": None,
        "wait": None,
    }


@pytest.mark.parametrize("relative", SUPERVISOR_EVENTS)
def test_supervisor_event_through_the_handler(deployed_like: DeployedLike, relative: str) -> None:
    """Each event source of the supervisor, about a task that does not exist: nothing to do, nothing failed."""
    expected = {"batchItemFailures": []} if "stream" in relative else {}
    assert deployed_like.invoke(SUPERVISOR_FUNCTION, _load(relative)) == expected


def test_the_sweeper_event_through_the_handler_finds_no_stale_lease_in_an_empty_table(
    deployed_like: DeployedLike,
) -> None:
    assert deployed_like.invoke(SWEEPER_FUNCTION, _load("sweeper/scheduled.json")) == {
        "checked": 0,
        "settled": 0,
        "restarted": 0,
        "resumed": 0,
        "extended": 0,
        "dropped": 0,
        "stale": 0,
        "refused": 0,
        "left": False,
    }


def test_the_callback_event_through_the_handler_is_refused_for_a_task_that_does_not_exist(
    deployed_like: DeployedLike,
) -> None:
    answer = deployed_like.invoke(CALLBACK_FUNCTION, _load("callbacks/complete.json"))
    assert (answer["statusCode"], json.loads(answer["body"])) == (404, REFUSED)
