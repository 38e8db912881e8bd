"""Running a task's work: one Step Functions Standard execution per task, named by the task id."""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

from ..observability import NO_TELEMETRY, Telemetry, traced
from .aws_clients import client_provider, error_code, is_aws_error
from .errors import ExecutorUnavailable

# An execution in one of these states will never write the task's terminal status.
ENDED_STATUSES: Final[frozenset[str]] = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
# Callback errors meaning "nobody waits on this token any more".
STALE_TOKEN_CODES: Final[frozenset[str]] = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


class TaskExecutor(Protocol):
    def start(self, task_id: str) -> None:
        """Start the task's execution; starting the same task twice is harmless."""

    def stop(self, task_id: str) -> None:
        """Stop the execution (an execution that already ended is fine)."""

    def resume(self, task_token: str) -> bool:
        """Wake an execution parked on input; False when nothing waits on that token any more."""

    def release(self, task_token: str) -> None:
        """Best effort: let a parked wait end without resuming the work (after a stop or cancel)."""

    def status(self, task_id: str) -> str | None:
        """The execution's status (RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED), or None if none exists."""


def execution_arn(state_machine_arn: str, task_id: str) -> str:
    """arn:...:stateMachine:<name> -> arn:...:execution:<name>:<task id>, without asking AWS."""
    prefix, _, name = state_machine_arn.rpartition(":stateMachine:")
    return f"{prefix}:execution:{name}:{task_id}"


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
    ) -> None:
        self.state_machine_arn = state_machine_arn
        self._client = client_provider(client, "stepfunctions", endpoint_url, region_name)
        self.telemetry = telemetry

    @traced("TaskExecutor.start")
    def start(self, task_id: str) -> None:
        try:
            self._client().start_execution(
                stateMachineArn=self.state_machine_arn, name=task_id, input=json.dumps({"taskId": task_id})
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) == "ExecutionAlreadyExists":
                return
            raise ExecutorUnavailable(f"could not start the task's execution: {error_code(exc) or exc}") from exc

    @traced("TaskExecutor.stop")
    def stop(self, task_id: str) -> None:
        try:
            self._client().stop_execution(
                executionArn=execution_arn(self.state_machine_arn, task_id), error="TaskCancelled", cause="tasks/cancel"
            )
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) != "ExecutionDoesNotExist":
                raise ExecutorUnavailable(f"could not stop the task's execution: {error_code(exc) or exc}") from exc

    @traced("TaskExecutor.resume")
    def resume(self, task_token: str) -> bool:
        try:
            self._client().send_task_success(taskToken=task_token, output=json.dumps({"resumed": True}))
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) in STALE_TOKEN_CODES:
                return False
            raise ExecutorUnavailable(f"could not resume the task's execution: {error_code(exc) or exc}") from exc
        return True

    @traced("TaskExecutor.release")
    def release(self, task_token: str) -> None:
        try:
            self._client().send_task_success(taskToken=task_token, output=json.dumps({"released": True}))
        except Exception as exc:
            if not is_aws_error(exc):
                raise

    @traced("TaskExecutor.status")
    def status(self, task_id: str) -> str | None:
        try:
            response = self._client().describe_execution(executionArn=execution_arn(self.state_machine_arn, task_id))
        except Exception as exc:
            if not is_aws_error(exc):
                raise
            if error_code(exc) == "ExecutionDoesNotExist":
                return None
            raise ExecutorUnavailable(f"could not describe the task's execution: {error_code(exc) or exc}") from exc
        return str(response["status"])
