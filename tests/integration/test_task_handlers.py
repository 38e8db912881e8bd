"""Tasks through the API handler wired by the composition root, with no state kept between instances.

A task created through one handler instance is read, answered and cancelled through fresh ones
(new server, new clients), the way separate Lambda containers would serve it. The worker is the
one `app.composition.build_worker` builds from the same settings.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from local_stack.aws import DUMMY_CREDENTIALS, REGION, register_function
from testkit import api_event, rpc, standard_headers

from app.composition import build_server, build_worker
from mcp_runtime import wire
from mcp_runtime.settings import Settings
from mcp_runtime.tasks.models import CANCELLED, COMPLETED, INPUT_REQUIRED
from mcp_runtime.transport import HttpRequest, McpHttpTransport
from tests.integration.task_harness import ALICE, MALLORY, TASKS_AND_ELICITATION, TaskEnvironment, wait_until

TERMINAL = {"completed", "failed", "cancelled"}
SERVER_INFO_META = {wire.META_SERVER_INFO: {"name": "serverless-mcp-tasks", "version": "0.1.0"}}


@pytest.fixture
def settings(task_env: TaskEnvironment, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in {**DUMMY_CREDENTIALS, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    values = {
        "MCP_TOOL_PACKAGES": "fixtures.conformance",
        "TASK_TABLE_NAME": task_env.resources.table_name,
        "TASK_STATE_MACHINE_ARN": task_env.resources.state_machine_arn,
        "AWS_ENDPOINT_URL": task_env.aws.endpoint,
        "TASK_PROGRESS_INTERVAL_MS": "0",
        "MCP_STATE_KEY": "test-only-requestState-key-0123456789abcdef",
    }
    settings = Settings.from_environ(values)
    worker = build_worker(settings)
    register_function(task_env.resources.worker_function_name, lambda event, context: worker.handle(event))
    return settings


class FreshHandler:
    """Every call goes through a newly composed server and transport: nothing survives in memory."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any], principal: Any = ALICE) -> dict[str, Any]:
        self.next_id += 1
        message = rpc(method, params, self.next_id, TASKS_AND_ELICITATION)
        transport = McpHttpTransport(build_server(self.settings))
        response = transport.handle(
            HttpRequest("POST", "/mcp", standard_headers(message), json.dumps(message).encode(), principal)
        )
        body: dict[str, Any] = response.json()
        return body

    def result(self, method: str, params: dict[str, Any], principal: Any = ALICE) -> dict[str, Any]:
        body = self.call(method, params, principal)
        assert "error" not in body, body
        result: dict[str, Any] = body["result"]
        return result

    def task(self, task_id: str) -> dict[str, Any]:
        return self.result("tasks/get", {"taskId": task_id})


def test_the_composition_root_advertises_the_tasks_extension_when_a_state_machine_is_configured(
    settings: Settings,
) -> None:
    discovered = FreshHandler(settings).result("server/discover", {})

    assert discovered["capabilities"]["extensions"] == {wire.TASKS_EXTENSION: {}}


def test_a_task_created_through_one_handler_is_read_answered_and_completed_through_fresh_ones(
    settings: Settings,
) -> None:
    handler = FreshHandler(settings)
    created = handler.result("tools/call", {"name": "confirm_delete", "arguments": {"filename": "plan.txt"}})

    waiting = wait_until(lambda: handler.task(created["taskId"]), lambda t: t["status"] != "working")
    ack = handler.result(
        "tasks/update",
        {
            "taskId": created["taskId"],
            "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
        },
    )
    done = wait_until(lambda: handler.task(created["taskId"]), lambda t: t["status"] in TERMINAL)

    assert created["resultType"] == wire.RESULT_TASK
    assert set(created) == {
        "resultType",
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttlMs",
        "pollIntervalMs",
        "_meta",
    }
    assert (waiting["status"], list(waiting["inputRequests"])) == (INPUT_REQUIRED, ["confirm"])
    assert ack == {"resultType": wire.RESULT_COMPLETE, "_meta": SERVER_INFO_META}
    assert (done["status"], done["result"]["content"]) == (COMPLETED, [{"type": "text", "text": "Deleted plan.txt"}])


def test_a_task_created_through_one_handler_is_cancelled_through_a_fresh_one(settings: Settings) -> None:
    handler = FreshHandler(settings)
    created = handler.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30, "label": "long"}})

    ack = FreshHandler(settings).result("tasks/cancel", {"taskId": created["taskId"]})

    assert ack == {"resultType": wire.RESULT_COMPLETE, "_meta": SERVER_INFO_META}
    assert FreshHandler(settings).task(created["taskId"])["status"] == CANCELLED


def test_mrtr_rounds_before_creation_carry_their_answer_into_the_task(settings: Settings) -> None:
    handler = FreshHandler(settings)
    first = handler.result("tools/call", {"name": "test_tool_with_task", "arguments": {}})
    created = handler.result(
        "tools/call",
        {
            "name": "test_tool_with_task",
            "arguments": {},
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
            "requestState": first["requestState"],
        },
    )
    done = wait_until(lambda: handler.task(created["taskId"]), lambda t: t["status"] in TERMINAL)

    assert first["resultType"] == wire.RESULT_INPUT_REQUIRED and "taskId" not in first
    assert created["resultType"] == wire.RESULT_TASK and "requestState" not in created
    assert done["result"]["content"] == [{"type": "text", "text": "Hello, Alice! The task finished."}]


def test_another_principal_gets_the_unknown_task_error_for_get_update_and_cancel(settings: Settings) -> None:
    handler = FreshHandler(settings)
    created = handler.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30, "label": "mine"}})
    expected = {"code": wire.INVALID_PARAMS, "message": "Failed to retrieve task: Task not found"}

    for method, params in (
        ("tasks/get", {"taskId": created["taskId"]}),
        ("tasks/update", {"taskId": created["taskId"], "inputResponses": {}}),
        ("tasks/cancel", {"taskId": created["taskId"]}),
    ):
        assert handler.call(method, params, MALLORY)["error"] == expected
        assert handler.call(method, {**params, "taskId": "no-such-task"})["error"] == expected
    assert handler.task(created["taskId"])["status"] == "working"
    handler.result("tasks/cancel", {"taskId": created["taskId"]})


class FunctionUrlCaller:
    """An IAM caller signing with its role session's current credentials, through the API endpoint as
    composed for Lambda (the Function URL's authorizer context names the session and the access key)."""

    session_arn = "arn:aws:sts::123456789012:assumed-role/ops-automation/build-42"

    def __init__(self, settings: Settings) -> None:
        from app.composition import build_api_endpoint
        from app.telemetry import PowertoolsTelemetry

        self.endpoint = build_api_endpoint(settings, PowertoolsTelemetry(settings.server_name))
        self.access_key = "ASIAFIRSTCREDENTIALS"
        self.next_id = 0

    def refresh_credentials(self) -> None:
        self.access_key = "ASIAREFRESHEDCREDENTS"

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        event = api_event(rpc(method, params, self.next_id, TASKS_AND_ELICITATION))
        event["requestContext"]["authorizer"] = {
            "iam": {"userArn": self.session_arn, "callerId": "AROAEXAMPLEROLE:build-42", "accessKey": self.access_key}
        }
        answer = self.endpoint.handle(event, None)
        assert answer["statusCode"] == 200, answer
        body: dict[str, Any] = json.loads(answer["body"])
        return body


@pytest.mark.parametrize(("binding", "found"), [("session", True), ("access-key", False)])
def test_an_iam_caller_whose_credentials_are_refreshed_between_create_and_get_reads_its_task_unless_bound_to_the_key(
    settings: Settings, binding: str, found: bool
) -> None:
    caller = FunctionUrlCaller(settings.model_copy(update={"iam_principal": binding}))
    created = caller.call("tools/call", {"name": "confirm_delete", "arguments": {"filename": "plan.txt"}})
    task_id = created["result"]["taskId"]

    caller.refresh_credentials()
    read = caller.call("tasks/get", {"taskId": task_id})

    if found:
        assert read["result"]["taskId"] == task_id
        assert read["result"]["status"] in ("working", INPUT_REQUIRED)
    else:
        assert read["error"]["code"] == wire.INVALID_PARAMS
