"""The template-driven local stack as `make run` starts it, and a small client for its HTTP API."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from local_stack.synth import synthesize

from mcp_runtime import wire
from tests.support import RunningStack, rpc, standard_headers

TASKS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}
TERMINAL = frozenset(wire.TERMINAL_TASK_STATUSES)


@dataclass
class StackClient:
    running: RunningStack
    user: str = "alice"

    def call(self, method: str, params: dict[str, Any], capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        message = rpc(method, params, 1, TASKS if capabilities is None else capabilities)
        headers = {**standard_headers(message), "authorization": f"Bearer dev:{self.user}"}
        reply = httpx.post(self.running.url, json=message, headers=headers, timeout=60)
        assert reply.status_code < 500, reply.text
        body: dict[str, Any] = reply.json()
        return body

    def result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = self.call(method, params)
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    def start(self, tool: str, arguments: dict[str, Any]) -> str:
        created = self.result("tools/call", {"name": tool, "arguments": arguments})
        assert created["resultType"] == wire.RESULT_TASK, created
        task_id: str = created["taskId"]
        return task_id

    def task(self, task_id: str) -> dict[str, Any]:
        return self.result("tasks/get", {"taskId": task_id})

    def wait_for(self, task_id: str, accept: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        task = self.task(task_id)
        while not accept(task) and time.monotonic() < deadline:
            time.sleep(0.1)
            task = self.task(task_id)
        return task

    def settled(self, task_id: str, timeout: float = 60.0) -> dict[str, Any]:
        return self.wait_for(task_id, lambda task: task["status"] in TERMINAL, timeout)

    def execution_status(self, task_id: str) -> str:
        machine = self.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
        arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
        status: str = self.running.aws_client("stepfunctions").describe_execution(executionArn=arn)["status"]
        return status

    def wait_for_execution(self, task_id: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        status = self.execution_status(task_id)
        while status == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.1)
            status = self.execution_status(task_id)
        return status

    def wait_for_output(self, text: str, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while not self.running.printed(text) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.running.printed(text)


@pytest.fixture(scope="module")
def lifecycle_stack(short_timeout_stack: RunningStack) -> StackClient:
    """The template with a 5 s worker and an 8 s API timeout; the conformance and lifecycle fixtures as a layer."""
    return StackClient(short_timeout_stack)


def edited_assembly(
    tmp_path: Path, edit: Callable[[dict[str, Any]], None], context: dict[str, Any] | None = None
) -> Path:
    """A copy of the synthesized assembly whose template `edit` changed (LOCAL_CDK_OUT serves it)."""
    source = synthesize(context).directory
    target = tmp_path / "assembly"
    shutil.copytree(source, target)
    (template_path,) = target.glob("*.template.json")
    template = json.loads(template_path.read_text())
    edit(template)
    template_path.write_text(json.dumps(template))
    return target


def resource_of(template: dict[str, Any], logical_id_prefix: str) -> dict[str, Any]:
    (found,) = [body for key, body in template["Resources"].items() if key.startswith(logical_id_prefix)]
    return found


def descendants(pid: int) -> dict[int, str]:
    """The processes `pid` started, and theirs (Linux /proc): pid -> command line. Not the warm synthesizer
    (LOCAL_SYNTH_WARM, the suite's), which a stack may spawn and which serves the stacks after it."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, IndexError):
            continue  # ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: dict[int, str] = {}
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop()
        if "local_stack._warm_synth" in commands.get(child, ""):
            continue
        found[child] = commands.get(child, "")
        pending.extend(children.get(child, []))
    return found


def still_running(processes: dict[int, str]) -> dict[int, str]:
    """Those of `processes` that still run the same command (a reused pid runs another)."""
    alive = {}
    for pid, command in processes.items():
        try:
            now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if now == command and state != "Z":
            alive[pid] = command
    return alive
