# ruff: noqa: E501  (tables of exact error texts read best one per line)
"""The Cognito template (auth=cognito, cdk.json's default) on the template-driven local stack: the OAuth
bridge's function, routes and registrations table from the template, its one app client in the stack's
Cognito and its token signing key in the stack's KMS (moto, IAM enforced with the bridge's role), and the
API function validating Cognito tokens against the pool's JWKS and the bridge's with the key's public half.

What does not run here: Cognito's managed login (sign-in pages, `/oauth2/token` under the pool's
domain), which moto does not have. The bridge's redirect to it is pinned below; the whole sign-in
runs against the local authorization server instead (test_sign_in.py).
"""

from __future__ import annotations

import gzip
import html
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from testkit import RunningStack, api_event, rpc, standard_headers

from tests.support import deployed_server_name, local_stack_process

pytestmark = pytest.mark.e2e

CALLBACK = "http://127.0.0.1:53682/callback"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
MOTO_SIGNING_KEY = Path(__import__("moto").__file__).parent / "cognitoidp" / "resources" / "jwks-private.json.gz"


# Every test here registers from 127.0.0.1; the last one exhausts the burst (refilled one an hour).
REGISTRATION_BURST = 40


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningStack]:
    context = json.dumps({"registrationBurst": str(REGISTRATION_BURST), "registrationsPerHour": "1"})
    with local_stack_process(extra_env={"LOCAL_CDK_CONTEXT": context}) as running:
        yield running


def base(stack: RunningStack) -> str:
    return stack.url.removesuffix("/mcp")


def pool_id(stack: RunningStack) -> str:
    (pool,) = stack.state["userPools"].values()
    return str(pool)


def app_clients(stack: RunningStack) -> list[dict[str, Any]]:
    cognito = stack.aws_client("cognito-idp")
    listed = cognito.list_user_pool_clients(UserPoolId=pool_id(stack), MaxResults=60)["UserPoolClients"]
    return [
        cognito.describe_user_pool_client(UserPoolId=pool_id(stack), ClientId=c["ClientId"])["UserPoolClient"]
        for c in listed
    ]


def registrations(stack: RunningStack) -> list[dict[str, Any]]:
    table = stack.physical_id("OAuthBridgeRegistrations", "AWS::DynamoDB::Table")
    items: list[dict[str, Any]] = stack.aws_client("dynamodb").scan(TableName=table)["Items"]
    return items


def register(stack: RunningStack, **metadata: Any) -> httpx.Response:
    document = {"redirect_uris": [CALLBACK], "client_name": "bridge test", "token_endpoint_auth_method": "none"}
    document.update(metadata)
    return httpx.post(
        f"{base(stack)}/oauth2/register", json={k: v for k, v in document.items() if v is not None}, timeout=60
    )


def authorize(stack: RunningStack, **params: str) -> httpx.Response:
    query = {
        "response_type": "code",
        "redirect_uri": CALLBACK,
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "state": "st-1",
        "resource": stack.url,
        **params,
    }
    return httpx.get(f"{base(stack)}/oauth2/authorize", params={k: v for k, v in query.items() if v}, timeout=60)


def nothing_stored(stack: RunningStack, clients_before: int, items_before: int) -> None:
    assert len(app_clients(stack)) == clients_before
    assert len(registrations(stack)) == items_before


# ---- registration (RFC 7591) -------------------------------------------------------------------
def test_registration_stores_the_client_and_no_approval_makes_anything_at_cognito(stack: RunningStack) -> None:
    clients = {c["ClientId"] for c in app_clients(stack)}
    reply = register(stack, client_name="Claude Desktop", redirect_uris=[CALLBACK, "cursor://anysphere/callback"])
    assert reply.status_code == 201, reply.text
    assert reply.headers["cache-control"] == "no-store"
    body = reply.json()
    assert {k: v for k, v in body.items() if k not in ("client_id", "client_id_issued_at")} == {
        "redirect_uris": [CALLBACK, "cursor://anysphere/callback"],
        "client_name": "Claude Desktop",
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "scope": "mcp/invoke openid",
    }
    for _ in range(5):  # five anonymous approvals (issue 36 measured five app clients made by five)
        assert approve(stack, authorize(stack, client_id=body["client_id"])).status_code == 302
    assert {c["ClientId"] for c in app_clients(stack)} == clients  # nothing at Cognito, ever
    (client,) = [c for c in app_clients(stack) if c.get("CallbackURLs")]  # the bridge's own (the template's)
    assert client["CallbackURLs"] == [f"{base(stack)}/oauth2/callback"]  # the bridge's own, never the client's
    assert client["AllowedOAuthFlows"] == ["code"]
    assert client["AllowedOAuthScopes"] == ["openid"]
    assert client["ClientSecret"]  # only the bridge reads it: only the bridge redeems Cognito's codes


def test_a_confidential_registration_gets_a_secret_of_the_bridges(stack: RunningStack) -> None:
    reply = register(stack, token_endpoint_auth_method=None)  # RFC 7591's default: client_secret_basic
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["token_endpoint_auth_method"] == "client_secret_basic"
    assert len(body["client_secret"]) == 43 and body["client_secret_expires_at"] == 0
    (row,) = [r for r in registrations(stack) if r["pk"]["S"] == f"client#{body['client_id']}"]
    assert body["client_secret"] not in json.dumps(row)  # kept as a digest only


@pytest.mark.parametrize(
    ("redirect_uris", "description"),
    [
        (["http://evil.example.com/cb"], "the redirect URI 'http://evil.example.com/cb' uses http on a host other than loopback"),
        (["javascript:alert(1)"], "the redirect URI scheme 'javascript' is not allowed"),
        (["https://app.example.com/cb#frag"], "the redirect URI 'https://app.example.com/cb#frag' must be absolute and have no fragment"),
        (["/relative/callback"], "the redirect URI '/relative/callback' must be absolute and have no fragment"),
        ([], "redirect_uris must be a non-empty array (the authorization code grant needs one)"),
        ([CALLBACK, CALLBACK], "redirect_uris lists a URI twice"),
    ],
    ids=["http-remote", "javascript", "fragment", "relative", "empty", "duplicate"],
)  # fmt: skip
def test_a_bad_redirect_uri_is_invalid_redirect_uri_and_nothing_is_stored(
    stack: RunningStack, redirect_uris: list[str], description: str
) -> None:
    clients, items = len(app_clients(stack)), len(registrations(stack))
    reply = register(stack, redirect_uris=redirect_uris)
    assert (reply.status_code, reply.json()) == (
        400,
        {"error": "invalid_redirect_uri", "error_description": description},
    )
    nothing_stored(stack, clients, items)


@pytest.mark.parametrize(
    ("metadata", "description"),
    [
        ({"grant_types": ["implicit"]}, "grant_types may only be authorization_code and refresh_token (not implicit)"),
        ({"response_types": ["token"]}, 'response_types must be ["code"]'),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "token_endpoint_auth_method must be one of none, client_secret_basic, client_secret_post"),
        ({"scope": "mcp/invoke admin"}, "unsupported scope: admin"),
    ],
    ids=["implicit", "token-response", "private-key-jwt", "unknown-scope"],
)  # fmt: skip
def test_bad_client_metadata_is_invalid_client_metadata_and_nothing_is_stored(
    stack: RunningStack, metadata: dict[str, Any], description: str
) -> None:
    clients, items = len(app_clients(stack)), len(registrations(stack))
    reply = register(stack, **metadata)
    assert (reply.status_code, reply.json()) == (
        400,
        {"error": "invalid_client_metadata", "error_description": description},
    )
    nothing_stored(stack, clients, items)


def test_a_registration_that_is_not_json_is_refused(stack: RunningStack) -> None:
    reply = httpx.post(
        f"{base(stack)}/oauth2/register",
        content=b"redirect_uris=x",
        headers={"content-type": "text/plain"},
        timeout=60,
    )
    assert reply.status_code == 400 and reply.json()["error"] == "invalid_client_metadata"


# ---- authorization endpoint ----------------------------------------------------------------------
def approve(stack: RunningStack, page: httpx.Response) -> httpx.Response:
    """The person's approve on the consent page: its form, with the cookie the page set."""
    assert page.status_code == 200, page.text
    fields = dict(re.findall(r'name="(request|token)" value="([^"]*)"', page.text))
    form = {name: html.unescape(value) for name, value in fields.items()} | {"decision": "approve"}
    cookie = page.headers["set-cookie"].split(";")[0]
    return httpx.post(f"{base(stack)}/oauth2/consent", data=form, headers={"cookie": cookie})


def test_authorize_asks_for_consent_then_sends_the_browser_to_cognitos_managed_login(stack: RunningStack) -> None:
    client_id = register(stack).json()["client_id"]
    page = authorize(stack, client_id=client_id, scope="mcp/invoke")
    assert (page.status_code, page.headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert "<title>Allow access?</title>" in page.text  # the browser test drives it (test_consent.py)
    reply = approve(stack, page)
    assert reply.status_code == 302
    location = urlsplit(reply.headers["location"])
    prefix = re.sub(r"[^a-z0-9-]+", "-", stack.state["stackName"].lower())  # the domain prefix: <stack>-<account>
    assert f"{location.scheme}://{location.netloc}{location.path}" == (
        f"https://{prefix}-123456789012.auth.us-east-1.amazoncognito.com/oauth2/authorize"
    )
    query = parse_qs(location.query)
    (app_id,) = query.pop("client_id")
    (state,) = query.pop("state")
    (challenge,) = query.pop("code_challenge")
    assert query == {
        "response_type": ["code"],
        "redirect_uri": [f"{base(stack)}/oauth2/callback"],  # Cognito sends back to the bridge only
        "code_challenge_method": ["S256"],
        "scope": ["openid"],
    }  # `resource` was checked here; Cognito is only asked who signs in
    (bridge_client,) = [c["ClientId"] for c in app_clients(stack) if c.get("CallbackURLs")]
    assert app_id == bridge_client  # the bridge's one app client, whatever the MCP client
    assert state != "st-1" and challenge != CHALLENGE  # the bridge's own record and PKCE with Cognito
    assert re.fullmatch(
        r"mcp-sign-in=[A-Za-z0-9_-]{43}; Path=/; Max-Age=600; HttpOnly; SameSite=Lax", reply.headers["set-cookie"]
    )


def test_a_redirect_uri_that_was_not_registered_is_refused_without_redirecting(stack: RunningStack) -> None:
    client_id = register(stack).json()["client_id"]
    reply = authorize(stack, client_id=client_id, redirect_uri="http://127.0.0.1:9999/elsewhere")
    assert "location" not in reply.headers
    assert (reply.status_code, reply.json()) == (
        400,
        {"error": "invalid_request", "error_description": "redirect_uri is not registered for this client"},
    )


def test_an_unknown_client_is_refused_without_redirecting(stack: RunningStack) -> None:
    reply = authorize(stack, client_id="neverregistered")
    assert (reply.status_code, reply.json()["error"]) == (400, "invalid_client")
    assert "location" not in reply.headers


@pytest.mark.parametrize(
    ("params", "error", "description"),
    [
        ({"code_challenge": ""}, "invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256"),
        ({"code_challenge_method": "plain"}, "invalid_request", "code_challenge_method must be S256"),
        ({"response_type": "token"}, "unsupported_response_type", "response_type must be code"),
        ({"resource": "https://other.example.com/mcp"}, "invalid_target", None),
        ({"scope": "mcp/invoke admin"}, "invalid_scope", "unsupported scope: admin"),
    ],
    ids=["no-pkce", "plain-pkce", "implicit", "other-resource", "unknown-scope"],
)  # fmt: skip
def test_other_authorization_errors_are_answered_here_and_never_redirect_before_the_person_acted(
    stack: RunningStack, params: dict[str, str], error: str, description: str | None
) -> None:
    """A redirect for a request nobody looked at would make the API an open redirector (RFC 9700 §4.11.2)."""
    client_id = register(stack).json()["client_id"]
    reply = authorize(stack, client_id=client_id, **params)
    assert "location" not in reply.headers
    expected = description or f"this authorization server issues tokens for {stack.url} only"
    assert (reply.status_code, reply.json()) == (400, {"error": error, "error_description": expected})


# ---- Client ID Metadata Documents ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("client_id", "description"),
    [
        ("https://10.0.0.7/client.json", "the client_id host '10.0.0.7' resolves to a private address"),
        ("https://127.0.0.1/client.json", "the client_id host '127.0.0.1' resolves to a private address"),
        ("https://169.254.169.254/latest/meta-data", "the client_id host '169.254.169.254' resolves to a private address"),
        ("https://[::ffff:192.168.0.1]/client.json", "the client_id host '::ffff:192.168.0.1' resolves to a private address"),
        ("https://localhost/client.json", "the client_id host 'localhost' resolves to a private address"),
        ("https://client.example.com/", "a client_id URL needs a path, without . or .. segments"),
        ("https://user@client.example.com/c.json", "a client_id URL must have no user info and no fragment"),
    ],
    ids=["private-10", "loopback", "metadata-service", "ipv4-mapped", "localhost", "no-path", "userinfo"],
)  # fmt: skip
def test_a_metadata_document_url_on_a_private_address_is_refused_before_any_fetch(
    stack: RunningStack, client_id: str, description: str
) -> None:
    clients, items = len(app_clients(stack)), len(registrations(stack))
    reply = authorize(stack, client_id=client_id)
    assert (reply.status_code, reply.json()) == (400, {"error": "invalid_client", "error_description": description})
    assert "location" not in reply.headers
    nothing_stored(stack, clients, items)


# ---- token endpoint -----------------------------------------------------------------------------
def token(stack: RunningStack, form: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base(stack)}/oauth2/token", data=form, timeout=60)


def test_the_token_endpoint_refuses_what_it_can_judge_before_cognito(stack: RunningStack) -> None:
    client_id = register(stack).json()["client_id"]
    exchange = {"grant_type": "authorization_code", "code": "c", "code_verifier": "v" * 43, "redirect_uri": CALLBACK}
    unknown = token(stack, {**exchange, "client_id": "neverregistered"})
    assert (unknown.status_code, unknown.json()["error"]) == (401, "invalid_client")
    other = token(stack, {**exchange, "client_id": client_id, "resource": "https://other.example.com/mcp"})
    assert (other.status_code, other.json()["error"]) == (400, "invalid_target")
    implicit = token(stack, {"grant_type": "password", "client_id": client_id, "username": "a", "password": "b"})
    assert (implicit.status_code, implicit.json()["error"]) == (400, "unsupported_grant_type")
    assert token(stack, {"grant_type": "refresh_token", "client_id": client_id}).json()["error"] == "invalid_request"


# ---- Cognito tokens at the MCP endpoint -----------------------------------------------------------
def moto_key() -> dict[str, Any]:
    return dict(json.loads(gzip.decompress(MOTO_SIGNING_KEY.read_bytes())))


def cognito_token(stack: RunningStack, **claims: Any) -> str:
    """A token signed with the pool's key (moto's), shaped like Cognito's access tokens."""
    now = int(time.time())
    payload = {
        "iss": f"https://cognito-idp.us-east-1.amazonaws.com/{pool_id(stack)}",
        "sub": "0f1e2d3c-user",
        "client_id": "claude",
        "token_use": "access",
        "scope": "mcp/invoke",
        "iat": now,
        "exp": now + 600,
        **claims,
    }
    key = jwt.PyJWK(moto_key())
    return jwt.encode({k: v for k, v in payload.items() if v is not None}, key.key, "RS256", headers={"kid": "dummy"})


def call(stack: RunningStack, token: str) -> httpx.Response:
    message = rpc("tools/list")
    return httpx.post(
        stack.url,
        content=json.dumps(message),
        headers={**standard_headers(message), "authorization": f"Bearer {token}"},
        timeout=60,
    )


def test_a_cognito_access_token_for_this_resource_server_is_accepted(stack: RunningStack) -> None:
    reply = call(stack, cognito_token(stack))
    assert reply.status_code == 200, reply.text
    assert "tools" in reply.json()["result"]


@pytest.mark.parametrize(
    ("claims", "description"),
    [
        ({"exp": int(time.time()) - 3600}, "the token has expired"),
        ({"aud": "https://other.example.com/mcp"}, "the token was issued for another resource"),
        ({"iss": "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_other"}, "the token was issued by another authorization server"),
        ({"token_use": "id"}, "the token is not an access token"),
    ],
    ids=["expired", "another-audience", "another-pool", "id-token"],
)  # fmt: skip
def test_an_unacceptable_cognito_token_is_401_invalid_token(
    stack: RunningStack, claims: dict[str, Any], description: str
) -> None:
    reply = call(stack, cognito_token(stack, **claims))
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith(
        f'Bearer error="invalid_token", error_description="{description}"'
    )


def test_a_tampered_cognito_token_is_401_invalid_token(stack: RunningStack) -> None:
    header, _, signature = cognito_token(stack).split(".")
    forged = jwt.utils.base64url_encode(json.dumps({"sub": "admin", "scope": "mcp/invoke"}).encode()).decode()
    reply = call(stack, f"{header}.{forged}.{signature}")
    assert reply.status_code == 401
    assert 'error_description="the token signature is invalid"' in reply.headers["www-authenticate"]


def test_a_token_the_pool_issued_without_the_endpoints_scope_is_403_insufficient_scope(stack: RunningStack) -> None:
    """A real token of the pool (moto's InitiateAuth), for Cognito's own API only."""
    cognito = stack.aws_client("cognito-idp")
    pool = pool_id(stack)
    client = cognito.create_user_pool_client(
        UserPoolId=pool, ClientName="password-login", ExplicitAuthFlows=["ALLOW_ADMIN_USER_PASSWORD_AUTH"]
    )["UserPoolClient"]["ClientId"]
    cognito.admin_create_user(UserPoolId=pool, Username="carol@example.com", MessageAction="SUPPRESS")
    cognito.admin_set_user_password(
        UserPoolId=pool, Username="carol@example.com", Password="Sup3r-secret!", Permanent=True
    )
    tokens = cognito.admin_initiate_auth(
        UserPoolId=pool,
        ClientId=client,
        AuthFlow="ADMIN_USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "carol@example.com", "PASSWORD": "Sup3r-secret!"},
    )["AuthenticationResult"]
    reply = call(stack, tokens["AccessToken"])
    assert reply.status_code == 403
    assert reply.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", error_description="the token lacks the scope mcp/invoke", '
        f'scope="mcp/invoke", resource_metadata="{base(stack)}/.well-known/oauth-protected-resource/mcp"'
    )
    assert call(stack, tokens["IdToken"]).status_code == 401  # an ID token is never an access token


def test_the_bridge_publishes_the_public_key_of_its_kms_signing_key_where_its_metadata_says(
    stack: RunningStack,
) -> None:
    metadata = httpx.get(f"{base(stack)}/.well-known/oauth-authorization-server", timeout=60).json()
    assert metadata["jwks_uri"] == f"{base(stack)}/.well-known/jwks.json"
    reply = httpx.get(metadata["jwks_uri"], timeout=60)
    assert (reply.status_code, reply.headers["cache-control"]) == (200, "max-age=3600")
    (key,) = reply.json()["keys"]
    kms = stack.aws_client("kms")
    assert (key["kty"], key["alg"], key["use"]) == ("RSA", "RS256", "sig")
    assert key["kid"] in {k["KeyId"] for k in kms.list_keys()["Keys"]}  # the KMS key itself, by its id
    from mcp_runtime._jws import RsaPublicKey

    held = RsaPublicKey.from_der(kms.get_public_key(KeyId=key["kid"])["PublicKey"])
    assert held.n == int.from_bytes(jwt.utils.base64url_decode(key["n"]), "big")
    assert len(jwt.utils.base64url_decode(key["n"])) == 256  # RSA 2048


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_the_protected_resource_metadata_names_the_bridge_as_the_authorization_server(
    stack: RunningStack, path: str
) -> None:
    """Both documents a client probes (RFC 9728 path-suffixed, then the root) when no challenge reaches it."""
    document = httpx.get(f"{base(stack)}{path}", timeout=60).json()
    assert document == {
        "resource": stack.url,
        "bearer_methods_supported": ["header"],
        "resource_name": deployed_server_name(),
        "authorization_servers": [base(stack)],
        "scopes_supported": ["mcp/invoke"],
    }


def test_cleanup_deletes_only_clients_unused_for_the_configured_days(stack: RunningStack) -> None:
    used = register(stack).json()["client_id"]
    unused = register(stack).json()["client_id"]
    table = stack.physical_id("OAuthBridgeRegistrations", "AWS::DynamoDB::Table")
    dynamodb = stack.aws_client("dynamodb")
    long_ago = str(int(time.time()) - 31 * 86_400)
    for client_id in (unused,):
        dynamodb.update_item(
            TableName=table,
            Key={"pk": {"S": f"client#{client_id}"}},
            UpdateExpression="SET lastUsedAt = :t",
            ExpressionAttributeValues={":t": {"N": long_ago}},
        )
    function = stack.physical_id("OAuthBridgeFunction", "AWS::Lambda::Function")
    answer = stack.aws_client("lambda").invoke(
        FunctionName=function, Payload=json.dumps({"action": "cleanup"}).encode()
    )
    assert json.loads(answer["Payload"].read())["removed"] >= 1
    keys = {item["pk"]["S"] for item in registrations(stack)}
    assert f"client#{used}" in keys and f"client#{unused}" not in keys


def test_registrations_past_the_burst_per_address_get_429_and_create_nothing(stack: RunningStack) -> None:
    """Last in this module: it uses up the address's registrations for the hour."""
    replies = [register(stack) for _ in range(REGISTRATION_BURST + 1)]
    refused = [r for r in replies if r.status_code != 201]
    assert refused, "the limit never applied"
    assert all(r.status_code == 201 for r in replies[: replies.index(refused[0])])
    assert (refused[0].status_code, refused[0].json()) == (
        429,
        {
            "error": "temporarily_unavailable",
            "error_description": f"too many registrations from one address: a burst of {REGISTRATION_BURST}, "
            "then 1 an hour",
        },
    )
    assert 0 < int(refused[0].headers["retry-after"]) <= 3600
    clients, items = len(app_clients(stack)), len(registrations(stack))
    assert register(stack).status_code == 429
    nothing_stored(stack, clients, items)


def test_cognito_is_created_from_the_template_and_managed_login_is_named_as_not_emulated(stack: RunningStack) -> None:
    cognito = stack.aws_client("cognito-idp")
    servers = cognito.list_resource_servers(UserPoolId=pool_id(stack), MaxResults=10)["ResourceServers"]
    assert [(s["Identifier"], [scope["ScopeName"] for scope in s["Scopes"]]) for s in servers] == [("mcp", ["invoke"])]
    prefix = re.sub(r"[^a-z0-9-]+", "-", stack.state["stackName"].lower())
    domain = f"https://{prefix}-123456789012.auth.us-east-1.amazoncognito.com"
    assert stack.printed(f"not emulated: Cognito managed login and OAuth endpoints at {domain} (moto has none)")


def test_the_http_api_front_passes_the_401_challenge_on_exactly_as_the_function_sends_it(stack: RunningStack) -> None:
    """HTTP APIs (payload 2.0) pass a Lambda's WWW-Authenticate through; REST APIs and Function URLs rename
    it x-amzn-Remapped-WWW-Authenticate (docs/security.md). The local front must not hide either."""
    message = rpc("tools/list")
    reply = httpx.post(stack.url, content=json.dumps(message), headers=standard_headers(message), timeout=30)
    expected = f'Bearer scope="mcp/invoke", resource_metadata="{base(stack)}/.well-known/oauth-protected-resource/mcp"'
    assert (reply.status_code, reply.headers["www-authenticate"]) == (401, expected)
    assert "x-amzn-remapped-www-authenticate" not in reply.headers
    function = stack.physical_id("FunctionsApi", "AWS::Lambda::Function")
    event = api_event(message)
    event["headers"]["host"] = base(stack).removeprefix("http://")
    answer = json.loads(
        stack.aws_client("lambda").invoke(FunctionName=function, Payload=json.dumps(event).encode())["Payload"].read()
    )
    assert answer["statusCode"] == 401
    assert {k.lower(): v for k, v in answer["headers"].items()}["www-authenticate"] == expected
