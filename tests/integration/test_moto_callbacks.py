"""Task tokens on the embedded moto answer as AWS's do (`local_stack.moto_patches` brings moto in line)."""

from __future__ import annotations

import io
import json
import queue
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from local_stack.aws import REGION, EmbeddedAws, register_function, unregister_function

from mcp_runtime.tasks.executor import STALE_TOKEN_CODES, StepFunctionsExecutor

ACCOUNT = "123456789012"
FUNCTION = "token-keeper"
# Park on a token, then keep running (a long Wait), so the answered token belongs to a running execution.
DEFINITION = {
    "StartAt": "Park",
    "States": {
        "Park": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
            "Parameters": {
                "FunctionName": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{FUNCTION}",
                "Payload": {"token.$": "$$.Task.Token"},
            },
            "Next": "Linger",
        },
        "Linger": {"Type": "Wait", "Seconds": 60, "End": True},
    },
}


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "")
    return buffer.getvalue()


@pytest.fixture
def parked(embedded_aws: EmbeddedAws) -> Iterator[tuple[Any, str, str]]:
    """A running execution, the token it parked on (answered once already), and its ARN."""
    embedded_aws.reset()
    tokens: queue.Queue[str] = queue.Queue()
    register_function(FUNCTION, lambda event, context: tokens.put(event["token"]) or {})
    iam, lam, sfn = (embedded_aws.client(s) for s in ("iam", "lambda", "stepfunctions"))
    statement = {"Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}
    trust = {"Version": "2012-10-17", "Statement": [statement]}
    role = iam.create_role(RoleName="keeper", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    code = {"ZipFile": _zip()}
    lam.create_function(FunctionName=FUNCTION, Runtime="python3.13", Role=role, Handler="handler.main", Code=code)
    machine = sfn.create_state_machine(name="keeper", definition=json.dumps(DEFINITION), roleArn=role)
    execution = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], name="once", input="{}")
    token = tokens.get(timeout=30)
    sfn.send_task_success(taskToken=token, output="{}")
    yield sfn, token, execution["executionArn"]
    sfn.stop_execution(executionArn=execution["executionArn"])
    unregister_function(FUNCTION)


def test_an_answered_token_of_a_running_execution_answers_task_timed_out_as_aws_does(
    parked: tuple[Any, str, str],
) -> None:
    sfn, token, execution_arn = parked
    assert sfn.describe_execution(executionArn=execution_arn)["status"] == "RUNNING"

    with pytest.raises(ClientError) as refused:
        sfn.send_task_success(taskToken=token, output="{}")

    assert refused.value.response["Error"]["Code"] == "TaskTimedOut"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as failed:
        sfn.send_task_failure(taskToken=token, error="Late")
    assert failed.value.response["Error"]["Code"] == "TaskTimedOut"


def test_the_executor_takes_an_answered_token_as_nothing_left_to_resume(parked: tuple[Any, str, str]) -> None:
    sfn, token, _ = parked
    executor = StepFunctionsExecutor("arn:aws:states:us-east-1:123456789012:stateMachine:keeper", sfn)

    assert "TaskTimedOut" in STALE_TOKEN_CODES and "InvalidToken" in STALE_TOKEN_CODES
    assert executor.resume(token) is False
