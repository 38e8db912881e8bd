"""AWS clients of the runtime, and the one place their calls are made, timed and translated.

Clients are built on first use (boto3 is imported then, never at import time), one per service and
endpoint in a process, with short connect and read timeouts and botocore's own retries off.
`AwsCaller.call` retries instead, for two reasons: a call's attempts stop before the invocation runs
out of time (`invocation_deadline`, set by each Lambda entry point from the context's remaining
time), and what AWS refused for good (`AwsRejected`: validation, access, a failed condition) is
told apart from what may succeed when sent again (`AwsUnavailable`: throttling, 5xx, timeouts,
connection errors, once the attempts or the time are used up). Callers translate these two into
their own domain errors; nothing else in the functions catches botocore's exceptions (the task side,
the handle store, the legacy session store and the sign-in bridge all call here).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, Final

CONNECT_TIMEOUT_SECONDS: Final = 1.0
# Per attempt; DynamoDB and Step Functions answer in milliseconds, S3 moves up to a few MB. With
# less time left in the invocation, an attempt uses the longest shorter read timeout that fits.
READ_TIMEOUT_SECONDS: Final[Mapping[str, float]] = {"dynamodb": 3.0, "stepfunctions": 4.0, "s3": 10.0}
DEFAULT_READ_TIMEOUT_SECONDS: Final = 4.0
SHORTER_READ_TIMEOUTS_SECONDS: Final[tuple[float, ...]] = (2.0, 1.0, 0.5)
MAX_ATTEMPTS: Final = 6
BASE_BACKOFF_SECONDS: Final = 0.05
MAX_BACKOFF_SECONDS: Final = 2.0
# Kept back from the invocation's remaining time: enough to answer after the last attempt.
ANSWER_RESERVE_SECONDS: Final = 1.0

# Error codes AWS uses for "not now": throttling, capacity, internal errors, transient conflicts.
TRANSIENT_CODES: Final[frozenset[str]] = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",
        "InternalServerError",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionConflictException",
        "TransactionInProgressException",
        # Step Functions' open-executions quota: room comes back as executions end.
        "ExecutionLimitExceeded",
    }
)
CONDITION_FAILED: Final = "ConditionalCheckFailedException"

_deadline: ContextVar[float | None] = ContextVar("invocation_deadline", default=None)
_clients: dict[tuple[str, str | None, str | None, float], Any] = {}
_clients_lock = threading.Lock()
_session_lock = threading.Lock()
_session: Any = None


class invocation_deadline:  # lower case, like contextlib's context managers
    """AWS calls inside this block stop retrying in time to leave `reserve_seconds` of the invocation.

    A class, not a generator: it runs around every request (bench/README.md, warm)."""

    __slots__ = ("_remaining_ms", "_reserve_seconds", "_token")

    def __init__(self, remaining_ms: float | None, reserve_seconds: float = ANSWER_RESERVE_SECONDS) -> None:
        self._remaining_ms = remaining_ms
        self._reserve_seconds = reserve_seconds
        self._token: Token[float | None] | None = None

    def __enter__(self) -> None:
        remaining_ms = self._remaining_ms
        deadline = None if remaining_ms is None else time.monotonic() + remaining_ms / 1000 - self._reserve_seconds
        self._token = _deadline.set(deadline)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _deadline.reset(self._token)
            self._token = None


def seconds_left() -> float | None:
    """Time left for AWS calls in this invocation (None outside any deadline)."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def shared_session() -> Any:
    """One boto3 session per process: each new session reloads botocore's endpoint data."""
    global _session
    with _session_lock:
        if _session is None:
            import boto3

            _session = boto3.session.Session()
        return _session


def connect_timeout(read_timeout: float) -> float:
    return min(CONNECT_TIMEOUT_SECONDS, read_timeout)


def build_client(
    service: str, endpoint_url: str | None = None, region_name: str | None = None, read_timeout: float | None = None
) -> Any:
    """The process's client for this service, endpoint and read timeout: botocore's retries off."""
    read = READ_TIMEOUT_SECONDS.get(service, DEFAULT_READ_TIMEOUT_SECONDS) if read_timeout is None else read_timeout
    key = (service, endpoint_url, region_name, read)
    client = _clients.get(key)
    if client is None:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                from botocore.config import Config

                config = Config(
                    connect_timeout=connect_timeout(read),
                    read_timeout=read,
                    retries={"mode": "standard", "total_max_attempts": 1},
                )
                client = shared_session().client(
                    service, endpoint_url=endpoint_url, region_name=region_name, config=config
                )
                _clients[key] = client
    return client


def client_provider(
    client: Any | None, service: str, endpoint_url: str | None = None, region_name: str | None = None
) -> Callable[..., Any]:
    """A callable returning the client (for a read timeout, if given): the injected one, or the process's own."""
    if client is not None:
        return lambda read_timeout=None: client
    return lambda read_timeout=None: build_client(service, endpoint_url, region_name, read_timeout)


class AwsCallError(Exception):
    """An AWS call that did not succeed: `code` is AWS's error code (or the exception's name)."""

    def __init__(self, service: str, operation: str, code: str, message: str, response: Mapping[str, Any]) -> None:
        super().__init__(f"{service} {operation}: {code}" + (f" ({message})" if message else ""))
        self.service = service
        self.operation = operation
        self.code = code
        self.response = dict(response)

    @property
    def item(self) -> dict[str, Any] | None:
        """The item DynamoDB returned with a failed condition (ReturnValuesOnConditionCheckFailure)."""
        item = self.response.get("Item")
        return item if isinstance(item, dict) else None


class AwsUnavailable(AwsCallError):
    """Throttled, failing or unreachable for every attempt the budget allowed: may succeed later."""


class AwsRejected(AwsCallError):
    """AWS answered and refused (validation, access, a failed condition, a missing resource)."""


def classify(service: str, operation: str, exc: BaseException) -> AwsCallError | None:
    """The AWS failure `exc` stands for, or None when it is not botocore's (a bug of ours)."""
    if not type(exc).__module__.startswith("botocore"):
        return None
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error") or {}
        code = str(error.get("Code") or "")
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        message = str(error.get("Message") or "")
        if code in TRANSIENT_CODES or status >= 500 or status == 429:
            return AwsUnavailable(service, operation, code or str(status), message, response)
        return AwsRejected(service, operation, code or str(status), message, response)
    from botocore.exceptions import ConnectionError as BotocoreConnectionError
    from botocore.exceptions import HTTPClientError

    if isinstance(exc, BotocoreConnectionError | HTTPClientError):
        return AwsUnavailable(service, operation, type(exc).__name__, str(exc), {})
    return AwsRejected(service, operation, type(exc).__name__, str(exc), {})


class AwsCaller:
    """Makes one service's calls: retries what may be retried, within the attempts and the time left."""

    def __init__(
        self,
        service: str,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        retry_for_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`retry_for_seconds`: retry what may be retried for this long from the first attempt, however
        many attempts that takes (within the invocation's time), instead of `max_attempts` times."""
        self.service = service
        self.client = client_provider(client, service, endpoint_url, region_name)
        self.max_attempts = max_attempts
        self.retry_for_seconds = retry_for_seconds
        self._clock = clock
        default = READ_TIMEOUT_SECONDS.get(service, DEFAULT_READ_TIMEOUT_SECONDS)
        self._read_timeouts = (default, *(t for t in SHORTER_READ_TIMEOUTS_SECONDS if t < default))
        self._sleep = sleep
        self._jitter = jitter

    def read_timeout_for(self, seconds: float | None) -> float | None:
        """The longest read timeout whose worst-case attempt fits in `seconds` (None: none fits)."""
        if seconds is None:
            return self._read_timeouts[0]
        for read in self._read_timeouts:
            if connect_timeout(read) + read <= seconds:
                return read
        return None

    def call(self, operation: str, *, then: Callable[[dict[str, Any]], Any] | None = None, **params: Any) -> Any:
        """The operation's response (or `then(response)`, inside the same attempt: reading a body)."""
        attempt = 0
        first = self._clock()
        while True:
            attempt += 1
            # Never start an attempt whose worst case would outlast the invocation.
            read_timeout = self.read_timeout_for(seconds_left())
            if read_timeout is None:
                raise AwsUnavailable(self.service, operation, "NoTimeLeft", "the invocation's time is up", {})
            try:
                response: dict[str, Any] = getattr(self.client(read_timeout), operation)(**params)
                return response if then is None else then(response)
            except Exception as exc:
                failure = classify(self.service, operation, exc)
                if failure is None:
                    raise
                if isinstance(failure, AwsRejected) or self._spent(attempt, first):
                    raise failure from exc
                delay = self._jitter() * min(MAX_BACKOFF_SECONDS, BASE_BACKOFF_SECONDS * 2**attempt)
                if self.retry_for_seconds is not None and self._clock() + delay - first > self.retry_for_seconds:
                    raise failure from exc
                left = seconds_left()
                if left is not None and self.read_timeout_for(left - delay) is None:
                    raise failure from exc
                self._sleep(delay)

    def _spent(self, attempt: int, first: float) -> bool:
        """Whether the retry budget is spent: attempts, or (`retry_for_seconds`) time since the first one."""
        if self.retry_for_seconds is None:
            return attempt >= self.max_attempts
        return self._clock() - first >= self.retry_for_seconds
