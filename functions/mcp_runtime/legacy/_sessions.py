"""Stateless sessions: the `Mcp-Session-Id` is a sealed token, so any instance opens it.

It holds what `initialize` negotiated (the protocol version, the client's capabilities and
client info), a random nonce that names the session (its revocation record, its streams), and an
expiry; it is bound to the principal that initialized it. Tampered, expired, another principal's,
or terminated: the caller gets the 404 the 2025 transport prescribes and re-initializes.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..limits import MAX_SESSION_PAYLOAD_BYTES
from ..sealing import Binding, StateRejected, StateSealer

SESSION_METHOD: Final = "session"
SESSION_TARGET: Final = "mcp"
# The sealed payload stays small (it travels on every request): beyond MAX_SESSION_PAYLOAD_BYTES the
# client's capabilities keep only the members the server reads, and its info only name, title and version.
KNOWN_CLIENT_CAPABILITIES: Final = ("elicitation", "sampling", "roots")
KNOWN_CLIENT_INFO: Final = ("name", "title", "version")


class SessionInvalid(Exception):
    """Not a session this server issued to this caller, or one that expired."""


@dataclass(frozen=True, slots=True)
class Session:
    nonce: str
    protocol_version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    expires_at: int


def _binding(principal: str) -> Binding:
    return Binding(principal, SESSION_METHOD, SESSION_TARGET, {})


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


class SessionSealer:
    def __init__(self, sealer: StateSealer, lifetime_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self._sealer = sealer
        self._lifetime = lifetime_seconds
        self._clock = clock

    def issue(
        self, principal: str, protocol_version: str, capabilities: dict[str, Any], client_info: dict[str, Any] | None
    ) -> tuple[Session, str]:
        payload: dict[str, Any] = {"v": protocol_version, "c": capabilities, "i": client_info}
        if _size(payload) > MAX_SESSION_PAYLOAD_BYTES:
            payload["c"] = {k: v for k, v in capabilities.items() if k in KNOWN_CLIENT_CAPABILITIES}
            info = client_info or {}
            payload["i"] = {k: str(info[k])[:128] for k in KNOWN_CLIENT_INFO if k in info}
        if _size(payload) > MAX_SESSION_PAYLOAD_BYTES:
            payload["c"] = {k: {} for k in payload["c"]}
        session = Session(
            nonce=secrets.token_urlsafe(18),
            protocol_version=protocol_version,
            capabilities=payload["c"],
            client_info=payload["i"],
            expires_at=int(self._clock()) + self._lifetime,
        )
        payload.update({"n": session.nonce, "e": session.expires_at})
        return session, self._sealer.seal(_binding(principal), payload, lifetime_seconds=self._lifetime)

    def open(self, principal: str, token: str) -> Session:
        try:
            payload = self._sealer.open(token, _binding(principal))
        except StateRejected:
            raise SessionInvalid() from None
        nonce, version, capabilities = payload.get("n"), payload.get("v"), payload.get("c")
        client_info, expires_at = payload.get("i"), payload.get("e")
        if not (isinstance(nonce, str) and isinstance(version, str) and isinstance(capabilities, dict)):
            raise SessionInvalid()
        if not isinstance(expires_at, int):
            raise SessionInvalid()
        return Session(nonce, version, capabilities, client_info if isinstance(client_info, dict) else None, expires_at)
