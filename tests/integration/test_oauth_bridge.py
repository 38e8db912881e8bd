"""The OAuth bridge in-process against the template's own resources in the embedded moto (the
registrations table, the user pool with the bridge's one app client, the KMS key that signs the access
tokens, as `provision` creates them), with a clock the tests move, Client ID Metadata Documents served
over real TLS on loopback, and the upstream token endpoint recorded (Cognito's managed login and token
endpoint do not exist in moto).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack, serve_bridge_at

from mcp_runtime._aws import MAX_ATTEMPTS
from mcp_runtime.tokens import KmsKeySet, TokenRejected, TokenValidator, ValidatedToken
from oauth_bridge.aws import Registration, RegistrationStore, UserPoolClients, metadata_url_key
from oauth_bridge.cimd import MetadataFetcher
from oauth_bridge.flows import DOCUMENT_MAX_AGE_SECONDS, Bridge
from oauth_bridge.grants import GrantStore, KeySealer
from oauth_bridge.handler import dispatch
from oauth_bridge.settings import BridgeSettings
from oauth_bridge.signing import TokenSigner
from tests.integration.task_harness import Clock
from tests.tls_server import Routes, make_certificate, serve_https

CALLBACK = "http://127.0.0.1:53682/callback"
BRIDGE_CALLBACK = "http://127.0.0.1:3000/oauth2/callback"
VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
HOST = "client.test"
DOMAIN = "https://bridge-test.auth.us-east-1.amazoncognito.com"
ISSUER = "http://127.0.0.1:3000"
RESOURCE = "http://127.0.0.1:3000/mcp"
# Hosts under these serve metadata documents too (every name resolves to loopback here).
WILDCARD_NAMES = ("*.evil.co.uk", "*.other.co.uk")


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def fake_jwt(claims: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJSUzI1NiJ9.{body}.c2ln"


@dataclass
class Cognito:
    """Cognito's managed login and its token and revocation endpoints, as far as the bridge meets them.
    `login` plays the authorize endpoint with a live session for `person`: like Cognito, it refuses a
    `redirect_uri` that is not exactly one of the app client's CallbackURLs. Its codes are redeemed once,
    by that app client (Basic with its secret), with the callback and PKCE verifier they were issued for."""

    describe: Callable[[str], dict[str, Any]]
    person: str = "alice-sub"
    calls: list[tuple[str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)
    codes: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    revoked: list[str] = field(default_factory=list)
    refresh_answer: tuple[int, bytes] | None = None
    issued: int = 0
    usernames: dict[str, str] = field(default_factory=dict)  # person -> the `username` claim Cognito sends

    def login(self, location: str) -> str:
        parts = urlsplit(location)
        assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{DOMAIN}/oauth2/authorize", location
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        app = self.describe(query["client_id"])
        if query["redirect_uri"] not in app.get("CallbackURLs", []):
            raise AssertionError(f"Cognito refuses redirect_uri {query['redirect_uri']}: not a callback URL")
        code = f"cognito-code-{len(self.codes)}"
        self.codes[code] = (query["client_id"], query["redirect_uri"], query["code_challenge"], self.person)
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        form = parse_qs(body.decode())
        self.calls.append((url, form, headers))
        app_id = form["client_id"][0]
        secret = self.describe(app_id).get("ClientSecret")
        if headers.get("authorization") != "Basic " + base64.b64encode(f"{app_id}:{secret}".encode()).decode():
            return 401, b'{"error":"invalid_client"}'
        if url == f"{DOMAIN}/oauth2/revoke":
            self.revoked.append(form["token"][0])
            return 200, b""
        if form["grant_type"] == ["refresh_token"]:
            if self.refresh_answer is not None:
                return self.refresh_answer
            return 200, json.dumps({"access_token": "refreshed", "token_type": "Bearer", "expires_in": 3600}).encode()
        found = self.codes.pop(form["code"][0], None)
        if found is None or found[:2] != (app_id, form["redirect_uri"][0]):
            return 400, b'{"error":"invalid_grant"}'
        if s256(form["code_verifier"][0]) != found[2]:
            return 400, b'{"error":"invalid_grant"}'
        self.issued += 1
        named = {"username": self.usernames[found[3]]} if found[3] in self.usernames else {}
        tokens = {
            "access_token": fake_jwt({"sub": found[3], "client_id": app_id, "n": self.issued, **named}),
            "id_token": fake_jwt({"sub": found[3]}),
            "refresh_token": f"rt-{self.issued}",
            "token_type": "Bearer",
            "expires_in": 3600,
        }
        return 200, json.dumps(tokens).encode()

    def token_calls(self) -> list[dict[str, list[str]]]:
        return [form for url, form, _ in self.calls if url == f"{DOMAIN}/oauth2/token"]


Jar = dict[str, str]


@dataclass
class BridgeUnderTest:
    bridge: Bridge
    clock: Clock
    cognito: Cognito
    cognito_idp: Any
    dynamodb: Any
    pool: str
    table: str
    routes: Routes
    port: int
    kms: Any
    app_id: str  # the bridge's own app client (the template's)
    key_id: str  # the KMS key that signs the bridge's access tokens
    template_clients: frozenset[str] = frozenset()  # the template's own (the machine client, the bridge's)

    def event(self, method: str, path: str, *, query: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        headers = {"host": "127.0.0.1:3000", **extra.pop("headers", {})}
        event: dict[str, Any] = {
            "version": "2.0",
            "rawPath": path,
            "rawQueryString": urlencode(query or {}),
            "headers": headers,
            "requestContext": {"http": {"method": method, "path": path, "sourceIp": extra.pop("ip", "203.0.113.9")}},
            "isBase64Encoded": False,
        }
        if "json" in extra:
            event["body"] = json.dumps(extra.pop("json"))
            headers["content-type"] = "application/json"
        if "form" in extra:
            event["body"] = urlencode(extra.pop("form"))
            headers["content-type"] = "application/x-www-form-urlencoded"
        return event

    def call(self, method: str, path: str, *, jar: Jar | None = None, **kwargs: Any) -> dict[str, Any]:
        """A request; with `jar`, as a browser: its cookies sent, the answer's kept."""
        if jar:
            kwargs["headers"] = {"cookie": "; ".join(f"{k}={v}" for k, v in jar.items()), **kwargs.get("headers", {})}
        answer = dispatch(self.bridge, self.event(method, path, **kwargs))
        if jar is not None:
            for cookie in answer.get("cookies", []):
                name, _, value = cookie.split(";")[0].partition("=")
                if "Max-Age=0" in cookie:
                    jar.pop(name, None)
                else:
                    jar[name] = value
        return answer

    def register(self, ip: str = "203.0.113.9", **metadata: Any) -> dict[str, Any]:
        document = {"redirect_uris": [CALLBACK], "client_name": "t", "token_endpoint_auth_method": "none", **metadata}
        return self.call("POST", "/oauth2/register", json=document, ip=ip)

    def client(self, **metadata: Any) -> str:
        answer = self.register(**metadata)
        assert answer["statusCode"] == 201, answer["body"]
        return str(json.loads(answer["body"])["client_id"])

    def authorize(
        self, client_id: str, jar: Jar | None = None, ip: str = "203.0.113.9", **params: str
    ) -> dict[str, Any]:
        return self.call("GET", "/oauth2/authorize", query=authorize_query(client_id, **params), jar=jar, ip=ip)

    def approve(self, client_id: str, jar: Jar | None = None, ip: str = "203.0.113.9", **params: str) -> dict[str, Any]:
        """Authorize, and approve on the consent page as the person would (its form, its cookie)."""
        jar = {} if jar is None else jar
        page = self.authorize(client_id, jar, ip=ip, **params)
        if page["statusCode"] != 200:
            return page
        form, _ = consent_form(page)
        return self.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar, ip=ip)

    def sign_in(self, client_id: str, jar: Jar | None = None, ip: str = "203.0.113.9", **params: str) -> dict[str, Any]:
        """The whole sign-in in one browser: consent (unless an approval stands), Cognito, the callback.
        The answer is the bridge's redirect to the client (or whatever refused on the way)."""
        jar = {} if jar is None else jar
        answer = self.authorize(client_id, jar, ip=ip, **params)
        if answer["statusCode"] == 200:
            form, _ = consent_form(answer)
            answer = self.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar, ip=ip)
        if answer["statusCode"] != 302 or not answer["headers"]["location"].startswith(DOMAIN):
            return answer
        back = urlsplit(self.cognito.login(answer["headers"]["location"]))
        assert f"{back.scheme}://{back.netloc}{back.path}" == BRIDGE_CALLBACK
        query = {k: v[0] for k, v in parse_qs(back.query).items()}
        return self.call("GET", "/oauth2/callback", query=query, jar=jar)

    def code(self, client_id: str, jar: Jar | None = None, **params: str) -> str:
        answer = self.sign_in(client_id, jar, **params)
        assert answer["statusCode"] == 302, answer["body"]
        location = urlsplit(answer["headers"]["location"])
        assert f"{location.scheme}://{location.netloc}{location.path}" == params.get("redirect_uri", CALLBACK)
        assert parse_qs(location.query)["iss"] == [ISSUER]  # RFC 9207, in every authorization response
        return parse_qs(location.query)["code"][0]

    def exchange(self, client_id: str, code: str, form: dict[str, str] | None = None) -> dict[str, Any]:
        sent = {
            "grant_type": "authorization_code",
            "code": code,
            "code_verifier": VERIFIER,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "resource": "http://127.0.0.1:3000/mcp",
            **(form or {}),
        }
        return self.call("POST", "/oauth2/token", form={k: v for k, v in sent.items() if v})

    def tokens(self, client_id: str, jar: Jar | None = None, **params: str) -> dict[str, Any]:
        answer = self.exchange(client_id, self.code(client_id, jar, **params))
        assert answer["statusCode"] == 200, answer["body"]
        return dict(json.loads(answer["body"]))

    def refresh(self, client_id: str, refresh_token: str, **form: str) -> dict[str, Any]:
        sent = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **form}
        return self.call("POST", "/oauth2/token", form=sent)

    def describe(self, app_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.cognito_idp.describe_user_pool_client(UserPoolId=self.pool, ClientId=app_id)[
            "UserPoolClient"
        ]
        return found

    def pool_clients(self) -> int:
        return len(self.cognito_idp.list_user_pool_clients(UserPoolId=self.pool, MaxResults=60)["UserPoolClients"])

    def api_validator(self, issuer: str = ISSUER, key_id: str | None = None) -> TokenValidator:
        """The API's check of the bridge's tokens, as the template configures it (mcp_runtime/tokens.py)."""
        keys = KmsKeySet(key_id or self.key_id, client=self.kms)
        return TokenValidator(issuer, keys, required_scopes=("mcp/invoke",), clock=self.clock)

    def accepted(self, access_token: str) -> ValidatedToken:
        return self.api_validator().validate(access_token, RESOURCE)

    def app_clients(self) -> dict[str, dict[str, Any]]:
        """The app clients the bridge created (there should never be one)."""
        listed = [
            c
            for c in self.cognito_idp.list_user_pool_clients(UserPoolId=self.pool, MaxResults=60)["UserPoolClients"]
            if c["ClientId"] not in self.template_clients
        ]
        return {c["ClientId"]: self.describe(c["ClientId"]) for c in listed}

    def items(self) -> dict[str, dict[str, Any]]:
        return {item["pk"]["S"]: item for item in self.dynamodb.scan(TableName=self.table)["Items"]}

    def registration(self, client_id: str) -> dict[str, Any]:
        key = metadata_url_key(client_id) if client_id.startswith("https://") else f"client#{client_id}"
        return self.items()[key]

    def serve_document(self, path: str, redirect_uris: list[str]) -> str:
        url = f"https://{HOST}:{self.port}{path}"
        document = {"client_id": url, "client_name": "CIMD client", "redirect_uris": redirect_uris}
        self.routes[path] = (200, {"content-type": "application/json"}, json.dumps(document).encode())
        return url


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"), HOST, *WILDCARD_NAMES)


@pytest.fixture
def bridge(embedded_aws: EmbeddedAws, deployed: ProvisionedStack, tls: tuple[Path, Path]) -> Iterator[BridgeUnderTest]:
    import ssl

    (pool,) = deployed.user_pools.values()
    (table,) = [name for logical_id, name in deployed.tables.items() if logical_id.startswith("OAuthBridge")]
    (function,) = [f for f in deployed.functions.values() if "BRIDGE_APP_CLIENT_ID" in f.environment]
    app_id, key_id = function.environment["BRIDGE_APP_CLIENT_ID"], function.environment["BRIDGE_SIGNING_KEY_ID"]
    sealing_key = function.environment["BRIDGE_SEALING_KEY_ID"]
    settings = BridgeSettings.model_validate(
        {
            "BRIDGE_TABLE_NAME": table,
            "BRIDGE_USER_POOL_ID": pool,
            "BRIDGE_APP_CLIENT_ID": app_id,
            "BRIDGE_SIGNING_KEY_ID": key_id,
            "BRIDGE_COGNITO_DOMAIN_URL": DOMAIN,
            "BRIDGE_RESOURCE_SCOPE": "mcp/invoke",
            "BRIDGE_REGISTRATIONS_PER_HOUR": "50",
        }
    )
    clock = Clock(1_900_000_000.0)
    cognito_idp, dynamodb = embedded_aws.client("cognito-idp"), embedded_aws.client("dynamodb")
    kms = embedded_aws.client("kms")
    serve_bridge_at(deployed, cognito_idp, ISSUER)

    def describe(app_id: str) -> dict[str, Any]:
        found: dict[str, Any] = cognito_idp.describe_user_pool_client(UserPoolId=pool, ClientId=app_id)[
            "UserPoolClient"
        ]
        return found

    cognito = Cognito(describe)
    with serve_https(tls) as (port, routes):
        fetcher = MetadataFetcher(
            resolver=lambda host, p: ["127.0.0.1"],
            ssl_context=ssl.create_default_context(cafile=str(tls[0])),
            allow_loopback=True,
        )
        bridge = Bridge(
            settings,
            RegistrationStore(table, clock=clock, client=dynamodb),
            UserPoolClients(pool, client=cognito_idp),
            GrantStore(table, clock=clock, client=dynamodb, sealer=KeySealer(sealing_key, client=kms)),
            TokenSigner(key_id, client=kms),
            fetcher=fetcher,
            post=cognito,
            clock=clock,
        )
        template_clients = frozenset(
            c["ClientId"] for c in cognito_idp.list_user_pool_clients(UserPoolId=pool, MaxResults=60)["UserPoolClients"]
        )
        yield BridgeUnderTest(
            bridge,
            clock,
            cognito,
            cognito_idp,
            dynamodb,
            pool,
            table,
            routes,
            port,
            kms,
            app_id,
            key_id,
            template_clients,
        )


def consent_form(page: dict[str, Any]) -> tuple[dict[str, str], str]:
    fields = dict(re.findall(r'name="(request|token)" value="([^"]*)"', page["body"]))
    return {name: html.unescape(value) for name, value in fields.items()}, page["cookies"][0].split(";")[0]


def authorize_query(client_id: str, **params: str) -> dict[str, str]:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "state": "s",
        **params,
    }
    return {k: v for k, v in query.items() if v}


def test_anonymous_approvals_create_no_cognito_resource_and_two_hundred_strangers_leave_a_person_free_to_connect(
    bridge: BridgeUnderTest,
) -> None:
    """The deployed defaults: 200 strangers, each from an address of its own, with a client of its own (as
    registration writes it), approve it on the consent page and never sign in."""
    from concurrent.futures import ThreadPoolExecutor

    before = bridge.pool_clients()

    def stranger(n: int) -> str:
        bridge.bridge.store.add(Registration(f"client#stranger{n}", "", (CALLBACK,), "none", 0), "t")
        return str(bridge.approve(f"stranger{n}", ip=f"198.18.0.{n + 1}")["headers"]["location"])

    with ThreadPoolExecutor(8) as pool:
        assert all(location.startswith(DOMAIN) for location in pool.map(stranger, range(200)))
    assert bridge.pool_clients() == before  # nothing in Cognito: no app client, no slot
    assert bridge.app_clients() == {} and "meta#clients" not in bridge.items()
    # A person who signs in connects a new client as if nobody had come.
    tokens = bridge.tokens(bridge.client())
    assert bridge.accepted(tokens["access_token"]).subject == "alice-sub"
    assert bridge.pool_clients() == before


def test_registration_creates_no_app_client_and_takes_no_slot(bridge: BridgeUnderTest) -> None:
    for _ in range(5):
        bridge.client()
    assert bridge.app_clients() == {}
    assert "meta#clients" not in bridge.items()


def test_a_metadata_document_client_is_registered_once_its_person_signed_in_and_follows_the_documents_redirect_uris(
    bridge: BridgeUnderTest,
) -> None:
    url = bridge.serve_document("/mcp-client.json", [CALLBACK])
    first = bridge.approve(url)
    assert first["statusCode"] == 302, first["body"]
    assert parse_qs(urlsplit(first["headers"]["location"]).query)["client_id"] == [bridge.app_id]
    assert metadata_url_key(url) not in bridge.items()  # approved, nobody signed in yet: nothing stored
    assert bridge.code(url)
    assert bridge.registration(url)["url"]["S"] == url and "client" not in bridge.registration(url)
    # Within the document's max age the stored record serves, without a second fetch.
    bridge.routes.clear()
    assert bridge.approve(url)["statusCode"] == 302
    # Later, the document lists another redirect URI: the old one is refused, the new one works.
    bridge.clock.advance(DOCUMENT_MAX_AGE_SECONDS + 1)
    moved = "http://127.0.0.1:53999/callback"
    bridge.serve_document("/mcp-client.json", [moved])
    refused = bridge.authorize(url)
    assert (refused["statusCode"], json.loads(refused["body"])["error_description"]) == (
        400,
        "redirect_uri is not registered for this client",
    )
    assert bridge.code(url, redirect_uri=moved)
    assert bridge.app_clients() == {}
    assert bridge.describe(bridge.app_id)["CallbackURLs"] == [BRIDGE_CALLBACK]  # Cognito never learns either


def test_the_code_is_exchanged_once_with_pkce_the_redirect_uri_and_the_resource_for_the_bridges_own_tokens(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client()
    code = bridge.code(client_id)
    (at_callback,) = bridge.cognito.token_calls()
    assert at_callback["client_id"] == [bridge.app_id] and at_callback["redirect_uri"] == [BRIDGE_CALLBACK]
    assert at_callback["code_verifier"] != [VERIFIER]  # the bridge's own PKCE with Cognito
    bridge.clock.advance(30)
    answer = bridge.exchange(client_id, code)
    assert answer["statusCode"] == 200 and answer["headers"]["cache-control"] == "no-store"
    tokens = json.loads(answer["body"])
    assert set(tokens) == {"access_token", "token_type", "expires_in", "scope", "refresh_token"}
    assert (tokens["token_type"], tokens["expires_in"], tokens["scope"]) == ("Bearer", 900, "mcp/invoke")
    assert len(tokens["refresh_token"]) == 43 and tokens["refresh_token"] != "rt-1"  # the bridge's, not Cognito's
    assert bridge.cognito.token_calls() == [at_callback]  # Cognito's tokens only told the bridge who signed in
    assert bridge.registration(client_id)["lastUsedAt"]["N"] == str(int(bridge.clock()))
    again = bridge.exchange(client_id, code)
    assert (again["statusCode"], json.loads(again["body"])) == (
        400,
        {
            "error": "invalid_grant",
            "error_description": "the code is invalid, expired, used already or not this client's",
        },
    )


def test_the_access_token_is_a_short_lived_jwt_of_the_bridge_for_the_mcp_resource_and_the_person(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client()
    tokens = bridge.tokens(client_id)
    header = json.loads(base64.urlsafe_b64decode(tokens["access_token"].split(".")[0] + "=="))
    claims = json.loads(base64.urlsafe_b64decode(tokens["access_token"].split(".")[1] + "=="))
    assert header == {"alg": "RS256", "typ": "at+jwt", "kid": bridge.key_id}
    now = int(bridge.clock())
    assert {k: v for k, v in claims.items() if k != "jti"} == {
        "iss": ISSUER,
        "aud": RESOURCE,
        "sub": "alice-sub",
        "client_id": client_id,
        "scope": "mcp/invoke",
        "iat": now,
        "exp": now + 900,
    }
    assert len(claims["jti"]) == 22
    validated = bridge.accepted(tokens["access_token"])  # the API's own check, with the KMS public key
    assert (validated.issuer, validated.subject, validated.client) == (ISSUER, "alice-sub", client_id)
    # The bridge publishes that key: its JWKS verifies the token as any resource server would.
    jwks = json.loads(bridge.call("GET", "/.well-known/jwks.json")["body"])
    assert [(k["kty"], k["alg"], k["kid"], k["use"]) for k in jwks["keys"]] == [("RSA", "RS256", bridge.key_id, "sig")]
    import jwt

    public = jwt.PyJWK(jwks["keys"][0]).key
    checked = jwt.decode(
        tokens["access_token"], public, algorithms=["RS256"], audience=RESOURCE, options={"verify_iat": False}
    )  # the test's clock runs in 2030
    assert checked["sub"] == "alice-sub"


def test_the_api_refuses_a_bridge_token_for_another_resource_issuer_or_key_and_one_past_its_expiry(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client()
    access = bridge.tokens(client_id)["access_token"]
    signer = bridge.bridge.signer
    claims = json.loads(base64.urlsafe_b64decode(access.split(".")[1] + "=="))
    other_key = str(bridge.kms.create_key(KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"])
    cases = {
        "the token was issued for another resource": signer.sign({**claims, "aud": "https://other.example/mcp"}),
        "the token was issued by another authorization server": signer.sign({**claims, "iss": "https://evil.example"}),
        "the token is signed with an unknown key": TokenSigner(other_key, client=bridge.kms).sign(claims),
        "the token signature is invalid": access[:-4] + ("AAAA" if not access.endswith("AAAA") else "BBBB"),
    }
    for description, token in cases.items():
        with pytest.raises(TokenRejected) as refused:
            bridge.accepted(token)
        assert refused.value.description == description
    # A key with the right id but other bits (the API trusting another key) refuses it too.
    with pytest.raises(TokenRejected, match="unknown key"):
        bridge.api_validator(key_id=other_key).validate(access, RESOURCE)
    bridge.clock.advance(900 + 31)
    with pytest.raises(TokenRejected, match="the token has expired"):
        bridge.accepted(access)


@pytest.mark.parametrize(
    ("form", "description"),
    [
        ({"code_verifier": "x" * 43}, "the code_verifier does not match the code_challenge"),
        ({"redirect_uri": "http://127.0.0.1:53682/other"}, "redirect_uri is not the one of the authorization request"),
        ({"redirect_uri": ""}, "redirect_uri is not the one of the authorization request"),
        ({"client_id": "OTHER"}, "the code is invalid, expired, used already or not this client's"),
        ({"code": "guessed"}, "the code is invalid, expired, used already or not this client's"),
    ],
    ids=["pkce", "redirect-uri", "no-redirect-uri", "other-client", "unknown-code"],
)
def test_a_code_exchange_that_does_not_match_the_authorization_is_invalid_grant_and_burns_the_code(
    bridge: BridgeUnderTest, form: dict[str, str], description: str
) -> None:
    client_id = bridge.client()
    code = bridge.code(client_id)
    if form.get("client_id") == "OTHER":
        form = {"client_id": bridge.client()}
    answer = bridge.exchange(client_id, code, form)
    assert (answer["statusCode"], json.loads(answer["body"])) == (
        400,
        {"error": "invalid_grant", "error_description": description},
    )
    if "code" not in form:
        assert bridge.exchange(client_id, code)["statusCode"] == 400  # taken by the failed try


def test_a_code_expires_after_two_minutes(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    code = bridge.code(client_id)
    bridge.clock.advance(121)
    assert json.loads(bridge.exchange(client_id, code)["body"])["error"] == "invalid_grant"


def test_a_confidential_client_authenticates_with_the_secret_the_bridge_gave_it(bridge: BridgeUnderTest) -> None:
    registered = json.loads(bridge.register(token_endpoint_auth_method="client_secret_basic")["body"])
    client_id, secret = registered["client_id"], registered["client_secret"]
    code = bridge.code(client_id)
    assert secret != bridge.describe(bridge.app_id)["ClientSecret"]  # Cognito's secret never leaves the bridge
    wrong = base64.b64encode(f"{client_id}:not-it".encode()).decode()
    refused = bridge.exchange(client_id, code, {"client_id": ""})
    assert (refused["statusCode"], json.loads(refused["body"])["error"]) == (401, "invalid_client")
    bad = bridge.call(
        "POST",
        "/oauth2/token",
        form={"grant_type": "authorization_code", "code": code, "code_verifier": VERIFIER, "redirect_uri": CALLBACK},
        headers={"authorization": f"Basic {wrong}"},
    )
    assert (bad["statusCode"], json.loads(bad["body"])["error"]) == (401, "invalid_client")
    good = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    answer = bridge.call(
        "POST",
        "/oauth2/token",
        form={"grant_type": "authorization_code", "code": code, "code_verifier": VERIFIER, "redirect_uri": CALLBACK},
        headers={"authorization": f"Basic {good}"},
    )
    assert answer["statusCode"] == 200, answer["body"]


def test_a_refresh_mints_the_next_tokens_without_cognito_while_the_approval_stands(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    tokens = bridge.tokens(client_id)
    other = bridge.client()
    stolen = bridge.refresh(other, tokens["refresh_token"])  # another client's: refused, and not used up
    assert (stolen["statusCode"], json.loads(stolen["body"])["error"]) == (400, "invalid_grant")
    calls = len(bridge.cognito.calls)
    bridge.clock.advance(600)
    answer = bridge.refresh(client_id, tokens["refresh_token"], scope="mcp/invoke offline_access")
    assert answer["statusCode"] == 200, answer["body"]
    refreshed = json.loads(answer["body"])
    assert refreshed["access_token"] != tokens["access_token"] and refreshed["scope"] == "mcp/invoke"
    claims = bridge.accepted(refreshed["access_token"]).claims
    assert (claims["sub"], claims["client_id"], claims["exp"]) == ("alice-sub", client_id, int(bridge.clock()) + 900)
    assert len(bridge.cognito.calls) == calls  # nothing upstream
    more = bridge.refresh(client_id, refreshed["refresh_token"], scope="mcp/invoke admin")
    assert (more["statusCode"], json.loads(more["body"])) == (
        400,
        {"error": "invalid_scope", "error_description": "a refresh cannot add scopes the person did not approve"},
    )
    unknown = bridge.refresh(client_id, "rt-never-issued")
    assert (unknown["statusCode"], json.loads(unknown["body"])["error"]) == (400, "invalid_grant")


def test_a_person_disabled_in_the_user_pool_can_no_longer_refresh_and_their_approval_goes(
    bridge: BridgeUnderTest,
) -> None:
    user = bridge.cognito_idp.admin_create_user(
        UserPoolId=bridge.pool, Username="carol@example.com", MessageAction="SUPPRESS"
    )["User"]["Username"]
    bridge.cognito.person = user
    bridge.cognito.usernames[user] = user
    client_id = bridge.client()
    tokens = bridge.tokens(client_id)
    refreshed = bridge.refresh(client_id, tokens["refresh_token"])
    assert refreshed["statusCode"] == 200, refreshed["body"]
    bridge.cognito_idp.admin_disable_user(UserPoolId=bridge.pool, Username=user)
    refused = bridge.refresh(client_id, json.loads(refreshed["body"])["refresh_token"])
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        400,
        {
            "error": "invalid_grant",
            "error_description": "the refresh token was revoked, has expired or is not this client's",
        },
    )
    assert not [k for k in bridge.items() if k.startswith((f"approval#{user}#", "refresh#"))]


def test_a_refresh_token_works_once_and_its_reuse_revokes_the_whole_family(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    first = bridge.tokens(client_id, jar)["refresh_token"]
    answer = bridge.refresh(client_id, first)
    assert answer["statusCode"] == 200
    second = json.loads(answer["body"])["refresh_token"]
    assert second != first and len(second) == 43
    third = json.loads(bridge.refresh(client_id, second)["body"])["refresh_token"]
    approval = json.loads(next(v for k, v in bridge.items().items() if k.startswith("approval#"))["doc"]["S"])
    assert len(approval["refresh"]) == 1  # the rotated-out tokens leave the family's list
    reused = bridge.refresh(client_id, first)  # a stolen copy of a used token (or its client, robbed)
    assert (reused["statusCode"], json.loads(reused["body"])) == (
        400,
        {
            "error": "invalid_grant",
            "error_description": "the refresh token was revoked, has expired or is not this client's",
        },
    )
    assert bridge.refresh(client_id, third)["statusCode"] == 400  # the whole family goes
    assert not [k for k in bridge.items() if k.startswith(("approval#", "refresh#"))]
    assert bridge.authorize(client_id, jar)["statusCode"] == 200  # the person is asked again


def test_an_aws_outage_is_a_503_with_a_generic_message(
    bridge: BridgeUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    client = bridge.bridge.store.dynamodb.client()
    with Stubber(client) as stub:
        for _ in range(MAX_ATTEMPTS):  # a 5xx is retried, within the invocation's time, before the 503
            stub.add_client_error("get_item", service_error_code="InternalServerError", service_message="boom inside")
        answer = bridge.authorize("someclient")
        stub.assert_no_pending_responses()
    assert (answer["statusCode"], json.loads(answer["body"])) == (
        503,
        {"error": "temporarily_unavailable", "error_description": "the authorization server is unavailable; retry"},
    )
    assert "boom inside" in caplog.text


def test_cleanup_removes_clients_unused_for_thirty_days_and_keeps_the_others(bridge: BridgeUnderTest) -> None:
    idle, busy = bridge.client(), bridge.client()
    idle_tokens = bridge.tokens(idle)
    busy_tokens = bridge.tokens(busy)
    bridge.clock.advance(20 * 86_400)
    assert bridge.refresh(busy, busy_tokens["refresh_token"])["statusCode"] == 200
    bridge.clock.advance(11 * 86_400)
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 1, "keptInUse": 0, "failed": 0}
    assert f"client#{idle}" not in bridge.items() and f"client#{busy}" in bridge.items()
    unknown = bridge.refresh(idle, idle_tokens["refresh_token"])
    assert (unknown["statusCode"], json.loads(unknown["body"])["error"]) == (401, "invalid_client")


def test_a_metadata_document_request_with_a_redirect_uri_it_does_not_list_registers_nothing(
    bridge: BridgeUnderTest,
) -> None:
    url = bridge.serve_document("/strict-client.json", ["http://127.0.0.1:1111/cb"])
    refused = bridge.authorize(url)  # asks for CALLBACK, which the document does not list
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        400,
        {"error": "invalid_request", "error_description": "redirect_uri is not registered for this client"},
    )
    assert "location" not in refused["headers"]
    assert bridge.app_clients() == {}
    assert metadata_url_key(url) not in bridge.items()


# ---- the consent step ---------------------------------------------------------------------------
def test_authorize_answers_the_consent_page_and_nothing_goes_to_cognito_before_the_approve(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client(client_name="<b>Evil</b> & co")
    page = bridge.authorize(client_id)
    assert page["statusCode"] == 200 and "location" not in page["headers"]
    assert '<span id="client-name">&lt;b&gt;Evil&lt;/b&gt; &amp; co</span>' in page["body"]  # escaped, never markup
    assert page["cookies"][0].startswith("mcp-consent-csrf=")
    assert page["headers"]["cache-control"] == "no-store"
    assert bridge.app_clients() == {} and bridge.cognito.calls == []


def test_deny_sends_access_denied_with_the_state_to_the_registered_redirect_uri(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    form, _ = consent_form(bridge.authorize(client_id, jar, state="xyz"))
    answer = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "deny"}, jar=jar)
    assert answer["statusCode"] == 302
    location = urlsplit(answer["headers"]["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CALLBACK
    assert parse_qs(location.query) == {
        "error": ["access_denied"],
        "error_description": ["the user denied the request"],
        "state": ["xyz"],
        "iss": [ISSUER],
    }
    assert "cookies" not in answer and bridge.app_clients() == {}


@pytest.mark.parametrize(
    "spoil",
    ["expired", "other-cookie", "no-cookie", "edited-request", "other-origin"],
)
def test_a_consent_form_that_is_stale_or_not_this_browsers_is_refused_with_403(
    bridge: BridgeUnderTest, spoil: str
) -> None:
    client_id = bridge.client()
    form, cookie = consent_form(bridge.authorize(client_id))
    headers = {"cookie": cookie}
    if spoil == "expired":
        bridge.clock.advance(601)
    elif spoil == "other-cookie":
        headers["cookie"] = "mcp-consent-csrf=" + "A" * 32
    elif spoil == "no-cookie":
        headers = {}
    elif spoil == "edited-request":
        form["request"] = form["request"].replace("state=s", "state=t")
    else:
        headers["origin"] = "https://attacker.example"
    answer = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, headers=headers)
    assert answer["statusCode"] == 403
    assert json.loads(answer["body"])["error"] == "access_denied"
    assert bridge.cognito.calls == [] and "location" not in answer["headers"]
    assert bridge.app_clients() == {}


def test_a_consent_form_is_answered_once_and_a_replay_writes_nothing(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    form, _ = consent_form(bridge.authorize(client_id, jar))
    first = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar)
    assert first["statusCode"] == 302 and first["headers"]["location"].startswith(DOMAIN)
    items = set(bridge.items())
    for decision in ("approve", "approve", "deny"):
        replay = bridge.call("POST", "/oauth2/consent", form={**form, "decision": decision}, jar=jar)
        assert (replay["statusCode"], json.loads(replay["body"])) == (
            403,
            {
                "error": "access_denied",
                "error_description": "this form was sent already: open the client's sign-in link again",
            },
        )
    assert set(bridge.items()) == items  # no sign-in record more
    assert bridge.app_clients() == {}
    console = dict(re.findall(r'name="(token)" value="([^"]*)"', approvals_page(bridge, jar)["body"]))
    assert bridge.call("POST", "/oauth2/consent", form={**console, "decision": "sign-in"}, jar=jar)["statusCode"] == 302
    again = bridge.call("POST", "/oauth2/consent", form={**console, "decision": "sign-in"}, jar=jar)
    assert again["statusCode"] == 403


def test_an_approval_stands_for_that_person_and_client_and_is_asked_again_when_the_scopes_grow(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    bridge.code(client_id, jar)
    assert set(jar) == {"mcp-consent-csrf", "mcp-sign-in", "mcp-person"}
    again = bridge.authorize(client_id, jar, state="again")
    assert again["statusCode"] == 302 and again["headers"]["location"].startswith(f"{DOMAIN}/oauth2/authorize?")
    assert bridge.code(client_id, jar, state="again")
    # More scopes than approved: the page again.
    assert bridge.authorize(client_id, jar, scope="mcp/invoke openid")["statusCode"] == 200
    # Another client of the same person: the page.
    assert bridge.authorize(bridge.client(), jar)["statusCode"] == 200
    # Another browser (no person cookie): the page.
    assert bridge.authorize(client_id)["statusCode"] == 200
    # And none stands past the approval's days.
    bridge.clock.advance(31 * 86_400)
    jar["mcp-person"] = bridge.bridge._signer().person_cookie("alice-sub", bridge.clock())
    assert bridge.authorize(client_id, jar)["statusCode"] == 200


def test_a_standing_approval_gives_no_code_when_another_person_signs_in_at_cognito(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    bridge.code(client_id, jar)
    bridge.cognito.person = "mallory-sub"
    answer = bridge.sign_in(client_id, jar)
    assert (answer["statusCode"], json.loads(answer["body"])["error"]) == (403, "access_denied")
    assert "location" not in answer["headers"] and not [k for k in bridge.items() if "mallory" in k]


# ---- the callback: only a sign-in the bridge sent, in the browser that approved it ---------------
def test_the_callback_refuses_a_state_it_never_issued_and_a_record_used_twice(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    approved = bridge.approve(client_id, jar)
    back = bridge.cognito.login(approved["headers"]["location"])
    query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
    forged = bridge.call("GET", "/oauth2/callback", query={**query, "state": "A" * 43}, jar=jar)
    assert (forged["statusCode"], json.loads(forged["body"])) == (
        400,
        {
            "error": "invalid_request",
            "error_description": "this sign-in expired or was used already: start again from your client",
        },
    )
    assert bridge.call("GET", "/oauth2/callback", query=query, jar=jar)["statusCode"] == 302
    replay = bridge.call("GET", "/oauth2/callback", query=query, jar=jar)
    assert replay["statusCode"] == 400 and "location" not in replay["headers"]


def test_a_sign_in_link_opened_in_another_browser_gives_no_code(bridge: BridgeUnderTest) -> None:
    """Login CSRF through the bridge: the attacker approves its own client, and sends Cognito's link
    (with the attacker's state) to the victim, whose Cognito session answers at once."""
    client_id = bridge.client(redirect_uris=["https://attacker.example/cb"])
    approved = bridge.approve(client_id, {}, redirect_uri="https://attacker.example/cb")
    back = bridge.cognito.login(approved["headers"]["location"])  # in the victim's browser
    query = {k: v[0] for k, v in parse_qs(urlsplit(back).query).items()}
    answer = bridge.call("GET", "/oauth2/callback", query=query, jar={"mcp-sign-in": "V" * 43})
    assert (answer["statusCode"], json.loads(answer["body"])["error"]) == (403, "access_denied")
    assert "location" not in answer["headers"]


def test_cognito_cannot_send_a_code_to_an_mcp_clients_redirect_uri(bridge: BridgeUnderTest) -> None:
    """The bypass of issue 29: straight to Cognito's authorize with the client's app client id."""
    client_id = bridge.client(redirect_uris=["https://attacker.example/cb"])
    assert bridge.approve(client_id, redirect_uri="https://attacker.example/cb")["statusCode"] == 302
    direct = f"{DOMAIN}/oauth2/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": bridge.app_id,
            "redirect_uri": "https://attacker.example/cb",
            "state": "x",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
        }
    )
    with pytest.raises(AssertionError, match=r"Cognito refuses redirect_uri https://attacker\.example/cb"):
        bridge.cognito.login(direct)


# ---- approvals on the server: the person's page, revocation ---------------------------------------
def approvals_page(bridge: BridgeUnderTest, jar: Jar) -> dict[str, Any]:
    page = bridge.call("GET", "/oauth2/consent", jar=jar)
    assert page["statusCode"] == 200
    return page


def test_the_approvals_page_asks_to_sign_in_first_and_then_lists_the_persons_approvals(
    bridge: BridgeUnderTest,
) -> None:
    jar: Jar = {}
    page = approvals_page(bridge, jar)
    assert '<p id="sign-in-first">' in page["body"]
    token = re.search(r'name="token" value="([^"]*)"', page["body"])
    assert token is not None
    to_cognito = bridge.call("POST", "/oauth2/consent", form={"decision": "sign-in", "token": token.group(1)}, jar=jar)
    assert to_cognito["statusCode"] == 302
    back = urlsplit(bridge.cognito.login(to_cognito["headers"]["location"]))
    signed_in = bridge.call(
        "GET", "/oauth2/callback", query={k: v[0] for k, v in parse_qs(back.query).items()}, jar=jar
    )
    assert (signed_in["statusCode"], signed_in["headers"]["location"]) == (302, "http://127.0.0.1:3000/oauth2/consent")
    assert '<p id="approvals">You approved 0 clients.</p>' in approvals_page(bridge, jar)["body"]
    first, second = bridge.client(client_name="First"), bridge.client(client_name="Second")
    bridge.code(first, jar)
    bridge.code(second, {})  # the same person (Cognito's), another browser
    listed = approvals_page(bridge, jar)["body"]
    assert '<p id="approvals">You approved 2 clients.</p>' in listed
    assert f"<td>First</td><td>{first}</td><td>mcp/invoke</td>" in listed
    assert f"<td>Second</td><td>{second}</td>" in listed


def test_revoking_an_approval_revokes_its_refresh_tokens_and_asks_again(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    tokens = bridge.tokens(client_id, jar)
    page = approvals_page(bridge, jar)["body"]
    form = dict(re.findall(r'name="(token|client)" value="([^"]*)"', page))
    answer = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "revoke"}, jar=jar)
    assert (answer["statusCode"], answer["headers"]["location"]) == (302, "http://127.0.0.1:3000/oauth2/consent")
    refused = bridge.refresh(client_id, tokens["refresh_token"])
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        400,
        {
            "error": "invalid_grant",
            "error_description": "the refresh token was revoked, has expired or is not this client's",
        },
    )
    assert '<p id="approvals">You approved 0 clients.</p>' in approvals_page(bridge, jar)["body"]
    assert bridge.authorize(client_id, jar)["statusCode"] == 200  # asked again
    # Approved again: the old refresh token stays refused (a new grant), the new one works.
    renewed = bridge.tokens(client_id, jar)
    assert bridge.refresh(client_id, tokens["refresh_token"])["statusCode"] == 400
    assert bridge.refresh(client_id, renewed["refresh_token"])["statusCode"] == 200


def test_a_code_minted_before_a_revocation_is_refused_after_it(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    bridge.tokens(client_id, jar)
    unredeemed = bridge.code(client_id, jar)  # the approval stands: straight through Cognito to a code
    page = approvals_page(bridge, jar)["body"]
    form = dict(re.findall(r'name="(token|client)" value="([^"]*)"', page))
    assert bridge.call("POST", "/oauth2/consent", form={**form, "decision": "revoke"}, jar=jar)["statusCode"] == 302
    refused = bridge.exchange(client_id, unredeemed)
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        400,
        {
            "error": "invalid_grant",
            "error_description": "the approval this code was issued under was revoked: sign in again",
        },
    )
    # Approved again meanwhile (a new grant): the old code stays refused.
    second = bridge.code(client_id, jar)
    page = approvals_page(bridge, jar)["body"]
    form = dict(re.findall(r'name="(token|client)" value="([^"]*)"', page))
    bridge.call("POST", "/oauth2/consent", form={**form, "decision": "revoke"}, jar=jar)
    fresh = bridge.code(client_id, jar)
    assert bridge.exchange(client_id, second)["statusCode"] == 400
    assert bridge.exchange(client_id, fresh)["statusCode"] == 200


def test_a_revoke_form_without_the_persons_cookie_or_token_revokes_nothing(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    tokens = bridge.tokens(client_id, jar)
    form = dict(re.findall(r'name="(token|client)" value="([^"]*)"', approvals_page(bridge, jar)["body"]))
    other_browser = {"mcp-consent-csrf": jar["mcp-consent-csrf"]}
    answer = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "revoke"}, jar=other_browser)
    assert answer["statusCode"] == 403
    forged = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "revoke", "token": "1.x"}, jar=jar)
    assert forged["statusCode"] == 403
    assert bridge.refresh(client_id, tokens["refresh_token"])["statusCode"] == 200


def test_a_client_revokes_its_refresh_token_at_the_bridge_rfc_7009(bridge: BridgeUnderTest) -> None:
    client_id, other = bridge.client(), bridge.client()
    tokens = bridge.tokens(client_id)
    not_its_own = bridge.call("POST", "/oauth2/revoke", form={"token": tokens["refresh_token"], "client_id": other})
    assert not_its_own["statusCode"] == 200
    answer = bridge.call("POST", "/oauth2/revoke", form={"token": tokens["refresh_token"], "client_id": client_id})
    assert (answer["statusCode"], answer["body"]) == (200, "")
    assert bridge.refresh(client_id, tokens["refresh_token"])["statusCode"] == 400
    unknown = bridge.call("POST", "/oauth2/revoke", form={"token": "whatever", "client_id": client_id})
    assert unknown["statusCode"] == 200  # RFC 7009 §2.2: an unknown token is not an error


def test_the_operator_revokes_a_client_for_everyone(bridge: BridgeUnderTest) -> None:
    client_id, kept = bridge.client(), bridge.client()
    alice = bridge.tokens(client_id)
    bridge.cognito.person = "bob-sub"
    bob = bridge.tokens(client_id)
    bobs_other = bridge.tokens(kept)
    assert dispatch(bridge.bridge, {"action": "revoke-client", "clientId": client_id}) == {"revokedApprovals": 2}
    assert bridge.refresh(client_id, alice["refresh_token"])["statusCode"] == 400
    assert bridge.refresh(client_id, bob["refresh_token"])["statusCode"] == 400
    assert bridge.refresh(kept, bobs_other["refresh_token"])["statusCode"] == 200
    assert dispatch(bridge.bridge, {"action": "revoke-client", "clientId": "nosuchclient"}) == {
        "error": "unknown client_id: register first"
    }


def test_signing_keys_rotate_and_what_the_old_key_signed_still_verifies(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    bridge.code(client_id, jar)
    form, _ = consent_form(bridge.authorize(bridge.client(), jar))
    assert dispatch(bridge.bridge, {"action": "rotate-signing-keys"}) == {"signingKeys": 2}
    signer = bridge.bridge._signer()
    assert len(signer.keys) == 2
    assert signer.person(jar["mcp-person"], bridge.clock()) == "alice-sub"  # signed with the old key
    assert bridge.authorize(client_id, jar)["statusCode"] == 302  # the old person cookie still stands
    assert bridge.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar)["statusCode"] == 302
    new = signer.person_cookie("alice-sub", bridge.clock())
    assert new.split(".")[1] == signer.sign("person", new.split(".")[0])
    assert dispatch(bridge.bridge, {"action": "rotate-signing-keys"}) == {"signingKeys": 3}
    assert dispatch(bridge.bridge, {"action": "rotate-signing-keys"}) == {"signingKeys": 3}  # at most three kept
    assert bridge.bridge._signer().person(jar["mcp-person"], bridge.clock()) is None  # the oldest is gone


def test_retiring_the_signing_keys_refuses_what_the_old_ones_signed_in_every_container_at_once(
    bridge: BridgeUnderTest,
) -> None:
    client_id = bridge.client()
    jar: Jar = {}
    bridge.code(client_id, jar)
    form, _ = consent_form(bridge.authorize(bridge.client(), jar))
    other_container = replace(bridge.bridge)  # a second warm container of the function, same table
    assert other_container._signer().person(jar["mcp-person"], bridge.clock()) == "alice-sub"
    assert dispatch(bridge.bridge, {"action": "rotate-signing-keys", "retire": True}) == {"signingKeys": 1}
    assert other_container._signer().person(jar["mcp-person"], bridge.clock()) is None  # no cached key
    assert bridge.authorize(client_id, jar)["statusCode"] == 200  # the person cookie no longer stands
    refused = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar)
    assert (refused["statusCode"], json.loads(refused["body"])["error"]) == (403, "access_denied")


# ---- registration limits and the expiry of clients that never sign in -----------------------------
def limited(bridge: BridgeUnderTest, **limits: int) -> None:
    bridge.bridge.settings = bridge.bridge.settings.model_copy(update=limits)


def first_use(bridge: BridgeUnderTest, path: str, ip: str) -> dict[str, Any]:
    url = bridge.serve_document(path, [CALLBACK])
    return bridge.approve(url, ip=ip)


def back_at_client(answer: dict[str, Any]) -> dict[str, list[str]]:
    """The bridge's redirect to the MCP client after the sign-in: its query."""
    assert answer["statusCode"] == 302, answer["body"]
    location = urlsplit(answer["headers"]["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CALLBACK
    return parse_qs(location.query)


def test_a_flood_of_metadata_documents_from_one_host_is_refused_at_sign_in_while_other_clients_still_register(
    bridge: BridgeUnderTest,
) -> None:
    limited(bridge, registrations_per_host_per_hour=3)
    for n in range(3):  # each from another address and person: only the host is the same
        bridge.cognito.person = f"person-{n}"
        url = bridge.serve_document(f"/flood-{n}.json", [CALLBACK])
        assert "code" in back_at_client(bridge.sign_in(url, ip=f"198.51.100.{n}"))
    bridge.cognito.person = "person-3"
    url = bridge.serve_document("/flood-3.json", [CALLBACK])
    assert bridge.approve(url, ip="198.51.100.3")["statusCode"] == 302  # nothing is counted before sign-in
    refused = back_at_client(bridge.sign_in(url, ip="198.51.100.3"))
    assert refused == {
        "error": ["temporarily_unavailable"],
        "error_description": [f"at most 3 new clients per hour from metadata documents on {HOST}"],
        "state": ["s"],
        "iss": [ISSUER],
    }
    assert metadata_url_key(url) not in bridge.items() and bridge.app_clients() == {}
    # Known documents go on working, and a client registering from elsewhere still gets in.
    assert "code" in back_at_client(bridge.sign_in(bridge.serve_document("/flood-0.json", [CALLBACK])))
    assert bridge.register(ip="192.0.2.50")["statusCode"] == 201


def test_a_person_connects_a_bounded_number_of_new_clients_an_hour_and_another_person_is_not_held_by_it(
    bridge: BridgeUnderTest,
) -> None:
    limited(bridge, clients_per_person_per_hour=2)
    first, second, third = (bridge.client() for _ in range(3))
    assert "code" in back_at_client(bridge.sign_in(first))
    assert "code" in back_at_client(bridge.sign_in(second))
    assert "code" in back_at_client(bridge.sign_in(first))  # a client already approved counts once
    refused = back_at_client(bridge.sign_in(third))
    assert (refused["error"], refused["error_description"]) == (
        ["temporarily_unavailable"],
        ["at most 2 new clients per hour for one person"],
    )
    assert not [k for k in bridge.items() if k.startswith(f"approval#alice-sub#client#{third}")]
    bridge.cognito.person = "bob-sub"
    assert "code" in back_at_client(bridge.sign_in(third))


def test_a_flood_from_one_address_is_refused_for_both_registration_methods_while_another_address_registers(
    bridge: BridgeUnderTest,
) -> None:
    # A registration takes one token; a metadata document's first use two: the authorize page and the
    # approving POST each fetch it (nothing is stored before a person signs in), and every fetch counts.
    limited(bridge, registrations_per_hour=3, registration_burst=3)
    assert bridge.register(ip="203.0.113.77")["statusCode"] == 201
    assert first_use(bridge, "/one-address.json", "203.0.113.77")["statusCode"] == 302
    by_document = first_use(bridge, "/one-address-2.json", "203.0.113.77")
    by_registration = bridge.register(ip="203.0.113.77")
    for refused in (by_document, by_registration):
        assert (refused["statusCode"], json.loads(refused["body"])["error_description"]) == (
            429,
            "too many registrations from one address: a burst of 3, then 3 an hour",
        )
        assert refused["headers"]["retry-after"].isdigit()
    assert bridge.register(ip="203.0.113.78")["statusCode"] == 201


def test_ipv6_sources_are_limited_per_64_prefix(bridge: BridgeUnderTest) -> None:
    limited(bridge, registrations_per_hour=1, registration_burst=1)
    assert bridge.register(ip="2001:db8:1:2::1")["statusCode"] == 201
    assert bridge.register(ip="2001:db8:1:2:ffff::9")["statusCode"] == 429  # same /64, another address
    assert bridge.register(ip="2001:db8:1:3::1")["statusCode"] == 201


def test_clients_that_never_completed_a_token_exchange_are_gone_within_the_hour(bridge: BridgeUnderTest) -> None:
    limited(bridge)
    never = bridge.client()
    assert first_use(bridge, "/never-signed-in.json", "198.51.100.20")["statusCode"] == 302  # stores nothing
    signed_in = bridge.client()
    bridge.clock.advance(60)
    bridge.tokens(signed_in)
    bridge.clock.advance(20 * 60)
    recent = bridge.client()
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 0}  # 21 min: kept
    bridge.clock.advance(10 * 60)  # the first is 31 minutes old, never exchanged a token
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 1, "keptInUse": 0, "failed": 0}
    assert metadata_url_key(f"https://{HOST}:{bridge.port}/never-signed-in.json") not in bridge.items()
    assert f"client#{never}" not in bridge.items() and f"client#{recent}" in bridge.items()
    assert f"client#{signed_in}" in bridge.items()
    # The one that signed in stays until it is unused for 30 days.
    bridge.clock.advance(31 * 86_400)
    assert dispatch(bridge.bridge, {"action": "cleanup"})["removed"] == 2


def test_cleanup_removes_the_app_clients_of_an_earlier_version_which_list_the_clients_redirect_uris(
    bridge: BridgeUnderTest,
) -> None:
    app = bridge.cognito_idp.create_user_pool_client(
        UserPoolId=bridge.pool, ClientName="legacy", CallbackURLs=[CALLBACK], AllowedOAuthFlows=["code"]
    )["UserPoolClient"]["ClientId"]
    now = str(int(bridge.clock()))
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={
            "pk": {"S": f"client#{app}"},
            "client": {"S": app},
            "redirectUris": {"L": [{"S": CALLBACK}]},
            "createdAt": {"N": now},
            "lastUsedAt": {"N": str(int(now) + 5)},
            "exchangedAt": {"N": now},
        },
    )
    refused = bridge.authorize(app)
    assert (refused["statusCode"], json.loads(refused["body"])["error"]) == (400, "invalid_client")
    assert dispatch(bridge.bridge, {"action": "cleanup"})["removed"] == 1
    assert bridge.app_clients() == {} and f"client#{app}" not in bridge.items()


def test_the_metadata_names_both_registration_methods_and_says_metadata_documents_are_preferred(
    bridge: BridgeUnderTest,
) -> None:
    document = json.loads(bridge.call("GET", "/.well-known/oauth-authorization-server")["body"])
    assert document["issuer"] == ISSUER
    assert document["authorization_response_iss_parameter_supported"] is True  # RFC 9207
    assert document["client_id_metadata_document_supported"] is True
    assert document["registration_endpoint"] == "http://127.0.0.1:3000/oauth2/register"
    assert document["revocation_endpoint"] == "http://127.0.0.1:3000/oauth2/revoke"
    assert document["jwks_uri"] == "http://127.0.0.1:3000/.well-known/jwks.json"
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["registration_note"] == (
        "Prefer a Client ID Metadata Document (an https client_id): MCP 2026-07-28 deprecates dynamic "
        "registration, which stays available at registration_endpoint for clients that lack it"
    )


def test_the_origin_is_the_configured_one_whatever_host_a_request_names(bridge: BridgeUnderTest) -> None:
    bridge.bridge.settings = bridge.bridge.settings.model_copy(update={"public_origin": ISSUER})
    elsewhere = {"host": "attacker.example"}
    document = json.loads(bridge.call("GET", "/.well-known/oauth-authorization-server", headers=elsewhere)["body"])
    assert (document["issuer"], document["token_endpoint"]) == (ISSUER, f"{ISSUER}/oauth2/token")
    client_id = bridge.client()
    jar: Jar = {}
    page = bridge.call("GET", "/oauth2/authorize", query=authorize_query(client_id), jar=jar, headers=elsewhere)
    form, _ = consent_form(page)
    approved = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "approve"}, jar=jar, headers=elsewhere)
    query = parse_qs(urlsplit(approved["headers"]["location"]).query)
    assert query["redirect_uri"] == [BRIDGE_CALLBACK]  # Cognito sends the person back to the configured origin
    assert bridge.app_clients() == {}  # and no stranger's Host pins another callback
    assert bridge.describe(bridge.app_id)["CallbackURLs"] == [BRIDGE_CALLBACK]


def test_the_resource_a_client_asks_for_is_compared_in_canonical_form(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    for resource in ("HTTP://127.0.0.1:3000/mcp/", "http://127.0.0.1:3000/mcp"):
        assert bridge.authorize(client_id, resource=resource)["statusCode"] == 200
    refused = bridge.authorize(client_id, resource="https://127.0.0.1:3000/mcp")
    assert (refused["statusCode"], json.loads(refused["body"])["error"]) == (400, "invalid_target")


def test_a_client_asking_for_offline_access_is_registered_to_refresh_and_cognito_is_asked_only_who_signed_in(
    bridge: BridgeUnderTest,
) -> None:
    registered = json.loads(
        bridge.register(grant_types=["authorization_code"], scope="mcp/invoke offline_access")["body"]
    )
    assert registered["grant_types"] == ["authorization_code", "refresh_token"]
    assert registered["scope"] == "mcp/invoke offline_access"
    approved = bridge.approve(registered["client_id"], scope="mcp/invoke offline_access")
    assert parse_qs(urlsplit(approved["headers"]["location"]).query)["scope"] == ["openid"]
    document = json.loads(bridge.call("GET", "/.well-known/oauth-authorization-server")["body"])
    assert document["scopes_supported"] == ["mcp/invoke", "openid", "offline_access"]


def test_a_client_removed_by_cleanup_gets_401_invalid_client_and_registers_again(bridge: BridgeUnderTest) -> None:
    client_id = bridge.client()
    bridge.clock.advance(3600)  # never exchanged a token: removed by the next cleanup
    assert dispatch(bridge.bridge, {"action": "cleanup"})["removed"] == 1
    refresh = {"grant_type": "refresh_token", "refresh_token": "rt", "client_id": client_id}
    answer = bridge.call("POST", "/oauth2/token", form=refresh)
    # RFC 6749 §5.2: 401 invalid_client, which clients (the MCP SDKs) answer by registering again.
    assert (answer["statusCode"], json.loads(answer["body"])["error"]) == (401, "invalid_client")
    again = bridge.register()
    assert again["statusCode"] == 201
    assert bridge.authorize(json.loads(again["body"])["client_id"])["statusCode"] == 200


# ---- issue 29: limits per registrable domain and per source, cleanup that heals ---------------------
def serve_document_on(bridge: BridgeUnderTest, host: str, path: str) -> str:
    url = f"https://{host}:{bridge.port}{path}"
    document = {"client_id": url, "client_name": "CIMD client", "redirect_uris": [CALLBACK]}
    bridge.routes[path] = (200, {"content-type": "application/json"}, json.dumps(document).encode())
    return url


def test_metadata_documents_on_any_subdomain_of_one_registrable_domain_share_its_limit(
    bridge: BridgeUnderTest,
) -> None:
    # Wildcard DNS gives an attacker every name under evil.co.uk: the limit is the registrable
    # domain's (co.uk is a public suffix), not each host's.
    limited(bridge, registrations_per_host_per_hour=3)
    for n in range(3):
        url = serve_document_on(bridge, f"h{n}.evil.co.uk", f"/wildcard-{n}.json")
        assert "code" in back_at_client(bridge.sign_in(url))
    url = serve_document_on(bridge, "h3.evil.co.uk", "/wildcard-3.json")
    refused = back_at_client(bridge.sign_in(url))
    assert refused["error_description"] == ["at most 3 new clients per hour from metadata documents on evil.co.uk"]
    assert metadata_url_key(url) not in bridge.items()
    # Another registrable domain under the same public suffix has a limit of its own.
    assert "code" in back_at_client(bridge.sign_in(serve_document_on(bridge, "app.other.co.uk", "/other.json")))


def test_eleven_people_behind_one_address_onboard_at_once_and_the_burst_refills_at_the_hourly_rate(
    bridge: BridgeUnderTest,
) -> None:
    limited(bridge, registrations_per_hour=10)  # the defaults: a burst of 30, then 10 an hour
    office = "198.51.100.7"
    for _ in range(11):
        assert bridge.register(ip=office)["statusCode"] == 201
    for _ in range(19):
        assert bridge.register(ip=office)["statusCode"] == 201
    refused = bridge.register(ip=office)
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        429,
        {
            "error": "temporarily_unavailable",
            "error_description": "too many registrations from one address: a burst of 30, then 10 an hour",
        },
    )
    assert refused["headers"]["retry-after"] == "360"  # one registration comes back every 6 minutes
    assert bridge.register(ip="198.51.100.8")["statusCode"] == 201  # another address has its own
    bridge.clock.advance(360)
    assert bridge.register(ip=office)["statusCode"] == 201
    assert bridge.register(ip=office)["statusCode"] == 429


def test_a_metadata_fetch_counts_against_its_source_even_when_it_fails(bridge: BridgeUnderTest) -> None:
    limited(bridge, registrations_per_hour=1, registration_burst=2)
    url = f"https://{HOST}:{bridge.port}/missing.json"  # answers 404
    for _ in range(2):
        failed = bridge.call("GET", "/oauth2/authorize", query=authorize_query(url), ip="192.0.2.77")
        assert (failed["statusCode"], json.loads(failed["body"])["error_description"]) == (
            400,
            "the client_id URL answered HTTP 404 (redirects are not followed)",
        )
    refused = bridge.call("GET", "/oauth2/authorize", query=authorize_query(url), ip="192.0.2.77")
    assert (refused["statusCode"], json.loads(refused["body"])["error_description"]) == (
        429,
        "too many registrations from one address: a burst of 2, then 1 an hour",
    )
    assert bridge.app_clients() == {}


class FailingDeletes:
    """Cognito refuses DeleteUserPoolClient for the client ids in `failing` (an outage, say)."""

    def __init__(self, cognito: Any) -> None:
        self.failing: set[str] = set()
        event = "before-parameter-build.cognito-identity-provider.DeleteUserPoolClient"
        cognito.meta.events.register(event, self._before)

    def _before(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("ClientId") in self.failing:
            raise ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "not now"}}, "DeleteUserPoolClient"
            )


def earlier_version_client(bridge: BridgeUnderTest) -> tuple[str, str]:
    """What an earlier version left for one MCP client: its own Cognito app client (listing the bridge's
    callback, its secret in the registration), an approval, a refresh token standing for Cognito's."""
    made = bridge.cognito_idp.create_user_pool_client(
        UserPoolId=bridge.pool,
        ClientName="per-client",
        GenerateSecret=True,
        CallbackURLs=[BRIDGE_CALLBACK],
        AllowedOAuthFlows=["code"],
    )["UserPoolClient"]
    client_id = bridge.client()
    bridge.dynamodb.update_item(
        TableName=bridge.table,
        Key={"pk": {"S": f"client#{client_id}"}},
        UpdateExpression="SET #client = :app, cognitoSecret = :secret",
        ExpressionAttributeNames={"#client": "client"},
        ExpressionAttributeValues={":app": {"S": made["ClientId"]}, ":secret": {"S": made["ClientSecret"]}},
    )
    now = int(bridge.clock())
    refresh = f"old-refresh-token-{client_id}"
    approval = {
        "subject": "alice-sub",
        "client_key": f"client#{client_id}",
        "client_id": client_id,
        "client_name": "t",
        "scopes": ["mcp/invoke"],
        "approved_at": now,
        "expires_at": now + 86_400,
        "grant": "g" * 43,
        "refresh": [hashlib.sha256(refresh.encode()).hexdigest()],
    }
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={
            "pk": {"S": f"approval#alice-sub#client#{client_id}"},
            "doc": {"S": json.dumps(approval, separators=(",", ":"))},
            "clientKey": {"S": f"client#{client_id}"},
            "revision": {"N": "1"},
            "expiresAt": {"N": str(now + 86_400)},
        },
    )
    record = {"subject": "alice-sub", "client_key": f"client#{client_id}", "grant": "g" * 43, "token": "cognito-rt"}
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={
            "pk": {"S": "refresh#" + hashlib.sha256(refresh.encode()).hexdigest()},
            "doc": {"S": json.dumps(record, separators=(",", ":"))},
            "expiresAt": {"N": str(now + 86_400)},
        },
    )
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={"pk": {"S": "meta#clients"}, "active": {"N": "1"}},
    )
    return client_id, refresh


def test_after_the_update_an_earlier_versions_client_refreshes_with_bridge_tokens_and_cleanup_removes_its_app_client(
    bridge: BridgeUnderTest,
) -> None:
    client_id, refresh = earlier_version_client(bridge)
    (old_app,) = bridge.app_clients()
    # Connected before the update: its refresh token keeps working (no sign-in again), rotated to the bridge's.
    answer = bridge.refresh(client_id, refresh)
    assert answer["statusCode"] == 200, answer["body"]
    assert bridge.accepted(json.loads(answer["body"])["access_token"]).client == client_id
    client2, refresh2 = earlier_version_client(bridge)
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 0}
    assert bridge.app_clients() == {}  # the per-client app clients are gone from Cognito
    for cid in (client_id, client2):
        assert {"client", "cognitoSecret"}.isdisjoint(bridge.registration(cid))
    assert "meta#clients" not in bridge.items()
    assert not [v for k, v in bridge.items().items() if k.startswith("refresh#") and "cognito-rt" in v["doc"]["S"]]
    assert bridge.refresh(client2, refresh2)["statusCode"] == 200  # scrubbed, still the client's token
    assert old_app not in bridge.app_clients()


def test_a_cognito_delete_that_fails_in_the_cleanup_is_counted_and_the_next_cleanup_finishes_it(
    bridge: BridgeUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    client_id, _ = earlier_version_client(bridge)
    (app,) = bridge.app_clients()
    deletes = FailingDeletes(bridge.bridge.clients.cognito.client())
    deletes.failing = {app}
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 1}
    assert set(bridge.app_clients()) == {app} and bridge.registration(client_id)["client"]["S"] == app
    assert f"cleanup: could not remove the app client of client#{client_id}" in caplog.text
    deletes.failing = set()
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 0}
    assert bridge.app_clients() == {} and "client" not in bridge.registration(client_id)


def test_concurrent_takes_from_one_bucket_never_give_out_more_than_its_burst(bridge: BridgeUnderTest) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = bridge.bridge.store
    with ThreadPoolExecutor(12) as pool:
        waits = list(pool.map(lambda _: store.take_token("source#office", 11, 10), range(12)))
    assert sorted(waits) == [0] * 11 + [360]  # conditional writes: a lost race reads again
    bucket = bridge.items()["rate#source#office"]
    assert (bucket["milliTokens"]["N"], bucket["takenAtMs"]["N"]) == ("0", str(1_900_000_000_000))
    assert bridge.authorize(bridge.client())["statusCode"] == 200


# ---- the proxy shape (issue 29): Cognito only ever redirects to the bridge --------------------------


def test_no_cognito_app_client_ever_lists_an_mcp_clients_redirect_uri(bridge: BridgeUnderTest) -> None:
    limited(bridge)
    registered = json.loads(bridge.register(redirect_uris=[CALLBACK, "https://attacker.example/cb"])["body"])
    assert "code" in back_at_client(bridge.sign_in(registered["client_id"]))
    url = bridge.serve_document("/proxy-shape.json", [CALLBACK])
    assert "code" in back_at_client(bridge.sign_in(url))
    assert bridge.app_clients() == {}  # one app client, the bridge's, whatever the clients
    assert bridge.describe(bridge.app_id)["CallbackURLs"] == [BRIDGE_CALLBACK]


def test_no_secret_raw_refresh_token_code_or_private_key_is_readable_in_the_bridge_tables_items(
    bridge: BridgeUnderTest,
) -> None:
    registered = json.loads(bridge.register(token_endpoint_auth_method="client_secret_basic")["body"])
    client_id, secret = registered["client_id"], registered["client_secret"]
    basic = {"authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}
    code = bridge.code(client_id)
    assert code not in str(bridge.items())  # only its hash
    answer = bridge.call(
        "POST",
        "/oauth2/token",
        form={"grant_type": "authorization_code", "code": code, "code_verifier": VERIFIER, "redirect_uri": CALLBACK},
        headers=basic,
    )
    tokens = json.loads(answer["body"])
    rotated = json.loads(
        bridge.call(
            "POST",
            "/oauth2/token",
            form={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]},
            headers=basic,
        )["body"]
    )
    cognito_secret = bridge.describe(bridge.app_id)["ClientSecret"]
    items = bridge.items()
    dump = str(items)
    for value in (secret, cognito_secret, tokens["refresh_token"], rotated["refresh_token"], code):
        assert value not in dump
    for value in (tokens["access_token"], rotated["access_token"], "rt-1", "PRIVATE KEY"):
        assert value not in dump  # no token at all, not Cognito's, no key material
    (form_key,) = bridge.bridge._signer().keys  # the forms' and cookies' HMAC key: sealed with KMS
    assert set(items["meta#signing-keys"]) == {"pk", "sealed", "newest"}
    assert form_key not in bytes(items["meta#signing-keys"]["sealed"]["B"]) and repr(form_key) not in dump
    assert bridge.app_clients() == {}


def test_signing_keys_an_earlier_version_kept_in_clear_are_sealed_at_their_first_use_and_keep_verifying(
    bridge: BridgeUnderTest,
) -> None:
    old = b"k" * 32
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={"pk": {"S": "meta#signing-keys"}, "keys": {"L": [{"B": old}]}, "newest": {"B": old}},
    )
    bridge.dynamodb.put_item(TableName=bridge.table, Item={"pk": {"S": "meta#signing-key"}, "key": {"B": old}})
    cookie = bridge.bridge._signer().person_cookie("alice-sub", bridge.clock())  # signed with the old key
    assert set(bridge.items()["meta#signing-keys"]) == {"pk", "sealed", "newest"}  # sealed on that read
    assert bridge.bridge._signer().person(cookie, bridge.clock()) == "alice-sub"
    dispatch(bridge.bridge, {"action": "cleanup"})
    assert "meta#signing-key" not in bridge.items()  # the oldest versions' single key, in clear, is gone
    # Sealed with a KMS key the bridge cannot use (a restored backup elsewhere): new keys, nothing opens.
    other = bridge.kms.create_key()["KeyMetadata"]["KeyId"]
    foreign = KeySealer(other, client=bridge.kms).seal((old,))
    bridge.dynamodb.put_item(
        TableName=bridge.table,
        Item={"pk": {"S": "meta#signing-keys"}, "sealed": {"B": foreign}, "newest": {"S": "x"}},
    )
    fresh = replace(bridge.bridge, grants=replace_sealer(bridge))
    assert fresh._signer().person(cookie, bridge.clock()) is None
    assert old not in fresh._signer().keys


def replace_sealer(bridge: BridgeUnderTest) -> GrantStore:
    """The table's grants as a fresh container sees them (nothing opened yet)."""
    grants = bridge.bridge.grants
    return GrantStore(
        grants.table, clock=bridge.clock, client=bridge.dynamodb, sealer=KeySealer(grants.sealer.key, client=bridge.kms)
    )  # type: ignore[union-attr]


def test_opening_the_authorize_link_of_a_metadata_document_registers_nothing(bridge: BridgeUnderTest) -> None:
    url = bridge.serve_document("/img-tag.json", [CALLBACK])
    page = bridge.authorize(url)
    assert page["statusCode"] == 200
    assert bridge.app_clients() == {}
    assert metadata_url_key(url) not in bridge.items()
    assert "meta#clients" not in bridge.items() or bridge.items()["meta#clients"]["active"]["N"] == "0"


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "mcp/invoke admin"}, "invalid_scope"),
        ({"resource": "https://other.example.com/mcp"}, "invalid_target"),
    ],
    ids=["plain-pkce", "implicit", "unknown-scope", "other-resource"],
)
def test_an_error_before_the_person_acted_is_answered_here_and_never_redirects(
    bridge: BridgeUnderTest, params: dict[str, str], error: str
) -> None:
    client_id = json.loads(bridge.register(redirect_uris=["https://attacker.example/cb"])["body"])["client_id"]
    answer = bridge.authorize(client_id, redirect_uri="https://attacker.example/cb", **params)
    assert "location" not in answer["headers"]
    assert (answer["statusCode"], json.loads(answer["body"])["error"]) == (400, error)
