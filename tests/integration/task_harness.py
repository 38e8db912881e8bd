"""Shared set-up of the task tests: one embedded moto server per session, the template's resources per test.

Every test starts from an empty moto and gets the synthesized template's table, functions and state
machine (`local_stack.provision`, the same code `make run` uses), with the real `TaskWorker`
invoked in-process by moto's Step Functions interpreter, and the template's event sources (the
table's stream, execution status changes) delivered to the real `TaskSupervisor` in-process by the
same `local_stack.event_delivery` the local stack runs. These are component tests: one process,
no IAM; the template-driven local stack (`tests/e2e`, `tests/local_stack`) runs each function as Lambda would.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from local_stack.aws import EmbeddedAws, in_process, register_function, start_embedded_aws, unregister_function
from local_stack.event_delivery import EventDelivery
from local_stack.provision import ProvisionedStack, provision
from local_stack.synth import Assembly, synthesize
from local_stack.template import DeployedTemplate

from mcp_runtime import wire
from mcp_runtime.context import Principal, RequestContext, RequestMeta
from mcp_runtime.observability import NO_TELEMETRY, Telemetry
from mcp_runtime.tasks.executor import StepFunctionsExecutor, execution_arn
from mcp_runtime.tasks.payloads import S3PayloadStore
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.supervisor import TaskSupervisor
from mcp_runtime.tasks.worker import TaskWorker
from mcp_runtime.tools import Registry

ALICE = Principal("test:alice", "test")
MALLORY = Principal("test:mallory", "test")
TASKS_AND_ELICITATION: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}
CALLBACK_URL = "https://callbacks.example.com/tasks/callbacks"


@dataclass(frozen=True, slots=True)
class TaskResources:
    table_name: str
    state_machine_arn: str
    worker_function_name: str
    supervisor_logical_id: str
    bucket_name: str

    @classmethod
    def of(cls, provisioned: ProvisionedStack) -> TaskResources:
        (table,) = [name for logical_id, name in provisioned.tables.items() if logical_id.startswith("TaskTable")]
        (machine,) = provisioned.state_machines.values()
        (worker,) = [spec.name for spec in provisioned.functions.values() if "Worker" in spec.logical_id]
        (supervisor,) = [logical_id for logical_id in provisioned.functions if "Supervisor" in logical_id]
        (bucket,) = provisioned.buckets.values()
        return cls(table, machine, worker, supervisor, bucket)


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
    tools: Registry = field(default_factory=Registry)
    clock: Callable[[], float] = time.time
    rounds_per_execution: int = 1000
    progress_interval_seconds: float = 0.0  # every report written; the deployed default is 1 s
    telemetry: Telemetry = NO_TELEMETRY  # what the worker reports

    def store(self, clock: Callable[[], float] | None = None) -> DynamoTaskStore:
        return DynamoTaskStore(self.resources.table_name, self.dynamodb, clock=clock or self.clock)

    def executor(self) -> StepFunctionsExecutor:
        return StepFunctionsExecutor(self.resources.state_machine_arn, self.stepfunctions)

    def payloads(self) -> S3PayloadStore:
        return S3PayloadStore(self.resources.bucket_name, self.aws.client("s3"))

    def service(self, *, ttl_ms: int | None = 3_600_000) -> TaskService:
        return TaskService(self.store(), ttl_ms=ttl_ms, poll_interval_ms=250, payloads=self.payloads())

    def worker(self) -> TaskWorker:
        return TaskWorker(
            self.store(),
            self.executor(),
            self.tools,
            payloads=self.payloads(),
            callback_url=CALLBACK_URL,
            rounds_per_execution=self.rounds_per_execution,
            progress_interval_seconds=self.progress_interval_seconds,
            telemetry=self.telemetry,
        )

    def supervisor(self) -> TaskSupervisor:
        return TaskSupervisor(self.store(), self.executor())

    def execution_status(self, execution_name: str) -> str | None:
        arn = execution_arn(self.resources.state_machine_arn, execution_name)
        try:
            status: str = self.stepfunctions.describe_execution(executionArn=arn)["status"]
        except self.stepfunctions.exceptions.ExecutionDoesNotExist:
            return None
        return status


@contextmanager
def delivered_events(
    aws: EmbeddedAws, deployed: ProvisionedStack, supervisor: Callable[[dict[str, Any], Any], Any]
) -> Iterator[EventDelivery]:
    """The template's stream mappings and rules, delivering to `supervisor` (a handler) in-process."""
    invoker = in_process(TaskResources.of(deployed).supervisor_logical_id, supervisor)
    delivery = EventDelivery.start(
        deployed,
        lambda logical_id, payload: invoker(payload, {}),
        lambda logical_id: aws.client("dynamodbstreams"),
        lambda logical_id: aws.client("sqs"),
    )
    try:
        yield delivery
    finally:
        delivery.stop()


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

    def supervisor_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return holder["env"].supervisor().handle(event)

    resources = TaskResources.of(deployed)
    register_function(resources.worker_function_name, worker_handler)
    env = TaskEnvironment(
        embedded_aws, resources, embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )
    holder["env"] = env
    with delivered_events(embedded_aws, deployed, supervisor_handler):
        yield env
    unregister_function(resources.worker_function_name)
