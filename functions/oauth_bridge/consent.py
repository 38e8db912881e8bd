"""The consent step and the pages of the person: the bridge asks before any client gets a code.

Cognito's app clients only ever send the browser back to the bridge (`/oauth2/callback`), so a code
reaches an MCP client only through the bridge, and the bridge hands one out only for a sign-in the
person approved on this page (or an approval of theirs on record: same client, scopes it covers).

- The form carries the authorize request and a token: an HMAC over the request, a random value
  held in a `SameSite=Strict`, `HttpOnly` cookie, and an expiry (`FORM_SECONDS`). Another site can
  neither read the cookie nor send it with a cross-site POST, so it cannot approve for the person.
- An approved sign-in is bound to the browser that approved it: a random value in a `SameSite=Lax`
  cookie (it must come back with Cognito's redirect), whose digest the server-side record keeps.
- After sign-in the bridge knows the person: a signed cookie names them (`PERSON_SECONDS`), so a
  later authorize of a client they approved goes straight to Cognito, which must then sign in that
  same person. The approvals themselves are on the server (per person, client and scopes).
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

from .registration import destination

FORM_SECONDS: Final = 600
PERSON_SECONDS: Final = 7 * 86_400
CSRF_COOKIE: Final = "mcp-consent-csrf"
FLOW_COOKIE: Final = "mcp-sign-in"
PERSON_COOKIE: Final = "mcp-person"

_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1b1b1b}"
    "h1{font-size:1.4rem}dt{font-weight:600;margin-top:.8rem}dd{margin:0;overflow-wrap:anywhere}"
    ".warn{background:#fff4e5;border-left:4px solid #e67e00;padding:.6rem .8rem}"
    "form{display:inline}button{font-size:1rem;padding:.5rem 1.2rem;margin:1.2rem .6rem 0 0;cursor:pointer}"
    "button[value=approve]{background:#0b5cad;color:#fff;border:0}"
    "table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.3rem;border-bottom:1px solid #ddd}"
)
STYLE_HASH: Final = "sha256-" + base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


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
    """HMAC-SHA256 over purpose-tagged messages: the newest key signs, every key listed verifies (so a
    rotation invalidates nothing in flight)."""

    keys: tuple[bytes, ...]

    def _mac(self, key: bytes, purpose: str, message: str) -> str:
        return _b64(hmac.new(key, f"{purpose}\n{message}".encode(), hashlib.sha256).digest())

    def sign(self, purpose: str, message: str) -> str:
        return self._mac(self.keys[0], purpose, message)

    def verify(self, purpose: str, message: str, signature: str) -> bool:
        return any(hmac.compare_digest(self._mac(key, purpose, message), signature) for key in self.keys)

    # ---- the forms' token -----------------------------------------------------------------------
    def form_token(self, request_query: str, csrf: str, now: float) -> str:
        """`<expires>.<nonce>.<signature>`: the nonce makes each form its own, so each is answered once."""
        expires = int(now) + FORM_SECONDS
        nonce = secrets.token_urlsafe(12)
        signature = self.sign("consent-form", "\n".join((str(expires), nonce, csrf, request_query)))
        return f"{expires}.{nonce}.{signature}"

    def form_token_valid(self, token: str, request_query: str, csrf: str | None, now: float) -> bool:
        expires, _, rest = token.partition(".")
        nonce, _, signature = rest.partition(".")
        if not csrf or not expires.isdigit() or int(expires) < now or not nonce:
            return False
        return self.verify("consent-form", "\n".join((expires, nonce, csrf, request_query)), signature)

    # ---- the person signed in -------------------------------------------------------------------
    def person_cookie(self, subject: str, now: float) -> str:
        payload = _b64(json.dumps({"sub": subject, "exp": int(now) + PERSON_SECONDS}).encode())
        return f"{payload}.{self.sign('person', payload)}"

    def person(self, cookie: str | None, now: float) -> str | None:
        """The subject a valid, unexpired person cookie names (None for anything else)."""
        if not cookie:
            return None
        payload, _, signature = cookie.partition(".")
        if not self.verify("person", payload, signature):
            return None
        try:
            document: Any = json.loads(_unb64(payload))
        except ValueError:
            return None
        if not isinstance(document, dict) or not isinstance(document.get("exp"), int) or document["exp"] < now:
            return None
        subject = document.get("sub")
        return subject if isinstance(subject, str) and subject else None


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
    approval_days: int


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
    redirect_host = destination(ask.redirect_uri)  # the host a browser goes to (registration.py)
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
<p>Your approval is kept for {ask.approval_days} days (asked again if the client wants more);
<a href="{e(action)}">see and revoke your approvals</a>.</p>
</body></html>
"""
    return body, page_headers((cognito_url, _origin_source(ask.redirect_uri)))


@dataclass(frozen=True, slots=True)
class ListedApproval:
    client_key: str
    client_name: str
    client_id: str
    scopes: tuple[str, ...]
    expires: str  # a date, for people


def approvals_page(action: str, approvals: list[ListedApproval], token: str) -> tuple[str, dict[str, str]]:
    """The signed-in person's approvals, each with a form that revokes it (and its refresh tokens)."""
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(a.client_name)}</td><td>{e(a.client_id)}</td><td>{e(' '.join(a.scopes))}</td>"
        f'<td>{e(a.expires)}</td><td><form method="post" action="{e(action)}">'
        f'<input type="hidden" name="token" value="{e(token)}">'
        f'<input type="hidden" name="client" value="{e(a.client_key)}">'
        f'<button type="submit" name="decision" value="revoke">Revoke</button></form></td></tr>'
        for a in approvals
    )
    count = len(approvals)
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Your approvals</title><style>{_STYLE}</style></head>
<body>
<h1>Your approvals</h1>
<p id="approvals">You approved {count} client{"" if count == 1 else "s"}.</p>
<table><tr><th>Client</th><th>Client id</th><th>Scopes</th><th>Until</th><th></th></tr>{rows}</table>
<p>Revoking one also revokes its refresh tokens: the client must ask you again.</p>
</body></html>
"""
    return body, page_headers()


def sign_in_page(action: str, token: str, cognito_url: str) -> tuple[str, dict[str, str]]:
    """The approvals page before sign-in: a button that signs the person in with Cognito first."""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Your approvals</title><style>{_STYLE}</style></head>
<body>
<h1>Your approvals</h1>
<p id="sign-in-first">Sign in to see the clients you approved and revoke them.</p>
<form method="post" action="{html.escape(action)}">
<input type="hidden" name="token" value="{html.escape(token)}">
<button type="submit" name="decision" value="sign-in" id="sign-in">Sign in</button>
</form>
</body></html>
"""
    return body, page_headers((cognito_url,))
