"""Client metadata as RFC 7591 registers it, and the redirect URIs an MCP client may use.

Redirect URIs (OAuth 2.1 §2.3.1 and §8.4.2, RFC 8252): absolute, no fragment, and either `https`,
`http` on a loopback host only (127.0.0.1, [::1], localhost: a native client's local listener), or
a private-use scheme named as a reverse domain name (RFC 8252 §7.1: `com.example.app:/callback`), or
the scheme of a named MCP client that predates that rule (`KNOWN_APP_SCHEMES`: Cursor's `cursor:`).
Never `http` to another host, never `javascript:`, `data:` or `file:`, and never an operating system's
own handler (`ms-msdt:`, `search-ms:`): any other single-word scheme is refused.

A URI is accepted only where this parser and a browser's (the WHATWG URL Standard) read the same host:
no user-info (`https://claude.ai@attacker.example/cb` goes to attacker.example), no backslash (a browser
reads a backslash as `/` in http(s) URLs), no percent-encoded host, and a numeric host only as a plain dotted
IPv4 address (a browser reads `0x7f.1` as 127.0.0.1). `destination(uri)` is that host, as the consent
page shows it. A bad redirect URI is `invalid_redirect_uri`; anything else wrong with the metadata is
`invalid_client_metadata` (RFC 7591 §3.2.2).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from .web import OAuthError

MAX_REDIRECT_URIS: Final = 10
MAX_URI_CHARS: Final = 2048
MAX_NAME_CHARS: Final = 128
GRANT_TYPES: Final = frozenset({"authorization_code", "refresh_token"})
OFFLINE_ACCESS: Final = "offline_access"
AUTH_METHODS: Final = ("none", "client_secret_basic", "client_secret_post")
_LOOPBACK: Final = frozenset({"127.0.0.1", "::1", "localhost"})
_FORBIDDEN_SCHEMES: Final = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "ws", "wss"})
# A reverse domain name: two labels at least (RFC 8252 §7.1), as schemes may be spelled (RFC 3986 §3.1).
_PRIVATE_SCHEME: Final = re.compile(r"^[a-z][a-z0-9-]*(?:\.[a-z0-9-]+)+$")
# Schemes of MCP clients (README, "Connect a client") that are not reverse-DNS names, each one checked to
# be that app's own and no operating system's handler. Add one only so.
KNOWN_APP_SCHEMES: Final = frozenset({"cursor"})
_NUMERIC_LABEL: Final = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")


def check_redirect_uri(uri: Any, error: str = "invalid_redirect_uri") -> str:
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise OAuthError(400, error, "each redirect URI must be a string of at most 2048 characters")
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in uri):
        raise OAuthError(400, error, f"the redirect URI {uri!r} has spaces, control or non-ASCII characters")
    if "\\" in uri:
        raise OAuthError(400, error, f"the redirect URI {uri!r} has a backslash, which browsers read as a slash")
    try:
        parts = urlsplit(uri)
        _ = parts.port  # a port that is not a number is refused here
    except ValueError:
        raise OAuthError(400, error, f"the redirect URI {uri!r} is not a valid URI") from None
    scheme = parts.scheme.lower()
    if not scheme or parts.fragment or "#" in uri:
        raise OAuthError(400, error, f"the redirect URI {uri!r} must be absolute and have no fragment")
    if scheme in _FORBIDDEN_SCHEMES:
        raise OAuthError(400, error, f"the redirect URI scheme {scheme!r} is not allowed")
    if "@" in parts.netloc:
        raise OAuthError(400, error, f"the redirect URI {uri!r} has user information (before an @ in its host)")
    if scheme == "https":
        if not parts.hostname:
            raise OAuthError(400, error, f"the redirect URI {uri!r} has no host")
        _check_host(uri, parts.hostname, error)
        return uri
    if scheme == "http":
        if parts.hostname not in _LOOPBACK:
            raise OAuthError(400, error, f"the redirect URI {uri!r} uses http on a host other than loopback")
        return uri
    if scheme not in KNOWN_APP_SCHEMES and not _PRIVATE_SCHEME.match(scheme):
        raise OAuthError(
            400,
            error,
            f"the redirect URI {uri!r} has a private-use scheme that is not a reverse domain name "
            "(RFC 8252 §7.1: com.example.app:/callback)",
        )
    return uri  # a native app's private-use scheme (RFC 8252 §7.1)


def _check_host(uri: str, host: str, error: str) -> None:
    """Refuse a host a browser would read as another: percent-encoded, or numeric but not dotted IPv4."""
    if "%" in host:
        raise OAuthError(400, error, f"the redirect URI {uri!r} has a percent-encoded host")
    last = host.rstrip(".").rsplit(".", 1)[-1]
    if host.startswith("[") or ":" in host:
        return  # an IPv6 literal: urlsplit has checked its brackets, browsers read it alike
    if _NUMERIC_LABEL.match(last):
        try:
            canonical = str(ipaddress.IPv4Address(host))
        except ValueError:
            canonical = ""
        if canonical != host:
            raise OAuthError(
                400, error, f"the redirect URI {uri!r} has a numeric host that is not a dotted IPv4 address"
            )


def destination(uri: str) -> str:
    """Where a browser goes with a checked redirect URI: its host (and port) for http(s), else its scheme."""
    parts = urlsplit(uri)
    if parts.scheme.lower() in ("http", "https") and parts.hostname:
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return f"{host}:{parts.port}" if parts.port is not None else host
    return f"{parts.scheme.lower()}:"


def check_redirect_uris(value: Any, error: str = "invalid_redirect_uri") -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise OAuthError(400, error, "redirect_uris must be a non-empty array (the authorization code grant needs one)")
    if len(value) > MAX_REDIRECT_URIS:
        raise OAuthError(400, error, f"at most {MAX_REDIRECT_URIS} redirect URIs may be registered")
    uris = tuple(check_redirect_uri(uri, error) for uri in value)
    if len(set(uris)) != len(uris):
        raise OAuthError(400, error, "redirect_uris lists a URI twice")
    return uris


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    redirect_uris: tuple[str, ...]
    client_name: str
    token_endpoint_auth_method: str
    grant_types: tuple[str, ...]
    scope: str

    @property
    def confidential(self) -> bool:
        return self.token_endpoint_auth_method != "none"

    def registered(self) -> dict[str, Any]:
        """The metadata as registered (RFC 7591 §3.2.1 returns all of it)."""
        return {
            "redirect_uris": list(self.redirect_uris),
            "client_name": self.client_name,
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "grant_types": list(self.grant_types),
            "response_types": ["code"],
            "scope": self.scope,
        }


def _string(document: dict[str, Any], name: str, default: str) -> str:
    value = document.get(name, default)
    if not isinstance(value, str):
        raise OAuthError(400, "invalid_client_metadata", f"{name} must be a string")
    return value


def parse_client_metadata(document: dict[str, Any], supported_scopes: tuple[str, ...]) -> ClientMetadata:
    """The metadata of a registration request, checked; an OAuthError names the first thing wrong."""
    redirect_uris = check_redirect_uris(document.get("redirect_uris"))
    grant_types = document.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not grant_types or not all(isinstance(g, str) for g in grant_types):
        raise OAuthError(400, "invalid_client_metadata", "grant_types must be a non-empty array of strings")
    unsupported = sorted(set(grant_types) - GRANT_TYPES)
    if unsupported or "authorization_code" not in grant_types:
        raise OAuthError(
            400,
            "invalid_client_metadata",
            "grant_types may only be authorization_code and refresh_token"
            + (f" (not {', '.join(unsupported)})" if unsupported else ""),
        )
    response_types = document.get("response_types", ["code"])
    if response_types != ["code"]:
        raise OAuthError(400, "invalid_client_metadata", 'response_types must be ["code"]')
    # RFC 7591 §2: the default is client_secret_basic.
    method = _string(document, "token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise OAuthError(
            400, "invalid_client_metadata", f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}"
        )
    name = _string(document, "client_name", "MCP client").strip() or "MCP client"
    if len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise OAuthError(400, "invalid_client_metadata", f"client_name must be printable, at most {MAX_NAME_CHARS}")
    scope = _string(document, "scope", " ".join(supported_scopes))
    requested = [s for s in scope.split() if s != OFFLINE_ACCESS]
    unknown = sorted(set(requested) - set(supported_scopes))
    if unknown:
        raise OAuthError(400, "invalid_client_metadata", f"unsupported scope: {' '.join(unknown)}")
    granted = " ".join(requested) or " ".join(supported_scopes)
    return ClientMetadata(
        redirect_uris=redirect_uris,
        client_name=name,
        token_endpoint_auth_method=method,
        # Every app client may refresh (Cognito issues refresh tokens to all): registered as such, so
        # clients that only refresh when refresh_token is registered do.
        grant_types=tuple(dict.fromkeys([*grant_types, "refresh_token"])),
        # offline_access is what refresh tokens are: granted to all, kept when asked for.
        scope=f"{granted} {OFFLINE_ACCESS}" if OFFLINE_ACCESS in scope.split() else granted,
    )
