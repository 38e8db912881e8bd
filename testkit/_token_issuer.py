"""A signing issuer for tests: RSA keys (cryptography), tokens (PyJWT), and its JWKS and OpenID metadata
served over real loopback HTTP, so the function's key fetching runs as it does against a provider."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey

    @classmethod
    def generate(cls, kid: str, bits: int = 2048) -> SigningKey:
        return cls(kid, rsa.generate_private_key(public_exponent=65537, key_size=bits))

    def private_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256", "n": _b64(numbers.n), "e": _b64(numbers.e)}


@dataclass
class LocalIssuer:
    url: str
    keys: list[SigningKey]
    requests: list[str] = field(default_factory=list)  # paths the issuer was asked for, in order

    @property
    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk for key in self.keys]}

    def token(
        self,
        *,
        key: SigningKey | None = None,
        algorithm: str = "RS256",
        headers: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A token of this issuer; claims default to a valid one (override, or pass None to drop)."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.url,
            "sub": "alice",
            "client_id": "client-1",
            "aud": "http://127.0.0.1/mcp",
            "scope": "mcp/invoke",
            "iat": now,
            "exp": now + 600,
        }
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        signer = key or self.keys[0]
        return jwt.encode(payload, signer.private, algorithm=algorithm, headers={"kid": signer.kid, **(headers or {})})


@contextmanager
def serve_issuer(keys: list[SigningKey] | None = None) -> Iterator[LocalIssuer]:
    """The issuer's metadata at /.well-known/openid-configuration and its keys at /jwks, on loopback."""
    holder: list[LocalIssuer] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            issuer = holder[0]
            issuer.requests.append(self.path)
            if self.path == "/.well-known/openid-configuration":
                body: Any = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"}
            elif self.path == "/jwks":
                body = issuer.jwks
            else:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(LocalIssuer(f"http://127.0.0.1:{server.server_address[1]}", keys or [SigningKey.generate("k1")]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
