"""Durable steps, waits, callbacks, continuation and big results, on the real ASL with the worker in-process."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bench.capacity import CapacityMeter
from fixtures import lifecycle
from local_stack.aws import DUMMY_CREDENTIALS, REGION, register_function
from local_stack.clients import aws_client
from pydantic import BaseModel

from mcp_runtime import ToolContext, tool, wire
from mcp_runtime._aws import MAX_ATTEMPTS, invocation_deadline
from mcp_runtime.limits import MAX_OPERATION_NAME_BYTES, MAX_OPERATIONS, MAX_RESULT_BYTES, MAX_SETTLE_RESULT_BYTES
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.callbacks import REFUSED, CallbackService
from mcp_runtime.tasks.durable import RUN_MARK_KEY, STEP_BUSY_RECHECK_SECONDS, is_step_mark
from mcp_runtime.tasks.models import CANCELLED, COMPLETED, FAILED
from mcp_runtime.tasks.payloads import S3PayloadStore
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import (
    DynamoTaskStore,
    part_key,
    record_to_attribute,
    step_item_entry,
    step_key,
    steps_of,
    task_key,
)
from mcp_runtime.tasks.worker import RESULT_NOT_STORED_MESSAGE, RESULT_PUT_BACKOFF_SECONDS, TaskWorker
from mcp_runtime.tools import SPEC_ATTRIBUTE
from tests.integration.task_harness import Clock, TaskEnvironment, request_context, wait_until
from tests.integration.test_task_store import create

TERMINAL = {COMPLETED, FAILED, CANCELLED}


@pytest.fixture
def env(task_env: TaskEnvironment) -> TaskEnvironment:
    task_env.tools.include(lifecycle)
    return task_env


@pytest.fixture
def service(env: TaskEnvironment) -> TaskService:
    return env.service()


def start(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any]) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


def settled(service: TaskService, task_id: str, timeout: float = 30) -> dict[str, Any]:
    task: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL, timeout
    )
    return task


def records_before_settling(env: TaskEnvironment, task_id: str) -> dict[str, dict[str, Any]]:
    """The task's durable records as the last writes of its work part and its step items left them (the
    run's own in-progress mark aside): a settled task's parts are deleted, so they are read from the
    table's stream."""
    streams = env.aws.client("dynamodbstreams")
    arn = env.dynamodb.describe_table(TableName=env.resources.table_name)["Table"]["LatestStreamArn"]
    images: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator)
            images += [record["dynamodb"]["NewImage"] for record in page["Records"] if "NewImage" in record["dynamodb"]]
            iterator = page.get("NextShardIterator") if page["Records"] else None
    latest = {image[schema.PARTITION_KEY]["S"]: image for image in images}
    work = steps_of(latest[schema.part_key_value(task_id, schema.WORK_PART)])
    records = {key: entry for key, entry in work.items() if key != RUN_MARK_KEY}
    for slot in range(1_000):
        shown = step_item_entry(latest.get(schema.step_key_value(task_id, slot)))
        if (
            shown is not None
            and shown[1] is not None
            and not is_step_mark(records.get(shown[0]) or {"state": "running"})
        ):
            continue  # the work part's record stands for this slot
        if shown is not None and shown[1] is not None:
            records[shown[0]] = shown[1]
    return records


def step_runs(ledger: Path) -> list[int]:
    return [int(line.split()[1]) for line in ledger.read_text().splitlines()]


def test_each_step_runs_once_across_invocations_cut_short_by_the_deadline(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    runs: list[str] = []

    def short_invocations(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if event.get("action") == "run":
            runs.append(event["taskId"])
        # 5 s: AWS calls stop 1 s before the end, and a step starts only while the longest one and the
        # 2 s reserve fit, so an invocation runs one to three 0.6 s steps and still has time to record
        # them however slow the machine is (at 3.5 s, a slow start left a step's record write too little).
        with invocation_deadline(5_000):
            return env.worker().handle(event)

    register_function(env.resources.worker_function_name, short_invocations)
    ledger = tmp_path / "ledger.txt"
    task_id = start(service, env, "stepped_job", {"steps": 5, "seconds": 0.6, "ledger": str(ledger)})

    done = settled(service, task_id)

    assert (done["status"], done["result"]["content"][0]["text"]) == (COMPLETED, "5 steps, sum of squares 30")
    assert step_runs(ledger) == [0, 1, 2, 3, 4]
    assert len(runs) >= 2  # five steps, at most three per invocation: the deadline did cut the work short
    steps = records_before_settling(env, task_id)
    assert sorted(steps) == [f"step:part-{n}" for n in range(5)]
    assert [steps[f"step:part-{n}"]["v"] for n in range(5)] == [0, 1, 4, 9, 16]


def test_a_durable_wait_ends_the_invocation_and_the_tool_goes_on_after_it(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    args = {"steps": 3, "ledger": str(ledger), "wait_after": 0, "wait_seconds": 1}
    task_id = start(service, env, "stepped_job", args)

    done = settled(service, task_id)

    assert done["status"] == COMPLETED
    assert step_runs(ledger) == [0, 1, 2]
    history = env.stepfunctions.get_execution_history(
        executionArn=env.stepfunctions.describe_execution(
            executionArn=f"{env.resources.state_machine_arn.replace(':stateMachine:', ':execution:')}:{task_id}"
        )["executionArn"]
    )["events"]
    assert [e["type"] for e in history].count("WaitStateEntered") == 1


def test_an_execution_near_its_round_limit_hands_the_task_to_a_new_execution(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    env.rounds_per_execution = 1
    ledger = tmp_path / "ledger.txt"
    args = {"steps": 2, "ledger": str(ledger), "wait_after": 0, "wait_seconds": 1}
    task_id = start(service, env, "stepped_job", args)

    done = settled(service, task_id)

    assert done["status"] == COMPLETED
    assert step_runs(ledger) == [0, 1]
    assert env.store().get(task_id).execution == f"{task_id}.2"
    assert env.execution_status(task_id) == "SUCCEEDED"
    assert wait_until(lambda: env.execution_status(f"{task_id}.2"), lambda s: s != "RUNNING") == "SUCCEEDED"


def test_a_callback_completes_once_for_its_token_and_refuses_a_second_and_a_forged_one(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    task_id = start(service, env, "external_job", {"inbox": str(inbox)})
    wait_until(lambda: inbox.exists() and inbox.read_text(), bool)
    (submitted,) = [json.loads(line) for line in inbox.read_text().splitlines()]
    callbacks = CallbackService(env.store(), env.payloads())
    forged = submitted["token"][:-4] + ("AAAA" if not submitted["token"].endswith("AAAA") else "BBBB")

    assert callbacks.complete(json.dumps({"token": forged, "result": {"ok": False}}).encode()).status == 404
    first = callbacks.complete(json.dumps({"token": submitted["token"], "result": {"ok": True}}).encode())
    second = callbacks.complete(json.dumps({"token": submitted["token"], "result": {"ok": "again"}}).encode())
    done = settled(service, task_id)

    assert (first.status, first.body) == (200, {"completed": True})
    assert (second.status, second.body) == (404, REFUSED)
    assert submitted["url"] == "https://callbacks.example.com/tasks/callbacks"
    assert done["status"] == COMPLETED, done
    assert done["result"]["content"][0]["text"] == 'report: the external system sent {"ok": true}'


def test_a_callback_woken_without_a_completion_waits_again_for_the_token_it_already_sent(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    task_id = start(service, env, "external_job", {"inbox": str(inbox)})
    awaited = wait_until(lambda: env.store().load(task_id), lambda r: "awaited" in r.steps.get("callback:build", {}))
    callback = awaited.steps["callback:build"]
    assert (callback["state"], callback["awaited"], awaited.status_message) == ("waiting", True, "Waiting for build")
    assert awaited.task_token is not None

    env.executor().resume(awaited.task_token)  # the execution's wait ends, but nothing completed the callback
    wait_until(lambda: env.store().get(task_id).task_token, lambda token: token not in (None, awaited.task_token))
    (submitted,) = [json.loads(line) for line in inbox.read_text().splitlines()]  # not submitted again
    completed = CallbackService(env.store(), env.payloads()).complete(
        json.dumps({"token": submitted["token"], "result": {"ok": True}}).encode()
    )
    done = settled(service, task_id)

    assert completed.status == 200
    assert done["result"]["content"][0]["text"] == 'report: the external system sent {"ok": true}'


def test_a_callback_not_completed_in_time_completes_the_task_with_a_tool_error(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox.jsonl"
    task_id = start(service, env, "external_job", {"inbox": str(inbox), "timeout_seconds": 1})

    done = settled(service, task_id)

    assert (done["status"], done["result"]["isError"]) == (COMPLETED, True)
    assert done["result"]["content"][0]["text"] == "Callback 'build' was not completed within 1 seconds"


def test_a_two_megabyte_result_comes_back_whole_and_a_six_megabyte_one_fails_naming_the_limit(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    big = start(service, env, "counted_job", {"ledger": str(ledger), "result_kb": 2048})
    too_big = start(service, env, "counted_job", {"ledger": str(ledger), "result_kb": 6144})

    done, refused = settled(service, big), settled(service, too_big)

    text = done["result"]["content"][0]["text"]
    assert (done["status"], len(text)) == (COMPLETED, len(f"ran {big}") + 2048 * 1024)
    assert refused["status"] == FAILED
    assert refused["error"]["code"] == wire.INTERNAL_ERROR
    assert refused["error"]["message"].endswith(f"over the limit of {MAX_RESULT_BYTES} bytes")
    assert refused["error"]["data"]["limitBytes"] == MAX_RESULT_BYTES


# ---- a result the payload bucket will not take ----------------------------------------------------------
class FailingPuts:
    """S3 answers the first `times` PutObject requests of the harness's client with a 500 (every one if None)."""

    def __init__(self, s3: Any, times: int | None) -> None:
        self.s3, self.left, self.failed = s3, times, 0

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        if self.left is not None and self.left <= 0:
            return None
        if self.left is not None:
            self.left -= 1
        self.failed += 1
        body = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"
        response = AWSResponse(request.url, 500, {"content-type": "application/xml"}, None)
        response._content = body
        return response


@pytest.fixture
def s3(env: TaskEnvironment) -> Any:
    """An S3 client as the functions build theirs: botocore's own retries off, so every attempt is the runtime's."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=env.aws.endpoint,
        region_name=REGION,
        config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
        **{name.lower(): value for name, value in DUMMY_CREDENTIALS.items() if name != "AWS_SESSION_TOKEN"},
    )


@pytest.fixture
def failing_puts(s3: Any) -> Callable[[int | None], FailingPuts]:
    def install(times: int | None) -> FailingPuts:
        fault = FailingPuts(s3, times)
        s3.meta.events.register("before-send.s3.PutObject", fault)
        return fault

    return install


def patient_worker(env: TaskEnvironment, s3: Any, slept: list[float]) -> None:
    """The worker with its backoff recorded, not slept (a real invocation would sleep it)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        payloads = S3PayloadStore(env.resources.bucket_name, s3)
        worker = TaskWorker(env.store(), env.executor(), env.tools, payloads=payloads, sleep=slept.append)
        return worker.handle(event)

    register_function(env.resources.worker_function_name, handler)


LARGER_THAN_SETTLE_CARRIES_KB = MAX_SETTLE_RESULT_BYTES // 1024 + 64


def test_a_result_too_large_for_settle_is_put_again_with_backoff_in_the_invocation_and_the_tool_runs_once(
    service: TaskService,
    env: TaskEnvironment,
    tmp_path: Path,
    s3: Any,
    failing_puts: Callable[[int | None], FailingPuts],
) -> None:
    slept: list[float] = []
    patient_worker(env, s3, slept)
    fault = failing_puts(MAX_ATTEMPTS + 2)  # the first put's attempts, then two of the second's
    ledger = tmp_path / "ledger.txt"

    task_id = start(service, env, "counted_job", {"ledger": str(ledger), "result_kb": LARGER_THAN_SETTLE_CARRIES_KB})

    done = settled(service, task_id)
    assert done["status"] == COMPLETED
    assert len(done["result"]["content"][0]["text"]) == len(f"ran {task_id}") + LARGER_THAN_SETTLE_CARRIES_KB * 1024
    assert ledger.read_text().splitlines() == [task_id]
    assert fault.failed == MAX_ATTEMPTS + 2
    assert slept == [RESULT_PUT_BACKOFF_SECONDS[0]]


def test_a_result_too_large_for_settle_that_s3_never_takes_fails_the_task_saying_so_and_the_tool_runs_once(
    service: TaskService,
    env: TaskEnvironment,
    tmp_path: Path,
    s3: Any,
    failing_puts: Callable[[int | None], FailingPuts],
) -> None:
    slept: list[float] = []
    patient_worker(env, s3, slept)
    failing_puts(None)
    ledger = tmp_path / "ledger.txt"

    task_id = start(service, env, "counted_job", {"ledger": str(ledger), "result_kb": LARGER_THAN_SETTLE_CARRIES_KB})

    done = settled(service, task_id)
    assert (done["status"], done["error"]) == (
        FAILED,
        {"code": wire.INTERNAL_ERROR, "message": RESULT_NOT_STORED_MESSAGE},
    )
    assert RESULT_NOT_STORED_MESSAGE == "Task result could not be stored"
    assert ledger.read_text().splitlines() == [task_id]
    assert slept == list(RESULT_PUT_BACKOFF_SECONDS)
    assert wait_until(lambda: env.execution_status(task_id), lambda s: s != "RUNNING") == "SUCCEEDED"


# ---- two runs of one task at once -------------------------------------------------------------------
def test_a_second_run_that_meets_a_step_another_run_is_in_waits_and_the_side_effect_runs_once(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    ledger, gate = tmp_path / "ledger.txt", tmp_path / "gate"
    ledger.touch()
    task_id = start(service, env, "gated_job", {"ledger": str(ledger), "gate": str(gate)})
    assert wait_until(lambda: ledger.read_text().splitlines(), lambda lines: lines == ["charged"]) == ["charged"]

    # What Step Functions does when it retries RunTool while the first invocation still runs.
    second: dict[str, Any] = {}
    retry = threading.Thread(
        target=lambda: second.update(
            env.worker().handle({"action": "run", "taskId": task_id, "round": 0, "executionName": task_id})
        )
    )
    retry.start()
    wait_until(lambda: retry.is_alive() and len(ledger.read_text().splitlines()) < 2, lambda alive: not alive, 10)
    gate.touch()
    retry.join(70)

    done = settled(service, task_id)
    assert (done["status"], done["result"]["content"][0]["text"]) == (COMPLETED, "step: charged once")
    assert ledger.read_text().splitlines() == ["charged"]
    assert second["outcome"] == "wait"
    assert 1 <= second["wait"]["seconds"] <= STEP_BUSY_RECHECK_SECONDS
    (step,) = records_before_settling(env, task_id).values()
    assert (sorted(step), step["v"]) == (["ms", "n", "v"], "charged once")


class FlakyArgs(BaseModel):
    ledger: str


@tool(description="A step that fails its first run; the tool waits a second and tries again.", task=True)
def flaky_step_job(args: FlakyArgs, ctx: ToolContext) -> str:
    def attempt() -> str:
        with open(args.ledger, "a", encoding="utf-8") as ledger:
            ledger.write("attempt\n")
        if len(Path(args.ledger).read_text().splitlines()) == 1:
            raise RuntimeError("the external system said no")
        return "took"

    try:
        return f"step {ctx.step('flaky', attempt)}"
    except RuntimeError:
        ctx.wait(1)
        raise


def test_a_step_that_raised_leaves_no_mark_so_the_next_run_runs_it_at_once(
    service: TaskService, env: TaskEnvironment, tmp_path: Path
) -> None:
    env.tools.add(getattr(flaky_step_job, SPEC_ATTRIBUTE))
    ledger = tmp_path / "ledger.txt"
    task_id = start(service, env, "flaky_step_job", {"ledger": str(ledger)})

    done = settled(service, task_id)

    assert (done["status"], done["result"]["content"][0]["text"]) == (COMPLETED, "step took")
    assert ledger.read_text().splitlines() == ["attempt", "attempt"]
    steps = records_before_settling(env, task_id)
    assert not any(is_step_mark(record) for record in steps.values())
    assert steps["step:flaky"]["v"] == "took"


class ManyStepsArgs(BaseModel):
    steps: int
    name_chars: int = 4


@tool(description="Many small steps.", task=True)
def many_steps_job(args: ManyStepsArgs, ctx: ToolContext) -> str:
    total = 0
    for n in range(args.steps):
        total += ctx.step(f"{n:04d}" + "x" * (args.name_chars - 4), lambda n=n: n)
    return f"{args.steps} steps, sum {total}"


def task_with_recorded_steps(env: TaskEnvironment, tool_name: str, arguments: dict[str, Any], steps: int) -> str:
    """A working task of `tool_name` whose first `steps` steps (`step:0000`...) are recorded, each on its
    own step item, as a run that recorded them leaves them (written in bulk: a thousand steps through
    the real writes take minutes of moto; `bench/capacity.py` drives them one by one)."""
    record = dataclasses.replace(create(env.store(), Clock(time.time())), tool_name=tool_name, arguments=arguments)
    env.store().discard(record.task_id, record.create_token)
    env.store().create(record)
    items = [
        {
            **step_key(record.task_id, n),
            schema.STEP_KEY_ATTRIBUTE: {"S": f"step:{n:04d}"},
            schema.STEP_RECORD_ATTRIBUTE: record_to_attribute({"v": n, "ms": 0}),
            schema.TTL_ATTRIBUTE: {"N": str(record.expires_at)},
        }
        for n in range(steps)
    ]
    for first in range(0, steps, 25):
        env.dynamodb.batch_write_item(
            RequestItems={env.resources.table_name: [{"PutRequest": {"Item": i}} for i in items[first : first + 25]]}
        )
    env.dynamodb.update_item(
        TableName=env.resources.table_name,
        Key=task_key(record.task_id),
        UpdateExpression="SET #count = :count",
        ExpressionAttributeNames={"#count": schema.STEP_ITEMS_ATTRIBUTE},
        ExpressionAttributeValues={":count": {"N": str(steps)}},
    )
    return record.task_id


def test_a_thousand_steps_fit_in_one_task_its_run_reads_them_100_a_request_and_completes(
    env: TaskEnvironment,
) -> None:
    env.tools.add(getattr(many_steps_job, SPEC_ATTRIBUTE))
    task_id = task_with_recorded_steps(env, "many_steps_job", {"steps": MAX_OPERATIONS}, MAX_OPERATIONS - 1)
    meter = CapacityMeter(
        aws_client("dynamodb", endpoint=env.aws.endpoint, region=REGION, credentials=DUMMY_CREDENTIALS)
    )
    worker = env.worker()
    worker.store = DynamoTaskStore(env.resources.table_name, meter.client)

    with meter.measuring("run"):
        outcome = worker.run(task_id)

    assert outcome["outcome"] == wire.OUTCOME_COMPLETED
    done = env.store().get(task_id)
    assert done.status == COMPLETED and done.result is not None
    assert done.result["content"] == [{"type": "text", "text": "1000 steps, sum 499500"}]
    # The hot item and its parts in one request, then the 999 step items 100 a request; the run's first
    # write; the 1,000th step: its mark on its own item, its record (one write each); the terminal write.
    assert meter.calls["run"] == ["BatchGetItem"] * 11 + ["UpdateItem"] * 4
    # The 1,000th record fit on the work part (with its n), where its mark's item is not read again.
    work = env.dynamodb.get_item(
        TableName=env.resources.table_name, Key=part_key(task_id, schema.WORK_PART), ConsistentRead=True
    )["Item"]
    assert {name: steps_of(work)["step:0999"][name] for name in ("v", "n")} == {"v": 999, "n": 999}


def test_an_operation_past_the_tasks_limit_fails_the_task_naming_the_limit_and_its_records_stand(
    env: TaskEnvironment,
) -> None:
    env.tools.add(getattr(many_steps_job, SPEC_ATTRIBUTE))
    task_id = task_with_recorded_steps(env, "many_steps_job", {"steps": 4}, 3)
    worker = env.worker()
    worker.max_operations = 3  # TASK_MAX_STEPS=3

    outcome = worker.run(task_id)

    assert outcome["outcome"] == wire.OUTCOME_FAILED
    assert env.store().get(task_id).error == {
        "code": wire.INTERNAL_ERROR,
        "message": "A task may record at most 3 steps, waits and callbacks (TASK_MAX_STEPS); "
        "its tool asked for one more: step:0003",
    }
    assert not env.dynamodb.get_item(TableName=env.resources.table_name, Key=step_key(task_id, 3)).get("Item")


def test_a_step_name_past_its_limit_is_a_tool_error_naming_the_limit(
    service: TaskService, env: TaskEnvironment
) -> None:
    env.tools.add(getattr(many_steps_job, SPEC_ATTRIBUTE))
    task_id = start(service, env, "many_steps_job", {"steps": 1, "name_chars": MAX_OPERATION_NAME_BYTES + 1})

    done = settled(service, task_id)

    assert (done["status"], done["result"]["isError"]) == (COMPLETED, True)
    assert done["result"]["content"][0]["text"] == (
        f"A step, wait or callback name may be at most {MAX_OPERATION_NAME_BYTES} bytes"
    )
