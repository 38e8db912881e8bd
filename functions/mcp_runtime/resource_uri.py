"""Canonical resource URIs and origins (RFC 8707 §2, RFC 3986 §6.2.2-6.2.3), compared as the MCP SDKs do.

The MCP Python SDK's `resource_url_from_server_url` lowercases scheme and host and drops the
fragment; its `check_resource_allowed` also treats `/mcp` and `/mcp/` as one. Here, in addition,
the scheme's default port is dropped (`https://h:443/mcp` is `https://h/mcp`). A token's `aud`, the
`resource` a client asks the bridge for, and this endpoint's own URI are compared in this form; a
parent path is not accepted for a child (no hierarchy): a token names this endpoint or it does not.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


def _netloc(scheme: str, host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{shown}:{port}"


def canonical_resource(uri: str) -> str:
    """`uri` in the form resource URIs are compared in; a URI that does not parse is returned as given."""
    try:
        parts = urlsplit(uri.strip())
        port = parts.port
    except ValueError:
        return uri
    scheme = parts.scheme.lower()
    if not scheme or parts.hostname is None or parts.username is not None or parts.password is not None:
        return uri
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, _netloc(scheme, parts.hostname.lower(), port), path, parts.query, ""))


def canonical_origin(origin: str) -> str | None:
    """`scheme://host[:port]` of an `Origin` header or a base URL, lower case, default port dropped;
    None for anything else (`null`, a path, user info)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or parts.hostname is None or parts.username is not None:
        return None
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    return f"{scheme}://{_netloc(scheme, parts.hostname.lower(), port)}"
