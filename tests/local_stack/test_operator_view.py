"""`make tasks` and `make task ID=`: the operator's view across users, read-only, against the running
template-driven stack as `make run` starts it (the script reads the stack's state file and signs as its
administrator, as it does for a developer)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.integration.task_harness import wait_until
from tests.local_stack.conftest import StackClient
from tests.support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import task_view as operator_view

pytestmark = pytest.mark.e2e


def listed(stack: StackClient, *argv: str) -> str:
    out = io.StringIO()
    assert operator_view.main(["--port", port_of(stack), *argv], out=out) == 0
    return out.getvalue()


def port_of(stack: StackClient) -> str:
    return str(urlsplit(stack.running.url).port)


def row_of(text: str, task_id: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(task_id)]
    return line.split()


@pytest.fixture(scope="module")
def bob(lifecycle_stack: StackClient) -> StackClient:
    return StackClient(lifecycle_stack.running, user="bob")


def test_a_failed_task_of_another_user_is_listed_with_its_tool_owner_and_execution(
    lifecycle_stack: StackClient, bob: StackClient
) -> None:
    task_id = bob.start("protocol_error_job", {})
    assert bob.settled(task_id)["status"] == "failed"
    bob.wait_for_execution(task_id)

    text = listed(lifecycle_stack, "--status", "failed")

    _, tool, owner, status, created, updated, execution = row_of(text, task_id)
    assert (tool, owner, status, execution) == ("protocol_error_job", "dev:bob", "failed", "SUCCEEDED")
    assert created <= updated
    assert text.splitlines()[0].split() == ["TASK", "TOOL", "OWNER", "STATUS", "CREATED", "LAST", "UPDATE", "EXECUTION"]
    assert all(line.split()[3] == "failed" for line in text.splitlines()[1:-1])
    assert task_id not in listed(lifecycle_stack, "--status", "completed,cancelled")
    assert task_id in listed(lifecycle_stack, "--owner", "dev:bob")
    assert task_id not in listed(lifecycle_stack, "--owner", "dev:alice")


def test_a_working_task_whose_tool_hangs_is_listed_stale_and_parked_ones_are_not(
    lifecycle_stack: StackClient, bob: StackClient, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    on_callback = bob.start("external_job", {"inbox": str(inbox)})  # working, parked on a callback
    parked = bob.start("confirm_delete", {"filename": "kept.txt"})  # input_required
    bob.wait_for(parked, lambda task: task["status"] == "input_required")
    assert wait_until(lambda: inbox.exists() and inbox.read_text(), bool)
    hung = bob.start("hold_worker", {"seconds": 4})

    # Nothing is written while the tool holds the worker: after a second it is silent for longer than STALE=1s.
    stale = ""
    for _ in range(60):
        stale = listed(lifecycle_stack, "--stale", "1s")
        if hung in stale:
            break
    assert row_of(stale, hung)[3:4] == ["working"]
    assert row_of(stale, hung)[-1] == "RUNNING"
    assert parked not in stale
    assert on_callback not in stale
    assert bob.task(on_callback)["status"] == "working"
    assert hung not in listed(lifecycle_stack, "--stale", "1h")
    for task_id in (parked, on_callback):
        bob.result("tasks/cancel", {"taskId": task_id})


def test_one_task_is_shown_with_its_item_and_its_executions_latest_events(
    lifecycle_stack: StackClient, bob: StackClient
) -> None:
    task_id = bob.start("failing_job", {})
    bob.settled(task_id)
    bob.wait_for_execution(task_id)

    out = io.StringIO()
    assert operator_view.main(["--port", port_of(lifecycle_stack), f"--task={task_id}"], out=out) == 0

    lines = out.getvalue().splitlines()
    assert "status: completed" in lines
    assert "owner: dev:bob" in lines
    assert "toolName: failing_job" in lines
    machine = lifecycle_stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
    (execution,) = [line for line in lines if line.startswith("execution ")]
    assert execution.startswith(f"execution {arn}: SUCCEEDED (started 20")
    events = [line.split() for line in lines if line.startswith("  ")]
    assert 2 <= len(events) <= operator_view.HISTORY_EVENTS
    assert events[0][2] == "ExecutionSucceeded"
    ids = [int(event[1].lstrip("#")) for event in events]
    assert ids == sorted(ids, reverse=True)


def test_an_unknown_task_and_a_bad_filter_are_answered_plainly(lifecycle_stack: StackClient) -> None:
    out = io.StringIO()
    assert operator_view.main(["--port", port_of(lifecycle_stack), "--task", "no-such-task"], out=out) == 1
    assert out.getvalue().startswith("no task no-such-task in ")

    refused = subprocess.run(
        [sys.executable, "scripts/task_view.py", "--port", port_of(lifecycle_stack), "--status", "done"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2
    assert "unknown status done: one of working, input_required, completed, failed, cancelled" in refused.stderr


def test_make_task_shows_a_task_whose_id_begins_with_a_dash(lifecycle_stack: StackClient) -> None:
    # Task ids are URL-safe base64: one in 64 begins with "-", which argparse took for an option.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    shown = subprocess.run(
        ["make", "--no-print-directory", "task", "ID=-no-such-task", f"PORT={port_of(lifecycle_stack)}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.stdout.splitlines()[-1].startswith("no task -no-such-task in "), shown.stdout + shown.stderr
