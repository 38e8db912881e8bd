"""A status event the supervisor fails on through all of Lambda's asynchronous retries is not lost:
Lambda sends its invocation record to the function's on-failure destination (the template's
`StatusEventFailures` queue, alarmed), as the local bus does too.

The template's own rule, EventInvokeConfig and queue (moto), with a handler standing in for the
supervisor: the bus, not the supervisor, is under test here.
"""

from __future__ import annotations

import json
from typing import Any

from local_stack.aws import EmbeddedAws
from local_stack.event_delivery import EXECUTION_STATUS_CHANGE, ExecutionEvents, FailureDestinations
from local_stack.provision import ProvisionedStack

from tests.integration.task_harness import TaskResources, wait_until

# Lambda's waits of about 1 and 2 minutes, divided by this: 0.1 and 0.2 s.
TIME_SCALE = 600


def ended(deployed: ProvisionedStack, name: str) -> dict[str, Any]:
    """An "Execution Status Change" event the template's rule matches: an execution of its state machine failed."""
    return {
        "version": "0",
        "id": f"event-{name}",
        "detail-type": EXECUTION_STATUS_CHANGE,
        "source": "aws.states",
        "account": "123456789012",
        "region": "us-east-1",
        "resources": [],
        "detail": {
            "name": name,
            "status": "FAILED",
            "stateMachineArn": TaskResources.of(deployed).state_machine_arn,
        },
    }


def test_a_status_event_the_supervisor_fails_on_every_retry_lands_in_its_on_failure_queue(
    embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    supervisor = TaskResources.of(deployed).supervisor_logical_id
    queue = deployed.queue_by_arn(deployed.async_on_failure[supervisor])
    assert queue is not None
    invocations: list[dict[str, Any]] = []

    def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
        invocations.append(json.loads(payload))
        return json.dumps({"errorType": "RuntimeError", "errorMessage": "cannot settle"}).encode(), "Unhandled"

    events = ExecutionEvents(
        deployed.event_rules,
        invoke,
        deployed.async_retry_attempts,
        time_scale=TIME_SCALE,
        destinations=FailureDestinations(deployed, lambda logical_id: embedded_aws.client("sqs")),
        function_arns={logical_id: spec.arn for logical_id, spec in deployed.functions.items()},
        on_failure=deployed.async_on_failure,
    )
    events.start()
    try:
        event = ended(deployed, "task-1")
        events.publish(event)
        assert events.wait_idle(30)
    finally:
        events.stop()

    assert invocations == [event] * (deployed.async_retry_attempts[supervisor] + 1)
    sqs = embedded_aws.client("sqs")

    def received() -> list[dict[str, Any]]:
        answer = sqs.receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10)
        return [json.loads(message["Body"]) for message in answer.get("Messages") or ()]

    messages = wait_until(received, bool, timeout=10)
    (record,) = messages
    assert record["version"] == "1.0"
    assert record["requestContext"]["condition"] == "RetriesExhausted"
    assert record["requestContext"]["approximateInvokeCount"] == len(invocations)
    assert record["requestContext"]["functionArn"] == deployed.functions[supervisor].arn
    assert record["requestPayload"] == event
    assert record["responseContext"] == {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
    assert record["responsePayload"] == {"errorType": "RuntimeError", "errorMessage": "cannot settle"}


def test_a_status_event_the_supervisor_takes_on_a_retry_sends_nothing_to_the_queue(
    embedded_aws: EmbeddedAws, deployed: ProvisionedStack
) -> None:
    supervisor = TaskResources.of(deployed).supervisor_logical_id
    queue = deployed.queue_by_arn(deployed.async_on_failure[supervisor])
    assert queue is not None
    attempts: list[str] = []

    def invoke(function: str, payload: bytes) -> tuple[bytes, str | None]:
        attempts.append(function)
        return (b'{"errorType": "RuntimeError"}', "Unhandled") if len(attempts) == 1 else (b"null", None)

    destinations = FailureDestinations(deployed, lambda logical_id: embedded_aws.client("sqs"))
    events = ExecutionEvents(
        deployed.event_rules,
        invoke,
        deployed.async_retry_attempts,
        time_scale=TIME_SCALE,
        destinations=destinations,
        on_failure=deployed.async_on_failure,
    )
    events.start()
    try:
        events.publish(ended(deployed, "task-2"))
        assert events.wait_idle(30)
    finally:
        events.stop()

    assert attempts == [supervisor, supervisor]
    assert destinations.sent == []
    answer = embedded_aws.client("sqs").receive_message(QueueUrl=queue.url, MaxNumberOfMessages=10)
    assert not answer.get("Messages")
