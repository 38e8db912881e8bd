"""Compact JWS signatures with RSA keys: RS256, RS384, RS512 (RFC 7515, RFC 7518 §3.3), verification only.

Our own rather than PyJWT with `rsa`: importing those two costs about a sixth of `import boto3` on
every cold start of the API function (bench/README.md, "Token validation in the function"), and a
resource server needs only this: split the token, decode it strictly, and check the signature by
EMSA-PKCS1-v1_5 encode-and-compare (RFC 8017 §8.2.2). The expected encoded message is built whole
and compared in constant time, so a signature whose padding or DigestInfo is merely *parsed* as
right (the e=3 forgeries of lenient verifiers) never passes. Claims are the caller's (`tokens.py`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable
from typing import Any, Final

from ._value import ValueObject

# The DER prefix of DigestInfo for each hash (RFC 8017 §9.2, note 1).
_ALGORITHMS: Final[dict[str, tuple[Callable[[bytes], Any], bytes]]] = {
    "RS256": (hashlib.sha256, bytes.fromhex("3031300d060960864801650304020105000420")),
    "RS384": (hashlib.sha384, bytes.fromhex("3041300d060960864801650304020205000430")),
    "RS512": (hashlib.sha512, bytes.fromhex("3051300d060960864801650304020305000440")),
}
SUPPORTED_ALGORITHMS: Final = frozenset(_ALGORITHMS)
MIN_RSA_KEY_BITS: Final = 2048  # shorter keys are refused outright (RFC 8725 §3.5)
_BASE64URL: Final = re.compile(r"[A-Za-z0-9_-]*")
# No header or claims of a real token nest this deep. Deeper is refused before decoding: how deep json.loads
# goes before its RecursionError depends on the interpreter (about 1,000 on 3.11, over 10,000 on 3.13).
MAX_JSON_NESTING: Final = 64
_JSON_STRING: Final = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[]{}"))


def nests_too_deeply(document: bytes, limit: int = MAX_JSON_NESTING) -> bool:
    """Whether a JSON text's arrays and objects nest deeper than `limit` (brackets in strings not counted)."""
    depth = 0
    for bracket in _JSON_STRING.sub(b'""', document).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > limit:
            return True
    return False


class MalformedJws(ValueError):
    """The token is not a compact JWS with a JSON header (the message says why, for the log)."""


class RsaPublicKey(ValueObject):
    """An RSA public key: modulus, exponent, and the JWK's `alg` when the issuer names one (then only
    that algorithm)."""

    __slots__ = ("alg", "e", "n")
    n: int
    e: int
    alg: str | None

    def __init__(self, n: int, e: int, alg: str | None = None) -> None:
        self.n = n
        self.e = e
        self.alg = alg

    @classmethod
    def from_jwk(cls, jwk: dict[str, Any]) -> RsaPublicKey:
        """An RSA signing key from its JWK members; ValueError for one unfit to verify with."""
        n, e, alg = _jwk_int(jwk.get("n")), _jwk_int(jwk.get("e")), jwk.get("alg")
        if n.bit_length() < MIN_RSA_KEY_BITS:
            raise ValueError(f"an RSA key of {n.bit_length()} bits (at least {MIN_RSA_KEY_BITS})")
        if e < 3 or e % 2 == 0 or e >= n:
            raise ValueError("an RSA public exponent that is not odd and at least 3")
        if alg is not None and alg not in SUPPORTED_ALGORITHMS:
            raise ValueError(f"a key for the algorithm {alg!r}")
        return cls(n, e, alg)

    @classmethod
    def from_der(cls, spki: bytes, alg: str | None = None) -> RsaPublicKey:
        """An RSA key from its DER SubjectPublicKeyInfo (what KMS GetPublicKey answers); ValueError if not one."""
        outer, rest = _der(spki, 0x30)
        if rest:
            raise ValueError("trailing bytes after the SubjectPublicKeyInfo")
        algorithm, outer = _der(outer, 0x30)
        if not algorithm.startswith(b"\x06\x09" + _RSA_ENCRYPTION_OID):
            raise ValueError("not an RSA public key")
        bits, _ = _der(outer, 0x03)
        if not bits or bits[0] != 0:
            raise ValueError("a BIT STRING with unused bits")
        sequence, _ = _der(bits[1:], 0x30)
        n, sequence = _der(sequence, 0x02)
        e, _ = _der(sequence, 0x02)
        return cls.from_jwk({"n": _b64(n.lstrip(b"\x00")), "e": _b64(e.lstrip(b"\x00")), "alg": alg})


_RSA_ENCRYPTION_OID: Final = bytes.fromhex("2a864886f70d010101")


def _der(data: bytes, tag: int) -> tuple[bytes, bytes]:
    """One DER element of type `tag` at the start of `data`: (its contents, what follows it)."""
    if len(data) < 2 or data[0] != tag:
        raise ValueError("malformed DER")
    length, offset = data[1], 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or len(data) < 2 + count:
            raise ValueError("malformed DER length")
        length, offset = int.from_bytes(data[2 : 2 + count], "big"), 2 + count
    if len(data) < offset + length:
        raise ValueError("truncated DER")
    return data[offset : offset + length], data[offset + length :]


def _b64(value: bytes) -> str:
    return base64.urlsafe_b64encode(value).rstrip(b"=").decode("ascii")


class CompactJws(ValueObject):
    """A compact JWS split and decoded: its JSON header, payload, signing input and signature."""

    __slots__ = ("header", "payload", "signature", "signing_input")
    header: dict[str, Any]
    payload: bytes
    signing_input: bytes
    signature: bytes

    def __init__(self, header: dict[str, Any], payload: bytes, signing_input: bytes, signature: bytes) -> None:
        self.header = header
        self.payload = payload
        self.signing_input = signing_input
        self.signature = signature


def parse(token: str) -> CompactJws:
    """Split and decode a compact JWS; nothing is verified yet."""
    segments = token.split(".")
    if len(segments) != 3:
        raise MalformedJws(f"{len(segments)} segments, not 3")
    header_segment, payload_segment, signature_segment = segments
    header_json = _base64url(header_segment)
    if nests_too_deeply(header_json):
        raise MalformedJws("the header nests too deeply")
    try:
        header = json.loads(header_json)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors too
        raise MalformedJws(f"the header is not JSON: {exc}") from None
    except RecursionError:  # nested deeper than the decoder goes: no header of a real token is
        raise MalformedJws("the header nests too deeply") from None
    if not isinstance(header, dict):
        raise MalformedJws("the header is not a JSON object")
    if "crit" in header:  # no extension is understood here, so none may be critical (RFC 7515 §4.1.11)
        raise MalformedJws(f"critical header extensions {header['crit']!r}")
    return CompactJws(
        header=header,
        payload=_base64url(payload_segment),
        signing_input=f"{header_segment}.{payload_segment}".encode("ascii"),
        signature=_base64url(signature_segment),
    )


def verify(jws: CompactJws, algorithm: str, key: RsaPublicKey) -> bool:
    """Whether `jws.signature` is the RSASSA-PKCS1-v1_5 signature of its signing input under `key`."""
    hash_function, digest_info_prefix = _ALGORITHMS[algorithm]
    if key.alg is not None and key.alg != algorithm:
        return False
    size = (key.n.bit_length() + 7) // 8
    if len(jws.signature) != size:
        return False
    signature = int.from_bytes(jws.signature, "big")
    if signature >= key.n:
        return False
    encoded = pow(signature, key.e, key.n).to_bytes(size, "big")
    digest_info = digest_info_prefix + hash_function(jws.signing_input).digest()
    expected = b"\x00\x01" + b"\xff" * (size - len(digest_info) - 3) + b"\x00" + digest_info
    return hmac.compare_digest(encoded, expected)


def _base64url(segment: str) -> bytes:
    """Unpadded base64url (RFC 7515 §2), strictly: any other character is refused, not skipped."""
    if not _BASE64URL.fullmatch(segment) or len(segment) % 4 == 1:
        raise MalformedJws("a segment is not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except binascii.Error as exc:
        raise MalformedJws(f"a segment is not base64url: {exc}") from None


def _jwk_int(value: Any) -> int:
    if not isinstance(value, str) or not value:
        raise ValueError("a JWK number that is not a base64url string")
    try:
        return int.from_bytes(_base64url(value), "big")
    except MalformedJws as exc:
        raise ValueError(str(exc)) from None
