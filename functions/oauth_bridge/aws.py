"""The bridge's AWS calls: its registrations table and the user pool's app clients.

Calls go through `AwsCaller` (retries within the invocation's time, errors classified); what it
raises is translated here and only here: a condition that did not hold becomes
`ConditionFailed` (the caller decides what it means), anything else `BridgeUnavailable` (answered 503
`temporarily_unavailable`, logged with its cause). Every state change is a conditional write.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from mcp_runtime._aws import CONDITION_FAILED, AwsCaller, AwsCallError

CLIENT_PREFIX: Final = "client#"
METADATA_URL_PREFIX: Final = "cimd#"
RATE_PREFIX: Final = "rate#"
COUNTER_KEY: Final = "meta#clients"  # the slot counter of earlier versions: cleanup deletes it
# Reads and conditional writes of one token bucket before a request gives up (503): each lost race
# means another request took a token, so a burst of N concurrent takes settles within N attempts.
BUCKET_ATTEMPTS: Final = 20
T = TypeVar("T")


class BridgeUnavailable(Exception):
    """An AWS call failed for a reason that is not the request's fault."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class ConditionFailed(Exception):
    """A conditional write's condition did not hold."""


def _aws(call: Callable[[], T]) -> T:
    try:
        return call()
    except AwsCallError as exc:
        if exc.code == CONDITION_FAILED:
            raise ConditionFailed(exc.code) from exc
        raise BridgeUnavailable(str(exc), exc.code) from exc


@dataclass(frozen=True, slots=True)
class Registration:
    """A client the bridge registered: by dynamic registration (`key` client#<id>) or from a Client ID
    Metadata Document (`key` cimd#<sha256 of the URL>)."""

    key: str
    cognito_client_id: str
    redirect_uris: tuple[str, ...]
    auth_method: str
    last_used_at: int
    metadata_url: str | None = None
    fetched_at: int = 0
    client_name: str = "MCP client"
    # A token exchange succeeded once (registrations older than this field count as exchanged if used).
    exchanged: bool = True
    # Earlier versions made an app client per MCP client (`cognito_client_id`, and its secret here); cleanup
    # deletes those and strips both. Nothing is written to either now.
    cognito_secret: str = field(default="", repr=False)
    # A confidential MCP client's secret (the bridge's, not Cognito's), as a SHA-256 digest.
    secret_hash: str = field(default="", repr=False)
    # False for a metadata document not registered yet (it is, at its first approved sign-in).
    stored: bool = True

    @property
    def legacy(self) -> bool:
        """An app client of an earlier version, which lists the MCP client's redirect URIs: never used."""
        return bool(self.cognito_client_id) and not self.cognito_secret

    @property
    def public_client_id(self) -> str:
        """The client id the MCP client knows: the Cognito id, or its metadata document's URL."""
        return self.metadata_url or self.key.removeprefix(CLIENT_PREFIX)


def metadata_url_key(url: str) -> str:
    return METADATA_URL_PREFIX + hashlib.sha256(url.encode()).hexdigest()


def client_key(client_id: str) -> str:
    return CLIENT_PREFIX + client_id


def _registration(item: dict[str, Any]) -> Registration:
    return Registration(
        key=item["pk"]["S"],
        cognito_client_id=item.get("client", {}).get("S", ""),
        redirect_uris=tuple(value["S"] for value in item.get("redirectUris", {}).get("L", [])),
        auth_method=item.get("authMethod", {}).get("S", "none"),
        last_used_at=int(item.get("lastUsedAt", {}).get("N", "0")),
        metadata_url=item.get("url", {}).get("S"),
        fetched_at=int(item.get("fetchedAt", {}).get("N", "0")),
        client_name=item.get("clientName", {}).get("S", "MCP client"),
        exchanged="exchangedAt" in item or int(item.get("lastUsedAt", {}).get("N", "0")) > _created(item),
        cognito_secret=item.get("cognitoSecret", {}).get("S", ""),
        secret_hash=item.get("secretHash", {}).get("S", ""),
    )


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _created(item: dict[str, Any]) -> int:
    return int(item.get("createdAt", {}).get("N", "0"))


class RegistrationStore:
    def __init__(
        self,
        table: str,
        endpoint_url: str | None = None,
        clock: Callable[[], float] = time.time,
        client: Any | None = None,
    ) -> None:
        self.table = table
        self.dynamodb = AwsCaller("dynamodb", client, endpoint_url=endpoint_url)  # client built on first use
        self.clock = clock

    def get(self, key: str) -> Registration | None:
        found = _aws(
            lambda: self.dynamodb.call("get_item", TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True)
        )
        item = found.get("Item")
        return _registration(item) if item else None

    def take_token(self, bucket: str, capacity: int, per_hour: int) -> int:
        """Take a token from the bucket `bucket` (`capacity` tokens, `per_hour` back an hour): 0 when
        taken, else the seconds until one is back (and nothing is written). The state (milli-tokens
        and the time of the last take) is read, then written on the condition that nobody wrote it
        meanwhile; a lost race reads again."""
        for _ in range(BUCKET_ATTEMPTS):
            wait = self._try_take(f"{RATE_PREFIX}{bucket}", capacity * 1000, per_hour)
            if wait is not None:
                return wait
        raise BridgeUnavailable(f"the bucket {bucket} stayed contended for {BUCKET_ATTEMPTS} attempts")

    def _try_take(self, pk: str, full: int, per_hour: int) -> int | None:
        """`take_token`'s one attempt: None when another request wrote the bucket first."""
        now_ms = int(self.clock() * 1000)
        found = _aws(
            lambda: self.dynamodb.call("get_item", TableName=self.table, Key={"pk": {"S": pk}}, ConsistentRead=True)
        ).get("Item")
        have = full
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        if found is not None:
            seen, taken_at = found["milliTokens"]["N"], found["takenAtMs"]["N"]
            have = min(full, int(seen) + max(0, now_ms - int(taken_at)) * per_hour // 3600)
            condition = {
                "ConditionExpression": "milliTokens = :seen AND takenAtMs = :at",
                "ExpressionAttributeValues": {":seen": {"N": seen}, ":at": {"N": taken_at}},
            }
        if have < 1000:
            return _ceil_div(_ceil_div((1000 - have) * 3600, per_hour), 1000)  # the refill's ms, in seconds
        left = have - 1000
        full_again_s = now_ms // 1000 + _ceil_div((full - left) * 3600, per_hour * 1000)
        item = {
            "pk": {"S": pk},
            "milliTokens": {"N": str(left)},
            "takenAtMs": {"N": str(now_ms)},
            "expiresAt": {"N": str(full_again_s + 3600)},  # full again by then: TTL may drop it
        }
        try:
            _aws(lambda: self.dynamodb.call("put_item", TableName=self.table, Item=item, **condition))
        except ConditionFailed:
            return None
        return 0

    def add(self, registration: Registration, client_name: str) -> None:
        """Record a new registration; ConditionFailed if one with this key exists (a concurrent first use)."""
        now = str(int(self.clock()))
        item: dict[str, Any] = {
            "pk": {"S": registration.key},
            "redirectUris": {"L": [{"S": uri} for uri in registration.redirect_uris]},
            "authMethod": {"S": registration.auth_method},
            "clientName": {"S": client_name},
            "createdAt": {"N": now},
            "lastUsedAt": {"N": now},
        }
        if registration.secret_hash:
            item["secretHash"] = {"S": registration.secret_hash}
        if registration.metadata_url is not None:
            item["url"] = {"S": registration.metadata_url}
            item["fetchedAt"] = {"N": now}
        _aws(
            lambda: self.dynamodb.call(
                "put_item", TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        )

    def refresh_document(self, registration: Registration, redirect_uris: tuple[str, ...]) -> None:
        """A refetched metadata document: its redirect URIs now, if nobody refreshed it meanwhile."""
        _aws(
            lambda: self.dynamodb.call(
                "update_item",
                TableName=self.table,
                Key={"pk": {"S": registration.key}},
                UpdateExpression="SET redirectUris = :uris, fetchedAt = :now",
                ConditionExpression="fetchedAt = :seen",
                ExpressionAttributeValues={
                    ":uris": {"L": [{"S": uri} for uri in redirect_uris]},
                    ":now": {"N": str(int(self.clock()))},
                    ":seen": {"N": str(registration.fetched_at)},
                },
            )
        )

    def touch(self, registration: Registration) -> None:
        """The client exchanged a code or a refresh token: it is in use."""
        try:
            _aws(
                lambda: self.dynamodb.call(
                    "update_item",
                    TableName=self.table,
                    Key={"pk": {"S": registration.key}},
                    UpdateExpression="SET lastUsedAt = :now, exchangedAt = if_not_exists(exchangedAt, :now)",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":now": {"N": str(int(self.clock()))}},
                )
            )
        except ConditionFailed:
            return  # cleaned up meanwhile: the next authorize registers it again

    def unused_since(self, cutoff: int, unexchanged_cutoff: int) -> Iterator[Registration]:
        """Registrations unused since `cutoff`, those that never exchanged a token and were created
        before `unexchanged_cutoff`, those a cleanup began to remove and did not finish, and those of an
        earlier version (an app client without a secret of the bridge's, whose callbacks are the MCP client's)."""
        query: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": (
                "(begins_with(pk, :client) OR begins_with(pk, :cimd)) AND (lastUsedAt < :cutoff OR "
                "(attribute_not_exists(exchangedAt) AND lastUsedAt <= createdAt AND createdAt < :fresh) OR "
                "attribute_exists(removingAt) OR (attribute_exists(#client) AND attribute_not_exists(cognitoSecret)))"
            ),
            "ExpressionAttributeNames": {"#client": "client"},
            "ExpressionAttributeValues": {
                ":client": {"S": CLIENT_PREFIX},
                ":cimd": {"S": METADATA_URL_PREFIX},
                ":cutoff": {"N": str(cutoff)},
                ":fresh": {"N": str(unexchanged_cutoff)},
            },
            "ConsistentRead": True,
        }
        while True:
            page = _aws(lambda: self.dynamodb.call("scan", **query))
            for item in page.get("Items", []):
                yield _registration(item)
            if "LastEvaluatedKey" not in page:
                return
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def claim_for_removal(self, registration: Registration) -> None:
        """Mark a registration as being removed, if it was not used since it was read (or a cleanup
        already marked it); ConditionFailed if it was used."""
        _aws(
            lambda: self.dynamodb.call(
                "update_item",
                TableName=self.table,
                Key={"pk": {"S": registration.key}},
                UpdateExpression="SET removingAt = if_not_exists(removingAt, :now)",
                ConditionExpression="attribute_exists(removingAt) OR (lastUsedAt = :seen"
                + ("" if registration.exchanged else " AND attribute_not_exists(exchangedAt)")
                + ")",
                ExpressionAttributeValues={
                    ":seen": {"N": str(registration.last_used_at)},
                    ":now": {"N": str(int(self.clock()))},
                },
            )
        )

    def forget(self, registration: Registration) -> None:
        """Delete a registration claimed for removal (its app client is gone); ConditionFailed if it
        is already gone."""
        _aws(
            lambda: self.dynamodb.call(
                "delete_item",
                TableName=self.table,
                Key={"pk": {"S": registration.key}},
                ConditionExpression="attribute_exists(removingAt)",
            )
        )

    def with_app_client(self) -> Iterator[Registration]:
        """Registrations of earlier versions that still name an app client of their own (cleanup removes it)."""
        query: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "(begins_with(pk, :client) OR begins_with(pk, :cimd)) AND attribute_exists(#client)",
            "ExpressionAttributeNames": {"#client": "client"},
            "ExpressionAttributeValues": {":client": {"S": CLIENT_PREFIX}, ":cimd": {"S": METADATA_URL_PREFIX}},
            "ConsistentRead": True,
        }
        while True:
            page = _aws(lambda: self.dynamodb.call("scan", **query))
            for item in page.get("Items", []):
                yield _registration(item)
            if "LastEvaluatedKey" not in page:
                return
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def drop_app_client(self, registration: Registration) -> None:
        """Forget a deleted app client and its secret; the registration stays a record of the bridge's."""
        _aws(
            lambda: self.dynamodb.call(
                "update_item",
                TableName=self.table,
                Key={"pk": {"S": registration.key}},
                UpdateExpression="REMOVE #client, cognitoSecret",
                ConditionExpression="#client = :client",
                ExpressionAttributeNames={"#client": "client"},
                ExpressionAttributeValues={":client": {"S": registration.cognito_client_id}},
            )
        )

    def remove_item(self, key: str) -> None:
        """Delete an item of an earlier version (the slot counter, the approvals page's app client)."""
        _aws(lambda: self.dynamodb.call("delete_item", TableName=self.table, Key={"pk": {"S": key}}))


class UserPoolClients:
    """The user pool's app clients as the bridge meets them: its own (the template's), whose secret it reads
    once per container, and app clients of earlier versions (one per MCP client), which cleanup deletes."""

    def __init__(self, user_pool_id: str, endpoint_url: str | None = None, client: Any | None = None) -> None:
        self.user_pool_id = user_pool_id
        self.cognito = AwsCaller("cognito-idp", client, endpoint_url=endpoint_url)  # client built on first use
        self._secrets: dict[str, str] = {}

    def secret(self, client_id: str) -> str:
        """The app client's secret, read from Cognito (never stored anywhere by the bridge)."""
        if client_id not in self._secrets:
            described = _aws(
                lambda: self.cognito.call("describe_user_pool_client", UserPoolId=self.user_pool_id, ClientId=client_id)
            )["UserPoolClient"]
            self._secrets[client_id] = str(described.get("ClientSecret") or "")
        return self._secrets[client_id]

    def user_enabled(self, username: str) -> bool:
        """Whether the person may still sign in: they exist in the pool and are not disabled."""
        try:
            found = _aws(lambda: self.cognito.call("admin_get_user", UserPoolId=self.user_pool_id, Username=username))
        except BridgeUnavailable as exc:
            if exc.code == "UserNotFoundException":
                return False
            raise
        return bool(found.get("Enabled", True))

    def delete(self, client_id: str) -> None:
        try:
            _aws(lambda: self.cognito.call("delete_user_pool_client", UserPoolId=self.user_pool_id, ClientId=client_id))
        except BridgeUnavailable as exc:
            if exc.code != "ResourceNotFoundException":  # already gone: what cleanup wanted
                raise
