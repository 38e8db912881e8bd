"""Lambda: moto's no-Docker invoke dispatches to the function's registered invoker."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from local_stack.moto_patches._registry import Patch, Patcher, register

# (payload bytes, request headers) -> (payload bytes, function error or None)
Invoker = Callable[[bytes, dict[str, str]], tuple[bytes, str | None]]

_INVOKERS: dict[str, Invoker] = {}


class LambdaThrottled(Exception):
    """An invocation over the function's concurrency limit: Lambda answers it HTTP 429
    TooManyRequestsException, with `reason` saying which limit."""

    def __init__(self, function_name: str, reason: str) -> None:
        super().__init__(f"Rate Exceeded. ({reason}: {function_name})")
        self.function_name = function_name
        self.reason = reason


def function_name_of(name_or_arn: str) -> str:
    # arn:aws:lambda:<region>:<account>:function:<name>[:<qualifier>]
    if name_or_arn.startswith("arn:"):
        return name_or_arn.split(":")[6]
    return name_or_arn.split(":")[0]


def set_invoker(function_name: str, invoker: Invoker | None) -> None:
    """What moto's Lambda Invoke of this function runs (None: moto's own answer again)."""
    if invoker is None:
        _INVOKERS.pop(function_name, None)
    else:
        _INVOKERS[function_name] = invoker


def _too_many_requests(throttled: LambdaThrottled) -> Exception:
    """Lambda's answer to a throttled invoke: HTTP 429, TooManyRequestsException, its Reason."""
    from moto.awslambda.exceptions import LambdaClientError

    error = LambdaClientError("TooManyRequestsException", "Rate Exceeded.")
    error.code = 429
    error.description = json.dumps(
        {"__type": "TooManyRequestsException", "message": "Rate Exceeded.", "Reason": throttled.reason}
    )
    return error


def _invoke_dispatch(patcher: Patcher) -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    def build(original: Callable[..., Any]) -> Callable[..., Any]:
        def invoke(
            self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> str | bytes | None:
            invoker = _INVOKERS.get(function_name_of(function_name))
            if invoker is None:
                return original(self, function_name, qualifier, body, headers, response_headers)  # type: ignore[no-any-return]
            raw = body if isinstance(body, bytes) else (body or "").encode()
            try:
                payload, function_error = invoker(raw, {str(k).lower(): str(v) for k, v in dict(headers or {}).items()})
            except LambdaThrottled as throttled:
                raise _too_many_requests(throttled) from None
            if function_error:
                response_headers["x-amz-function-error"] = function_error
            response_headers["Content-Length"] = str(len(payload))
            return payload

        return invoke

    patcher.wrap(LambdaSimpleBackend, "invoke", build)


register(
    Patch(
        name="lambda_invoke_runs_the_function",
        group="emulation",
        aws="Invoke runs the function's code and answers its result; an uncaught error is "
        "X-Amz-Function-Error: Unhandled with errorType/errorMessage; over the concurrency limit, "
        "HTTP 429 TooManyRequestsException with its Reason.",
        moto="Without Docker, LambdaSimpleBackend.invoke answers the request payload back (or "
        "'Simple Lambda happy path OK') and runs nothing; it never throttles.",
        reference="https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html",
        install=_invoke_dispatch,
    )
)
