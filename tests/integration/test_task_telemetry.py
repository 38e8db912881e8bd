"""Task metrics through the real workflow: moto runs the ASL and invokes the real worker in-process.

The worker and the service each get a `RecordingTelemetry`; every terminal write is reported once,
by tool, with TimeToTerminal equal to what `tasks/get` shows between createdAt and lastUpdatedAt.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from fixtures import conformance_tasks
from pydantic import BaseModel

from mcp_runtime import tool
from mcp_runtime.observability import (
    TASKS_CANCELLED,
    TASKS_COMPLETED,
    TASKS_CREATED,
    TASKS_FAILED,
    TIME_TO_TERMINAL,
    TOOL_EXCEPTIONS,
)
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.models import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, parse_timestamp
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.worker import TaskWorker
from mcp_runtime.tools import ToolContext
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until
from tests.telemetry_support import RecordingTelemetry, Sample

TERMINAL = {COMPLETED, FAILED, CANCELLED}


class NoArgs(BaseModel):
    pass


@tool(description="Crashes with an exception that is neither a tool error nor a protocol error.", task=True)
def crash_for_metrics(args: NoArgs, ctx: ToolContext) -> str:
    raise RuntimeError("disk on fire")


def instrumented(env: TaskEnvironment, recorder: RecordingTelemetry) -> tuple[DynamoTaskStore, StepFunctionsExecutor]:
    store = DynamoTaskStore(env.resources.table_name, env.dynamodb, telemetry=recorder)
    executor = StepFunctionsExecutor(env.resources.state_machine_arn, env.stepfunctions, telemetry=recorder)
    return store, executor


@pytest.fixture
def worker_telemetry(task_env: TaskEnvironment) -> RecordingTelemetry:
    """The worker the state machine invokes reports to this recorder."""
    recorder = RecordingTelemetry()
    env = task_env

    def worker() -> TaskWorker:
        store, executor = instrumented(env, recorder)
        return TaskWorker(store, executor, env.tools, progress_interval_seconds=0.0, telemetry=recorder)

    env.worker = worker  # type: ignore[method-assign]
    env.tools.include(conformance_tasks)
    env.tools.include(sys.modules[__name__])
    return recorder


@pytest.fixture
def api_telemetry() -> RecordingTelemetry:
    return RecordingTelemetry()


@pytest.fixture
def service(task_env: TaskEnvironment, api_telemetry: RecordingTelemetry) -> TaskService:
    store, _ = instrumented(task_env, api_telemetry)
    return TaskService(store, ttl_ms=3_600_000, poll_interval_ms=250, telemetry=api_telemetry)


def start(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any] | None = None) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, arguments or {}, request_context(), None)["taskId"]
    return task_id


def settle(service: TaskService, task_id: str, statuses: set[str] = TERMINAL) -> dict[str, Any]:
    result: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda r: r["status"] in statuses
    )
    return result


def elapsed_ms(task: dict[str, Any]) -> float:
    return round((parse_timestamp(task["lastUpdatedAt"]) - parse_timestamp(task["createdAt"])) * 1000, 3)


def terminal_samples(recorder: RecordingTelemetry) -> list[Sample]:
    return [s for s in recorder.samples if s.metric != TASKS_CREATED]


def reported(recorder: RecordingTelemetry, count: int = 2) -> list[Sample]:
    """The worker reports right after its terminal write returns, which a poll can see first."""
    samples: list[Sample] = wait_until(lambda: list(recorder.samples), lambda found: len(found) >= count)
    return samples


def test_a_completed_task_is_reported_by_the_worker_with_its_time_to_terminal(
    service: TaskService,
    task_env: TaskEnvironment,
    worker_telemetry: RecordingTelemetry,
    api_telemetry: RecordingTelemetry,
) -> None:
    task_id = start(service, task_env, "slow_compute", {"seconds": 0.2, "label": "metrics"})
    done = settle(service, task_id)

    assert done["status"] == COMPLETED
    assert api_telemetry.samples == [Sample(TASKS_CREATED, "Count", 1.0, {"tool": "slow_compute"})]
    assert reported(worker_telemetry) == [
        Sample(TASKS_COMPLETED, "Count", 1.0, {"tool": "slow_compute"}),
        Sample(TIME_TO_TERMINAL, "Milliseconds", elapsed_ms(done), {"tool": "slow_compute", "status": COMPLETED}),
    ]
    assert elapsed_ms(done) >= 200.0  # the tool slept 0.2 s between createdAt and the terminal write
    assert worker_telemetry.keys == {"task_id": task_id, "execution_name": task_id}
    assert "TaskStore.finish" in worker_telemetry.spans and "TaskStore.load" in worker_telemetry.spans
    assert api_telemetry.spans[0] == "TaskStore.create"
    # Built without an executor, as a stream-only deployment would be: the supervisor alone starts it.
    assert not any(span.startswith("TaskExecutor") for span in api_telemetry.spans)


def test_a_protocol_error_is_reported_failed_by_the_worker(
    service: TaskService, task_env: TaskEnvironment, worker_telemetry: RecordingTelemetry
) -> None:
    task_id = start(service, task_env, "protocol_error_job")
    done = settle(service, task_id)

    assert done["status"] == FAILED
    assert reported(worker_telemetry) == [
        Sample(TASKS_FAILED, "Count", 1.0, {"tool": "protocol_error_job"}),
        Sample(TIME_TO_TERMINAL, "Milliseconds", elapsed_ms(done), {"tool": "protocol_error_job", "status": FAILED}),
    ]


def test_a_tool_that_raises_is_reported_once_as_a_tool_exception_and_a_failed_task(
    service: TaskService, task_env: TaskEnvironment, worker_telemetry: RecordingTelemetry
) -> None:
    task_id = start(service, task_env, "crash_for_metrics")
    done = settle(service, task_id)
    assert wait_until(lambda: task_env.execution_status(task_id), lambda s: s != "RUNNING") == "SUCCEEDED"

    assert done["status"] == FAILED
    assert reported(worker_telemetry, 3) == [
        Sample(TOOL_EXCEPTIONS, "Count", 1.0, {"tool": "crash_for_metrics"}),
        Sample(TASKS_FAILED, "Count", 1.0, {"tool": "crash_for_metrics"}),
        Sample(TIME_TO_TERMINAL, "Milliseconds", elapsed_ms(done), {"tool": "crash_for_metrics", "status": FAILED}),
    ]


def test_a_task_cancelled_while_waiting_for_input_is_reported_cancelled_once_and_never_completed(
    service: TaskService,
    task_env: TaskEnvironment,
    worker_telemetry: RecordingTelemetry,
    api_telemetry: RecordingTelemetry,
) -> None:
    task_id = start(service, task_env, "confirm_delete", {"filename": "report.txt"})
    assert settle(service, task_id, {INPUT_REQUIRED} | TERMINAL)["status"] == INPUT_REQUIRED

    service.cancel(task_id, request_context())
    done = service.get(task_id, request_context())
    assert wait_until(lambda: task_env.execution_status(task_id), lambda s: s not in (None, "RUNNING")) != "RUNNING"

    assert done["status"] == CANCELLED
    assert terminal_samples(api_telemetry) == [
        Sample(TASKS_CANCELLED, "Count", 1.0, {"tool": "confirm_delete"}),
        Sample(TIME_TO_TERMINAL, "Milliseconds", elapsed_ms(done), {"tool": "confirm_delete", "status": CANCELLED}),
    ]
    assert worker_telemetry.samples == []  # the waiting execution ended without a terminal write of its own
