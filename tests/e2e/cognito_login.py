"""A stand-in for Cognito's managed login and OAuth endpoints, which moto does not have, for the local stack
(`LOCAL_COGNITO_LOGIN`, `LOCAL_COGNITO_CA`): served over TLS on loopback, it behaves as Cognito does
where the bridge's security depends on it.

- The person is a user of the stack's pool (`attach`), signed in already.
- `/oauth2/authorize`: the app client must exist in the stack's user pool (moto) and `redirect_uri` must be
  exactly one of its `CallbackURLs`, as Cognito checks; otherwise an error page and no redirect. The
  person has a live session (`person`): the answer is a code at once, with the `state`.
- `/oauth2/token`: the app client authenticates with its secret (HTTP Basic); a code is redeemed once,
  with the redirect URI and PKCE verifier it was issued for; tokens are signed with the pool's key (moto's),
  shaped like Cognito's (`client_id`, `token_use`, `scope`), so the MCP endpoint accepts them. A refresh
  token works until it is revoked.
- `/oauth2/revoke` (RFC 7009): revokes a refresh token of that app client.

Every request is recorded (path, query or form).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import secrets
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

import jwt

from tests.tls_server import make_certificate

MOTO_SIGNING_KEY = Path(__import__("moto").__file__).parent / "cognitoidp" / "resources" / "jwks-private.json.gz"
HOST = "localhost"


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


@dataclass
class CognitoLogin:
    certificate: Path
    key: Path
    person: str = "0f1e2d3c-alice"
    port: int = 0
    cognito: Any = None  # the stack's cognito-idp client, set once the stack runs
    pool: str = ""
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    refresh_tokens: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # token -> (app, person, scope)
    revoked: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def environment(self) -> dict[str, str]:
        """What the local stack needs to use this stand-in."""
        return {"LOCAL_COGNITO_LOGIN": self.url, "LOCAL_COGNITO_CA": str(self.certificate)}

    def attach(self, cognito: Any, pool: str) -> None:
        """The stack's user pool; the person becomes one of its users (their username, as Cognito's pools
        with email sign-in make it, is their `sub`), so the bridge finds them enabled at each refresh."""
        self.cognito, self.pool = cognito, pool
        created = cognito.admin_create_user(UserPoolId=pool, Username="alice@example.com", MessageAction="SUPPRESS")
        self.person = str(created["User"]["Username"])

    def app_client(self, client_id: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.cognito.describe_user_pool_client(UserPoolId=self.pool, ClientId=client_id)[
                "UserPoolClient"
            ]
        except self.cognito.exceptions.ResourceNotFoundException:
            return None
        return found

    def authorize_requests(self) -> list[dict[str, list[str]]]:
        return [query for path, query in self.requests if path == "/oauth2/authorize"]

    # ---- endpoints ------------------------------------------------------------------------------
    def authorize(self, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
        one = {k: v[0] for k, v in query.items()}
        app = self.app_client(one.get("client_id", ""))
        if app is None:
            return _error_page("invalid_client")
        if one.get("redirect_uri") not in app.get("CallbackURLs", []):
            return _error_page("redirect_mismatch")
        if one.get("response_type") != "code" or one.get("code_challenge_method") != "S256":
            return _error_page("invalid_request")
        code = secrets.token_urlsafe(24)
        with self.lock:
            self.codes[code] = {
                "app": app["ClientId"],
                "redirect_uri": one["redirect_uri"],
                "challenge": one.get("code_challenge", ""),
                "scope": one.get("scope", ""),
                "person": self.person,
            }
        back = {"code": code, **({"state": one["state"]} if "state" in one else {})}
        return 302, {"location": f"{one['redirect_uri']}?{urlencode(back)}"}, b""

    def token(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, str], bytes]:
        app_id, secret = _basic(authorization)
        app = self.app_client(app_id) if app_id == form.get("client_id", app_id) else None
        if app is None or not secret or secret != app.get("ClientSecret"):
            return _json(400, {"error": "invalid_client"})
        if form.get("grant_type") == "authorization_code":
            with self.lock:
                issued = self.codes.pop(form.get("code", ""), None)
            if (
                issued is None
                or issued["app"] != app_id
                or issued["redirect_uri"] != form.get("redirect_uri")
                or s256(form.get("code_verifier", "")) != issued["challenge"]
            ):
                return _json(400, {"error": "invalid_grant"})
            refresh = secrets.token_urlsafe(48)
            with self.lock:
                self.refresh_tokens[refresh] = (app_id, issued["person"], issued["scope"])
            return _json(200, {**self.tokens(app_id, issued["person"], issued["scope"]), "refresh_token": refresh})
        if form.get("grant_type") == "refresh_token":
            found = self.refresh_tokens.get(form.get("refresh_token", ""))
            if found is None or found[0] != app_id:
                return _json(400, {"error": "invalid_grant"})
            return _json(200, self.tokens(*found))
        return _json(400, {"error": "unsupported_grant_type"})

    def revoke(self, form: dict[str, str], authorization: str) -> tuple[int, dict[str, str], bytes]:
        app_id, secret = _basic(authorization)
        app = self.app_client(app_id)
        if app is None or secret != app.get("ClientSecret"):
            return _json(400, {"error": "invalid_client"})
        token = form.get("token", "")
        with self.lock:
            found = self.refresh_tokens.get(token)
            if found is not None and found[0] == app_id:
                del self.refresh_tokens[token]
                self.revoked.append(token)
        return 200, {}, b""

    def tokens(self, app_id: str, person: str, scope: str) -> dict[str, Any]:
        now = int(time.time())
        issuer = f"https://cognito-idp.us-east-1.amazonaws.com/{self.pool}"
        key = jwt.PyJWK(json.loads(gzip.decompress(MOTO_SIGNING_KEY.read_bytes())))
        access = {
            "iss": issuer,
            "sub": person,
            "client_id": app_id,
            "token_use": "access",
            "scope": " ".join(s for s in scope.split() if s != "openid"),
            "username": person,
            "iat": now,
            "exp": now + 3600,
        }
        identity = {"iss": issuer, "sub": person, "aud": app_id, "token_use": "id", "iat": now, "exp": now + 3600}
        sign = lambda claims: jwt.encode(claims, key.key, "RS256", headers={"kid": "dummy"})  # noqa: E731
        return {"access_token": sign(access), "id_token": sign(identity), "token_type": "Bearer", "expires_in": 3600}

    # ---- the server -----------------------------------------------------------------------------
    def handler(self) -> type[BaseHTTPRequestHandler]:
        login = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                login.requests.append((parts.path, query))
                if parts.path == "/oauth2/authorize":
                    self.answer(*login.authorize(query))
                else:
                    self.answer(404, {}, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                path = urlsplit(self.path).path
                login.requests.append((path, {k: [v] for k, v in form.items()}))
                authorization = self.headers.get("authorization") or ""
                if path == "/oauth2/token":
                    self.answer(*login.token(form, authorization))
                elif path == "/oauth2/revoke":
                    self.answer(*login.revoke(form, authorization))
                else:
                    self.answer(404, {}, b"")

        return Handler


@contextmanager
def cognito_login(folder: Path) -> Iterator[CognitoLogin]:
    certificate, key = make_certificate(folder, HOST)
    login = CognitoLogin(certificate, key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), login.handler())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    login.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield login
    finally:
        server.shutdown()
        server.server_close()


def _basic(header: str) -> tuple[str, str]:
    if not header.lower().startswith("basic "):
        return "", ""
    try:
        decoded = base64.b64decode(header[6:]).decode()
    except ValueError:
        return "", ""
    app, _, secret = decoded.partition(":")
    return unquote(app), unquote(secret)


def _json(status: int, document: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps(document).encode()


def _error_page(error: str) -> tuple[int, dict[str, str], bytes]:
    """Cognito shows an error page of its own and redirects nowhere."""
    body = f"<title>Error</title><p id='error'>An error was encountered with the requested page: {error}</p>"
    return 400, {"content-type": "text/html"}, body.encode()
