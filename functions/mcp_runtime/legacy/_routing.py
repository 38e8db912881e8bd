"""Which POSTed messages belong to the handshake era: cheap enough to ask of every request."""

from __future__ import annotations

from typing import Any

from .. import wire


def is_legacy_message(message: Any, headers: dict[str, str]) -> bool:
    """Whether a POSTed message belongs to the handshake era (else it takes the 2026-07-28 path).

    A 2026-07-28 (or unknown) `MCP-Protocol-Version` header, or 2026 `_meta` (any of its reserved
    `io.modelcontextprotocol/` keys), always wins, so nothing a 2026 client sends (even a stray
    session header) changes its path. Otherwise a session id, a 2025 version header or an
    `initialize` marks the handshake era.
    """
    header = headers.get(wire.HEADER_PROTOCOL_VERSION)
    if header is not None and header.strip() not in wire.LEGACY_PROTOCOL_VERSIONS:
        return False
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and any(str(key).startswith(wire.META_PREFIX) for key in meta):
        return False  # 2026 `_meta` (its reserved keys); a 2025 `_meta` carries only `progressToken`
    if header is not None or headers.get(wire.HEADER_SESSION_ID, "").strip():
        return True
    return isinstance(message, dict) and message.get("method") == wire.METHOD_INITIALIZE
