"""The local stack's Lambda concurrency accounting: reserved shares, the account's unreserved pool, and
event sources that retry a throttle instead of counting it as a failure."""

from __future__ import annotations

from typing import Any

import pytest
from local_stack.aws import LambdaThrottled
from local_stack.runtime import ConcurrencyLimits, InvocationResult

from local_stack import stack


def test_a_function_at_its_reserved_concurrency_is_throttled_with_lambdas_reason() -> None:
    limits = ConcurrencyLimits(1000, {"worker": 2, "api": None})
    limits.enter("worker")
    limits.enter("worker")
    with pytest.raises(LambdaThrottled) as raised:
        limits.enter("worker")
    assert raised.value.reason == "ReservedFunctionConcurrentInvocationLimitExceeded"
    assert str(raised.value) == "Rate Exceeded. (ReservedFunctionConcurrentInvocationLimitExceeded: worker)"
    limits.leave("worker")
    limits.enter("worker")  # a finished invocation frees its unit
    assert limits.throttled == {"worker": 1}


def test_unreserved_functions_share_what_the_account_limit_leaves_and_reserved_ones_do_not_take_it() -> None:
    # LOCAL_LAMBDA_ACCOUNT_CONCURRENCY=5 with a worker reserving 3: the API and supervisor share 2.
    limits = ConcurrencyLimits(5, {"worker": 3, "api": None, "supervisor": None})
    assert limits.unreserved_limit == 2
    for _ in range(3):
        limits.enter("worker")
    limits.enter("api")
    limits.enter("supervisor")
    with pytest.raises(LambdaThrottled) as raised:
        limits.enter("api")
    assert raised.value.reason == "ConcurrentInvocationLimitExceeded"
    limits.leave("supervisor")
    limits.enter("api")


class _FlakyPool:
    """Throttled `throttles` times, then answers."""

    def __init__(self, throttles: int) -> None:
        self.throttles = throttles
        self.calls = 0

    def invoke(self, payload: bytes) -> InvocationResult:
        self.calls += 1
        if self.calls <= self.throttles:
            raise LambdaThrottled("supervisor", "ReservedFunctionConcurrentInvocationLimitExceeded")
        return InvocationResult(b'{"batchItemFailures": []}')


def test_an_event_source_retries_a_throttle_with_backoff_until_the_function_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(stack.time, "sleep", waits.append)
    pool: Any = _FlakyPool(throttles=4)

    result = stack._retrying_throttles(pool, b"{}")

    assert result.payload == b'{"batchItemFailures": []}' and result.function_error is None
    assert pool.calls == 5
    assert waits == [1.0, 2.0, 4.0, 8.0]  # from 1 s, doubling, at most 5 minutes


def test_the_event_source_backoff_stops_growing_at_five_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr(stack.time, "sleep", waits.append)
    stack._retrying_throttles(_FlakyPool(throttles=12), b"{}")  # type: ignore[arg-type]
    assert waits[-4:] == [256.0, 300.0, 300.0, 300.0]


def test_the_account_limit_is_a_knob_of_the_local_stack() -> None:
    assert stack.Options.from_environ({}).account_concurrency == 1000
    assert stack.Options.from_environ({"LOCAL_LAMBDA_ACCOUNT_CONCURRENCY": "10"}).account_concurrency == 10


def test_api_gateway_answers_a_throttled_function_with_its_own_500_not_lambdas_429() -> None:
    from local_stack.http_front import INTERNAL_ERROR, ApiGatewayFront
    from local_stack.provision import Route

    def throttled(logical_id: str, payload: bytes) -> InvocationResult:
        raise LambdaThrottled("api", "ConcurrentInvocationLimitExceeded")

    front = ApiGatewayFront([Route("POST /mcp", "Api", "NONE")], throttled)
    answer = front.serve("POST", "/mcp", {"host": "127.0.0.1:3000"}, b"{}", "127.0.0.1")
    assert (answer.status, answer.body) == (500, INTERNAL_ERROR)
