"""The example task tool end to end: stages with progress, one approval mid-flight, resume without redoing work."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_runtime.tasks.models import COMPLETED, INPUT_REQUIRED
from mcp_runtime.tasks.service import TaskService
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until
from tools import deploy_release

TERMINAL = {"completed", "failed", "cancelled"}


@pytest.fixture
def service(task_env: TaskEnvironment) -> TaskService:
    task_env.tools.include(deploy_release)
    return task_env.service()


def start(service: TaskService, env: TaskEnvironment, arguments: dict[str, Any]) -> str:
    spec = env.tools.get("deploy_release")
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


def test_the_release_waits_for_approval_after_staging_and_goes_live_once_approved(
    service: TaskService, task_env: TaskEnvironment
) -> None:
    task_id = start(service, task_env, {"service": "billing", "version": "1.4.2", "seconds_per_stage": 0.3})
    seen_messages: set[str] = set()

    def poll() -> dict[str, Any]:
        task = service.get(task_id, request_context())
        seen_messages.add(task.get("statusMessage", ""))
        return task

    waiting = wait_until(poll, lambda t: t["status"] != "working")
    recorded = task_env.store().load(task_id).steps
    service.update(task_id, {"promote": {"action": "accept", "content": {"approve": True}}}, request_context())
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL)

    assert waiting["status"] == INPUT_REQUIRED
    assert waiting["inputRequests"]["promote"]["params"]["message"] == (
        "billing 1.4.2 passed staging. Promote to production?"
    )
    assert {key: record["v"] for key, record in recorded.items()} == {
        "step:build": "build done",
        "step:test": "test done",
        "step:staging": "staging done",
    }
    assert any(message.startswith(("build:", "test:", "staging:")) for message in seen_messages)
    assert (done["status"], done["result"]["content"]) == (
        COMPLETED,
        [{"type": "text", "text": "billing 1.4.2 is live in production."}],
    )


def test_a_declined_release_stays_on_staging(service: TaskService, task_env: TaskEnvironment) -> None:
    task_id = start(service, task_env, {"service": "billing", "version": "1.4.3", "seconds_per_stage": 0})
    wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] != "working")

    service.update(task_id, {"promote": {"action": "decline"}}, request_context())
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL)

    assert done["result"]["content"] == [
        {"type": "text", "text": "billing 1.4.3 stays on staging; production was not changed."}
    ]
