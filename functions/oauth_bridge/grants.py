"""What the sign-in keeps on the server, in the registrations table (conditional writes only).

- `pending#<id>`: an approved sign-in on its way through Cognito (the `state` Cognito carries is the id):
  the MCP client, its redirect URI, its PKCE challenge and `state`, the resource and scopes, the bridge's
  own PKCE verifier for Cognito, and a digest of the cookie of the browser that approved. Taken (deleted)
  once, at the callback; `FLOW_SECONDS` to live.
- `code#<sha256>`: a code the bridge minted for an MCP client at the callback: bound to that record, the
  person and the approval's grant (no token: those are minted at the exchange); taken once at
  `/oauth2/token`, and redeemed only while that approval stands; `CODE_SECONDS` to live.
- `approval#<subject>#<client key>`: a person's approval of a client for some scopes, until it expires,
  with the digests of the refresh tokens issued under it (revoked with it).
- `refresh#<sha256>`: a refresh token the bridge handed out (random; only its hash is kept): whose, for
  which client, under which grant. It works only while this row and its approval exist. Each use
  spends it (the client gets a new one: OAuth 2.1 §4.3.1 rotation) and leaves
- `spent#<sha256>`: a refresh token used once already: presented again, it is a stolen copy (or the
  theft's victim), and its whole family, the approval with every refresh token under it, is revoked.
- `form#<sha256>`: a consent or approvals form that was posted: each is answered once (a replay writes
  nothing); kept until the form would have expired anyway (TTL on `expiresAt`).
- `meta#signing-keys`: the HMAC keys of the consent forms and cookies, newest first (it signs; all verify),
  sealed with the bridge's KMS key (`KeySealer`). The access tokens are signed in KMS (signing.py): nothing
  in this table mints a token or opens anything in clear.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from mcp_runtime._aws import AwsCaller

from .aws import BridgeUnavailable, ConditionFailed, _aws

log = logging.getLogger(__name__)

PENDING_PREFIX: Final = "pending#"
CODE_PREFIX: Final = "code#"
APPROVAL_PREFIX: Final = "approval#"
REFRESH_PREFIX: Final = "refresh#"
FORM_PREFIX: Final = "form#"
SPENT_PREFIX: Final = "spent#"
SIGNING_KEYS: Final = "meta#signing-keys"
LEGACY_SIGNING_KEY: Final = "meta#signing-key"
CONSOLE_CLIENT: Final = "meta#console-client"
FLOW_SECONDS: Final = 600
CODE_SECONDS: Final = 120
MAX_SIGNING_KEYS: Final = 3
MAX_REFRESH_PER_APPROVAL: Final = 20


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Pending:
    """An approved sign-in between the consent POST (or a standing approval) and the callback."""

    kind: str  # "consent" (approved on the page), "standing" (an approval on record), "console" (the approvals page)
    client_key: str
    client_id: str
    redirect_uri: str
    code_challenge: str
    state: str | None
    resource: str
    scopes: tuple[str, ...]
    verifier: str  # PKCE between the bridge and Cognito
    browser: str  # digest of the flow cookie of the browser that approved
    expires_at: int
    person: str | None = None  # a standing approval's subject: the person who must sign in
    nonce: str | None = None
    # A metadata document's client, registered only once the person has signed in: what it said.
    client_name: str = ""
    redirect_uris: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IssuedCode:
    client_key: str
    redirect_uri: str
    code_challenge: str
    resource: str
    scopes: tuple[str, ...]
    subject: str
    tokens: dict[str, Any]  # empty: the tokens are minted at the exchange (earlier versions stored Cognito's)
    expires_at: int
    # The approval's grant when the code was minted: a revocation (or a revoke and approve again) before
    # the exchange leaves the code refused.
    grant: str = ""


@dataclass(frozen=True, slots=True)
class Approval:
    subject: str
    client_key: str
    client_id: str
    client_name: str
    scopes: tuple[str, ...]
    approved_at: int
    expires_at: int
    # Made when the person first approves; refresh tokens carry it, so a revoked and approved-again
    # client's old refresh tokens stay refused.
    grant: str
    refresh: tuple[str, ...] = ()
    revision: int = 0
    # The person's Cognito username (not a secret): each refresh checks they still exist and are enabled.
    username: str = ""

    def covers(self, scopes: tuple[str, ...], now: float) -> bool:
        return self.expires_at > now and set(scopes) <= set(self.scopes)


@dataclass(frozen=True, slots=True)
class RefreshRecord:
    subject: str
    client_key: str
    grant: str
    # Only in records of earlier versions (Cognito's refresh token): never written now, scrubbed by cleanup.
    token: str = field(default="", repr=False)


def _approval_key(subject: str, client_key: str) -> str:
    return f"{APPROVAL_PREFIX}{subject}#{client_key}"


class KeySealer:
    """Seals the form and cookie keys with a symmetric KMS key only the bridge's role may use: the table (and
    its backups) holds them encrypted. The last keys opened are kept while their ciphertext is the item's, so
    a container calls KMS once per rotation, and a rotation (a new ciphertext) is seen at once."""

    def __init__(self, key: str, endpoint_url: str | None = None, client: Any | None = None) -> None:
        self.key = key
        self.kms = AwsCaller("kms", client, endpoint_url=endpoint_url)  # client built on first use
        self._opened: tuple[bytes, tuple[bytes, ...]] | None = None

    def seal(self, keys: tuple[bytes, ...]) -> bytes:
        sealed = _aws(
            lambda: self.kms.call("encrypt", KeyId=self.key, Plaintext=b"".join(keys), EncryptionContext=_CONTEXT)
        )
        return bytes(sealed["CiphertextBlob"])

    def open(self, sealed: bytes) -> tuple[bytes, ...] | None:
        if self._opened is not None and self._opened[0] == sealed:
            return self._opened[1]
        try:
            plain = bytes(
                _aws(
                    lambda: self.kms.call("decrypt", KeyId=self.key, CiphertextBlob=sealed, EncryptionContext=_CONTEXT)
                )["Plaintext"]
            )
        except BridgeUnavailable as exc:
            # Sealed by a key this one is not (a table restored into another stack, a local stack restarted
            # with a new key; moto says AccessDenied for those): new keys are made, as in a retirement.
            if exc.code not in ("InvalidCiphertextException", "IncorrectKeyException", "AccessDeniedException"):
                raise
            log.warning("the signing keys cannot be opened with %s (%s): new keys are made", self.key, exc.code)
            return None
        keys = tuple(plain[i : i + 32] for i in range(0, len(plain), 32))
        self._opened = (sealed, keys)
        return keys


_CONTEXT: Final = {"purpose": "oauth-bridge-signing-keys"}


class GrantStore:
    def __init__(
        self,
        table: str,
        endpoint_url: str | None = None,
        clock: Callable[[], float] = time.time,
        client: Any | None = None,
        sealer: KeySealer | None = None,
    ) -> None:
        self.table = table
        self.dynamodb = AwsCaller("dynamodb", client, endpoint_url=endpoint_url)
        self.clock = clock
        self.sealer = sealer  # None: keys in clear (what earlier versions did; the template always seals)

    # ---- single-use records ---------------------------------------------------------------------
    def _put_new(self, key: str, document: dict[str, Any], expires_at: int, **extra: dict[str, Any]) -> None:
        item = {
            "pk": {"S": key},
            "doc": {"S": json.dumps(document, separators=(",", ":"))},
            "expiresAt": {"N": str(expires_at)},
            **extra,
        }
        _aws(
            lambda: self.dynamodb.call(
                "put_item", TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        )

    def _take(self, key: str) -> dict[str, Any] | None:
        """Delete a record and answer what it held; None if it is gone (taken already) or expired."""
        try:
            old = _aws(
                lambda: self.dynamodb.call(
                    "delete_item",
                    TableName=self.table,
                    Key={"pk": {"S": key}},
                    ConditionExpression="attribute_exists(pk)",
                    ReturnValues="ALL_OLD",
                )
            ).get("Attributes")
        except ConditionFailed:
            return None
        if not old or int(old["expiresAt"]["N"]) <= self.clock():
            return None
        document: dict[str, Any] = json.loads(old["doc"]["S"])
        return document

    def put_pending(self, flow_id: str, pending: Pending) -> None:
        self._put_new(PENDING_PREFIX + digest(flow_id), asdict(pending), pending.expires_at)

    def take_pending(self, flow_id: str) -> Pending | None:
        found = self._take(PENDING_PREFIX + digest(flow_id))
        if found is None:
            return None
        return Pending(
            **{**found, "scopes": tuple(found["scopes"]), "redirect_uris": tuple(found.get("redirect_uris", ()))}
        )

    def use_form(self, token: str, expires_at: int) -> bool:
        """Mark a posted form's token used; False if it was used before (a replay)."""
        try:
            self._put_new(FORM_PREFIX + digest(token), {}, expires_at)
        except ConditionFailed:
            return False
        return True

    def put_code(self, code: str, issued: IssuedCode) -> None:
        self._put_new(CODE_PREFIX + digest(code), asdict(issued), issued.expires_at)

    def take_code(self, code: str) -> IssuedCode | None:
        found = self._take(CODE_PREFIX + digest(code))
        if found is None:
            return None
        return IssuedCode(**{**found, "scopes": tuple(found["scopes"])})

    # ---- approvals ------------------------------------------------------------------------------
    def approval(self, subject: str, client_key: str) -> Approval | None:
        item = _aws(
            lambda: self.dynamodb.call(
                "get_item",
                TableName=self.table,
                Key={"pk": {"S": _approval_key(subject, client_key)}},
                ConsistentRead=True,
            )
        ).get("Item")
        return _approval(item) if item else None

    def save_approval(self, approval: Approval) -> None:
        """Write an approval read at `approval.revision` (0: none was); ConditionFailed if it changed since."""
        document = asdict(approval)
        revision = document.pop("revision")
        item = {
            "pk": {"S": _approval_key(approval.subject, approval.client_key)},
            "doc": {"S": json.dumps(document, separators=(",", ":"))},
            "clientKey": {"S": approval.client_key},
            "revision": {"N": str(revision + 1)},
            "expiresAt": {"N": str(approval.expires_at)},
        }
        condition = "attribute_not_exists(pk)" if revision == 0 else "revision = :seen"
        values: dict[str, Any] = {} if revision == 0 else {"ExpressionAttributeValues": {":seen": {"N": str(revision)}}}
        _aws(
            lambda: self.dynamodb.call(
                "put_item", TableName=self.table, Item=item, ConditionExpression=condition, **values
            )
        )

    def remove_approval(self, approval: Approval) -> None:
        """ConditionFailed if it changed (or went) since it was read."""
        _aws(
            lambda: self.dynamodb.call(
                "delete_item",
                TableName=self.table,
                Key={"pk": {"S": _approval_key(approval.subject, approval.client_key)}},
                ConditionExpression="revision = :seen",
                ExpressionAttributeValues={":seen": {"N": str(approval.revision)}},
            )
        )

    def approvals_of(self, subject: str) -> list[Approval]:
        return list(self._scan("begins_with(pk, :prefix)", {":prefix": {"S": f"{APPROVAL_PREFIX}{subject}#"}}))

    def approvals_for(self, client_key: str) -> list[Approval]:
        return list(
            self._scan(
                "begins_with(pk, :prefix) AND clientKey = :client",
                {":prefix": {"S": APPROVAL_PREFIX}, ":client": {"S": client_key}},
            )
        )

    def _scan(self, condition: str, values: dict[str, Any]) -> Iterator[Approval]:
        query: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
        }
        while True:
            page = _aws(lambda: self.dynamodb.call("scan", **query))
            for item in page.get("Items", []):
                yield _approval(item)
            if "LastEvaluatedKey" not in page:
                return
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ---- refresh tokens -------------------------------------------------------------------------
    def put_refresh(self, token: str, record: RefreshRecord, expires_at: int) -> None:
        document = {k: v for k, v in asdict(record).items() if k != "token"}  # only the hash of a token is kept
        self._put_new(REFRESH_PREFIX + digest(token), document, expires_at)

    def refresh(self, token: str) -> RefreshRecord | None:
        item = _aws(
            lambda: self.dynamodb.call(
                "get_item", TableName=self.table, Key={"pk": {"S": REFRESH_PREFIX + digest(token)}}, ConsistentRead=True
            )
        ).get("Item")
        if not item or int(item["expiresAt"]["N"]) <= self.clock():
            return None
        return RefreshRecord(**json.loads(item["doc"]["S"]))

    def take_refresh(self, token_digest: str) -> RefreshRecord | None:
        found = self._take(REFRESH_PREFIX + token_digest)
        return RefreshRecord(**found) if found is not None else None

    def spend_refresh(self, token: str, record: RefreshRecord, expires_at: int) -> bool:
        """Use a refresh token up (it is deleted, a `spent#` marker remembers whose it was); False if it was
        used meanwhile (two uses of one token: one of them is not its client's)."""
        if self.take_refresh(digest(token)) is None:
            return False
        spent = {"subject": record.subject, "client_key": record.client_key, "grant": record.grant}
        try:
            self._put_new(SPENT_PREFIX + digest(token), spent, expires_at)
        except ConditionFailed:
            return False
        return True

    def spent(self, token: str) -> tuple[str, str, str] | None:
        """(subject, client key, grant) of a refresh token used up before: its reuse names its family."""
        item = self._get(SPENT_PREFIX + digest(token))
        if not item or int(item["expiresAt"]["N"]) <= self.clock():
            return None
        found = json.loads(item["doc"]["S"])
        return str(found["subject"]), str(found["client_key"]), str(found["grant"])

    def scrub_upstream_tokens(self) -> int:
        """Cognito's tokens that earlier versions kept: dropped from refresh records (the bridge's refresh
        token keeps working), and unredeemed codes that held them deleted. Answers the failures."""
        query: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": (
                "(begins_with(pk, :refresh) AND contains(doc, :token) AND NOT contains(doc, :empty)) OR "
                "(begins_with(pk, :code) AND contains(doc, :access))"
            ),
            "ExpressionAttributeValues": {
                ":refresh": {"S": REFRESH_PREFIX},
                ":code": {"S": CODE_PREFIX},
                ":token": {"S": '"token":"'},
                ":empty": {"S": '"token":""'},
                ":access": {"S": '"access_token"'},
            },
            "ConsistentRead": True,
        }
        failed = 0
        while True:
            page = _aws(lambda: self.dynamodb.call("scan", **query))
            for item in page.get("Items", []):
                try:
                    self._scrub(item)
                except ConditionFailed:
                    continue  # used or taken meanwhile
                except Exception:  # counted: the next run tries again
                    failed += 1
            if "LastEvaluatedKey" not in page:
                return failed
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _scrub(self, item: dict[str, Any]) -> None:
        key, seen = item["pk"]["S"], item["doc"]["S"]
        if key.startswith(CODE_PREFIX):
            _aws(
                lambda: self.dynamodb.call(
                    "delete_item",
                    TableName=self.table,
                    Key={"pk": {"S": key}},
                    ConditionExpression="doc = :seen",
                    ExpressionAttributeValues={":seen": {"S": seen}},
                )
            )
            return
        document = {k: v for k, v in json.loads(seen).items() if k != "token"}
        _aws(
            lambda: self.dynamodb.call(
                "update_item",
                TableName=self.table,
                Key={"pk": {"S": key}},
                UpdateExpression="SET doc = :doc",
                ConditionExpression="doc = :seen",
                ExpressionAttributeValues={
                    ":doc": {"S": json.dumps(document, separators=(",", ":"))},
                    ":seen": {"S": seen},
                },
            )
        )

    # ---- signing keys ---------------------------------------------------------------------------
    def signing_keys(self) -> tuple[bytes, ...]:
        """The keys, newest first: made on first use (from the one key of earlier versions, if any)."""
        found = self._read_keys()
        if found is not None and found[0]:
            return found[0]
        legacy = self._get(LEGACY_SIGNING_KEY) if found is None else None
        keys = (bytes(legacy["key"]["B"]),) if legacy else (secrets.token_bytes(32),)
        try:
            self._put_keys(keys, None if found is None else found[1])
        except ConditionFailed:
            return self.signing_keys()  # another container made them first
        return keys

    def rotate_signing_keys(self, retire: bool = False) -> int:
        """A new key signs from now on; the older ones still verify (at most `MAX_SIGNING_KEYS` kept), or
        with `retire` none does: what they signed (forms in flight, person cookies) is refused at once."""
        current = self.signing_keys()
        found = self._read_keys()
        assert found is not None  # made just above
        keys = (secrets.token_bytes(32),) if retire else (secrets.token_bytes(32), *current)[:MAX_SIGNING_KEYS]
        self._put_keys(keys, found[1])
        return len(keys)

    def _read_keys(self) -> tuple[tuple[bytes, ...], dict[str, Any]] | None:
        """(the keys, the `newest` attribute a write is conditioned on); None if there is no item. Keys an
        earlier version stored in clear are sealed now; sealed keys KMS cannot open come back empty (made
        again: as a retirement, every form and person cookie is refused)."""
        item = self._get(SIGNING_KEYS)
        if not item:
            return None
        seen: dict[str, Any] = item["newest"]
        if "sealed" in item:
            keys = self.sealer.open(bytes(item["sealed"]["B"])) if self.sealer is not None else None
            return (keys or (), seen)
        keys = tuple(bytes(value["B"]) for value in item["keys"]["L"])
        if self.sealer is not None:
            with contextlib.suppress(ConditionFailed):  # sealed concurrently by another container
                self._put_keys(keys, seen)
        return keys, seen

    def _put_keys(self, keys: tuple[bytes, ...], seen: dict[str, Any] | None) -> None:
        item: dict[str, Any] = {"pk": {"S": SIGNING_KEYS}}
        if self.sealer is not None:
            item["sealed"] = {"B": self.sealer.seal(keys)}
            item["newest"] = {"S": hashlib.sha256(keys[0]).hexdigest()}
        else:
            item.update(keys={"L": [{"B": key} for key in keys]}, newest={"B": keys[0]})
        if seen is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {"ConditionExpression": "newest = :seen", "ExpressionAttributeValues": {":seen": seen}}
        _aws(lambda: self.dynamodb.call("put_item", TableName=self.table, Item=item, **condition))

    def _get(self, key: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = _aws(
            lambda: self.dynamodb.call("get_item", TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True)
        ).get("Item")
        return found

    # ---- the approvals page's app client of earlier versions (cleanup deletes it) -----------------
    def console_client(self) -> tuple[str, str] | None:
        item = self._get(CONSOLE_CLIENT)
        return (item["client"]["S"], item["secret"]["S"]) if item else None


def _approval(item: dict[str, Any]) -> Approval:
    document = json.loads(item["doc"]["S"])
    return Approval(
        **{
            **document,
            "scopes": tuple(document["scopes"]),
            "refresh": tuple(document.get("refresh", ())),
            "revision": int(item["revision"]["N"]),
        }
    )
