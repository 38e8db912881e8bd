"""Server-minted handles: cross-call application state the model carries as an ordinary argument.

A handle is an unguessable id for a small JSON document owned by one principal, with a kind (so a
cart handle cannot be passed where an order handle is expected), a version for optimistic locking
and an expiry. Handles live in the task table under their own key prefix. Another principal's
handle, an expired one and an unknown one are indistinguishable to the caller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ._dynamo import ConditionFailed, DynamoStore
from .errors import HandleConflict, HandleError, HandleNotFound, HandleStoreUnavailable
from .limits import MAX_HANDLE_DATA_BYTES
from .observability import traced
from .tasks import schema

__all__ = [
    "CallerHandles",
    "DynamoHandleStore",
    "Handle",
    "HandleConflict",
    "HandleError",
    "HandleNotFound",
    "HandleStore",
    "HandleStoreUnavailable",
]

HANDLE_OWNER_ATTRIBUTE: Final = "handleOwner"  # not the GSI's owner attribute: handles stay out of task history


@dataclass(frozen=True, slots=True)
class Handle:
    handle_id: str
    kind: str
    owner: str
    data: dict[str, Any]
    version: int
    expires_at: int


class HandleStore(Protocol):
    def mint(self, owner: str, kind: str, data: dict[str, Any], ttl_seconds: int) -> Handle: ...

    def resolve(self, owner: str, kind: str, handle_id: str) -> Handle: ...

    def update(self, handle: Handle, data: dict[str, Any]) -> Handle: ...

    def delete(self, handle: Handle) -> None: ...


def new_handle_id(kind: str) -> str:
    """`<kind>_<192 random bits>`: readable for the model, unguessable for anyone else."""
    import secrets  # only when minting: keeps it off the cold-start path

    return f"{kind}_{secrets.token_urlsafe(24)}"


class DynamoHandleStore(DynamoStore):
    unavailable = HandleStoreUnavailable

    @traced("HandleStore.mint")
    def mint(self, owner: str, kind: str, data: dict[str, Any], ttl_seconds: int) -> Handle:
        handle = Handle(new_handle_id(kind), kind, owner, data, 1, int(self._clock()) + ttl_seconds)
        item = {
            schema.PARTITION_KEY: {"S": schema.HANDLE_KEY_PREFIX + handle.handle_id},
            "kind": {"S": kind},
            HANDLE_OWNER_ATTRIBUTE: {"S": owner},
            "data": {"S": _encode(data)},
            "version": {"N": "1"},
            schema.TTL_ATTRIBUTE: {"N": str(handle.expires_at)},
        }
        self._call(
            "put_item",
            TableName=self._table,
            Item=item,
            ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": schema.PARTITION_KEY},
        )
        return handle

    @traced("HandleStore.resolve")
    def resolve(self, owner: str, kind: str, handle_id: str) -> Handle:
        if not handle_id.startswith(f"{kind}_") or len(handle_id) > 128:
            raise HandleNotFound(handle_id)
        response = self._call("get_item", TableName=self._table, Key=self._key(handle_id), ConsistentRead=True)
        item = response.get("Item")
        if (
            item is None
            or item.get(HANDLE_OWNER_ATTRIBUTE, {}).get("S") != owner
            or item.get("kind", {}).get("S") != kind
            or int(item[schema.TTL_ATTRIBUTE]["N"]) <= self._clock()
        ):
            raise HandleNotFound(handle_id)
        return Handle(
            handle_id,
            kind,
            owner,
            json.loads(item["data"]["S"]),
            int(item["version"]["N"]),
            int(item[schema.TTL_ATTRIBUTE]["N"]),
        )

    @traced("HandleStore.update")
    def update(self, handle: Handle, data: dict[str, Any]) -> Handle:
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=self._key(handle.handle_id),
                UpdateExpression="SET #data = :data, #version = :next",
                ConditionExpression="#owner = :owner AND #version = :version AND #expires > :now",
                ExpressionAttributeNames={
                    "#data": "data",
                    "#version": "version",
                    "#owner": HANDLE_OWNER_ATTRIBUTE,
                    "#expires": schema.TTL_ATTRIBUTE,
                },
                ExpressionAttributeValues={
                    ":data": {"S": _encode(data)},
                    ":next": {"N": str(handle.version + 1)},
                    ":owner": {"S": handle.owner},
                    ":version": {"N": str(handle.version)},
                    ":now": {"N": str(int(self._clock()))},
                },
            )
        except ConditionFailed as exc:
            raise HandleConflict(handle.handle_id) from exc
        return Handle(handle.handle_id, handle.kind, handle.owner, data, handle.version + 1, handle.expires_at)

    @traced("HandleStore.delete")
    def delete(self, handle: Handle) -> None:
        try:
            self._call(
                "delete_item",
                TableName=self._table,
                Key=self._key(handle.handle_id),
                ConditionExpression="#owner = :owner AND #version = :version",
                ExpressionAttributeNames={"#owner": HANDLE_OWNER_ATTRIBUTE, "#version": "version"},
                ExpressionAttributeValues={":owner": {"S": handle.owner}, ":version": {"N": str(handle.version)}},
            )
        except ConditionFailed as exc:
            raise HandleConflict(handle.handle_id) from exc

    @staticmethod
    def _key(handle_id: str) -> dict[str, dict[str, str]]:
        return {schema.PARTITION_KEY: {"S": schema.HANDLE_KEY_PREFIX + handle_id}}


def _encode(data: dict[str, Any]) -> str:
    encoded = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if len(encoded.encode()) > MAX_HANDLE_DATA_BYTES:
        raise ValueError("handle data is too large")
    return encoded


@dataclass(frozen=True, slots=True)
class CallerHandles:
    """The handle store as one caller sees it: every operation is on the caller's own handles."""

    store: HandleStore
    owner: str

    def mint(self, kind: str, data: dict[str, Any], ttl_seconds: int = 3600) -> Handle:
        return self.store.mint(self.owner, kind, data, ttl_seconds)

    def resolve(self, kind: str, handle_id: str) -> Handle:
        return self.store.resolve(self.owner, kind, handle_id)

    def update(self, handle: Handle, data: dict[str, Any]) -> Handle:
        return self.store.update(handle, data)

    def delete(self, handle: Handle) -> None:
        self.store.delete(handle)
