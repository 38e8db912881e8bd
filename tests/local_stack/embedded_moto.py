"""What the tests of the embedded moto itself share (IAM enforcement, the moto patches)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
from botocore.exceptions import ClientError
from local_stack.aws import start_embedded_aws

from local_stack import iam_enforcement

T = TypeVar("T")
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def eventually(probe: Callable[[], T | None], timeout: float = 20.0) -> T:
    """Poll until the probe returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.02)


def refused(call: Callable[[], object]) -> dict[str, Any]:
    """The error response of a call that must fail."""
    with pytest.raises(ClientError) as caught:
        call()
    return caught.value.response


def invoking(function_arn: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A state machine of one Task invoking the function with this payload."""
    return {
        "StartAt": "RunTool",
        "States": {
            "RunTool": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": function_arn, "Payload": payload},
                "End": True,
            }
        },
    }


@contextmanager
def embedded_moto() -> Iterator[tuple[str, dict[str, str]]]:
    """The local stack's embedded moto: a ThreadedMotoServer on a free port, executing state machines,
    with MOTO_PORT pointing the interpreter at it and the IAM patches installed (enforcement relaxed):
    (its endpoint, the keys of an admin user)."""
    previous_port = os.environ.get("MOTO_PORT")
    embedded = start_embedded_aws()
    iam_enforcement.install()
    try:
        yield embedded.endpoint, iam_enforcement.create_admin_user(embedded.endpoint)
    finally:
        iam_enforcement.relax()
        embedded.stop()
        if previous_port is None:
            os.environ.pop("MOTO_PORT", None)
        else:
            os.environ["MOTO_PORT"] = previous_port


def finished(sfn: Any, execution_arn: str, timeout: float = 20.0) -> dict[str, Any]:
    """The execution's description once it is no longer RUNNING."""

    def settled() -> dict[str, Any] | None:
        description: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        return None if description["status"] == "RUNNING" else description

    return eventually(settled, timeout)


@pytest.fixture(autouse=True)
def relaxed_around_each_test() -> Iterator[None]:
    """Enforcement off before and after each test (import this fixture into the test module)."""
    iam_enforcement.relax()
    yield
    iam_enforcement.relax()
