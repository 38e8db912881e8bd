"""The OAuth bridge in-process against the template's own resources in the embedded moto (the
registrations table, the user pool and its resource server, as `provision` creates them), with a
clock the tests move, Client ID Metadata Documents served over real TLS on loopback, and the
upstream token endpoint recorded (Cognito's managed login and token endpoint do not exist in moto).
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from local_stack.aws import EmbeddedAws
from local_stack.provision import ProvisionedStack

from mcp_runtime._aws import MAX_ATTEMPTS
from oauth_bridge.aws import RegistrationStore, UserPoolClients, metadata_url_key
from oauth_bridge.cimd import MetadataFetcher
from oauth_bridge.flows import DOCUMENT_MAX_AGE_SECONDS, Bridge
from oauth_bridge.handler import dispatch
from oauth_bridge.settings import BridgeSettings
from tests.integration.task_harness import Clock
from tests.tls_server import Routes, make_certificate, serve_https

CALLBACK = "http://127.0.0.1:53682/callback"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
HOST = "client.test"
DOMAIN = "https://bridge-test.auth.us-east-1.amazoncognito.com"
# Hosts under these serve metadata documents too (every name resolves to loopback here).
WILDCARD_NAMES = ("*.evil.co.uk", "*.other.co.uk")


@dataclass
class Upstream:
    """Cognito's token endpoint as the bridge calls it: each request recorded, a scripted answer."""

    status: int = 200
    body: bytes = b'{"access_token":"at","refresh_token":"rt","token_type":"Bearer","expires_in":3600}'
    calls: list[tuple[str, dict[str, list[str]], dict[str, str]]] = field(default_factory=list)

    def __call__(self, url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        self.calls.append((url, parse_qs(body.decode()), headers))
        return self.status, self.body


@dataclass
class BridgeUnderTest:
    bridge: Bridge
    clock: Clock
    upstream: Upstream
    cognito: Any
    dynamodb: Any
    pool: str
    table: str
    routes: Routes
    port: int
    template_clients: frozenset[str] = frozenset()  # the template's own (the machine client)

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

    def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        return dispatch(self.bridge, self.event(method, path, **kwargs))

    def register(self, ip: str = "203.0.113.9", **metadata: Any) -> dict[str, Any]:
        document = {"redirect_uris": [CALLBACK], "client_name": "t", "token_endpoint_auth_method": "none", **metadata}
        return self.call("POST", "/oauth2/register", json=document, ip=ip)

    def authorize(self, client_id: str, **params: str) -> dict[str, Any]:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "state": "s",
            **params,
        }
        return self.call("GET", "/oauth2/authorize", query=query)

    def approve(self, client_id: str, **params: str) -> dict[str, Any]:
        """Authorize, and approve on the consent page as the person would (its form, its cookie)."""
        page = self.authorize(client_id, **params)
        if page["statusCode"] != 200:
            return page
        cookie = page["cookies"][0].split(";")[0]
        fields = dict(re.findall(r'name="(request|token)" value="([^"]*)"', page["body"]))
        form = {name: html.unescape(value) for name, value in fields.items()} | {"decision": "approve"}
        return self.call("POST", "/oauth2/consent", form=form, headers={"cookie": cookie})

    def app_clients(self) -> dict[str, dict[str, Any]]:
        """The app clients the bridge created."""
        listed = [
            c
            for c in self.cognito.list_user_pool_clients(UserPoolId=self.pool, MaxResults=60)["UserPoolClients"]
            if c["ClientId"] not in self.template_clients
        ]
        return {
            c["ClientId"]: self.cognito.describe_user_pool_client(UserPoolId=self.pool, ClientId=c["ClientId"])[
                "UserPoolClient"
            ]
            for c in listed
        }

    def items(self) -> dict[str, dict[str, Any]]:
        return {item["pk"]["S"]: item for item in self.dynamodb.scan(TableName=self.table)["Items"]}

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
    settings = BridgeSettings.model_validate(
        {
            "BRIDGE_TABLE_NAME": table,
            "BRIDGE_USER_POOL_ID": pool,
            "BRIDGE_COGNITO_DOMAIN_URL": DOMAIN,
            "BRIDGE_RESOURCE_SCOPE": "mcp/invoke",
            "BRIDGE_MAX_CLIENTS": "3",
            "BRIDGE_REGISTRATIONS_PER_HOUR": "50",
        }
    )
    clock = Clock(1_900_000_000.0)
    cognito, dynamodb = embedded_aws.client("cognito-idp"), embedded_aws.client("dynamodb")
    upstream = Upstream()
    with serve_https(tls) as (port, routes):
        fetcher = MetadataFetcher(
            resolver=lambda host, p: ["127.0.0.1"],
            ssl_context=ssl.create_default_context(cafile=str(tls[0])),
            allow_loopback=True,
        )
        bridge = Bridge(
            settings,
            RegistrationStore(table, clock=clock, client=dynamodb),
            UserPoolClients(pool, settings.scopes, access_token_minutes=60, refresh_token_days=30, client=cognito),
            fetcher=fetcher,
            post=upstream,
            clock=clock,
        )
        template_clients = frozenset(
            c["ClientId"] for c in cognito.list_user_pool_clients(UserPoolId=pool, MaxResults=60)["UserPoolClients"]
        )
        yield BridgeUnderTest(bridge, clock, upstream, cognito, dynamodb, pool, table, routes, port, template_clients)


def test_past_the_cap_of_registered_clients_a_registration_gets_429_and_creates_nothing(
    bridge: BridgeUnderTest,
) -> None:
    for _ in range(3):
        assert bridge.register()["statusCode"] == 201
    clients, items = bridge.app_clients(), bridge.items()
    refused = bridge.register()
    assert refused["statusCode"] == 429
    assert json.loads(refused["body"]) == {
        "error": "temporarily_unavailable",
        "error_description": "the authorization server has as many clients as it accepts (3); "
        "clients that never sign in are removed within an hour: retry later",
    }
    assert refused["headers"]["retry-after"] == "900"
    assert bridge.app_clients().keys() == clients.keys()
    assert {k for k in bridge.items() if not k.startswith("rate#")} == {k for k in items if not k.startswith("rate#")}


def test_a_metadata_document_client_gets_one_app_client_which_follows_the_documents_redirect_uris(
    bridge: BridgeUnderTest,
) -> None:
    url = bridge.serve_document("/mcp-client.json", [CALLBACK])
    first = bridge.approve(url)
    assert first["statusCode"] == 302, first["body"]
    (app_id,) = bridge.app_clients()
    assert parse_qs(urlsplit(first["headers"]["location"]).query)["client_id"] == [app_id]
    assert bridge.app_clients()[app_id]["CallbackURLs"] == [CALLBACK]
    # Within the document's max age the same app client serves, without a second fetch or client.
    bridge.routes.clear()
    assert bridge.approve(url)["statusCode"] == 302
    assert list(bridge.app_clients()) == [app_id]
    # Later, the document lists another redirect URI: the old one is refused, the app client follows the new.
    bridge.clock.advance(DOCUMENT_MAX_AGE_SECONDS + 1)
    moved = "http://127.0.0.1:53999/callback"
    bridge.serve_document("/mcp-client.json", [moved])
    refused = bridge.authorize(url)
    assert (refused["statusCode"], json.loads(refused["body"])["error_description"]) == (
        400,
        "redirect_uri is not registered for this client",
    )
    assert bridge.app_clients()[app_id]["CallbackURLs"] == [CALLBACK]  # a refused request changes nothing
    assert bridge.approve(url, redirect_uri=moved)["statusCode"] == 302
    assert bridge.app_clients()[app_id]["CallbackURLs"] == [moved]
    assert list(bridge.app_clients()) == [app_id]
    assert bridge.items()[metadata_url_key(url)]["client"]["S"] == app_id


def test_the_token_endpoint_forwards_with_the_cognito_client_id_and_records_the_use(bridge: BridgeUnderTest) -> None:
    url = bridge.serve_document("/token-client.json", [CALLBACK])
    bridge.authorize(url)
    (app_id,) = bridge.app_clients()
    bridge.clock.advance(600)
    form = {
        "grant_type": "authorization_code",
        "code": "the-code",
        "code_verifier": "v" * 43,
        "redirect_uri": CALLBACK,
        "client_id": url,
        "resource": "http://127.0.0.1:3000/mcp",
    }
    answer = bridge.call("POST", "/oauth2/token", form=form)
    assert (answer["statusCode"], json.loads(answer["body"])["access_token"]) == (200, "at")
    assert answer["headers"]["cache-control"] == "no-store"
    ((target, sent, headers),) = bridge.upstream.calls
    assert target == f"{DOMAIN}/oauth2/token"
    assert sent == {
        "grant_type": ["authorization_code"],
        "code": ["the-code"],
        "code_verifier": ["v" * 43],
        "redirect_uri": [CALLBACK],
        "client_id": [app_id],  # the metadata document URL mapped to its app client; `resource` checked, not sent
    }
    assert "authorization" not in headers
    assert bridge.items()[metadata_url_key(url)]["lastUsedAt"]["N"] == str(int(bridge.clock()))


def test_basic_client_authentication_is_passed_on_for_the_app_clients_secret(bridge: BridgeUnderTest) -> None:
    registered = json.loads(bridge.register(token_endpoint_auth_method="client_secret_basic")["body"])
    credentials = base64.b64encode(f"{registered['client_id']}:{registered['client_secret']}".encode()).decode()
    form = {"grant_type": "refresh_token", "refresh_token": "rt"}
    answer = bridge.call("POST", "/oauth2/token", form=form, headers={"authorization": f"Basic {credentials}"})
    assert answer["statusCode"] == 200
    ((_, sent, headers),) = bridge.upstream.calls
    assert sent == {"grant_type": ["refresh_token"], "refresh_token": ["rt"], "client_id": [registered["client_id"]]}
    assert headers["authorization"] == f"Basic {credentials}"


@pytest.mark.parametrize(("status", "expected"), [(400, 400), (401, 401), (500, 503), (429, 503)])
def test_cognitos_token_errors_pass_through_and_its_failures_are_503(
    bridge: BridgeUnderTest, status: int, expected: int
) -> None:
    client_id = json.loads(bridge.register()["body"])["client_id"]
    bridge.upstream.status, bridge.upstream.body = status, b'{"error":"invalid_grant"}'
    form = {"grant_type": "authorization_code", "code": "c", "code_verifier": "v" * 43, "client_id": client_id}
    answer = bridge.call("POST", "/oauth2/token", form=form)
    assert answer["statusCode"] == expected
    body = json.loads(answer["body"])
    assert body["error"] == ("invalid_grant" if expected < 500 else "temporarily_unavailable")
    assert bridge.items()[f"client#{client_id}"]["lastUsedAt"]["N"] == str(int(bridge.clock()))  # not touched


def test_cognito_refusing_the_redirect_uris_is_400_and_gives_the_slot_back(bridge: BridgeUnderTest) -> None:
    client = bridge.bridge.clients.cognito.client()
    with Stubber(client) as stub:
        stub.add_client_error(
            "create_user_pool_client",
            service_error_code="InvalidParameterException",
            service_message="Invalid callback URL",
        )
        answer = bridge.register()
    assert (answer["statusCode"], json.loads(answer["body"])) == (
        400,
        {
            "error": "invalid_client_metadata",
            "error_description": "the user pool refused this client: Invalid callback URL",
        },
    )
    assert bridge.app_clients() == {}
    assert bridge.items()["meta#clients"]["active"]["N"] == "0"


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
    idle = json.loads(bridge.register()["body"])["client_id"]
    busy = json.loads(bridge.register()["body"])["client_id"]
    bridge.clock.advance(20 * 86_400)
    form = {"grant_type": "authorization_code", "code": "c", "code_verifier": "v" * 43, "client_id": busy}
    assert bridge.call("POST", "/oauth2/token", form=form)["statusCode"] == 200
    bridge.clock.advance(11 * 86_400)
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 1, "keptInUse": 0, "failed": 0}
    assert set(bridge.app_clients()) == {busy}
    assert f"client#{idle}" not in bridge.items() and f"client#{busy}" in bridge.items()
    assert bridge.items()["meta#clients"]["active"]["N"] == "1"
    unknown = bridge.call("POST", "/oauth2/token", form={**form, "client_id": idle})
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
def consent_form(page: dict[str, Any]) -> tuple[dict[str, str], str]:
    fields = dict(re.findall(r'name="(request|token)" value="([^"]*)"', page["body"]))
    return {name: html.unescape(value) for name, value in fields.items()}, page["cookies"][0].split(";")[0]


def test_authorize_answers_the_consent_page_and_nothing_goes_to_cognito_before_the_approve(
    bridge: BridgeUnderTest,
) -> None:
    client_id = json.loads(bridge.register(client_name="<b>Evil</b> & co")["body"])["client_id"]
    page = bridge.authorize(client_id)
    assert page["statusCode"] == 200 and "location" not in page["headers"]
    assert '<span id="client-name">&lt;b&gt;Evil&lt;/b&gt; &amp; co</span>' in page["body"]  # escaped, never markup
    assert page["cookies"][0].startswith("mcp-consent-csrf=")
    assert page["headers"]["cache-control"] == "no-store"


def test_deny_sends_access_denied_with_the_state_to_the_registered_redirect_uri(bridge: BridgeUnderTest) -> None:
    client_id = json.loads(bridge.register()["body"])["client_id"]
    form, cookie = consent_form(bridge.authorize(client_id, state="xyz"))
    answer = bridge.call("POST", "/oauth2/consent", form={**form, "decision": "deny"}, headers={"cookie": cookie})
    assert answer["statusCode"] == 302
    location = urlsplit(answer["headers"]["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == CALLBACK
    assert parse_qs(location.query) == {
        "error": ["access_denied"],
        "error_description": ["the user denied the request"],
        "state": ["xyz"],
    }
    assert "cookies" not in answer  # a denial is not remembered


@pytest.mark.parametrize(
    "spoil",
    ["expired", "other-cookie", "no-cookie", "edited-request", "other-origin"],
)
def test_a_consent_form_that_is_stale_or_not_this_browsers_is_refused_with_403(
    bridge: BridgeUnderTest, spoil: str
) -> None:
    client_id = json.loads(bridge.register()["body"])["client_id"]
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
    assert bridge.upstream.calls == [] and "location" not in answer["headers"]


def test_an_approval_is_remembered_for_that_client_and_redirect_uri_only(bridge: BridgeUnderTest) -> None:
    other = "http://127.0.0.1:53683/callback"
    client_id = json.loads(bridge.register(redirect_uris=[CALLBACK, other])["body"])["client_id"]
    approved = bridge.approve(client_id)
    assert approved["statusCode"] == 302
    (remember,) = approved["cookies"]
    assert remember.endswith("; Path=/; Max-Age=2592000; HttpOnly; SameSite=Lax")
    cookie = {"cookie": remember.split(";")[0]}
    again = bridge.call("GET", "/oauth2/authorize", query=authorize_query(client_id, CALLBACK), headers=cookie)
    assert again["statusCode"] == 302 and again["headers"]["location"].startswith(f"{DOMAIN}/oauth2/authorize?")
    elsewhere = bridge.call("GET", "/oauth2/authorize", query=authorize_query(client_id, other), headers=cookie)
    assert elsewhere["statusCode"] == 200  # another redirect URI asks again
    second = json.loads(bridge.register()["body"])["client_id"]
    assert (
        bridge.call("GET", "/oauth2/authorize", query=authorize_query(second, CALLBACK), headers=cookie)["statusCode"]
        == 200
    )
    forged = remember.split(";")[0][:-4] + "AAAA"
    tampered = bridge.call(
        "GET", "/oauth2/authorize", query=authorize_query(client_id, CALLBACK), headers={"cookie": forged}
    )
    assert tampered["statusCode"] == 200  # a cookie whose signature does not hold remembers nothing
    bridge.clock.advance(31 * 86_400)
    assert (
        bridge.call("GET", "/oauth2/authorize", query=authorize_query(client_id, CALLBACK), headers=cookie)[
            "statusCode"
        ]
        == 200
    )  # and none is remembered past 30 days


def authorize_query(client_id: str, redirect_uri: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
        "state": "s",
    }


# ---- registration limits and the expiry of clients that never sign in -----------------------------
def limited(bridge: BridgeUnderTest, **limits: int) -> None:
    bridge.bridge.settings = bridge.bridge.settings.model_copy(update={"max_clients": 50, **limits})


def first_use(bridge: BridgeUnderTest, path: str, ip: str) -> dict[str, Any]:
    url = bridge.serve_document(path, [CALLBACK])
    query = authorize_query(url, CALLBACK)
    return bridge.call("GET", "/oauth2/authorize", query=query, ip=ip)


def test_a_flood_of_metadata_documents_from_one_host_gets_429_while_other_clients_still_register(
    bridge: BridgeUnderTest,
) -> None:
    limited(bridge, registrations_per_host_per_hour=3)
    for n in range(3):  # each from another address: only the host is the same
        assert first_use(bridge, f"/flood-{n}.json", f"198.51.100.{n}")["statusCode"] == 200
    clients, items = bridge.app_clients(), bridge.items()
    refused = first_use(bridge, "/flood-3.json", "198.51.100.3")
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        429,
        {
            "error": "temporarily_unavailable",
            "error_description": f"at most 3 new clients per hour from metadata documents on {HOST}",
        },
    )
    assert 0 < int(refused["headers"]["retry-after"]) <= 3600 and "location" not in refused["headers"]
    assert bridge.app_clients().keys() == clients.keys()
    assert {k for k in bridge.items() if not k.startswith("rate#")} == {k for k in items if not k.startswith("rate#")}
    # Known documents go on working, and a client registering from elsewhere still gets in.
    assert first_use(bridge, "/flood-0.json", "198.51.100.3")["statusCode"] == 200
    assert bridge.register(ip="192.0.2.50")["statusCode"] == 201


def test_a_flood_from_one_address_is_refused_for_both_registration_methods_while_another_address_registers(
    bridge: BridgeUnderTest,
) -> None:
    limited(bridge, registrations_per_hour=2, registration_burst=2)
    assert bridge.register(ip="203.0.113.77")["statusCode"] == 201
    assert first_use(bridge, "/one-address.json", "203.0.113.77")["statusCode"] == 200
    by_document = first_use(bridge, "/one-address-2.json", "203.0.113.77")
    by_registration = bridge.register(ip="203.0.113.77")
    for refused in (by_document, by_registration):
        assert (refused["statusCode"], json.loads(refused["body"])["error_description"]) == (
            429,
            "too many registrations from one address: a burst of 2, then 2 an hour",
        )
        assert refused["headers"]["retry-after"].isdigit()
    assert bridge.register(ip="203.0.113.78")["statusCode"] == 201


def test_ipv6_sources_are_limited_per_64_prefix(bridge: BridgeUnderTest) -> None:
    limited(bridge, registrations_per_hour=1, registration_burst=1)
    assert bridge.register(ip="2001:db8:1:2::1")["statusCode"] == 201
    assert bridge.register(ip="2001:db8:1:2:ffff::9")["statusCode"] == 429  # same /64, another address
    assert bridge.register(ip="2001:db8:1:3::1")["statusCode"] == 201


def test_clients_that_never_completed_a_token_exchange_are_gone_within_the_hour(
    bridge: BridgeUnderTest, capsys: pytest.CaptureFixture[str]
) -> None:
    limited(bridge)
    never = json.loads(bridge.register()["body"])["client_id"]
    assert first_use(bridge, "/never-signed-in.json", "198.51.100.20")["statusCode"] == 200
    signed_in = json.loads(bridge.register()["body"])["client_id"]
    form = {"grant_type": "authorization_code", "code": "c", "code_verifier": "v" * 43, "client_id": signed_in}
    bridge.clock.advance(60)
    assert bridge.call("POST", "/oauth2/token", form=form)["statusCode"] == 200
    bridge.clock.advance(20 * 60)
    recent = json.loads(bridge.register()["body"])["client_id"]
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 0}  # 21 min
    bridge.clock.advance(10 * 60)  # the first two are 31 minutes old, never exchanged a token
    capsys.readouterr()
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 2, "keptInUse": 0, "failed": 0}
    assert set(bridge.app_clients()) == {signed_in, recent}
    assert bridge.items()["meta#clients"]["active"]["N"] == "2"
    assert metadata_url_key(f"https://{HOST}:{bridge.port}/never-signed-in.json") not in bridge.items()
    assert f"client#{never}" not in bridge.items()
    (emf,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert emf["RegisteredClients"] == 2
    assert emf["_aws"]["CloudWatchMetrics"] == [
        {
            "Namespace": "serverless-mcp-tasks",
            "Dimensions": [[]],
            "Metrics": [{"Name": "RegisteredClients", "Unit": "Count"}],
        }
    ]
    # The one that signed in stays until it is unused for 30 days.
    bridge.clock.advance(31 * 86_400)
    assert dispatch(bridge.bridge, {"action": "cleanup"})["removed"] == 2


def test_the_metadata_names_both_registration_methods_and_says_metadata_documents_are_preferred(
    bridge: BridgeUnderTest,
) -> None:
    document = json.loads(bridge.call("GET", "/.well-known/oauth-authorization-server")["body"])
    assert document["client_id_metadata_document_supported"] is True
    assert document["registration_endpoint"] == "http://127.0.0.1:3000/oauth2/register"
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["registration_note"] == (
        "Prefer a Client ID Metadata Document (an https client_id): MCP 2026-07-28 deprecates dynamic "
        "registration, which stays available at registration_endpoint for clients that lack it"
    )


def test_the_resource_a_client_asks_for_is_compared_in_canonical_form(bridge: BridgeUnderTest) -> None:
    client_id = json.loads(bridge.register()["body"])["client_id"]
    for resource in ("HTTP://127.0.0.1:3000/mcp/", "http://127.0.0.1:3000/mcp"):
        assert bridge.authorize(client_id, resource=resource)["statusCode"] == 200
    refused = bridge.authorize(client_id, resource="https://127.0.0.1:3000/mcp")
    assert parse_qs(urlsplit(refused["headers"]["location"]).query)["error"] == ["invalid_target"]


def test_a_client_asking_for_offline_access_is_registered_to_refresh_and_cognito_is_never_sent_that_scope(
    bridge: BridgeUnderTest,
) -> None:
    registered = json.loads(
        bridge.register(grant_types=["authorization_code"], scope="mcp/invoke offline_access")["body"]
    )
    assert registered["grant_types"] == ["authorization_code", "refresh_token"]
    assert registered["scope"] == "mcp/invoke offline_access"
    approved = bridge.approve(registered["client_id"], scope="mcp/invoke offline_access")
    assert parse_qs(urlsplit(approved["headers"]["location"]).query)["scope"] == ["mcp/invoke"]
    document = json.loads(bridge.call("GET", "/.well-known/oauth-authorization-server")["body"])
    assert document["scopes_supported"] == ["mcp/invoke", "openid", "offline_access"]


def test_a_client_removed_by_cleanup_gets_401_invalid_client_and_registers_again(bridge: BridgeUnderTest) -> None:
    client_id = json.loads(bridge.register()["body"])["client_id"]
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
        assert bridge.approve(url)["statusCode"] == 302
    clients = bridge.app_clients()
    url = serve_document_on(bridge, "h3.evil.co.uk", "/wildcard-3.json")
    refused = bridge.approve(url)
    assert (refused["statusCode"], json.loads(refused["body"])) == (
        429,
        {
            "error": "temporarily_unavailable",
            "error_description": "at most 3 new clients per hour from metadata documents on evil.co.uk",
        },
    )
    assert 0 < int(refused["headers"]["retry-after"]) <= 1200 and "location" not in refused["headers"]
    assert bridge.app_clients().keys() == clients.keys()
    # Another registrable domain under the same public suffix has a limit of its own.
    assert bridge.approve(serve_document_on(bridge, "app.other.co.uk", "/other.json"))["statusCode"] == 302


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
        failed = bridge.call("GET", "/oauth2/authorize", query=authorize_query(url, CALLBACK), ip="192.0.2.77")
        assert (failed["statusCode"], json.loads(failed["body"])["error_description"]) == (
            400,
            "the client_id URL answered HTTP 404 (redirects are not followed)",
        )
    refused = bridge.call("GET", "/oauth2/authorize", query=authorize_query(url, CALLBACK), ip="192.0.2.77")
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


def test_a_cognito_delete_that_fails_leaves_the_slot_counted_and_the_next_cleanup_finishes_it(
    bridge: BridgeUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    stuck, other = (json.loads(bridge.register()["body"])["client_id"] for _ in range(2))
    deletes = FailingDeletes(bridge.bridge.clients.cognito.client())
    deletes.failing = {stuck}
    bridge.clock.advance(3600)  # neither ever exchanged a token
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 1, "keptInUse": 0, "failed": 1}
    assert set(bridge.app_clients()) == {stuck}  # its Cognito client still exists, and so
    assert f"client#{stuck}" in bridge.items()  # its registration, and its slot
    assert bridge.items()["meta#clients"]["active"]["N"] == "1"
    assert f"cleanup: could not remove client {stuck}" in caplog.text
    deletes.failing = set()
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 1, "keptInUse": 0, "failed": 0}
    assert bridge.app_clients() == {} and f"client#{stuck}" not in bridge.items()
    assert f"client#{other}" not in bridge.items()
    assert bridge.items()["meta#clients"]["active"]["N"] == "0"


@pytest.mark.parametrize("drifted", ["7", "0"])
def test_each_cleanup_recounts_the_slots_from_the_registrations(
    bridge: BridgeUnderTest, capsys: pytest.CaptureFixture[str], drifted: str
) -> None:
    for _ in range(2):
        assert bridge.register()["statusCode"] == 201
    bridge.dynamodb.put_item(TableName=bridge.table, Item={"pk": {"S": "meta#clients"}, "active": {"N": drifted}})
    capsys.readouterr()
    assert dispatch(bridge.bridge, {"action": "cleanup"}) == {"removed": 0, "keptInUse": 0, "failed": 0}
    assert bridge.items()["meta#clients"]["active"]["N"] == "2"
    (emf,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert emf["RegisteredClients"] == 2


def test_concurrent_takes_from_one_bucket_never_give_out_more_than_its_burst(bridge: BridgeUnderTest) -> None:
    from concurrent.futures import ThreadPoolExecutor

    store = bridge.bridge.store
    with ThreadPoolExecutor(12) as pool:
        waits = list(pool.map(lambda _: store.take_token("source#office", 11, 10), range(12)))
    assert sorted(waits) == [0] * 11 + [360]  # conditional writes: a lost race reads again
    bucket = bridge.items()["rate#source#office"]
    assert (bucket["milliTokens"]["N"], bucket["takenAtMs"]["N"]) == ("0", str(1_900_000_000_000))
