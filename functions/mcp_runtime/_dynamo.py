"""What the stores on the task table share: how they reach DynamoDB, and how its failures reach them.

A store built on `DynamoStore` names, in `unavailable`, the exception it raises for any AWS failure
(`_aws.AwsCaller` has already retried what may be retried); a conditional write whose condition did
not hold raises `ConditionFailed` instead, for the store to say what that means in its own terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from ._aws import CONDITION_FAILED, AwsCaller, AwsCallError
from .observability import NO_TELEMETRY, Telemetry


class ConditionFailed(Exception):
    """A conditional write's condition did not hold."""


class DynamoStore:
    """A store on one DynamoDB table. The client is injected, or built lazily on first use."""

    unavailable: ClassVar[type[Exception]]

    def __init__(
        self,
        table_name: str,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        clock: Callable[[], float] = time.time,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self._table = table_name
        self._aws = AwsCaller("dynamodb", client, endpoint_url=endpoint_url)
        self._clock = clock
        self.telemetry = telemetry

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self._aws.call(operation, **kwargs)
        except AwsCallError as exc:
            if exc.code == CONDITION_FAILED:
                raise ConditionFailed(exc.code) from exc
            raise self.unavailable(f"{operation}: {exc.code}") from exc
        return response
