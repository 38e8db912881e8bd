"""Throttling through the template-driven stack: the worker's reserved concurrency from the template
(1 here) is enforced with Lambda's own error, and the workflow waits it out.

Each function runs in its own interpreters with its own role (IAM enforced), so the state machine's
own fail write (MarkFailedInTable) runs with exactly the grant the template gives its role. The
backoff is scaled to waits of at most 1 s (deployed: minutes), as the context allows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime.tasks.models import EXECUTION_FAILED_ERROR
from tests.local_stack.conftest import StackClient
from tests.support import local_stack_process

pytestmark = pytest.mark.e2e

THROTTLE = "Lambda.TooManyRequestsException"
CONTEXT: dict[str, Any] = {
    "workerReservedConcurrency": 1,
    "workerTimeoutSeconds": 60,
    "throttleRetryIntervalSeconds": 1,
    "throttleRetryMaxDelaySeconds": 1,
    "throttleRetryMaxAttempts": 10,
}


@pytest.fixture(scope="module")
def throttled_stack() -> Iterator[StackClient]:
    env = {"LOCAL_CDK_CONTEXT": json.dumps(CONTEXT)}
    with local_stack_process(fixtures="lifecycle", extra_env=env) as running:
        yield StackClient(running)


def history(stack: StackClient, task_id: str) -> list[dict[str, Any]]:
    machine = stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
    client = stack.running.aws_client("stepfunctions")
    events: list[dict[str, Any]] = client.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return events


def throttles(stack: StackClient, task_id: str) -> int:
    return sum(
        1
        for event in history(stack, task_id)
        if event["type"] == "TaskFailed" and event["taskFailedEventDetails"]["error"] == THROTTLE
    )


def await_throttles(stack: StackClient, task_id: str, count: int, timeout: float = 60.0) -> int:
    import time

    deadline = time.monotonic() + timeout
    seen = throttles(stack, task_id)
    while seen < count and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = throttles(stack, task_id)
    return seen


def hold_the_worker(stack: StackClient, gate: Path) -> str:
    """A task that takes the worker's one unit of concurrency until `gate` exists."""
    holder = stack.start("gate_worker", {"gate": str(gate), "seconds": 120})
    held = stack.wait_for(holder, lambda task: task.get("statusMessage") == "holding")
    assert held.get("statusMessage") == "holding", held
    return holder


def test_the_worker_runs_with_the_templates_reserved_concurrency(throttled_stack: StackClient) -> None:
    assert throttled_stack.running.printed("reserved concurrency 1")


def test_a_task_throttled_at_the_workers_concurrency_waits_and_then_completes(
    throttled_stack: StackClient, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    holder = hold_the_worker(throttled_stack, gate)
    waiting = throttled_stack.start("hold_worker", {"seconds": 0})

    assert await_throttles(throttled_stack, waiting, 1) >= 1
    assert throttled_stack.task(waiting)["status"] == "working"  # delayed, not failed
    gate.touch()

    task = throttled_stack.settled(waiting)
    assert (task["status"], task["result"]["content"][0]["text"]) == ("completed", "held for 0s")
    assert throttled_stack.wait_for_execution(waiting) == "SUCCEEDED"
    assert throttled_stack.settled(holder)["status"] == "completed"


def test_a_task_whose_worker_stays_throttled_is_failed_by_the_state_machines_own_write(
    throttled_stack: StackClient, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    holder = hold_the_worker(throttled_stack, gate)
    try:
        starved = throttled_stack.start("hold_worker", {"seconds": 0})

        task = throttled_stack.settled(starved, timeout=90)

        assert task["status"] == "failed"
        assert task["error"] == EXECUTION_FAILED_ERROR
        assert throttled_stack.wait_for_execution(starved) == "FAILED"
        # RunTool: 1 + 10 retries; MarkFailed: 1 + 2; then the table write, allowed by the role's grant.
        assert throttles(throttled_stack, starved) == 14
        events = history(throttled_stack, starved)
        entered = [e["stateEnteredEventDetails"]["name"] for e in events if e["type"] == "TaskStateEntered"]
        assert entered == ["RunTool", "MarkFailed", "MarkFailedInTable"]
        assert [e["type"] for e in events].count("TaskSucceeded") == 1
    finally:
        gate.touch()
    assert throttled_stack.settled(holder)["status"] == "completed"
