"""The project's RS256/RS384/RS512 verifier (`mcp_runtime._jws`) against PyJWT with `cryptography`."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_runtime import _jws
from mcp_runtime._jws import MalformedJws, RsaPublicKey

CRITICAL_HEADER = base64.urlsafe_b64encode(b'{"alg":"RS256","crit":["b64"],"b64":false}').rstrip(b"=").decode()
SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_of(private: rsa.RSAPrivateKey, alg: str | None = None) -> RsaPublicKey:
    numbers = private.public_key().public_numbers()
    return RsaPublicKey(numbers.n, numbers.e, alg)


@pytest.mark.parametrize("algorithm", ["RS256", "RS384", "RS512"])
@pytest.mark.parametrize("bits", [2048, 3072, 4096])
def test_tokens_signed_by_pyjwt_verify_and_any_flipped_bit_does_not(algorithm: str, bits: int) -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    token = jwt.encode({"sub": "alice", "n": secrets.token_hex(8)}, private, algorithm=algorithm)
    jws = _jws.parse(token)
    key = public_of(private)
    assert _jws.verify(jws, algorithm, key)
    assert json.loads(jws.payload)["sub"] == "alice"
    for position in (0, len(jws.signature) // 2, len(jws.signature) - 1):
        flipped = bytearray(jws.signature)
        flipped[position] ^= 0x01
        tampered = _jws.CompactJws(jws.header, jws.payload, jws.signing_input, bytes(flipped))
        assert not _jws.verify(tampered, algorithm, key)


def test_a_signature_over_other_claims_does_not_verify(private_key: rsa.RSAPrivateKey) -> None:
    one = _jws.parse(jwt.encode({"sub": "alice"}, private_key, algorithm="RS256"))
    other = _jws.parse(jwt.encode({"sub": "mallory"}, private_key, algorithm="RS256"))
    forged = _jws.CompactJws(other.header, other.payload, other.signing_input, one.signature)
    assert not _jws.verify(forged, "RS256", public_of(private_key))


def test_a_signature_under_one_hash_does_not_verify_as_another(private_key: rsa.RSAPrivateKey) -> None:
    jws = _jws.parse(jwt.encode({"sub": "alice"}, private_key, algorithm="RS384"))
    assert not _jws.verify(jws, "RS256", public_of(private_key))
    assert not _jws.verify(jws, "RS512", public_of(private_key))


def test_a_key_published_for_one_algorithm_verifies_no_other(private_key: rsa.RSAPrivateKey) -> None:
    jws = _jws.parse(jwt.encode({"sub": "alice"}, private_key, algorithm="RS512"))
    assert _jws.verify(jws, "RS512", public_of(private_key, "RS512"))
    assert not _jws.verify(jws, "RS512", public_of(private_key, "RS256"))


def test_a_signature_one_byte_short_or_long_or_not_below_the_modulus_is_refused(private_key: rsa.RSAPrivateKey) -> None:
    jws = _jws.parse(jwt.encode({"sub": "alice"}, private_key, algorithm="RS256"))
    key = public_of(private_key)
    for signature in (jws.signature[1:], b"\x00" + jws.signature, key.n.to_bytes(256, "big")):
        assert not _jws.verify(_jws.CompactJws(jws.header, jws.payload, jws.signing_input, signature), "RS256", key)


def integer_cube_root(value: int) -> int:
    low, high = 0, 1 << (value.bit_length() // 3 + 1)
    while low < high:
        middle = (low + high) // 2
        if middle**3 < value:
            low = middle + 1
        else:
            high = middle
    return low


def test_an_e3_forgery_that_a_parsing_verifier_accepts_is_refused() -> None:
    """Bleichenbacher 2006: with e=3, a cube root makes a block whose *leading* bytes are the right
    padding, DigestInfo and hash, followed by garbage. Encode-and-compare must refuse it."""
    header = b64(b'{"alg":"RS256","kid":"k"}')
    payload = b64(b'{"sub":"mallory"}')
    signing_input = f"{header}.{payload}".encode()
    block = b"\x00\x01" + b"\xff" * 8 + b"\x00" + SHA256_DIGEST_INFO + hashlib.sha256(signing_input).digest()
    size = 256
    target = int.from_bytes(block + b"\x00" * (size - len(block)), "big")
    signature = integer_cube_root(target)
    modulus = (1 << 2047) | secrets.randbits(2047) | 1  # any modulus above the cube: no reduction happens
    encoded = pow(signature, 3, modulus).to_bytes(size, "big")
    assert encoded.startswith(block)  # what a verifier that parses the padding would accept
    key = RsaPublicKey(modulus, 3)
    forged = _jws.parse(f"{header}.{payload}.{b64(signature.to_bytes(size, 'big'))}")
    assert not _jws.verify(forged, "RS256", key)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("a.b", "2 segments, not 3"),
        ("a.b.c.d.e", "5 segments, not 3"),
        (f"{b64(b'{}')}=.{b64(b'{}')}.", "a segment is not unpadded base64url"),
        (f"{b64(b'{}')}.e30+.", "a segment is not unpadded base64url"),
        (f"{b64(b'{}')}.e3 0.", "a segment is not unpadded base64url"),
        (f"{b64(b'{}')}.abcde.", "a segment is not unpadded base64url"),
        (f"{b64(b'[1]')}.e30.", "the header is not a JSON object"),
        (f"{CRITICAL_HEADER}.e30.", "critical header extensions ['b64']"),
    ],
)
def test_what_is_not_a_strict_compact_jws_is_refused_saying_why(token: str, reason: str) -> None:
    with pytest.raises(MalformedJws) as refused:
        _jws.parse(token)
    assert str(refused.value) == reason


def test_a_header_that_is_not_json_is_refused() -> None:
    with pytest.raises(MalformedJws, match=r"^the header is not JSON: "):
        _jws.parse(f"{b64(b'{nope')}.e30.")


@pytest.mark.parametrize(
    ("jwk", "reason"),
    [
        ({"n": b64((1 << 2046).to_bytes(256, "big")), "e": "AQAB"}, "an RSA key of 2047 bits (at least 2048)"),
        ({"n": b64(((1 << 2047) | 1).to_bytes(256, "big")), "e": "AQ"}, "not odd and at least 3"),
        ({"n": b64(((1 << 2047) | 1).to_bytes(256, "big")), "e": "AQAA"}, "not odd and at least 3"),
        ({"n": b64(((1 << 2047) | 1).to_bytes(256, "big")), "e": "AQAB", "alg": "PS256"}, "the algorithm 'PS256'"),
        ({"n": "a+b", "e": "AQAB"}, "not unpadded base64url"),
        ({"e": "AQAB"}, "not a base64url string"),
    ],
)
def test_jwks_keys_unfit_for_verifying_are_refused(jwk: dict[str, str], reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):
        RsaPublicKey.from_jwk(jwk)


def test_nesting_past_the_limit_is_refused_whatever_the_interpreters_json_decoder_takes() -> None:
    """3.11's json.loads gives up near 1,000 levels, 3.13's past 10,000: the limit is ours, the same on both."""
    from mcp_runtime._jws import MAX_JSON_NESTING, nests_too_deeply

    assert not nests_too_deeply(b"[" * MAX_JSON_NESTING + b"]" * MAX_JSON_NESTING)
    assert nests_too_deeply(b"[" * (MAX_JSON_NESTING + 1) + b"]" * (MAX_JSON_NESTING + 1))
    assert not nests_too_deeply(b'{"kid": "' + b"[" * 500 + b'\\"{"}')  # brackets in strings are text
