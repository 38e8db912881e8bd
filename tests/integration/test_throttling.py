"""A throttled worker, as Lambda throttles it (HTTP 429 TooManyRequestsException), under the real ASL on
moto's interpreter: the task waits and then completes; a worker that stays throttled still gets its
task settled failed, by the state machine's own conditional table write."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_stack.aws import LambdaThrottled, in_process, register_invoker
from local_stack.synth import Assembly, synthesize
from pydantic import BaseModel

from mcp_runtime import tool
from mcp_runtime.tasks.executor import execution_arn
from mcp_runtime.tasks.models import COMPLETED, EXECUTION_FAILED_ERROR, FAILED, TaskRecord
from mcp_runtime.tools import ToolContext
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until

THROTTLE = "Lambda.TooManyRequestsException"
# The deployed backoff is minutes; scaled to 1 s waits, 3 retries, as the context allows.
SCALED = {"throttleRetryIntervalSeconds": 1, "throttleRetryMaxDelaySeconds": 1, "throttleRetryMaxAttempts": 3}


class NoArgs(BaseModel):
    pass


@tool(description="Answers at once.", task=True)
def quick(args: NoArgs, ctx: ToolContext) -> str:
    return "done"


@tool(description="Waits one second durably (a second round), then answers.", task=True)
def two_rounds(args: NoArgs, ctx: ToolContext) -> str:
    ctx.wait(1)
    return "done"


@pytest.fixture(scope="module")
def assembly() -> Assembly:
    return synthesize(SCALED)


@pytest.fixture
def env(task_env: TaskEnvironment) -> TaskEnvironment:
    task_env.tools.include(sys.modules[__name__])
    return task_env


def throttle_worker(env: TaskEnvironment, throttled: Callable[[dict[str, Any]], bool]) -> list[str]:
    """The worker throttled whenever `throttled(event)` says so; returns the actions it was asked for."""
    name = env.resources.worker_function_name
    real = in_process(name, lambda event, context: env.worker().handle(event))
    asked: list[str] = []

    def invoke(body: bytes, headers: dict[str, str]) -> tuple[bytes, str | None]:
        event = json.loads(body)
        asked.append(str(event.get("action")))
        if throttled(event):
            raise LambdaThrottled(name, "ReservedFunctionConcurrentInvocationLimitExceeded")
        return real(body, headers)

    register_invoker(name, invoke)
    return asked


def start(env: TaskEnvironment, tool_name: str = "quick") -> str:
    spec = env.tools.get(tool_name)
    assert spec is not None
    task_id: str = env.service().create(spec, {}, request_context(), None)["taskId"]
    return task_id


def settled(env: TaskEnvironment, task_id: str, timeout: float = 30.0) -> TaskRecord:
    record: TaskRecord = wait_until(
        lambda: env.store().get(task_id), lambda r: r.status in (COMPLETED, FAILED, "cancelled"), timeout
    )
    return record


def ended(env: TaskEnvironment, task_id: str) -> str | None:
    status: str | None = wait_until(lambda: env.execution_status(task_id), lambda s: s not in (None, "RUNNING"), 30)
    return status


def failures(env: TaskEnvironment, task_id: str) -> list[str]:
    arn = execution_arn(env.resources.state_machine_arn, task_id)
    events = env.stepfunctions.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    return [event["taskFailedEventDetails"]["error"] for event in events if event["type"] == "TaskFailed"]


def test_a_throttled_synchronous_invoke_answers_http_429_too_many_requests(env: TaskEnvironment) -> None:
    throttle_worker(env, lambda event: True)
    with pytest.raises(ClientError) as raised:
        env.aws.client("lambda").invoke(FunctionName=env.resources.worker_function_name, Payload=b"{}")
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 429
    assert error["Error"]["Code"] == "TooManyRequestsException"
    assert error["Reason"] == "ReservedFunctionConcurrentInvocationLimitExceeded"


def test_a_throttled_worker_delays_the_task_which_then_completes(env: TaskEnvironment) -> None:
    runs = {"count": 0}

    def first_two_runs(event: dict[str, Any]) -> bool:
        if event.get("action") != "run":
            return False
        runs["count"] += 1
        return runs["count"] <= 2

    throttle_worker(env, first_two_runs)
    task_id = start(env)

    record = settled(env, task_id)
    assert (record.status, record.result["content"]) == (COMPLETED, [{"type": "text", "text": "done"}])
    assert ended(env, task_id) == "SUCCEEDED"
    assert failures(env, task_id) == [THROTTLE, THROTTLE]


def test_a_worker_that_stays_throttled_gets_its_task_failed_by_the_state_machines_own_write(
    env: TaskEnvironment,
) -> None:
    asked = throttle_worker(env, lambda event: True)
    task_id = start(env)
    before = env.store().get(task_id)

    record = settled(env, task_id)

    assert record.status == FAILED
    assert record.error == EXECUTION_FAILED_ERROR  # what the worker's fail path writes
    assert (record.task_token, record.status_message, record.effect, record.input_requests) == (None, None, None, {})
    assert record.version == before.version + 1
    assert (
        record.seconds_since_update() >= 0
    )  # lastUpdatedAt is a timestamp the store reads ($$.State.EnteredTime, as AWS writes it)
    assert ended(env, task_id) == "FAILED"
    # RunTool: 1 + 3 throttle retries; MarkFailed: 1 + 2 retries; then the table write, which needs no worker.
    assert failures(env, task_id) == [THROTTLE] * 7
    assert asked == ["run"] * 4 + ["fail"] * 3


def test_the_state_machines_fail_write_leaves_a_task_that_settled_meanwhile_alone(env: TaskEnvironment) -> None:
    settled_once: list[str] = []

    def settle_then_throttle(event: dict[str, Any]) -> bool:
        if event.get("action") == "run" and not settled_once:
            # A terminal write that lands while the worker is throttled (a cancel would do the same).
            env.store().finish(event["taskId"], COMPLETED, {"content": [{"type": "text", "text": "late"}]})
            settled_once.append(event["taskId"])
        return True

    throttle_worker(env, settle_then_throttle)
    task_id = start(env)

    assert ended(env, task_id) == "FAILED"
    assert failures(env, task_id)[-1] == "DynamoDB.ConditionalCheckFailedException"
    record = env.store().get(task_id)
    assert (record.status, record.result) == (COMPLETED, {"content": [{"type": "text", "text": "late"}]})
    assert record.version == 2


def test_every_round_gets_the_whole_retry_policy_again(env: TaskEnvironment) -> None:
    """Retry counts are per entry into a state, as in Step Functions: a round throttled to its last
    retry leaves the next round all of them (moto kept counting across rounds)."""
    throttled_in_round: dict[int, int] = {}

    def three_per_round(event: dict[str, Any]) -> bool:
        if event.get("action") != "run":
            return False
        count = throttled_in_round.get(event["round"], 0)
        throttled_in_round[event["round"]] = count + 1
        return count < 3  # every retry the policy allows (3), in each round

    throttle_worker(env, three_per_round)
    task_id = start(env, "two_rounds")

    record = settled(env, task_id, timeout=60)
    assert (record.status, record.result["content"]) == (COMPLETED, [{"type": "text", "text": "done"}])
    assert failures(env, task_id) == [THROTTLE] * 6
    assert throttled_in_round == {0: 4, 1: 4}
