"""A stream record the supervisor cannot carry out is given up to the on-failure queue, the rest of the
shard goes on, and `make redrive` settles its task once the cause is gone: through the template-driven
stack, its mapping as deployed (bisect, bounded retries, SQS on-failure destination).

The poison: every StartExecution of one task answers HTTP 500 (the fault layer, `testkit/_fault_layer/`), so
the supervisor fails that record on every delivery, whatever it retries inside one invocation.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from testkit import ERROR, FaultLayer, Rule

from tests.local_stack.conftest import StackClient
from tests.support import REPO, local_stack_process

pytestmark = pytest.mark.e2e

START = "SFN.StartExecution"
# Ten retries of the poisoned batch, each an invocation whose StartExecution is retried inside it,
# with the poller's waits between them: about a minute here, under load more.
GIVE_UP_SECONDS = 240.0


def poison(*texts: str) -> Rule:
    """Fail every StartExecution whose request holds `texts` (all of them: none given)."""
    return Rule(ERROR, START, contains=texts, times=10**6)


@pytest.fixture(scope="module")
def faults(tmp_path_factory: pytest.TempPathFactory) -> FaultLayer:
    return FaultLayer.create(tmp_path_factory.mktemp("poison-layer"))


@pytest.fixture(scope="module")
def stack(faults: FaultLayer) -> Iterator[StackClient]:
    # The supervisor retries a failing Step Functions call for 1 s inside each invocation (40 s deployed):
    # a poison of 500s is then given up in about the time ten attempts took before retries were budgeted in time.
    context = json.dumps({"supervisorRetrySeconds": 1})
    with local_stack_process(
        fixtures="conformance,lifecycle",
        extra_env={"LOCAL_LAYERS": str(faults.directory), "LOCAL_CDK_CONTEXT": context},
    ) as running:
        yield StackClient(running, user="poison-tester")


def last_events(stack: StackClient, task_id: str) -> list[str]:
    machine = stack.running.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
    events = stack.running.aws_client("stepfunctions").get_execution_history(executionArn=arn)["events"]
    return [str(event)[:600] for event in events[-5:]]


def given_up_count(stack: StackClient) -> int:
    sqs = stack.running.aws_client("sqs")
    (url,) = [u for lid, u in stack.running.state["queues"].items() if lid.startswith("SupervisorStreamFailures")]
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def wait_for_count(stack: StackClient, expected: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    count = given_up_count(stack)
    while count != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        count = given_up_count(stack)
    return count


def test_a_poison_record_ends_in_the_on_failure_queue_the_shard_goes_on_and_the_redrive_settles_its_task(
    stack: StackClient, faults: FaultLayer
) -> None:
    faults.arm(poison())  # until the poisoned task's id is known, every start fails
    poisoned = stack.start("slow_compute", {"seconds": 0, "label": "poisoned"})
    faults.arm(poison(poisoned))

    # The rest of the shard: a start, a resume and a stop of other tasks. Those hashed to the poisoned
    # record's share of the shard wait behind it until it is given up (as on AWS); the others do not.
    started = stack.start("slow_compute", {"seconds": 0, "label": "started"})
    resumed = stack.start("confirm_delete", {"filename": "a.txt"})
    stopped = stack.start("confirm_delete", {"filename": "b.txt"})
    awaiting = stack.wait_for(resumed, lambda task: task["status"] == "input_required", timeout=GIVE_UP_SECONDS)
    (key,) = awaiting["inputRequests"]
    answer = {"action": "accept", "content": {"confirm": True}}
    stack.result("tasks/update", {"taskId": resumed, "inputResponses": {key: answer}})
    parked = stack.wait_for(stopped, lambda task: task["status"] == "input_required", timeout=GIVE_UP_SECONDS)
    assert parked["status"] == "input_required"
    stack.result("tasks/cancel", {"taskId": stopped})

    assert stack.settled(started, timeout=GIVE_UP_SECONDS)["status"] == "completed"
    assert stack.settled(resumed, timeout=GIVE_UP_SECONDS)["status"] == "completed"
    assert stack.wait_for_execution(stopped, timeout=GIVE_UP_SECONDS) == "ABORTED", last_events(stack, stopped)
    assert stack.task(stopped)["status"] == "cancelled"

    assert wait_for_count(stack, 1, timeout=GIVE_UP_SECONDS) == 1
    assert stack.task(poisoned)["status"] == "working"  # never started: its start was given up
    assert stack.wait_for_output("given up: RetryAttemptsExhausted")

    faults.arm()  # the cause is fixed
    port = urlsplit(stack.running.url).port
    redrive = subprocess.run(
        [sys.executable, "scripts/redrive.py", "--port", str(port)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert redrive.returncode == 0, redrive.stdout + redrive.stderr
    assert "1 of 1 given-up batches replayed; 0 kept in the queue" in redrive.stdout
    assert given_up_count(stack) == 0
    assert stack.settled(poisoned)["status"] == "completed"
    assert stack.wait_for_execution(poisoned) == "SUCCEEDED"


def test_a_redrive_with_nothing_given_up_replays_nothing(stack: StackClient) -> None:
    port = urlsplit(stack.running.url).port
    redrive = subprocess.run(
        [sys.executable, "scripts/redrive.py", "--port", str(port)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert redrive.returncode == 0, redrive.stderr
    assert "0 of 0 given-up batches replayed; 0 kept in the queue" in redrive.stdout
