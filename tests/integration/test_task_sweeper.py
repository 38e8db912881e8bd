"""The sweeper on moto, with real executions of the template's state machine and no status events at
all (none is delivered here, as when Step Functions' best-effort delivery drops them): a task whose
execution ended is settled failed once its lease runs out, one whose execution runs gets a new
lease, one whose start was lost is started, and each run asks Step Functions at most its cap."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_stack.aws import EmbeddedAws, register_function, unregister_function
from local_stack.provision import ProvisionedStack

from mcp_runtime.observability import SWEEP_BEHIND, TASK_WRITES_REFUSED, TASKS_REPAIRED, TASKS_STALE
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.errors import ExecutorUnavailable
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.models import EXECUTION_LOST_ERROR, FAILED, INPUT_REQUIRED, WORKING
from mcp_runtime.tasks.store import DynamoTaskStore, lease_until, task_key
from mcp_runtime.tasks.supervisor import TaskSupervisor
from mcp_runtime.tasks.sweeper import (
    BEHIND_CAP,
    BEHIND_UNAVAILABLE,
    REFUSED_RECHECK_SECONDS,
    REPAIR_RESTARTED,
    REPAIR_RESUMED,
    REPAIR_SETTLED,
    SCHEDULED_EVENT,
    TaskSweeper,
)
from oauth_bridge.flows import CLEANUP_MINUTES
from tests.integration.task_harness import Clock, TaskEnvironment, TaskResources, wait_until
from tests.integration.test_task_store import await_input, create
from tests.telemetry_support import RecordingTelemetry

LEASE = 600
# An outcome that ends the execution (SUCCEEDED), as a run that finds another execution current does.
NOT_CURRENT = {"outcome": "not_current", "tokenWait": None, "settle": None, "wait": None}
SCHEDULED = {"version": "0", "detail-type": SCHEDULED_EVENT, "source": "aws.events", "detail": {}}


class Worker:
    """The worker function as the executions see it: each run does what the test says."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.runs: list[str] = []
        self.hold = False

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.runs.append(str(event.get("taskId")))
        if self.hold:
            self.release.wait(30)  # the execution runs as long as this invocation does
        return NOT_CURRENT  # ends the execution (SUCCEEDED) without writing the task: nothing settles it


class CountingExecutor(StepFunctionsExecutor):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.described: list[str] = []
        self.resumed: list[str] = []
        self.throttle_after: int | None = None

    def resume(self, task_token: str, output: dict[str, Any] | None = None) -> bool:
        self.resumed.append(task_token)  # the tests' tokens are made up: nothing waits on them in moto
        return True

    def describe(self, execution_name: str) -> str | None:
        if self.throttle_after is not None and len(self.described) >= self.throttle_after:
            raise ExecutorUnavailable("could not describe the task's execution (ThrottlingException)")
        self.described.append(execution_name)
        return super().describe(execution_name)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def worker(deployed: ProvisionedStack) -> Iterator[Worker]:
    scripted = Worker()
    name = TaskResources.of(deployed).worker_function_name
    register_function(name, scripted)
    yield scripted
    scripted.release.set()
    unregister_function(name)


@pytest.fixture
def task_env(embedded_aws: EmbeddedAws, deployed: ProvisionedStack) -> TaskEnvironment:
    return TaskEnvironment(
        embedded_aws, TaskResources.of(deployed), embedded_aws.client("dynamodb"), embedded_aws.client("stepfunctions")
    )


@pytest.fixture
def store(task_env: TaskEnvironment, clock: Clock) -> DynamoTaskStore:
    return DynamoTaskStore(task_env.resources.table_name, task_env.dynamodb, clock=clock, lease_seconds=LEASE)


@pytest.fixture
def executor(task_env: TaskEnvironment) -> CountingExecutor:
    return CountingExecutor(task_env.resources.state_machine_arn, task_env.stepfunctions)


@pytest.fixture
def telemetry() -> RecordingTelemetry:
    return RecordingTelemetry()


@pytest.fixture
def sweeper(
    store: DynamoTaskStore, executor: CountingExecutor, clock: Clock, telemetry: RecordingTelemetry
) -> Callable[..., TaskSweeper]:
    def build(max_checks: int = 100) -> TaskSweeper:
        return TaskSweeper(store, executor, max_checks=max_checks, clock=clock, telemetry=telemetry)

    return build


def started(store: DynamoTaskStore, clock: Clock, executor: StepFunctionsExecutor, env: TaskEnvironment) -> str:
    task_id = create(store, clock, ttl_ms=None).task_id
    executor.start(task_id, task_id)
    wait_until(lambda: env.execution_status(task_id), lambda status: status is not None)
    return task_id


def lease_of(env: TaskEnvironment, task_id: str) -> int | None:
    item = env.dynamodb.get_item(TableName=env.resources.table_name, Key=task_key(task_id), ConsistentRead=True)
    value = item["Item"].get(schema.LEASE_ATTRIBUTE)
    return int(value["N"]) if value else None


def repaired(telemetry: RecordingTelemetry) -> list[tuple[float, dict[str, str]]]:
    return [(sample.value, sample.dimensions) for sample in telemetry.of(TASKS_REPAIRED)]


def test_a_task_whose_execution_ended_without_a_word_is_settled_failed_once_its_lease_runs_out(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    task_id = started(store, clock, executor, task_env)
    assert wait_until(lambda: task_env.execution_status(task_id), lambda s: s != "RUNNING") == "SUCCEEDED"

    early = sweeper().handle(SCHEDULED)  # the lease has not run out: nothing is asked
    clock.advance(LEASE)
    late = sweeper().handle(SCHEDULED)

    nothing = {
        "checked": 0,
        "settled": 0,
        "restarted": 0,
        "resumed": 0,
        "extended": 0,
        "dropped": 0,
        "stale": 0,
        "refused": 0,
        "left": False,
    }
    assert early == nothing
    assert late == {**nothing, "checked": 1, "settled": 1}
    settled = store.get(task_id)
    assert (settled.status, settled.error) == (FAILED, EXECUTION_LOST_ERROR)
    assert lease_of(task_env, task_id) is None
    assert repaired(telemetry) == [(1, {"repair": REPAIR_SETTLED})]
    assert sweeper().sweep().checked == 0  # settled: out of the index


def test_a_task_whose_execution_still_runs_gets_a_new_lease_and_is_not_settled(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    worker.hold = True
    task_id = started(store, clock, executor, task_env)
    wait_until(lambda: worker.runs, bool)
    await_input(store, task_id, ["ok"])  # the task waits for its client while the execution runs
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (report.checked, report.extended, report.settled) == (1, 1, 0)
    assert store.get(task_id).status == INPUT_REQUIRED
    assert lease_of(task_env, task_id) == lease_until(clock(), LEASE)
    assert task_env.execution_status(task_id) == "RUNNING"
    assert sweeper().sweep().checked == 0  # asked about again one lease later, not at every run
    assert repaired(telemetry) == []


def test_a_working_task_whose_execution_runs_silent_for_a_lease_is_reported_stale_and_kept(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    worker.hold = True  # the tool hangs: its execution runs, nothing is written
    task_id = started(store, clock, executor, task_env)
    wait_until(lambda: worker.runs, bool)
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (report.checked, report.extended, report.stale, report.settled) == (1, 1, 1, 0)
    assert store.get(task_id).status == WORKING
    assert [(sample.value, sample.dimensions) for sample in telemetry.of(TASKS_STALE)] == [(1, {"status": "working"})]
    assert sweeper().sweep().stale == 0  # reported again one lease later, not at every run


def test_an_answers_resume_whose_direct_call_and_stream_retries_were_lost_is_made_one_lease_later(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    worker.hold = True  # the execution runs, parked as it would be on the task token
    task_id = started(store, clock, executor, task_env)
    wait_until(lambda: worker.runs, bool)
    await_input(store, task_id, ["ok"], token="token-of-the-answer")
    owner = store.get(task_id).owner
    assert store.answer(task_id, owner, {"ok": {"action": "accept", "content": {}}}).resumed
    # Nothing sends the token: the API's direct SendTaskSuccess and the supervisor's retries were lost.
    early = sweeper().sweep()
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (early.checked, executor.resumed) == (0, ["token-of-the-answer"])
    assert (report.checked, report.resumed, report.stale, report.extended) == (1, 1, 0, 1)
    assert repaired(telemetry) == [(1, {"repair": REPAIR_RESUMED})]
    assert store.get(task_id).status == WORKING


def test_a_callback_completions_resume_that_was_lost_is_made_one_lease_later(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    worker.hold = True
    task_id = started(store, clock, executor, task_env)
    wait_until(lambda: worker.runs, bool)
    waiting = {"state": "waiting", "name": "build", "hash": "hash-of-the-secret", "timeout": None, "deadline": None}
    store.mark_step(task_id, "cb.build", waiting, clock())
    assert store.await_callback(task_id, "cb.build", "token-of-the-callback", "waiting for build").applied
    assert store.complete_callback(task_id, "cb.build", "hash-of-the-secret", {"v": {"built": True}})
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert executor.resumed == ["token-of-the-callback"]
    assert (report.resumed, report.stale) == (1, 0)
    assert repaired(telemetry) == [(1, {"repair": REPAIR_RESUMED})]


def test_a_working_task_whose_start_was_lost_is_started_with_its_own_name_and_input(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id  # its start never happened
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (report.checked, report.restarted, report.settled) == (1, 1, 0)
    assert wait_until(lambda: worker.runs, bool) == [task_id]
    execution = task_env.stepfunctions.describe_execution(
        executionArn=f"{task_env.resources.state_machine_arn.replace(':stateMachine:', ':execution:')}:{task_id}"
    )
    assert execution["input"] == f'{{"taskId":"{task_id}","round":0}}'
    assert store.get(task_id).status == WORKING
    assert lease_of(task_env, task_id) == lease_until(clock(), LEASE)
    assert repaired(telemetry) == [(1, {"repair": REPAIR_RESTARTED})]


def test_a_task_waiting_for_input_whose_execution_does_not_exist_is_settled_failed(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment, sweeper: Callable[..., TaskSweeper]
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id
    await_input(store, task_id, ["ok"])
    clock.advance(LEASE)

    assert sweeper().sweep().settled == 1
    assert (store.get(task_id).status, store.get(task_id).error) == (FAILED, EXECUTION_LOST_ERROR)


def test_each_run_asks_step_functions_about_at_most_its_cap_oldest_lease_first(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
    telemetry: RecordingTelemetry,
) -> None:
    tasks = []
    for _ in range(3):
        tasks.append(started(store, clock, executor, task_env))
        clock.advance(60)  # a lease step apart: oldest first is creation order
    for task_id in tasks:
        wait_until(lambda task_id=task_id: task_env.execution_status(task_id), lambda s: s != "RUNNING")
    clock.advance(LEASE)

    first = sweeper(max_checks=2).sweep()
    second = sweeper(max_checks=2).sweep()

    assert (first.checked, first.settled, first.behind) == (2, 2, BEHIND_CAP)
    assert (second.checked, second.settled, second.behind) == (1, 1, None)
    assert [(s.value, s.dimensions) for s in telemetry.of(SWEEP_BEHIND)] == [(1, {"cause": BEHIND_CAP})]
    assert executor.described == tasks
    assert {store.get(task_id).status for task_id in tasks} == {FAILED}


def test_a_throttled_describe_ends_the_run_and_the_next_run_goes_on(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
) -> None:
    tasks = [started(store, clock, executor, task_env) for _ in range(2)]
    for task_id in tasks:
        wait_until(lambda task_id=task_id: task_env.execution_status(task_id), lambda s: s != "RUNNING")
    clock.advance(LEASE)
    executor.throttle_after = 1

    throttled = sweeper().sweep()
    executor.throttle_after = None
    after = sweeper().sweep()

    assert (throttled.settled, throttled.behind) == (1, BEHIND_UNAVAILABLE)
    assert (after.settled, after.behind) == (1, None)


def test_a_task_past_its_expiry_leaves_the_index_without_a_step_functions_call(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    sweeper: Callable[..., TaskSweeper],
) -> None:
    task_id = create(store, clock, ttl_ms=60_000).task_id
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (report.dropped, report.checked) == (1, 0)
    assert executor.described == []
    assert lease_of(task_env, task_id) is None


def test_the_sweeper_refuses_an_event_that_is_not_its_schedule(sweeper: Callable[..., TaskSweeper]) -> None:
    with pytest.raises(ValueError, match="schedule"):
        sweeper().handle({"detail-type": "Step Functions Execution Status Change", "detail": {}})


def test_the_template_schedules_the_sweeper_and_the_local_bus_reads_that_schedule(deployed: ProvisionedStack) -> None:
    by_target = {rule.targets[0].function_logical_id: rule for rule in deployed.scheduled_rules}
    (sweeper,) = [rule for target, rule in by_target.items() if target.startswith("Sweeper")]
    (cleanup,) = [rule for target, rule in by_target.items() if target.startswith("OAuthBridge")]

    assert (sweeper.period_seconds, sweeper.targets[0].maximum_retry_attempts, sweeper.inputs) == (300, 0, (None,))
    assert (cleanup.period_seconds, json.loads(cleanup.inputs[0] or "")) == (
        CLEANUP_MINUTES * 60,
        {"action": "cleanup"},
    )
    assert not any("scheduled" in kind for kind in deployed.not_emulated.values())


@pytest.mark.parametrize("execution", ["ended", "running"])
def test_a_settled_task_a_stray_write_left_a_lease_leaves_the_index_without_being_settled_again(
    execution: str,
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
) -> None:
    worker.hold = execution == "running"
    task_id = started(store, clock, executor, task_env)
    if execution == "ended":
        wait_until(lambda: task_env.execution_status(task_id), lambda s: s != "RUNNING")
    store.finish(task_id, FAILED, dict(EXECUTION_LOST_ERROR))
    task_env.dynamodb.update_item(  # what a write without a status condition could leave behind
        TableName=task_env.resources.table_name,
        Key=task_key(task_id),
        UpdateExpression="SET #lease = :lease",
        ExpressionAttributeNames={"#lease": schema.LEASE_ATTRIBUTE},
        ExpressionAttributeValues={":lease": {"N": str(int(clock()))}},
    )
    clock.advance(LEASE)

    report = sweeper().sweep()

    assert (report.checked, report.settled, report.extended, report.dropped) == (1, 0, 0, 1)
    assert lease_of(task_env, task_id) is None
    assert store.get(task_id).status == FAILED
    assert sweeper().sweep().checked == 0


class RefusingTable:
    """The task table's client, refusing the writes to the tasks in `refused` as DynamoDB refuses a
    write that would take an item past 400 KB (what a task created before items were bounded met):
    a write of the lease alone (a number for a number) still goes through, unless `refuse_all`."""

    MESSAGE = "Item size to update has exceeded the maximum allowed size"
    LEASE_ONLY = {schema.PARTITION_KEY, schema.LEASE_ATTRIBUTE, schema.LEASE_SHARD_ATTRIBUTE, "status"}

    def __init__(self, client: Any) -> None:
        self._client = client
        self.refused: set[str] = set()
        self.refuse_all = False

    def update_item(self, **params: Any) -> Any:
        task_id = params["Key"][schema.PARTITION_KEY]["S"].removeprefix(schema.TASK_KEY_PREFIX)
        lease_only = set(params["ExpressionAttributeNames"].values()) <= self.LEASE_ONLY
        if task_id in self.refused and (self.refuse_all or not lease_only):
            error = {"Error": {"Code": "ValidationException", "Message": self.MESSAGE}}
            raise ClientError(error, "UpdateItem")  # type: ignore[arg-type]
        return self._client.update_item(**params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.parametrize("refusing", ["growing writes", "every write"])
def test_a_task_whose_writes_are_refused_is_counted_and_set_aside_and_the_sweeper_repairs_the_others(
    refusing: str,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    telemetry: RecordingTelemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = RefusingTable(task_env.dynamodb)
    store = DynamoTaskStore(task_env.resources.table_name, table, clock=clock, lease_seconds=LEASE)
    refused = started(store, clock, executor, task_env)  # the oldest lease: the first the sweeper takes
    clock.advance(60)
    others = [started(store, clock, executor, task_env) for _ in range(2)]
    for task_id in [refused, *others]:
        wait_until(lambda task_id=task_id: task_env.execution_status(task_id), lambda s: s != "RUNNING")
    seen = lease_of(task_env, refused)
    table.refused.add(refused)
    table.refuse_all = refusing == "every write"
    clock.advance(LEASE)

    first = TaskSweeper(store, executor, clock=clock, telemetry=telemetry).sweep()

    assert (first.checked, first.settled, first.refused, first.behind) == (3, 2, 1, None)
    assert {store.get(task_id).status for task_id in others} == {FAILED}
    assert store.get(refused).status == WORKING
    assert [(s.value, s.dimensions) for s in telemetry.of(TASK_WRITES_REFUSED)] == [(1, {"by": "sweeper"})]
    assert f"task {refused}: the task table refused its write; looked at again in 3600 s" in caplog.text
    assert RefusingTable.MESSAGE in caplog.text
    if refusing == "growing writes":  # moved aside: the runs that follow do not meet it first
        assert lease_of(task_env, refused) == math.floor(clock()) + REFUSED_RECHECK_SECONDS
        assert TaskSweeper(store, executor, clock=clock).sweep().checked == 0
    else:  # nothing can be written to it: it takes one check of each run, and the run goes on
        assert lease_of(task_env, refused) == seen
        assert f"task {refused}: its lease could not be set aside" in caplog.text
    table.refused.clear()
    clock.advance(REFUSED_RECHECK_SECONDS)
    assert TaskSweeper(store, executor, clock=clock).sweep().settled == 1  # refused no more: repaired
    assert store.get(refused).status == FAILED


def test_a_lease_the_sweeper_sets_aside_comes_back_one_recheck_period_later(
    store: DynamoTaskStore, clock: Clock, task_env: TaskEnvironment
) -> None:
    task_id = create(store, clock, ttl_ms=None).task_id
    clock.advance(LEASE)
    (lease,) = store.stale_leases(clock(), 10)

    assert store.set_lease_aside(task_id, lease.lease_expires_at, REFUSED_RECHECK_SECONDS)

    assert lease_of(task_env, task_id) == math.floor(clock()) + REFUSED_RECHECK_SECONDS
    assert store.stale_leases(clock(), 10) == []
    assert [found.task_id for found in store.stale_leases(clock() + REFUSED_RECHECK_SECONDS, 10)] == [task_id]
    assert not store.set_lease_aside(task_id, lease.lease_expires_at, 1)  # only the lease it saw


def test_the_supervisor_counts_a_refused_settle_as_that_tasks_failure_and_does_not_raise(
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    telemetry: RecordingTelemetry,
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = RefusingTable(task_env.dynamodb)
    store = DynamoTaskStore(task_env.resources.table_name, table, clock=clock, lease_seconds=LEASE)
    task_id = started(store, clock, executor, task_env)
    assert wait_until(lambda: task_env.execution_status(task_id), lambda s: s != "RUNNING") == "SUCCEEDED"
    table.refused.add(task_id)
    supervisor = TaskSupervisor(store, executor, telemetry=telemetry)

    supervisor.reconcile({"status": "ABORTED", "name": task_id, "input": json.dumps({"taskId": task_id})})

    assert store.get(task_id).status == WORKING  # left to the sweeper, which sets it aside
    assert [(s.value, s.dimensions) for s in telemetry.of(TASK_WRITES_REFUSED)] == [(1, {"by": "supervisor"})]
    assert f"task {task_id}: the task table refused its write" in caplog.text


# Parked tasks at once: with one uniform lease, these many (10 times what one run checks) held a lost
# task behind them for 20 runs, 100 minutes (issue 31). Parked, they cost the sweeper nothing.
PARKED_TASKS = 2_000


def test_two_thousand_parked_tasks_cost_the_sweeper_nothing_and_a_lost_one_among_them_is_repaired_in_one_run(
    store: DynamoTaskStore,
    clock: Clock,
    executor: CountingExecutor,
    task_env: TaskEnvironment,
    worker: Worker,
    sweeper: Callable[..., TaskSweeper],
) -> None:
    parked = create(store, clock, ttl_ms=None).task_id
    record = store.get(parked)
    store.await_input(  # waiting a day for a person, as the worker's store_token step parks it
        parked, record.version, {"ok": {"method": "elicitation/create"}}, (("ok", "ok"),), {}, "t", clock() + 86_400
    )
    template = task_env.dynamodb.get_item(TableName=task_env.resources.table_name, Key=task_key(parked))["Item"]
    copies = []
    for number in range(PARKED_TASKS - 1):  # the same task, parked 1,999 more times under other ids
        task_id = f"parked-{number:05d}-{parked}"
        copies.append(
            {
                **template,
                **task_key(task_id),
                "taskId": {"S": task_id},
                schema.LEASE_SHARD_ATTRIBUTE: {"S": schema.lease_shard(task_id)},
            }
        )
    for start in range(0, len(copies), 25):
        batch = [{"PutRequest": {"Item": item}} for item in copies[start : start + 25]]
        task_env.dynamodb.batch_write_item(RequestItems={task_env.resources.table_name: batch})
    clock.advance(60)
    lost = started(store, clock, executor, task_env)  # the newest lease of all: behind every parked one
    assert wait_until(lambda: task_env.execution_status(lost), lambda s: s != "RUNNING") == "SUCCEEDED"
    clock.advance(LEASE)

    report = sweeper().sweep()  # one run, at its default cap of 100 checks

    assert (report.checked, report.settled, report.behind) == (1, 1, None)
    assert executor.described == [lost]
    assert (store.get(lost).status, store.get(lost).error) == (FAILED, EXECUTION_LOST_ERROR)
    assert store.get(parked).status == INPUT_REQUIRED
    clock.advance(12 * 3600)  # half a day later, every run still finds nothing to ask about
    assert sweeper().sweep().checked == 0
