"""The function as an OAuth resource server: bearer tokens validated against a real (loopback) issuer's
JWKS, and every refusal answered with the challenge RFC 6750 and the MCP authorization spec name."""

from __future__ import annotations

import base64
import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from testkit import LocalIssuer, SigningKey, rpc, serve_issuer, standard_headers

from app.composition import build_authenticator
from mcp_runtime.tokens import (
    LEEWAY_SECONDS,
    VERIFIED_TOKEN_MAX_AGE_SECONDS,
    KeySet,
    TokenRejected,
    TokenValidator,
)
from mcp_runtime.transport import HttpRequest, HttpResponse, McpHttpTransport
from tests.unit.conftest import make_server, make_settings

RESOURCE = "http://127.0.0.1/mcp"
METADATA = "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
SCOPE = "mcp/invoke"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with serve_issuer([SigningKey.generate("k1"), SigningKey.generate("k2")]) as running:
        yield running


def transport_for(issuer: LocalIssuer, **settings: str) -> McpHttpTransport:
    values = {"MCP_JWT_ISSUER": issuer.url, "MCP_JWT_REQUIRED_SCOPES": SCOPE, **settings}
    configured = make_settings(**values)
    return McpHttpTransport(make_server(settings=configured), authenticator=build_authenticator(configured))


def call(transport: McpHttpTransport, authorization: str | None, method: str = "tools/list") -> HttpResponse:
    message = rpc(method)
    headers = {**standard_headers(message), "host": "127.0.0.1"}
    if authorization is not None:
        headers["authorization"] = authorization
    return transport.handle(HttpRequest("POST", "/mcp", headers, json.dumps(message).encode(), None))


def challenge(response: HttpResponse) -> str:
    return response.headers["www-authenticate"]


def tampered(token: str, **changes: Any) -> str:
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


def test_a_valid_token_is_served_as_its_subject_and_client(issuer: LocalIssuer) -> None:
    transport = transport_for(issuer)
    response = call(transport, f"Bearer {issuer.token()}", "server/discover")
    assert response.status == 200, response.body
    assert "result" in response.json()


def test_the_issuer_subject_and_client_of_the_token_are_the_principal(issuer: LocalIssuer) -> None:
    authenticator = build_authenticator(make_settings(MCP_JWT_ISSUER=issuer.url))
    assert authenticator is not None
    principal = authenticator.authenticate(f"Bearer {issuer.token(sub='auth0|7', client_id='vs|code')}", RESOURCE)
    assert principal.id == f"jwt:{issuer.url}|auth0%7C7|vs%7Ccode"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("audience", "accepted"),
    [
        ("HTTP://127.0.0.1/mcp", True),
        ("http://127.0.0.1:80/mcp", True),
        ("http://127.0.0.1/mcp/", True),
        ("http://127.0.0.1/mcp#fragment", True),
        (["https://other.example/mcp", "http://127.0.0.1/mcp/"], True),
        ("https://127.0.0.1/mcp", False),
        ("http://127.0.0.1:8080/mcp", False),
        ("http://127.0.0.1/MCP", False),
        ("http://127.0.0.1/mcp/child", False),
        ("http://127.0.0.1/", False),
    ],
)
def test_the_audience_is_compared_as_a_canonical_resource_uri_as_the_mcp_sdk_does(
    issuer: LocalIssuer, audience: str | list[str], accepted: bool
) -> None:
    response = call(transport_for(issuer), f"Bearer {issuer.token(aud=audience)}")
    assert response.status == (200 if accepted else 401), response.headers


def test_no_token_gets_401_naming_the_metadata_and_the_scope(issuer: LocalIssuer) -> None:
    response = call(transport_for(issuer), None)
    assert response.status == 401
    assert challenge(response) == f'Bearer scope="{SCOPE}", resource_metadata="{METADATA}"'
    assert response.json() == {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Authentication required"}}


@pytest.mark.parametrize(
    ("make_token", "description"),
    [
        (lambda i: i.token(exp=int(time.time()) - 120), "the token has expired"),
        (lambda i: tampered(i.token(), sub="mallory"), "the token signature is invalid"),
        (lambda i: i.token(aud="https://other.example.com/mcp"), "the token was issued for another resource"),
        (lambda i: i.token(aud=None), "the token names no audience"),
        (lambda i: i.token(iss="https://evil.example.com"), "the token was issued by another authorization server"),
        (lambda i: i.token(nbf=int(time.time()) + 600), "the token is not valid yet"),
        (lambda i: i.token(exp=None), "the token has no 'exp' claim"),
        (lambda i: i.token(token_use="id"), "the token is not an access token"),
        (lambda i: i.token(key=SigningKey.generate("k1")), "the token signature is invalid"),
        (lambda i: i.token(headers={"kid": "never-published"}), "the token is signed with an unknown key"),
        (lambda i: "not.a.jwt", "the token is malformed"),
        (lambda i: jwt_none(i), "the token is signed with an unsupported algorithm"),
        (lambda i: jwt_hs256(i), "the token is signed with an unsupported algorithm"),
        (lambda i: unsigned({"alg": ["RS256"], "kid": "k1"}), "the token is signed with an unsupported algorithm"),
        (lambda i: i.token(headers={"crit": ["exp"]}), "the token is malformed"),
        (lambda i: signed_payload(i, b"[1, 2]"), "the token is malformed"),
        (lambda i: signed_payload(i, b"{nope"), "the token is malformed"),
        (lambda i: i.token(aud=[RESOURCE, {"nested": 1}]), "the token is malformed"),
        (lambda i: i.token(exp="tomorrow"), "the token is malformed"),
        (lambda i: i.token(exp=True), "the token is malformed"),
        (lambda i: i.token(exp=float("nan")), "the token is malformed"),
        (lambda i: i.token(exp=10**400), "the token is malformed"),
        (lambda i: i.token(iat=int(time.time()) + 600), "the token is not valid yet"),
        (lambda i: i.token(sub=None), "the token has no 'sub' claim"),
        (lambda i: i.token(sub=""), "the token has no subject"),
        (
            lambda i: raw_header(b'{"alg":"RS256","kid":"k1","x":' + b"[" * 5000 + b"]" * 5000 + b"}"),
            "the token is malformed",
        ),
        (lambda i: signed_payload(i, b'{"sub":' + b"[" * 5000 + b"]" * 5000 + b"}"), "the token is malformed"),
    ],
    ids=[
        "expired",
        "tampered",
        "another-audience",
        "no-audience",
        "another-issuer",
        "not-yet-valid",
        "no-expiry",
        "id-token",
        "foreign-key-same-kid",
        "unknown-kid",
        "garbage",
        "alg-none",
        "hs256-with-public-key",
        "alg-not-a-string",
        "critical-extension",
        "claims-not-an-object",
        "claims-not-json",
        "audience-not-strings",
        "exp-a-string",
        "exp-a-boolean",
        "exp-nan",
        "exp-beyond-a-float",
        "issued-in-the-future",
        "no-subject-claim",
        "empty-subject",
        "header-nested-deeply",
        "claims-nested-deeply",
    ],
)
def test_an_unacceptable_token_gets_401_invalid_token_with_the_reason(
    issuer: LocalIssuer, make_token: Any, description: str
) -> None:
    response = call(transport_for(issuer), f"Bearer {make_token(issuer)}")
    assert response.status == 401
    assert challenge(response) == (
        f'Bearer error="invalid_token", error_description="{description}", scope="{SCOPE}", '
        f'resource_metadata="{METADATA}"'
    )
    assert response.json()["error"] == {"code": -32600, "message": "Invalid access token"}


def jwt_none(issuer: LocalIssuer) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"none","kid":"k1"}').rstrip(b"=").decode()
    payload = base64.urlsafe_b64encode(json.dumps({"iss": issuer.url, "sub": "a"}).encode()).rstrip(b"=").decode()
    return f"{header}.{payload}."


def unsigned(header: dict[str, Any]) -> str:
    encoded = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    return f"{encoded}.e30.c2ln"


def raw_header(header: bytes) -> str:
    encoded = base64.urlsafe_b64encode(header).rstrip(b"=").decode()
    return f"{encoded}.e30.c2ln"


def signed_payload(issuer: LocalIssuer, payload: bytes) -> str:
    import jwt

    signer = issuer.keys[0]
    return jwt.api_jws.encode(payload, signer.private, algorithm="RS256", headers={"kid": signer.kid})


def jwt_hs256(issuer: LocalIssuer) -> str:
    import jwt

    return jwt.encode(
        {"iss": issuer.url, "sub": "a", "aud": RESOURCE}, "k" * 32, algorithm="HS256", headers={"kid": "k1"}
    )


def test_a_token_without_the_required_scope_gets_403_insufficient_scope(issuer: LocalIssuer) -> None:
    response = call(transport_for(issuer), f"Bearer {issuer.token(scope='openid profile')}")
    assert response.status == 403
    assert challenge(response) == (
        f'Bearer error="insufficient_scope", error_description="the token lacks the scope {SCOPE}", '
        f'scope="{SCOPE}", resource_metadata="{METADATA}"'
    )


def test_scopes_may_come_as_an_scp_list(issuer: LocalIssuer) -> None:
    assert call(transport_for(issuer), f"Bearer {issuer.token(scope=None, scp=[SCOPE])}").status == 200


@pytest.mark.parametrize("authorization", ["Basic YWxpY2U6c2VjcmV0", "Token abc", "Bearerabc", "", "   "])
def test_credentials_of_another_scheme_are_answered_like_none(issuer: LocalIssuer, authorization: str) -> None:
    response = call(transport_for(issuer), authorization)
    assert response.status == 401
    assert challenge(response) == f'Bearer scope="{SCOPE}", resource_metadata="{METADATA}"'


def test_an_empty_bearer_is_an_invalid_token(issuer: LocalIssuer) -> None:
    response = call(transport_for(issuer), "Bearer   ")
    assert 'error="invalid_token", error_description="the token is malformed"' in challenge(response)


def test_configured_audiences_replace_the_resource_uri(issuer: LocalIssuer) -> None:
    transport = transport_for(issuer, MCP_JWT_AUDIENCE="api://mcp, https://mcp.example.com/mcp")
    assert call(transport, f"Bearer {issuer.token(aud=['x', 'api://mcp'])}").status == 200
    assert call(transport, f"Bearer {issuer.token()}").status == 401  # the resource URI is no longer enough


def test_cognito_tokens_without_aud_are_accepted_on_the_resource_servers_scope(issuer: LocalIssuer) -> None:
    transport = transport_for(issuer, MCP_JWT_AUDIENCE_OPTIONAL="true")
    assert call(transport, f"Bearer {issuer.token(aud=None, token_use='access')}").status == 200
    # ...but an `aud` that is present must still be this resource.
    refused = call(transport, f"Bearer {issuer.token(aud='https://other.example.com')}")
    assert refused.status == 401 and "another resource" in challenge(refused)
    # ...and a token of the same pool for other scopes is not enough.
    assert call(transport, f"Bearer {issuer.token(aud=None, scope='aws.cognito.signin.user.admin')}").status == 403


def test_keys_are_fetched_once_through_the_issuers_metadata(issuer: LocalIssuer) -> None:
    issuer.requests.clear()
    transport = transport_for(issuer)
    for _ in range(3):
        assert call(transport, f"Bearer {issuer.token()}").status == 200
    assert call(transport, f"Bearer {issuer.token(key=issuer.keys[1])}").status == 200  # second key, same fetch
    assert issuer.requests == ["/.well-known/openid-configuration", "/jwks"]


def test_unknown_key_ids_do_not_make_every_request_refetch_the_keys(issuer: LocalIssuer) -> None:
    issuer.requests.clear()
    transport = transport_for(issuer, MCP_JWT_JWKS_URL=f"{issuer.url}/jwks")
    for index in range(5):
        assert call(transport, f"Bearer {issuer.token(headers={'kid': f'random-{index}'})}").status == 401
    assert issuer.requests == ["/jwks"]


def test_a_rotated_key_is_picked_up_when_a_token_names_it() -> None:
    clock = [1000.0]
    with serve_issuer([SigningKey.generate("old")]) as issuer:
        keys = KeySet(issuer.url, f"{issuer.url}/jwks", clock=lambda: clock[0])
        validator = TokenValidator(issuer.url, keys)
        assert validator.validate(issuer.token(), RESOURCE).subject == "alice"
        issuer.keys.append(SigningKey.generate("new"))
        clock[0] += 61  # past the refetch spacing for unknown key ids
        assert validator.validate(issuer.token(key=issuer.keys[1]), "http://127.0.0.1/mcp").subject == "alice"
        assert issuer.requests == ["/jwks", "/jwks"]


def test_an_unreachable_issuer_refuses_the_token_without_a_5xx() -> None:
    with serve_issuer() as issuer:
        token = issuer.token()
        url = issuer.url
    settings = make_settings(MCP_JWT_ISSUER=url)
    transport = McpHttpTransport(make_server(settings=settings), authenticator=build_authenticator(settings))
    response = call(transport, f"Bearer {token}")
    assert response.status == 401
    assert 'error_description="the token cannot be verified now"' in challenge(response)


def test_rsa_keys_shorter_than_2048_bits_are_never_used() -> None:
    with serve_issuer([SigningKey.generate("weak", bits=1024)]) as issuer:
        settings = make_settings(MCP_JWT_ISSUER=issuer.url)
        transport = McpHttpTransport(make_server(settings=settings), authenticator=build_authenticator(settings))
        with warnings.catch_warnings():  # PyJWT 2.10 on warns of the short key it is made to sign with
            warnings.simplefilter("ignore")
            weak = issuer.token()
        response = call(transport, f"Bearer {weak}")
        assert 'error_description="the token is signed with an unknown key"' in challenge(response)


def test_keys_are_never_fetched_over_plain_http_from_a_remote_host() -> None:
    from mcp_runtime.tokens import check_fetch_url

    check_fetch_url("https://cognito-idp.us-east-1.amazonaws.com/pool/.well-known/jwks.json")
    check_fetch_url("http://127.0.0.1:4000/jwks")
    with pytest.raises(ValueError, match="must be fetched over https"):
        check_fetch_url("http://login.example.com/jwks")


def test_an_unreachable_issuer_is_not_asked_again_by_every_request() -> None:
    clock = [1000.0]
    attempts: list[str] = []

    def failing_fetch(url: str, headers: Any = None) -> Any:
        attempts.append(url)
        from mcp_runtime.tokens import KeySetUnavailable

        raise KeySetUnavailable("connection refused")

    keys = KeySet(
        "https://issuer.example.com", "https://issuer.example.com/jwks", fetch=failing_fetch, clock=lambda: clock[0]
    )
    validator = TokenValidator("https://issuer.example.com", keys)
    with serve_issuer() as issuer:
        token = issuer.token()
    from mcp_runtime.tokens import KeySetUnavailable

    messages = []
    for _ in range(5):
        with pytest.raises(KeySetUnavailable) as failed:
            validator.validate(token, RESOURCE)
        messages.append(str(failed.value))
    assert messages == ["connection refused"] + ["the issuer's keys could not be fetched moments ago"] * 4
    assert len(attempts) == 1
    clock[0] += 6
    with pytest.raises(KeySetUnavailable, match="connection refused"):
        validator.validate(token, RESOURCE)
    assert len(attempts) == 2


class CountingVerifier:
    """Counts the RSA verifications `tokens` asks `_jws` for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from mcp_runtime import _jws

        self.calls = 0
        real = _jws.verify

        def verify(*args: Any) -> bool:
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(_jws, "verify", verify)


def clocked_validator(issuer: LocalIssuer, now: list[float]) -> TokenValidator:
    keys = KeySet(issuer.url, f"{issuer.url}/jwks", clock=lambda: now[0])
    return TokenValidator(issuer.url, keys, clock=lambda: now[0])


def test_a_token_verified_once_is_not_verified_again_on_its_next_requests(
    issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    verifier = CountingVerifier(monkeypatch)
    validator = clocked_validator(issuer, [time.time()])
    token = issuer.token()
    for _ in range(5):
        assert validator.validate(token, RESOURCE).subject == "alice"
    assert verifier.calls == 1
    assert validator.validate(issuer.token(sub="bob"), RESOURCE).subject == "bob"
    assert verifier.calls == 2


def test_a_remembered_token_still_expires(issuer: LocalIssuer) -> None:
    now = [time.time()]
    validator = clocked_validator(issuer, now)
    token = issuer.token(exp=int(now[0]) + 60)
    assert validator.validate(token, RESOURCE).subject == "alice"
    now[0] += 60 + LEEWAY_SECONDS + 1
    with pytest.raises(TokenRejected, match=r"^the token has expired$"):
        validator.validate(token, RESOURCE)


def test_a_remembered_token_is_verified_afresh_after_the_reuse_limit(
    issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    verifier = CountingVerifier(monkeypatch)
    now = [time.time()]
    validator = clocked_validator(issuer, now)
    token = issuer.token(exp=int(now[0]) + 3600)
    validator.validate(token, RESOURCE)
    now[0] += VERIFIED_TOKEN_MAX_AGE_SECONDS - 1
    validator.validate(token, RESOURCE)
    assert verifier.calls == 1
    now[0] += 2
    assert validator.validate(token, RESOURCE).subject == "alice"
    assert verifier.calls == 2


def test_a_token_remembered_for_one_resource_is_judged_anew_for_another(issuer: LocalIssuer) -> None:
    validator = clocked_validator(issuer, [time.time()])
    token = issuer.token()
    assert validator.validate(token, RESOURCE).subject == "alice"
    with pytest.raises(TokenRejected, match=r"^the token was issued for another resource$"):
        validator.validate(token, "https://other.example.com/mcp")


def test_only_so_many_verified_tokens_are_remembered(issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("mcp_runtime.tokens.VERIFIED_TOKEN_CACHE_SIZE", 3)
    verifier = CountingVerifier(monkeypatch)
    validator = clocked_validator(issuer, [time.time()])
    tokens = [issuer.token(sub=f"user-{n}") for n in range(4)]
    for token in tokens:
        validator.validate(token, RESOURCE)
    validator.validate(tokens[3], RESOURCE)  # still remembered
    assert verifier.calls == 4
    validator.validate(tokens[0], RESOURCE)  # the oldest was let go
    assert verifier.calls == 5


def test_a_token_with_characters_outside_ascii_is_malformed(issuer: LocalIssuer) -> None:
    validator = clocked_validator(issuer, [time.time()])
    with pytest.raises(TokenRejected, match=r"^the token is malformed$"):
        validator.validate(issuer.token() + "\udc80", RESOURCE)
