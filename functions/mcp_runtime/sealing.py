"""Sealed `requestState`: HMAC-SHA256 over a compact JSON payload, bound to its origin.

Token format: ``v1.<key id>.<base64url payload>.<base64url tag>``. The tag covers everything before
it, so the version and key id cannot be swapped. Keys are shared by every instance (Secrets
Manager in AWS, configuration locally); a list of keys allows rotation: the first seals, any opens.
The keys may be given as a function that reads them: it is called by the first seal or open, so a
request that seals nothing never waits for the secret (bench/README.md, cold start).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from . import _json
from ._value import ValueObject
from .errors import InvalidParams
from .limits import MAX_REQUEST_STATE_CHARS

TOKEN_VERSION: Final = "v1"
_MIN_KEY_BYTES: Final = 32


class StateRejected(InvalidParams):
    """A requestState that fails verification, is expired, or belongs to another call or caller."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Invalid requestState: {reason}")


class StateTooLarge(InvalidParams):
    """What a round gathered (answers and the tool's state) would make a token `open` refuses."""

    def __init__(self) -> None:
        super().__init__(
            f"Invalid params: the answers and state of this request do not fit in a requestState "
            f"(at most {MAX_REQUEST_STATE_CHARS} characters)"
        )


class SealingKey(ValueObject):
    """One key of the sealer: its id (named in each token) and its secret."""

    __slots__ = ("key_id", "secret")
    key_id: str
    secret: bytes

    def __init__(self, key_id: str, secret: bytes) -> None:
        if len(secret) < _MIN_KEY_BYTES:
            raise ValueError("a requestState sealing key needs at least 32 bytes")
        self.key_id = key_id
        self.secret = secret

    def __repr__(self) -> str:
        return f"SealingKey(key_id={self.key_id!r})"  # never the secret, in a log or a test report


class Binding(ValueObject, compare=("principal", "method", "target")):
    """What a state is bound to: the caller, the method and target, and a digest of the arguments."""

    __slots__ = ("_digest", "arguments", "method", "principal", "target")
    principal: str
    method: str
    target: str
    arguments: Any
    _digest: str | None

    def __init__(self, principal: str, method: str, target: str, arguments: Any) -> None:
        self.principal = principal
        self.method = method
        self.target = target
        self.arguments = arguments
        self._digest = None

    @property
    def arguments_digest(self) -> str:
        """Made when a state is sealed or opened, once: a call that neither asks nor answers never pays
        for it (bench/README.md, warm). Not `functools.cached_property`, which takes a lock per object."""
        digest = self._digest
        if digest is None:
            digest = self._digest = digest_arguments(self.arguments)
        return digest


def digest_arguments(arguments: Any) -> str:
    return hashlib.sha256(_json.canonical(arguments).encode()).hexdigest()


_TO_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE: Final = bytes.maketrans(b"-_", b"+/")


def _b64encode(raw: bytes) -> str:
    """Unpadded base64url (what `base64.urlsafe_b64encode` spells, without its `=`)."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return binascii.a2b_base64(padded.encode("ascii").translate(_FROM_URLSAFE))


KeySource = Callable[[], Sequence[SealingKey]]


class StateSealer:
    def __init__(
        self,
        keys: Sequence[SealingKey] | KeySource,
        *,
        lifetime_seconds: int = 900,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source: KeySource | None = keys if callable(keys) else None
        self._keys: list[SealingKey] = []
        self._secrets: dict[str, bytes] = {}
        self._lock = threading.Lock()
        if not callable(keys):
            self._load(keys)
        self._lifetime = lifetime_seconds
        self._clock = clock

    def _load(self, keys: Sequence[SealingKey]) -> None:
        if not keys:
            raise ValueError("at least one sealing key is required")
        self._secrets = {key.key_id: key.secret for key in keys}
        self._keys = list(keys)

    def _keyring(self) -> dict[str, bytes]:
        """The keys' secrets by id, read from the source by the first caller (a failed read is tried again)."""
        if not self._keys and self._source is not None:
            with self._lock:
                if not self._keys:
                    self._load(self._source())
        return self._secrets

    def seal(self, binding: Binding, payload: dict[str, Any], *, lifetime_seconds: int | None = None) -> str:
        """A token for `payload`, valid for this sealer's lifetime or, where given, `lifetime_seconds`."""
        self._keyring()
        key = self._keys[0]
        body = {
            "p": binding.principal,
            "m": binding.method,
            "t": binding.target,
            "a": binding.arguments_digest,
            "x": int(self._clock()) + (self._lifetime if lifetime_seconds is None else lifetime_seconds),
            "d": payload,
        }
        encoded = _b64encode(_json.compact_text(body).encode())
        signed = f"{TOKEN_VERSION}.{key.key_id}.{encoded}"
        token = f"{signed}.{_b64encode(self._tag(key.key_id, signed))}"
        if len(token) > MAX_REQUEST_STATE_CHARS:  # the one limit, checked where the state is made
            raise StateTooLarge()
        return token

    def open(self, token: object, binding: Binding) -> dict[str, Any]:
        if not isinstance(token, str) or not token:
            raise StateRejected("must be a non-empty string")
        if len(token) > MAX_REQUEST_STATE_CHARS:
            raise StateRejected("too large")
        if not token.isascii():  # the token alphabet is ASCII; anything else would crash the tag check
            raise StateRejected("malformed")
        parts = token.split(".")
        if len(parts) != 4 or parts[0] != TOKEN_VERSION:
            raise StateRejected("malformed")
        version, key_id, encoded, tag_text = parts
        if key_id not in self._keyring():
            raise StateRejected("unknown key")
        # Compare the canonical spelling of the tag, not its decoded bytes: base64 decoding tolerates
        # padding and unused low bits, which would let a changed token still verify.
        expected = _b64encode(self._tag(key_id, f"{version}.{key_id}.{encoded}"))
        if not hmac.compare_digest(tag_text, expected):
            raise StateRejected("verification failed")
        try:
            body = json.loads(_b64decode(encoded).decode())
        except ValueError as exc:  # cannot happen for a genuine tag, kept as defence in depth
            raise StateRejected("malformed") from exc
        if not isinstance(body, dict) or not isinstance(body.get("d"), dict):
            raise StateRejected("malformed")
        if not isinstance(body.get("x"), int) or body["x"] < self._clock():
            raise StateRejected("expired")
        if (body.get("p"), body.get("m"), body.get("t"), body.get("a")) != (
            binding.principal,
            binding.method,
            binding.target,
            binding.arguments_digest,
        ):
            raise StateRejected("issued for another request")
        payload: dict[str, Any] = body["d"]
        return payload

    def _tag(self, key_id: str, signed: str) -> bytes:
        return hmac.new(self._secrets[key_id], signed.encode("ascii"), "sha256").digest()
