"""Lost status events, through the template-driven stack: every Step Functions status event is
dropped (LOCAL_DROP_STATUS_EVENTS=all), so only the sweeper on its template schedule can notice an
execution that ended behind a task's back. The template is synthesized with a 3 s lease and a
1-minute schedule, and LOCAL_TIME_SCALE=60 makes that minute a second: the bound (lease + interval,
plus one sweep) scaled from 15 minutes to 4 s."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import EXECUTION_LOST_ERROR, parse_timestamp
from mcp_runtime.tasks.store import task_key
from tests.local_stack.conftest import StackClient
from tests.support import local_stack_process

pytestmark = pytest.mark.e2e

LEASE_SECONDS = 3
INTERVAL_SECONDS = 1  # sweepIntervalMinutes=1, divided by LOCAL_TIME_SCALE=60
# One sweep on this stack: the sweeper's invocation (a cold start in its own interpreter the first
# time, on a shared 2-core machine), its query and its DescribeExecution and write.
SWEEP_ALLOWANCE_SECONDS = 15
BOUND_SECONDS = LEASE_SECONDS + INTERVAL_SECONDS + SWEEP_ALLOWANCE_SECONDS


@pytest.fixture(scope="module")
def stack() -> Iterator[StackClient]:
    env = {
        "LOCAL_CDK_CONTEXT": json.dumps({"taskLeaseSeconds": LEASE_SECONDS, "sweepIntervalMinutes": 1}),
        "LOCAL_TIME_SCALE": "60",
        "LOCAL_DROP_STATUS_EVENTS": "all",
    }
    with local_stack_process(fixtures="conformance,lifecycle", extra_env=env) as running:
        yield StackClient(running, user="sweeper-tester")


def item(stack: StackClient, task_id: str) -> dict[str, Any]:
    table = stack.running.physical_id("TaskTable", "AWS::DynamoDB::Table")
    found: dict[str, Any] = stack.running.aws_client("dynamodb").get_item(
        TableName=table, Key=task_key(task_id), ConsistentRead=True
    )["Item"]
    return found


def lease(stack: StackClient, task_id: str) -> int | None:
    value = item(stack, task_id).get(schema.LEASE_ATTRIBUTE)
    return int(value["N"]) if value else None


def execution_arn(stack: StackClient, task_id: str) -> str:
    machine = stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    return machine.replace(":stateMachine:", ":execution:") + f":{task_id}"


def awaiting_input(stack: StackClient, tool_file: str) -> str:
    task_id = stack.start("confirm_delete", {"filename": tool_file})
    task = stack.wait_for(task_id, lambda t: t["status"] != "working")
    assert task["status"] == "input_required", task
    return task_id


def holding(stack: StackClient, gate: Path) -> str:
    """A working task whose tool holds its worker (silent after 'holding') until `gate` exists."""
    task_id = stack.start("gate_worker", {"gate": str(gate), "seconds": 120})
    task = stack.wait_for(task_id, lambda t: t.get("statusMessage") == "holding")
    assert task["status"] == "working", task
    return task_id


def test_a_task_whose_execution_was_stopped_and_whose_status_event_was_lost_is_settled_failed_within_the_bound(
    stack: StackClient, tmp_path: Path
) -> None:
    # Parked on a callback with a 2 s timeout: its lease runs one lease past that deadline.
    inbox = tmp_path / "inbox.jsonl"
    task_id = stack.start("external_job", {"inbox": str(inbox), "timeout_seconds": 2})
    assert stack.wait_for(task_id, lambda t: inbox.exists() and bool(inbox.read_text()))["status"] == "working"
    sfn = stack.running.aws_client("stepfunctions")

    # An operator, behind the task's back (the local stack aborts a token wait at once, as AWS does).
    sfn.stop_execution(executionArn=execution_arn(stack, task_id))
    assert stack.wait_for_execution(task_id) == "ABORTED"
    stopped = sfn.describe_execution(executionArn=execution_arn(stack, task_id))["stopDate"]

    settled = stack.settled(task_id, timeout=60)

    assert (settled["status"], settled["error"]) == ("failed", EXECUTION_LOST_ERROR)
    assert stack.running.printed("dropped the status event of execution " + task_id)
    assert stack.wait_for_output(f"task {task_id}: execution {task_id} ended ABORTED without a terminal write")
    assert schema.LEASE_ATTRIBUTE not in item(stack, task_id)
    took = parse_timestamp(settled["lastUpdatedAt"]) - _epoch(stopped)
    assert 0 < took <= 2 + BOUND_SECONDS, f"settled {took:.1f} s after the execution ended"


def test_a_quiet_running_task_gets_its_lease_renewed_by_the_sweeper_and_a_parked_one_is_left_alone(
    stack: StackClient, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    running = holding(stack, gate)
    parked = awaiting_input(stack, "still-parked.txt")
    first, parked_lease = lease(stack, running), lease(stack, parked)
    assert first is not None and parked_lease is not None

    deadline = time.monotonic() + 60
    renewed = lease(stack, running)
    while (renewed or 0) <= first and time.monotonic() < deadline:
        time.sleep(0.2)
        renewed = lease(stack, running)

    # Nothing but the sweeper writes a task whose tool is silent: a renewal by one lease, not a lease set
    # aside for an hour (what a sweep that the table refused does).
    output = "\n".join(list(stack.running.output)[-80:])
    assert renewed is not None and first < renewed <= time.time() + LEASE_SECONDS, output
    assert "refused" not in output.replace("'refused': 0", ""), output
    # A task waiting for its client carries a lease to its wait's deadline: no sweep asks about it meanwhile.
    assert lease(stack, parked) == parked_lease > renewed
    assert stack.task(parked)["status"] == "input_required"
    assert stack.execution_status(running) == "RUNNING"
    gate.touch()
    assert stack.settled(running)["status"] == "completed"
    stack.result("tasks/cancel", {"taskId": parked})


def _epoch(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value)
