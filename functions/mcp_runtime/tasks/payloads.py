"""The payload bucket: task results and durable records too large for the task item, in S3.

Objects are written once under `tasks/<task id>/`, named by what they hold, and read back whole;
the item keeps a pointer (`{"s3": key, "bytes": n}`). The bucket encrypts them and its lifecycle
deletes what is under `tasks/` a day after the task's TTL (`infra/capabilities/payloads.py`). A task
without a TTL keeps its item for ever, so its objects go under `kept/`, which no rule expires.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

from .._aws import AwsCaller, AwsCallError, AwsUnavailable
from ..observability import NO_TELEMETRY, Telemetry, traced
from .errors import TaskStoreRefused, TaskStoreUnavailable

POINTER_KEY = "s3"
EXPIRING_PREFIX = "tasks/"
KEPT_PREFIX = "kept/"


class PayloadStore(Protocol):
    def put(self, task_id: str, name: str, value: Any, *, expires: bool) -> dict[str, Any]: ...

    def get(self, pointer: dict[str, Any]) -> Any: ...


def is_pointer(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get(POINTER_KEY), str)


def object_key(task_id: str, name: str, *, expires: bool) -> str:
    """`tasks/<task id>/<digest of the name>.json` (`kept/...` when the task has no TTL, so its
    object outlives the lifecycle as its item does): names a tool chose never shape the key."""
    prefix = EXPIRING_PREFIX if expires else KEPT_PREFIX
    return f"{prefix}{task_id}/{hashlib.sha256(name.encode()).hexdigest()[:32]}.json"


class S3PayloadStore:
    def __init__(
        self,
        bucket: str,
        client: Any | None = None,
        *,
        endpoint_url: str | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        caller: AwsCaller | None = None,
    ) -> None:
        self.bucket = bucket
        self._aws = caller or AwsCaller("s3", client, endpoint_url=endpoint_url)
        self.telemetry = telemetry

    @traced("PayloadStore.put")
    def put(self, task_id: str, name: str, value: Any, *, expires: bool) -> dict[str, Any]:
        """`expires`: the task has a TTL (its object may go with it); False keeps the object."""
        body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        key = object_key(task_id, name, expires=expires)
        # Writing the same object again (a retry, a step run twice) leaves the same content behind.
        self._call("put_object", Bucket=self.bucket, Key=key, Body=body, ContentType="application/json")
        return {POINTER_KEY: key, "bytes": len(body)}

    @traced("PayloadStore.get")
    def get(self, pointer: dict[str, Any]) -> Any:
        body = self._call(
            "get_object",
            then=lambda response: response["Body"].read(),
            Bucket=self.bucket,
            Key=str(pointer[POINTER_KEY]),
        )
        return json.loads(body)

    def _call(self, operation: str, **params: Any) -> Any:
        try:
            return self._aws.call(operation, **params)
        except AwsCallError as exc:
            if isinstance(exc, AwsUnavailable):
                raise TaskStoreUnavailable(f"payload bucket unavailable ({exc.operation}: {exc.code})") from exc
            raise TaskStoreRefused(f"payload bucket refused the request ({exc})", exc.code) from exc
