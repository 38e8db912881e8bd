"""The consent step: the bridge asks the person before it sends their browser to Cognito for a client.

Cognito keeps a sign-in session per user-pool domain, so once someone signed in, any client's
authorize link would otherwise come back with a code at once (a confused deputy: an attacker
registers a client with its own redirect URI and sends the link). The bridge therefore shows a
page first, naming the client, where the browser goes back to, how it was registered and what it
may do, and goes on to Cognito only after the person approves.

- The form carries the authorize request and a token: an HMAC over the request, a random value
  held in a `SameSite=Strict`, `HttpOnly` cookie, and an expiry (`FORM_SECONDS`). Another site can
  neither read the cookie nor send it with a cross-site POST, so it cannot approve for the person.
- An approval is remembered for this browser only after an explicit approve: a signed cookie
  (`SameSite=Lax`, so it reaches the authorize link) lists digests of (client id, redirect URI);
  at most `MAX_REMEMBERED`, for `REMEMBER_DAYS`. "Forget" on `/oauth2/consent` clears it.
- Every page is `no-store` with a CSP allowing nothing but its own hashed style and form targets,
  and may not be framed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import secrets
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

FORM_SECONDS: Final = 600
REMEMBER_DAYS: Final = 30
MAX_REMEMBERED: Final = 20
CSRF_COOKIE: Final = "mcp-consent-csrf"
APPROVALS_COOKIE: Final = "mcp-consent"

_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}"
    "h1{font-size:1.4rem}dt{font-weight:600;margin-top:.8rem}dd{margin:0;overflow-wrap:anywhere}"
    ".warn{background:#fff4e5;border-left:4px solid #e67e00;padding:.6rem .8rem}"
    "form{display:inline}button{font-size:1rem;padding:.5rem 1.2rem;margin:1.2rem .6rem 0 0;cursor:pointer}"
    "button[value=approve]{background:#0b5cad;color:#fff;border:0}"
)
STYLE_HASH: Final = "sha256-" + base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def approval_digest(client_id: str, redirect_uri: str) -> str:
    return _b64(hashlib.sha256(f"{client_id}\n{redirect_uri}".encode()).digest()[:16])


def cookie_name(base: str, name: str) -> str:
    """`__Host-` names on https (Secure, host-only, Path=/); the plain name on a loopback http stack."""
    return f"__Host-{name}" if base.startswith("https://") else name


def set_cookie(base: str, name: str, value: str, max_age: int, same_site: str) -> str:
    secure = "; Secure" if base.startswith("https://") else ""
    return f"{cookie_name(base, name)}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}"


def read_cookies(header: str | None) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in (header or "").split(";"):
        name, separator, value = part.strip().partition("=")
        if separator and name not in found:
            found[name] = value
    return found


@dataclass(frozen=True, slots=True)
class Signer:
    """HMAC-SHA256 with the bridge's key, over purpose-tagged messages."""

    key: bytes

    def sign(self, purpose: str, message: str) -> str:
        return _b64(hmac.new(self.key, f"{purpose}\n{message}".encode(), hashlib.sha256).digest())

    def verify(self, purpose: str, message: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign(purpose, message), signature)

    # ---- the consent form's token -------------------------------------------------------------
    def form_token(self, request_query: str, csrf: str, now: float) -> str:
        expires = int(now) + FORM_SECONDS
        signature = self.sign("consent-form", "\n".join((str(expires), csrf, request_query)))
        return f"{expires}.{signature}"

    def form_token_valid(self, token: str, request_query: str, csrf: str | None, now: float) -> bool:
        expires, _, signature = token.partition(".")
        if not csrf or not expires.isdigit() or int(expires) < now:
            return False
        return self.verify("consent-form", "\n".join((expires, csrf, request_query)), signature)

    # ---- the remembered approvals -------------------------------------------------------------
    def approvals(self, cookie: str | None, now: float) -> list[str]:
        """The digests a valid, unexpired approvals cookie lists (none for anything else)."""
        if not cookie:
            return []
        payload, _, signature = cookie.partition(".")
        if not self.verify("consent-approvals", payload, signature):
            return []
        try:
            document: Any = json.loads(_unb64(payload))
        except ValueError:
            return []
        if not isinstance(document, dict) or not isinstance(document.get("exp"), int) or document["exp"] < now:
            return []
        listed = document.get("a")
        return [d for d in listed if isinstance(d, str)] if isinstance(listed, list) else []

    def approvals_cookie(self, digests: list[str], now: float) -> str:
        kept = list(dict.fromkeys(digests))[-MAX_REMEMBERED:]
        payload = _b64(json.dumps({"a": kept, "exp": int(now) + REMEMBER_DAYS * 86_400}).encode())
        return f"{payload}.{self.sign('consent-approvals', payload)}"


def new_csrf_value() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True, slots=True)
class ConsentRequest:
    """What the page says about the client asking."""

    client_name: str
    client_id: str
    metadata_url: str | None
    redirect_uri: str
    resource: str
    scopes: tuple[str, ...]
    access_token_minutes: int
    refresh_token_days: int


def _origin_source(uri: str) -> str:
    """The CSP source that lets a form's redirect reach `uri` (an origin, or a private-use scheme)."""
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https"):
        return f"{parts.scheme}://{parts.netloc}"
    return f"{parts.scheme}:"


def page_headers(form_targets: tuple[str, ...] = ()) -> dict[str, str]:
    sources = " ".join(dict.fromkeys(["'self'", *form_targets]))
    return {
        "content-type": "text/html; charset=utf-8",
        "cache-control": "no-store",
        "pragma": "no-cache",
        "content-security-policy": (
            f"default-src 'none'; style-src '{STYLE_HASH}'; form-action {sources}; "
            "frame-ancestors 'none'; base-uri 'none'"
        ),
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "same-origin",  # no-referrer would make the form's Origin "null"
    }


def consent_page(
    ask: ConsentRequest, action: str, request_query: str, token: str, cognito_url: str
) -> tuple[str, dict[str, str]]:
    e = html.escape
    redirect_host = urlsplit(ask.redirect_uri).netloc or urlsplit(ask.redirect_uri).scheme + ":"
    if ask.metadata_url is not None:
        registered = f"by its Client ID Metadata Document at {e(ask.metadata_url)}"
        warning = ""
    else:
        registered = "registered by dynamic client registration"
        warning = (
            '<p class="warn">This client registered itself: nobody checked its name. '
            "Approve only if you started this sign-in yourself and you know where it sends you back.</p>"
        )
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Allow access?</title><style>{_STYLE}</style></head>
<body>
<h1>Allow <span id="client-name">{e(ask.client_name)}</span> to use {e(ask.resource)} as you?</h1>
{warning}
<dl>
<dt>Client</dt><dd id="client-id">{e(ask.client_id)} ({registered})</dd>
<dt>After you approve, your browser goes back to</dt><dd id="redirect-host">{e(redirect_host)}</dd>
<dd id="redirect-uri">{e(ask.redirect_uri)}</dd>
<dt>It will be able to</dt>
<dd id="abilities">call every tool of this server as you, and read, answer and cancel your tasks
(scopes {e(" ".join(ask.scopes))}), with access tokens of {ask.access_token_minutes} minutes renewed
for up to {ask.refresh_token_days} days</dd>
</dl>
<form method="post" action="{e(action)}">
<input type="hidden" name="request" value="{e(request_query)}">
<input type="hidden" name="token" value="{e(token)}">
<button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
<p>Your approval is remembered in this browser; <a href="{e(action)}">forget approvals</a>.</p>
</body></html>
"""
    return body, page_headers((cognito_url, _origin_source(ask.redirect_uri)))


def remembered_page(action: str, count: int, token: str) -> tuple[str, dict[str, str]]:
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Remembered approvals</title><style>{_STYLE}</style></head>
<body>
<h1>Remembered approvals</h1>
<p id="remembered">This browser remembers {count} approved client{"" if count == 1 else "s"}.</p>
<form method="post" action="{html.escape(action)}">
<input type="hidden" name="token" value="{html.escape(token)}">
<button type="submit" name="decision" value="forget" id="forget">Forget them</button>
</form>
</body></html>
"""
    return body, page_headers()
