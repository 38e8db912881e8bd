"""The whole task lifecycle through the template-driven stack, as `cdk deploy` would run it.

Each function runs in interpreters of its own with its template environment, the credentials of
its own role (IAM enforced) and its template timeout (the worker's set to 5 s here); the state
machine invokes the worker through the same path. These are the tests that would have caught the
worker that could not start in AWS: nothing here shares a process or an environment with the API.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from testkit import TASKS, StackClient

from mcp_runtime import wire
from mcp_runtime.limits import MAX_TASK_CLIENT_BYTES, MAX_TASK_KEPT_ANSWERS_BYTES
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import EXECUTION_FAILED_ERROR
from mcp_runtime.tasks.service import answers_full_message
from mcp_runtime.tasks.store import task_key
from tests.local_stack.test_long_work import lambda_runs_between
from tests.support import REPO

pytestmark = pytest.mark.e2e


def accept(**content: object) -> dict[str, object]:
    return {"action": "accept", "content": content}


def test_a_task_completes_with_the_tools_result(lifecycle_stack: StackClient) -> None:
    task_id = lifecycle_stack.start("slow_compute", {"seconds": 0.2, "label": "done"})
    task = lifecycle_stack.settled(task_id)
    assert task["status"] == "completed"
    assert task["result"]["content"][0]["type"] == "text"
    assert "done" in task["result"]["content"][0]["text"]
    assert lifecycle_stack.wait_for_execution(task_id) == "SUCCEEDED"


def test_a_tool_error_completes_the_task_with_is_error(lifecycle_stack: StackClient) -> None:
    task = lifecycle_stack.settled(lifecycle_stack.start("failing_job", {}))
    assert (task["status"], task["result"]["isError"]) == ("completed", True)


def test_a_protocol_error_fails_the_task_with_the_error_inline(lifecycle_stack: StackClient) -> None:
    task = lifecycle_stack.settled(lifecycle_stack.start("protocol_error_job", {}))
    assert task["status"] == "failed"
    assert task["error"]["code"] == wire.INTERNAL_ERROR


def test_input_mid_flight_holds_the_execution_and_the_answer_resumes_it(lifecycle_stack: StackClient) -> None:
    task_id = lifecycle_stack.start("confirm_delete", {"filename": "a.txt"})
    awaiting = lifecycle_stack.wait_for(task_id, lambda task: task["status"] == "input_required")
    (key,) = awaiting["inputRequests"]
    assert awaiting["inputRequests"][key]["method"] == "elicitation/create"

    lifecycle_stack.result("tasks/update", {"taskId": task_id, "inputResponses": {key: accept(confirm=True)}})

    task = lifecycle_stack.settled(task_id)
    assert task["status"] == "completed", task
    assert lifecycle_stack.wait_for_execution(task_id) == "SUCCEEDED"


def test_cancelling_a_running_task_settles_cancelled_and_stops_its_execution(lifecycle_stack: StackClient) -> None:
    task_id = lifecycle_stack.start("slow_compute", {"seconds": 4, "label": "never"})
    lifecycle_stack.wait_for(task_id, lambda task: bool(task.get("statusMessage")))

    lifecycle_stack.result("tasks/cancel", {"taskId": task_id})

    assert lifecycle_stack.task(task_id)["status"] == "cancelled"
    # Stopped by the supervisor, or ended by the tool noticing the cancel at its next report first.
    assert lifecycle_stack.wait_for_execution(task_id) in ("ABORTED", "SUCCEEDED")
    assert lifecycle_stack.task(task_id)["status"] == "cancelled"


def test_cancelling_a_task_awaiting_input_settles_cancelled_and_aborts_its_execution_at_once(
    lifecycle_stack: StackClient,
) -> None:
    task_id = lifecycle_stack.start("confirm_delete", {"filename": "b.txt"})
    lifecycle_stack.wait_for(task_id, lambda task: task["status"] == "input_required")

    lifecycle_stack.result("tasks/cancel", {"taskId": task_id})

    assert lifecycle_stack.task(task_id)["status"] == "cancelled"
    assert lifecycle_stack.wait_for_execution(task_id) == "ABORTED"


# A run cut short (a crash, a timeout) of a tool that records no steps is not run again from the top (its
# authors expect it once): the retry fails the task naming the limit and the fix, and the execution ends there.
CUT_SHORT = "was cut short (the worker's timeout, cdk.json's workerTimeoutSeconds, or a crash) and it records no steps"


def test_a_worker_that_crashes_fails_the_task_naming_why_and_never_runs_it_again(lifecycle_stack: StackClient) -> None:
    task = lifecycle_stack.settled(lifecycle_stack.start("crash_worker", {"status": 3}))
    assert task["status"] == "failed"
    assert task["error"] == EXECUTION_FAILED_ERROR  # the reason goes to the log and the item, not the client
    assert lifecycle_stack.wait_for_output(f"task {task_id_of(task)}: the run of tool 'crash_worker' {CUT_SHORT}")
    assert lifecycle_stack.wait_for_execution(task_id_of(task)) == "SUCCEEDED"  # its retry settled the task


def test_a_worker_past_its_template_timeout_is_killed_and_fails_the_task(lifecycle_stack: StackClient) -> None:
    task_id = lifecycle_stack.start("hold_worker", {"seconds": 30})
    task = lifecycle_stack.settled(task_id, timeout=40)
    assert task["status"] == "failed"
    assert task["error"] == EXECUTION_FAILED_ERROR
    assert lifecycle_stack.wait_for_output("Task timed out after 5.00 seconds")
    assert lifecycle_stack.wait_for_output(f"task {task_id}: the run of tool 'hold_worker' {CUT_SHORT}")
    # The killed environment is replaced: the next task runs.
    after = lifecycle_stack.settled(lifecycle_stack.start("hold_worker", {"seconds": 0}))
    assert (after["status"], after["result"]["content"][0]["text"]) == ("completed", "held for 0s")


def make_task(stack: StackClient, task_id: str) -> list[str]:
    """What `make task ID=` prints for the task (the operator's view of its item and execution)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    port = urlsplit(stack.running.url).port
    shown = subprocess.run(
        ["make", "--no-print-directory", "-s", "task", f"ID={task_id}", f"PORT={port}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return shown.stdout.splitlines()


def regions_written(ledger: Path) -> list[str]:
    return ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []


def test_the_ported_oncall_rollback_cut_short_by_the_workers_timeout_fails_naming_why_and_rolls_no_region_back_twice(
    lifecycle_stack: StackClient, tmp_path: Path
) -> None:
    # The module as it runs on FastMCP, no steps: 2 s regions against this stack's 5 s worker (the
    # issue's 4 s regions against 10 s, halved), so the timeout falls inside the third region.
    ledger = tmp_path / "rollback.txt"
    task_id = lifecycle_stack.start("rollback", {"regions": 3, "seconds": 2, "ledger": str(ledger)})
    task = lifecycle_stack.settled(task_id, timeout=60)
    assert (task["status"], task["error"]) == ("failed", EXECUTION_FAILED_ERROR)
    written = regions_written(ledger)
    assert written == [f"region {region}" for region in range(len(written))] and len(written) < 3, written
    reason = f"the run of tool 'rollback' {CUT_SHORT}; running it again from the top would repeat what it already did."
    assert any(line.startswith(f"reason: {reason}") for line in make_task(lifecycle_stack, task_id))


def test_the_ported_oncall_rollback_in_steps_outlives_the_workers_timeout_rolling_each_region_back_once(
    lifecycle_stack: StackClient, tmp_path: Path
) -> None:
    ledger = tmp_path / "rollback_in_steps.txt"
    task_id = lifecycle_stack.start("rollback_in_steps", {"regions": 3, "seconds": 2, "ledger": str(ledger)})
    task = lifecycle_stack.settled(task_id, timeout=60)
    assert (task["status"], task["result"]["content"]) == (
        "completed",
        [{"type": "text", "text": "rolled back 3 regions"}],
    )
    # 6 s of regions against a 5 s worker: the run went on in another invocation after a recorded step
    # (or after a kill; then a region is written again only by the step cut short between its write and
    # its record, a few milliseconds of 2 s: never one a finished step recorded).
    assert lambda_runs_between(lifecycle_stack, task_id, 0, float("inf")) >= 2
    written = regions_written(ledger)
    assert [line for index, line in enumerate(written) if index == 0 or written[index - 1] != line] == [
        "region 0",
        "region 1",
        "region 2",
    ], written


def task_id_of(task: dict[str, object]) -> str:
    return str(task["taskId"])


def test_an_interview_whose_answers_would_outgrow_the_task_is_refused_cleanly_and_can_go_on_smaller(
    lifecycle_stack: StackClient,
) -> None:
    task_id = lifecycle_stack.start("interview", {"questions": 3})

    def asked(key: str) -> dict[str, object]:
        task = lifecycle_stack.wait_for(task_id, lambda t: key in (t.get("inputRequests") or {}))
        assert (task["status"], list(task["inputRequests"])) == ("input_required", [key]), task
        return task

    def answer(key: str, chars: int) -> dict[str, object]:
        update = {"taskId": task_id, "inputResponses": {key: accept(text="x" * chars)}}
        return lifecycle_stack.call("tasks/update", update)

    asked("q0")
    assert "result" in answer("q0", 60 * 1024)
    before = asked("q1")

    refused = answer("q1", 60 * 1024)  # 120 KB kept: over the cap, and on its way to DynamoDB's 400 KB item

    assert refused["error"] == {
        "code": wire.INVALID_PARAMS,
        "message": answers_full_message(MAX_TASK_KEPT_ANSWERS_BYTES),
    }
    assert MAX_TASK_KEPT_ANSWERS_BYTES == 96 * 1024
    assert lifecycle_stack.task(task_id) == before  # nothing changed
    assert "result" in answer("q1", 30 * 1024)
    asked("q2")
    assert "result" in answer("q2", 1)
    done = lifecycle_stack.settled(task_id)
    assert (done["status"], done["result"]["content"][0]["text"]) == (
        "completed",
        f"3 answers, {90 * 1024 + 1} characters",
    )


def test_a_task_call_whose_client_capabilities_carry_300_kb_is_refused_and_nothing_is_stored(
    lifecycle_stack: StackClient,
) -> None:
    heavy = StackClient(lifecycle_stack.running, user="heavy-capabilities")
    capabilities = {**TASKS, "experimental": {"padding": ["x" * 100_000] * 3}}

    body = heavy.call("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}}, capabilities)

    assert body["error"] == {
        "code": wire.INVALID_PARAMS,
        "message": f"Invalid params: clientCapabilities of a task may be at most {MAX_TASK_CLIENT_BYTES} bytes",
    }
    created = heavy.result("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0}})
    dynamodb = heavy.running.aws_client("dynamodb")
    table = heavy.running.physical_id("TaskTable", "AWS::DynamoDB::Table")
    owner = dynamodb.get_item(TableName=table, Key=task_key(created["taskId"]), ConsistentRead=True)["Item"]["owner"]
    owned = dynamodb.query(
        TableName=table,
        IndexName=schema.OWNER_INDEX,
        KeyConditionExpression="#owner = :owner",
        ExpressionAttributeNames={"#owner": schema.OWNER_INDEX_PARTITION_KEY},
        ExpressionAttributeValues={":owner": owner},
    )["Items"]
    assert [item["taskId"]["S"] for item in owned] == [created["taskId"]]  # the refused call stored nothing
