"""Long work that really is long: durable steps, waits, callbacks and big results, through the template-driven stack.

The worker's timeout is 10 s here and an execution hands the task on after 4 rounds, so a tool of
twelve 3-second steps with a 5-second wait in the middle needs several invocations and more than
one execution: each step must still run exactly once.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_runtime import wire
from mcp_runtime.limits import MAX_RESULT_BYTES
from mcp_runtime.tasks.callbacks import REFUSED
from tests.local_stack.conftest import StackClient
from tests.support import REPO, local_stack_process

pytestmark = pytest.mark.e2e

CONTEXT = {"workerTimeoutSeconds": 10, "executionRoundLimit": 4}
STEPS, STEP_SECONDS, WAIT_AFTER, WAIT_SECONDS = 12, 3, 5, 5


# What adding the README's tool does, once a function imports `tools`: its file in functions/tools/,
# its line in MODULES. Functions that never import `tools` (the supervisor) stay as they are.
README_TOOL_LAYER = """
import importlib, importlib.abc, importlib.util, pathlib, sys


class AddTheReadmeTool(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "tools":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("tools")
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.__path__.append(str(pathlib.Path(__file__).parent / "tools"))
            module.MODULES = (*module.MODULES, importlib.import_module("tools.run_pipeline"))

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, AddTheReadmeTool())
"""


def readme_tool() -> str:
    readme = (REPO / "docs" / "tasks.md").read_text()
    block = re.search(r"<!-- long-work:start -->\n```python\n(.*?)```\n<!-- long-work:end -->", readme, re.DOTALL)
    assert block, "docs/tasks.md lost its long-work example"
    return block.group(1)


@pytest.fixture(scope="module")
def readme_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    layer = tmp_path_factory.mktemp("readme-tool")
    (layer / "tools").mkdir()
    (layer / "tools" / "run_pipeline.py").write_text(readme_tool())
    (layer / "sitecustomize.py").write_text(README_TOOL_LAYER)
    return layer


@pytest.fixture(scope="module")
def stack(readme_layer: Path) -> Iterator[StackClient]:
    env = {"LOCAL_CDK_CONTEXT": json.dumps(CONTEXT), "LOCAL_LAYERS": str(readme_layer)}
    # The project's tools (the README's run_pipeline joins them) beside the lifecycle fixtures.
    with local_stack_process(tool_packages="tools,fixtures.lifecycle", extra_env=env) as running:
        yield StackClient(running, user="long-work")


def ledger_lines(path: Path) -> list[tuple[str, int, float]]:
    lines = []
    for line in path.read_text().splitlines():
        kind, index, moment = line.split()
        lines.append((kind, int(index), float(moment)))
    return lines


def executions_of(stack: StackClient, task_id: str) -> list[dict[str, Any]]:
    machine = stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    listed = stack.running.aws_client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]
    return [e for e in listed if e["name"] == task_id or e["name"].startswith(f"{task_id}.")]


def lambda_runs_between(stack: StackClient, task_id: str, start: float, end: float) -> int:
    """Worker invocations any execution of the task scheduled in (start, end), by their history."""
    sfn = stack.running.aws_client("stepfunctions")
    runs = 0
    for execution in executions_of(stack, task_id):
        for event in sfn.get_execution_history(executionArn=execution["executionArn"])["events"]:
            if event["type"] == "TaskScheduled" and start < event["timestamp"].timestamp() < end:
                runs += 1
    return runs


def wait_window(stack: StackClient, task_id: str) -> tuple[float, float]:
    sfn = stack.running.aws_client("stepfunctions")
    for execution in executions_of(stack, task_id):
        events = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
        entered = [e["timestamp"].timestamp() for e in events if e["type"] == "WaitStateEntered"]
        exited = [e["timestamp"].timestamp() for e in events if e["type"] == "WaitStateExited"]
        if entered and exited:
            return entered[0], exited[0]
    raise AssertionError("no execution of the task went through the Wait state")


def test_twelve_steps_with_a_wait_complete_each_step_once_and_a_cancel_halfway_stops_the_rest(
    stack: StackClient, tmp_path: Path
) -> None:
    whole, halfway = tmp_path / "whole.txt", tmp_path / "halfway.txt"
    for ledger in (whole, halfway):
        ledger.touch()
    arguments = {"steps": STEPS, "seconds": STEP_SECONDS, "wait_after": WAIT_AFTER, "wait_seconds": WAIT_SECONDS}
    task_id = stack.start("stepped_job", {**arguments, "ledger": str(whole)})
    cancelled_id = stack.start("stepped_job", {**arguments, "ledger": str(halfway)})

    deadline = time.monotonic() + 60
    while len(ledger_lines(halfway)) < STEPS // 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    stack.result("tasks/cancel", {"taskId": cancelled_id})
    done = stack.settled(task_id, timeout=150)

    assert (done["status"], done["result"]["content"][0]["text"]) == (
        "completed",
        f"{STEPS} steps, sum of squares {sum(n * n for n in range(STEPS))}",
    )
    assert sorted(index for _, index, _ in ledger_lines(whole)) == list(range(STEPS))  # each step once
    start, end = wait_window(stack, task_id)
    assert end - start >= WAIT_SECONDS - 0.5
    assert lambda_runs_between(stack, task_id, start, end) == 0  # nothing ran during the wait
    names = sorted(e["name"] for e in executions_of(stack, task_id))
    assert names[0] == task_id and len(names) >= 2  # continued in new executions, same task id
    assert {e["status"] for e in executions_of(stack, task_id)} == {"SUCCEEDED"}

    cancelled = stack.task(cancelled_id)
    assert cancelled["status"] == "cancelled"
    ran = sorted(index for _, index, _ in ledger_lines(halfway))
    assert ran == list(range(len(ran))) and len(ran) <= STEPS // 2 + 1  # the later steps never ran
    assert all(e["status"] != "RUNNING" for e in executions_of(stack, cancelled_id))


def test_a_callback_completes_the_task_once_through_the_templates_route_and_refuses_replays_and_forgeries(
    stack: StackClient, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    task_id = stack.start("external_job", {"inbox": str(inbox)})
    deadline = time.monotonic() + 30
    while not (inbox.exists() and inbox.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    (submitted,) = [json.loads(line) for line in inbox.read_text().splitlines()]
    assert submitted["url"].endswith("/tasks/callbacks")
    route = stack.running.url.removesuffix("/mcp") + "/tasks/callbacks"  # the template's route, served locally
    # submit() runs before the execution parks and the worker stores the token with the waiting message
    waiting = stack.wait_for(task_id, lambda task: "statusMessage" in task, timeout=30)
    token = submitted["token"]
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")

    refused_forgery = httpx.post(route, json={"token": forged, "result": {"build": "fake"}})
    accepted = httpx.post(route, json={"token": token, "result": {"build": "green", "artifacts": 3}})
    refused_replay = httpx.post(route, json={"token": token, "result": {"build": "again"}})
    done = stack.settled(task_id)

    assert (waiting["status"], waiting["statusMessage"]) == ("working", "Waiting for build")
    assert (refused_forgery.status_code, refused_forgery.json()) == (404, REFUSED)
    assert (accepted.status_code, accepted.json()) == (200, {"completed": True})
    assert (refused_replay.status_code, refused_replay.json()) == (404, REFUSED)
    assert done["result"]["content"][0]["text"] == (
        'report: the external system sent {"artifacts": 3, "build": "green"}'
    )


def test_a_two_megabyte_result_comes_back_whole_and_six_megabytes_fail_naming_the_limit(
    stack: StackClient, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    big = stack.start("counted_job", {"ledger": str(ledger), "result_kb": 2048})
    too_big = stack.start("counted_job", {"ledger": str(ledger), "result_kb": 6144})

    done, refused = stack.settled(big), stack.settled(too_big)

    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == f"ran {big}" + " " * (2048 * 1024)
    assert refused["status"] == "failed"
    assert refused["error"]["code"] == wire.INTERNAL_ERROR
    assert refused["error"]["message"].endswith(f"over the limit of {MAX_RESULT_BYTES} bytes")


class FakeCi:
    """The CI the README's tool triggers: it records each webhook; the test then plays the pipeline."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        ci = self

        class Webhook(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                ci.received.append({**json.loads(self.rfile.read(length)), "key": self.headers.get("idempotency-key")})
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/build"

    def webhook_for(self, project: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for hook in self.received:
                if hook["project"] == project:
                    return hook
            time.sleep(0.1)
        raise AssertionError(f"the CI never heard of {project}")


def test_the_readme_tool_added_in_one_file_gets_steps_the_wait_the_callback_big_results_and_cancel(
    stack: StackClient,
) -> None:
    ci = FakeCi()
    route = stack.running.url.removesuffix("/mcp") + "/tasks/callbacks"
    task_id = stack.start("run_pipeline", {"project": "apollo", "webhook": ci.url, "settle_seconds": 2})
    cancelled_id = stack.start("run_pipeline", {"project": "gemini", "webhook": ci.url, "settle_seconds": 2})

    hook = ci.webhook_for("apollo")
    log = "x" * (2 * 1024 * 1024)
    accepted = httpx.post(route, json={"token": hook["token"], "result": {"status": "passed", "log": log}}, timeout=30)
    replayed = httpx.post(route, json={"token": hook["token"], "result": {"status": "failed"}})
    other = ci.webhook_for("gemini")
    stack.result("tasks/cancel", {"taskId": cancelled_id})
    late = httpx.post(route, json={"token": other["token"], "result": {"status": "passed"}})
    done = stack.settled(task_id, timeout=60)

    assert (accepted.status_code, replayed.status_code, late.status_code) == (200, 404, 404)
    assert done["status"] == "completed"
    assert done["result"]["content"][0]["text"] == f"apollo: passed\n{log}"
    assert hook["callbackUrl"].startswith("https://") and hook["callbackUrl"].endswith("/tasks/callbacks")
    assert len(hook["key"]) == 32 and hook["key"] != other["key"]
    start, end = wait_window(stack, task_id)
    assert end - start >= 1.5 and lambda_runs_between(stack, task_id, start, end) == 0
    assert stack.task(cancelled_id)["status"] == "cancelled"
    assert stack.wait_for_execution(cancelled_id) in ("ABORTED", "SUCCEEDED")


def test_a_step_running_when_its_invocation_died_runs_again_and_the_finished_ones_do_not(
    stack: StackClient, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"

    done = stack.settled(stack.start("crash_once_job", {"ledger": str(ledger)}), timeout=60)

    assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "first, then second")
    assert ledger.read_text().splitlines() == ["first", "second (dies)", "second"]
