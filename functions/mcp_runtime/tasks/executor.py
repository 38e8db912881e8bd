"""Running a task's work: Step Functions Standard executions, named by the task (`executionName`).

The API starts, resumes and stops executions right after the write that asks for it
(`mcp_runtime.tasks.service`), and the supervisor makes the same calls again from the table's stream
as the task item's `effect` asks (`mcp_runtime.tasks.supervisor`); the worker only answers its own
task token. Every call is safe to repeat: a start of an execution that exists (the same name and
input), a stop of one that ended, and a token nobody waits on any more are all "already done".
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

from .._aws import MAX_ATTEMPTS, AwsCaller, AwsCallError, AwsRejected
from ..observability import NO_TELEMETRY, Telemetry, traced
from .errors import ExecutorRefused, ExecutorUnavailable

# Callback errors meaning "nobody waits on this token any more" (it was answered, timed out, or its
# execution ended): the task's own item, not the token, says what happens next.
STALE_TOKEN_CODES: Final[frozenset[str]] = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


class TaskExecutor(Protocol):
    def start(self, task_id: str, execution_name: str) -> None:
        """Start the task's execution; starting it again is harmless."""

    def stop(self, execution_name: str) -> None:
        """Stop the execution (one that already ended, or never started, is fine)."""

    def resume(self, task_token: str, output: dict[str, Any] | None = None) -> bool:
        """Resume the execution waiting on this task token; False when nothing waits on it any more."""


def execution_arn(state_machine_arn: str, execution_name: str) -> str:
    """arn:...:stateMachine:<name> -> arn:...:execution:<name>:<execution>, without asking AWS."""
    prefix, _, name = state_machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{name}:{execution_name}"


def execution_input(task_id: str) -> str:
    """The one input every execution of a task gets (so a repeated start is the same start): the task,
    and round 0 of the rounds the state machine counts toward handing the task to a new execution."""
    return json.dumps({"taskId": task_id, "round": 0}, separators=(",", ":"))


class StepFunctionsExecutor:
    """`TaskExecutor` on a Step Functions state machine. The client is injected or built lazily."""

    def __init__(
        self,
        state_machine_arn: str,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        caller: AwsCaller | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        retry_for_seconds: float | None = None,
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self._aws = caller or AwsCaller(
            "stepfunctions",
            client,
            endpoint_url=endpoint_url,
            region_name=region_name,
            max_attempts=max_attempts,
            retry_for_seconds=retry_for_seconds,
        )
        self.telemetry = telemetry

    @traced("TaskExecutor.start")
    def start(self, task_id: str, execution_name: str) -> None:
        try:
            self._aws.call(
                "start_execution",
                stateMachineArn=self.state_machine_arn,
                name=execution_name,
                input=execution_input(task_id),
            )
        except AwsCallError as exc:
            if isinstance(exc, AwsRejected) and exc.code == "ExecutionAlreadyExists":
                return  # started before (and perhaps ended since)
            raise _translate(exc, "start") from exc

    @traced("TaskExecutor.stop")
    def stop(self, execution_name: str) -> None:
        try:
            self._aws.call(
                "stop_execution",
                executionArn=execution_arn(self.state_machine_arn, execution_name),
                error="TaskCancelled",
                cause="tasks/cancel",
            )
        except AwsCallError as exc:
            if isinstance(exc, AwsRejected) and exc.code == "ExecutionDoesNotExist":
                return  # never started
            raise _translate(exc, "stop") from exc

    @traced("TaskExecutor.describe")
    def describe(self, execution_name: str) -> str | None:
        """The execution's status (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED...); None when it
        does not exist (never started). Only the sweeper asks, for tasks nothing wrote for a lease."""
        try:
            response = self._aws.call(
                "describe_execution", executionArn=execution_arn(self.state_machine_arn, execution_name)
            )
        except AwsCallError as exc:
            if isinstance(exc, AwsRejected) and exc.code == "ExecutionDoesNotExist":
                return None
            raise _translate(exc, "describe") from exc
        return str(response["status"])

    @traced("TaskExecutor.resume")
    def resume(self, task_token: str, output: dict[str, Any] | None = None) -> bool:
        try:
            self._aws.call("send_task_success", taskToken=task_token, output=json.dumps(output or {"resumed": True}))
        except AwsCallError as exc:
            if isinstance(exc, AwsRejected) and exc.code in STALE_TOKEN_CODES:
                return False
            raise _translate(exc, "resume") from exc
        return True


def _translate(exc: AwsCallError, what: str) -> Exception:
    if isinstance(exc, AwsRejected):
        return ExecutorRefused(f"could not {what} the task's execution ({exc})")
    return ExecutorUnavailable(f"could not {what} the task's execution ({exc.code})")
