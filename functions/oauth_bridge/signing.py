"""The bridge's access tokens: JWTs (RFC 9068) signed by an asymmetric KMS key whose private half never
leaves KMS (`kms:Sign`, RSASSA_PKCS1_V1_5_SHA_256, so RS256). The key id is the token's `kid`; the public
key (`kms:GetPublicKey`) is published as the bridge's JWKS and read by the API the same way.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any, Final

from mcp_runtime._aws import AwsCaller
from mcp_runtime._jws import RsaPublicKey

from .aws import _aws

ALGORITHM: Final = "RS256"
KMS_ALGORITHM: Final = "RSASSA_PKCS1_V1_5_SHA_256"


def key_id_of(key: str) -> str:
    """The bare key id of a KMS key id or ARN (`arn:...:key/<id>`): the tokens' `kid`."""
    return key.rsplit("/", 1)[-1]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class TokenSigner:
    def __init__(self, key: str, endpoint_url: str | None = None, client: Any | None = None) -> None:
        self.key = key
        self.kid = key_id_of(key)
        self.kms = AwsCaller("kms", client, endpoint_url=endpoint_url)  # client built on first use
        self._public: RsaPublicKey | None = None
        self._lock = threading.Lock()

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": ALGORITHM, "typ": "at+jwt", "kid": self.kid}
        signing_input = ".".join(
            _b64(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)
        ).encode("ascii")
        signed = _aws(
            lambda: self.kms.call(
                "sign", KeyId=self.key, Message=signing_input, MessageType="RAW", SigningAlgorithm=KMS_ALGORITHM
            )
        )
        return signing_input.decode("ascii") + "." + _b64(bytes(signed["Signature"]))

    def public_key(self) -> RsaPublicKey:
        """Read once per container: a KMS key's public half never changes."""
        with self._lock:
            if self._public is None:
                answer = _aws(lambda: self.kms.call("get_public_key", KeyId=self.key))
                self._public = RsaPublicKey.from_der(bytes(answer["PublicKey"]), ALGORITHM)
            return self._public

    def jwks(self) -> dict[str, Any]:
        key = self.public_key()
        n = key.n.to_bytes((key.n.bit_length() + 7) // 8, "big")
        e = key.e.to_bytes((key.e.bit_length() + 7) // 8, "big")
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": ALGORITHM, "kid": self.kid, "n": _b64(n), "e": _b64(e)}]}
