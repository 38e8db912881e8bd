"""`make run` keeps tasks and handles across a restart (LOCAL_STATE_DIR); without it, each start is clean."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_runtime.tasks.models import EXECUTION_LOST_ERROR
from tests.local_stack.conftest import StackClient
from tests.support import local_stack_process

pytestmark = pytest.mark.e2e
SKU = "coffee"


def test_a_restarted_stack_still_has_the_tasks_and_handles_of_the_last_run_and_settles_a_lost_execution(
    tmp_path: Path,
) -> None:
    """What the last run stored is served again; a task whose execution did not survive (it was
    awaiting input when the stack stopped) is settled failed as a lost execution."""
    env = {"LOCAL_STATE_DIR": str(tmp_path / "state")}
    with local_stack_process(fixtures="conformance", extra_env=env) as first:
        client = StackClient(first)
        task_id = client.start("slow_compute", {"seconds": 0.1, "label": "kept"})
        finished = client.settled(task_id)
        opened = client.result("tools/call", {"name": "cart_open", "arguments": {}})
        cart = opened["content"][0]["text"].split()[2].rstrip(".")
        assert cart.startswith("cart_")
        parked_id = client.start("confirm_delete", {"filename": "kept.txt"})
        client.wait_for(parked_id, lambda task: task["status"] == "input_required")
    assert first.printed("state: 0 items restored")

    with local_stack_process(fixtures="conformance", extra_env=env) as second:
        client = StackClient(second)
        # pollIntervalMs grows with the task's age (a tenth of it, past 10 s): a slow restart changes it.
        assert without_poll_interval(client.task(task_id)) == without_poll_interval(finished)
        added = client.result(
            "tools/call", {"name": "cart_add", "arguments": {"cart": cart, "sku": SKU, "quantity": 2}}
        )
        assert added.get("isError") is not True, added
        settled = client.settled(parked_id)
        assert (settled["status"], settled["error"]) == ("failed", EXECUTION_LOST_ERROR)
    assert second.printed("items restored from")
    assert not second.printed("state: 0 items restored")
    assert second.printed(f"state: the execution of task {parked_id} did not survive the restart: reported ABORTED")


def without_poll_interval(task: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.items() if key != "pollIntervalMs"}


def test_without_a_state_directory_a_restarted_stack_starts_empty() -> None:
    with local_stack_process(fixtures="conformance") as first:
        task_id = StackClient(first).start("slow_compute", {"seconds": 0, "label": "gone"})
    with local_stack_process(fixtures="conformance") as second:
        gone = StackClient(second).call("tasks/get", {"taskId": task_id})
    assert gone["error"]["message"] == "Failed to retrieve task: Task not found"
