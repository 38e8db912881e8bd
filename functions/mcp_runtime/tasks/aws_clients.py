"""boto3 clients built on first use (never at import time) and cached; boto3 itself is imported lazily."""

from __future__ import annotations

import threading
from typing import Any

_session_lock = threading.Lock()
_session: Any = None


def shared_session() -> Any:
    """One boto3 session per process: each new session reloads botocore's endpoint data."""
    global _session
    with _session_lock:
        if _session is None:
            import boto3

            _session = boto3.session.Session()
        return _session


class LazyClient:
    """One boto3 client per service, built on first use. Client creation is not thread-safe; use is."""

    def __init__(self, service: str, endpoint_url: str | None = None, region_name: str | None = None) -> None:
        self.service = service
        self.endpoint_url = endpoint_url
        self.region_name = region_name
        self._client: Any = None
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    from botocore.config import Config

                    self._client = shared_session().client(
                        self.service,
                        endpoint_url=self.endpoint_url,
                        region_name=self.region_name,
                        config=Config(
                            retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30
                        ),
                    )
        return self._client


def client_provider(
    client: Any | None, service: str, endpoint_url: str | None = None, region_name: str | None = None
) -> Any:
    """A zero-argument callable returning the client: the injected one, or a lazily built one."""
    if client is not None:
        return lambda: client
    return LazyClient(service, endpoint_url, region_name)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def is_aws_error(exc: BaseException) -> bool:
    """botocore's ClientError and its connection/endpoint errors, told apart from our own bugs."""
    return type(exc).__module__.startswith("botocore")


THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
    }
)
