"""A client of the local stack's HTTP API: calls as a development user, durable tasks awaited."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from mcp_runtime import wire

from ._stack import RunningStack
from ._wire import rpc, standard_headers

TASKS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}
TERMINAL = frozenset(wire.TERMINAL_TASK_STATUSES)
MAX_QUESTIONS = 20


@dataclass
class StackClient:
    """Calls a running local stack's MCP endpoint as the development user `user` (`Bearer dev:<user>`),
    declaring the tasks extension and elicitation unless told otherwise."""

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

    def run_task(
        self, tool: str, arguments: dict[str, Any], answers: Mapping[str, Any] | None = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Run a tool as a task on the state machine, answer what it asks (`answers`, by key, each a
        response or a function of the question, as `ToolClient.call` takes them), and return the task
        once it has settled (tasks/get: `status`, and `result` once completed)."""
        task_id = self.start(tool, arguments)
        for _ in range(MAX_QUESTIONS):
            task = self.wait_for(task_id, lambda task: task["status"] != "working", timeout)
            if task["status"] != "input_required":
                assert task["status"] in TERMINAL, f"task {task_id} still {task['status']} after {timeout} s"
                return task
            asked: dict[str, Any] = task["inputRequests"]
            missing = sorted(set(asked) - set(answers or {}))
            assert not missing, f"{tool} asked {missing} and the test gave no answer: {asked}"
            given = answers or {}
            responses = {key: dict(given[key](asked[key]) if callable(given[key]) else given[key]) for key in asked}
            self.result("tasks/update", {"taskId": task_id, "inputResponses": responses})
            self.wait_for(task_id, _answered(asked), timeout)
        raise AssertionError(f"{tool} was still asking after {MAX_QUESTIONS} answers")

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


def _answered(asked: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Whether a task has moved past these questions (working again, finished, or asking others)."""
    return lambda task: task.get("inputRequests") != asked
