"""The AWS caller's retry budget: a count of attempts by default, or a time (the supervisor's), within which
a throttled or failing call is tried again however many attempts that takes."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from mcp_runtime._aws import MAX_ATTEMPTS, AwsCaller, AwsRejected, AwsUnavailable


class ThrottledUntil:
    """A Step Functions client that answers ThrottlingException until the fake clock reaches `until`."""

    def __init__(self, clock: list[float], until: float, code: str = "ThrottlingException") -> None:
        self.clock = clock
        self.until = until
        self.code = code
        self.attempts = 0

    def start_execution(self, **params: Any) -> dict[str, Any]:
        self.attempts += 1
        if self.clock[0] < self.until:
            error = {"Code": self.code, "Message": "Rate exceeded"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "StartExecution")
        return {"executionArn": "arn:aws:states:us-east-1:123456789012:execution:m:t"}


def caller(client: ThrottledUntil, clock: list[float], **options: Any) -> AwsCaller:
    def sleep(seconds: float) -> None:
        clock[0] += seconds

    return AwsCaller("stepfunctions", client, sleep=sleep, jitter=lambda: 1.0, clock=lambda: clock[0], **options)


def test_by_default_a_throttled_call_is_given_up_after_its_attempts_within_seconds() -> None:
    clock = [0.0]
    client = ThrottledUntil(clock, until=120.0)

    with pytest.raises(AwsUnavailable, match="ThrottlingException"):
        caller(client, clock).call("start_execution", name="t")

    assert client.attempts == MAX_ATTEMPTS
    assert clock[0] < 10.0


def test_with_a_time_budget_a_throttled_call_is_retried_until_the_throttling_ends() -> None:
    clock = [0.0]
    client = ThrottledUntil(clock, until=30.0)

    answer = caller(client, clock, retry_for_seconds=40).call("start_execution", name="t")

    assert answer["executionArn"].endswith(":t")
    assert client.attempts > MAX_ATTEMPTS
    assert 30.0 <= clock[0] <= 32.0  # backoff capped at 2 s: a freed slot is used within seconds


def test_a_time_budget_is_given_up_before_a_wait_would_pass_it() -> None:
    clock = [0.0]
    client = ThrottledUntil(clock, until=120.0)

    with pytest.raises(AwsUnavailable):
        caller(client, clock, retry_for_seconds=40).call("start_execution", name="t")

    assert 38.0 <= clock[0] <= 40.0


def test_a_refusal_is_never_retried_whatever_the_budget() -> None:
    clock = [0.0]
    client = ThrottledUntil(clock, until=120.0, code="ValidationException")

    with pytest.raises(AwsRejected, match="ValidationException"):
        caller(client, clock, retry_for_seconds=40).call("start_execution", name="t")

    assert client.attempts == 1
