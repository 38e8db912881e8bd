"""Shared set-up of the task tests: one embedded moto server per session, the template's resources per test.

Every test starts from an empty moto and gets the synthesized template's table, worker function and
state machine (`local_stack.provision`, the same code `make run` uses), with the real `TaskWorker`
invoked in-process by moto's Step Functions interpreter. These are component tests: one process,
no IAM; the template-driven local stack (`tests/e2e`, `tests/local_stack`) runs each function as Lambda would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from local_stack.aws import EmbeddedAws, register_function, start_embedded_aws, unregister_function
from local_stack.provision import ProvisionedStack, provision
from local_stack.synth import Assembly, synthesize
from local_stack.template import DeployedTemplate
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


@dataclass(frozen=True, slots=True)
class TaskResources:
    table_name: str
    state_machine_arn: str
    worker_function_name: str

    @classmethod
    def of(cls, provisioned: ProvisionedStack) -> TaskResources:
        (table,) = [name for logical_id, name in provisioned.tables.items() if logical_id.startswith("TaskTable")]
        (machine,) = provisioned.state_machines.values()
        (worker,) = [spec.name for spec in provisioned.functions.values() if "Worker" in spec.logical_id]
        return cls(table, machine, worker)


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
        return StepFunctionsExecutor(self.resources.state_machine_arn, self.stepfunctions)

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
def assembly() -> Assembly:
    return synthesize()


@pytest.fixture(scope="session")
def embedded_aws() -> Iterator[EmbeddedAws]:
    aws = start_embedded_aws()
    yield aws
    aws.stop()


@pytest.fixture
def deployed(embedded_aws: EmbeddedAws, assembly: Assembly) -> ProvisionedStack:
    """An empty moto holding exactly what the template declares."""
    embedded_aws.reset()
    return provision(DeployedTemplate.load(assembly.directory, assembly.stack_name), embedded_aws.client)


@pytest.fixture
def task_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> Iterator[TaskEnvironment]:
    """The template's resources; the worker handler reads `env.tools` at call time, so tests add tools after."""
    holder: dict[str, TaskEnvironment] = {}

    def worker_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return holder["env"].worker().handle(event)

    resources = TaskResources.of(deployed)
    register_function(resources.worker_function_name, worker_handler)
    env = TaskEnvironment(
        embedded_aws, resources, embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )
    holder["env"] = env
    yield env
    unregister_function(resources.worker_function_name)
