"""The API accepts the OAuth bridge's access tokens beside its other issuer's: a token goes to the checks of
the issuer it names, the bridge's are verified with the public half of its KMS key (moto signs and answers
GetPublicKey as KMS does), and whatever is malformed is a 401, never a 5xx."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from testkit import LocalIssuer, SigningKey, serve_issuer

from app.composition import build_authenticator
from mcp_runtime._jws import RsaPublicKey
from mcp_runtime.bearer import Refusal
from mcp_runtime.tokens import KmsKeySet
from oauth_bridge.signing import TokenSigner
from tests.unit.conftest import make_settings

RESOURCE = "http://127.0.0.1/mcp"
BRIDGE = "https://mcp.example.com"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with serve_issuer([SigningKey.generate("k1")]) as running:
        yield running


@pytest.fixture
def kms() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("kms", region_name="us-east-1")


def bridge_key(kms: Any) -> str:
    return str(kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"])


def bridge_token(kms: Any, key: str, **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": BRIDGE, "sub": "person-1", "aud": RESOURCE, "client_id": "c1", "scope": "mcp/invoke"}
    claims.update({"iat": now, "exp": now + 900, **changes})
    return TokenSigner(key, client=kms).sign({k: v for k, v in claims.items() if v is not None})


def authenticator(issuer: LocalIssuer, kms: Any, key: str) -> Any:
    settings = make_settings(
        MCP_JWT_ISSUER=issuer.url,
        MCP_JWT_REQUIRED_SCOPES="mcp/invoke",
        MCP_JWT_AUDIENCE_OPTIONAL="true",  # as the template sets it for the user pool's tokens
        MCP_BRIDGE_ISSUER=BRIDGE,
        MCP_BRIDGE_SIGNING_KEY_ID=key,
    )
    found = build_authenticator(settings)
    assert found is not None
    found.validator.by_issuer[BRIDGE].keys = KmsKeySet(key, client=kms)  # the mocked KMS, not a real endpoint
    return found


def test_the_public_half_of_a_kms_key_is_read_from_its_der_form(kms: Any) -> None:
    key = bridge_key(kms)
    der = kms.get_public_key(KeyId=key)["PublicKey"]
    from cryptography.hazmat.primitives.serialization import load_der_public_key

    numbers = load_der_public_key(der).public_numbers()  # type: ignore[union-attr]
    parsed = RsaPublicKey.from_der(der, "RS256")
    assert (parsed.n, parsed.e, parsed.alg) == (numbers.n, numbers.e, "RS256")
    for broken in (der[:-1], b"\x30\x03\x02\x01\x01", der + b"\x00"):
        with pytest.raises(ValueError):
            RsaPublicKey.from_der(broken)


def test_a_bridge_token_and_a_user_pool_token_are_each_accepted_as_their_own_principal(
    issuer: LocalIssuer, kms: Any
) -> None:
    key = bridge_key(kms)
    checks = authenticator(issuer, kms, key)
    person = checks.authenticate(f"Bearer {bridge_token(kms, key)}", RESOURCE)
    assert person.id == f"jwt:{BRIDGE}|person-1|c1"
    machine = checks.authenticate(f"Bearer {issuer.token(aud=None, scope='mcp/invoke')}", RESOURCE)
    assert machine.id.startswith(f"jwt:{issuer.url}|")


@pytest.mark.parametrize(
    ("changes", "description"),
    [
        ({"aud": None}, "the token names no audience"),  # the bridge's always name the resource
        ({"aud": "https://other.example/mcp"}, "the token was issued for another resource"),
        ({"exp": 1_000}, "the token has expired"),
        ({"scope": "openid"}, "the token lacks the scope mcp/invoke"),
    ],
    ids=["no-aud", "other-aud", "expired", "no-scope"],
)
def test_a_bridge_token_that_is_not_for_this_resource_or_current_is_refused(
    issuer: LocalIssuer, kms: Any, changes: dict[str, Any], description: str
) -> None:
    key = bridge_key(kms)
    refusal = authenticator(issuer, kms, key).authenticate(f"Bearer {bridge_token(kms, key, **changes)}", RESOURCE)
    assert isinstance(refusal, Refusal) and refusal.description == description


def test_a_token_signed_by_another_kms_key_or_naming_another_issuer_is_refused(issuer: LocalIssuer, kms: Any) -> None:
    key, other = bridge_key(kms), bridge_key(kms)
    checks = authenticator(issuer, kms, key)
    forged = bridge_token(kms, other)
    _, payload, signature = forged.split(".")
    relabelled = json.dumps({"alg": "RS256", "typ": "at+jwt", "kid": key}).encode()
    same_kid = base64.urlsafe_b64encode(relabelled).rstrip(b"=").decode() + f".{payload}.{signature}"
    answers = {
        "other key": checks.authenticate(f"Bearer {forged}", RESOURCE),
        "other key, our kid": checks.authenticate(f"Bearer {same_kid}", RESOURCE),
        "another issuer": checks.authenticate(f"Bearer {bridge_token(kms, key, iss='https://evil.example')}", RESOURCE),
    }
    assert {name: (a.status, a.description) for name, a in answers.items()} == {
        "other key": (401, "the token is signed with an unknown key"),
        "other key, our kid": (401, "the token signature is invalid"),
        # Checked as the user pool's (the first issuer), whose keys do not hold this one.
        "another issuer": (401, "the token is signed with an unknown key"),
    }


@pytest.mark.parametrize(
    "token",
    [
        "not-a-jwt",
        "a.b.c",
        base64.urlsafe_b64encode(b'{"alg":"RS256","kid":"k"}').decode().rstrip("=") + "." + "W" * 50 + ".AAAA",
        "eyJhbGciOiJSUzI1NiJ9." + base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode().rstrip("=") + ".AA",
        "eyJhbGciOiJSUzI1NiJ9." + base64.urlsafe_b64encode(b'{"iss":["x"]}').decode().rstrip("=") + ".AA",
    ],
    ids=["no-dots", "junk", "payload-not-json", "deep-payload", "iss-not-a-string"],
)
def test_any_malformed_token_is_a_401(issuer: LocalIssuer, kms: Any, token: str) -> None:
    refusal = authenticator(issuer, kms, bridge_key(kms)).authenticate(f"Bearer {token}", RESOURCE)
    assert isinstance(refusal, Refusal) and refusal.status == 401
