"""Shared set-up of the task tests: one embedded moto server per session, fresh resources per test.

Every test gets its own table, worker function and state machine (unique names), created from the
real ASL file, with the real `TaskWorker` invoked in-process by moto's Step Functions interpreter.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from local_stack.aws import EmbeddedAws, TaskResources, start_embedded_aws, unregister_function
from mcp_runtime import wire
from mcp_runtime.context import Principal, RequestContext, RequestMeta
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.worker import TaskWorker
from mcp_runtime.tools import ToolRegistry

ALICE = Principal("test:alice", "test")
MALLORY = Principal("test:mallory", "test")
TASKS_AND_ELICITATION: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}
_names = itertools.count(1)


class Clock:
    """Wall-clock seconds that a test can move forward by hand."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def request_context(
    principal: Principal = ALICE, capabilities: dict[str, Any] | None = None, method: str = "tools/call"
) -> RequestContext:
    meta = RequestMeta(wire.PROTOCOL_VERSION, dict(TASKS_AND_ELICITATION if capabilities is None else capabilities))
    return RequestContext(request_id=1, method=method, meta=meta, principal=principal, headers={})


def wait_until(
    probe: Callable[[], Any], accept: Callable[[Any], bool], timeout: float = 15.0, interval: float = 0.05
) -> Any:
    """Poll `probe` until `accept` holds for its value; the last value is returned either way."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not accept(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = probe()
    return value


@dataclass
class TaskEnvironment:
    """Clients, resources and ready-made store/executor/service/worker for one test."""

    aws: EmbeddedAws
    resources: TaskResources
    dynamodb: Any
    stepfunctions: Any
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    clock: Callable[[], float] = time.time

    def store(self, clock: Callable[[], float] | None = None) -> DynamoTaskStore:
        return DynamoTaskStore(self.resources.table_name, self.dynamodb, clock=clock or self.clock)

    def executor(self) -> StepFunctionsExecutor:
        return StepFunctionsExecutor(self.resources.state_machine_arn, self.stepfunctions, release_parked_on_stop=True)

    def service(self, *, ttl_ms: int | None = 3_600_000, reconcile_after_seconds: float = 300.0) -> TaskService:
        return TaskService(
            self.store(),
            self.executor(),
            ttl_ms=ttl_ms,
            poll_interval_ms=250,
            reconcile_after_seconds=reconcile_after_seconds,
        )

    def worker(self) -> TaskWorker:
        return TaskWorker(self.store(), self.executor(), self.tools, progress_interval_seconds=0.0)

    def execution_status(self, task_id: str) -> str | None:
        return self.executor().status(task_id)


@pytest.fixture(scope="session")
def embedded_aws() -> Iterator[EmbeddedAws]:
    aws = start_embedded_aws()
    yield aws
    aws.stop()


@pytest.fixture
def task_env(embedded_aws: EmbeddedAws) -> Iterator[TaskEnvironment]:
    """Fresh resources; the worker handler reads `env.tools` at call time, so tests add tools after."""
    suffix = f"{next(_names)}-{int(time.time() * 1000) % 1_000_000}"
    holder: dict[str, TaskEnvironment] = {}

    def worker_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return holder["env"].worker().handle(event)

    resources = embedded_aws.provision(
        table_name=f"tasks-{suffix}",
        state_machine_name=f"tasks-{suffix}",
        worker_function_name=f"worker-{suffix}",
        worker=worker_handler,
    )
    env = TaskEnvironment(
        embedded_aws, resources, embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )
    holder["env"] = env
    yield env
    unregister_function(resources.worker_function_name)
