"""The bridge's consent page in a real browser (Debian's Chromium), on the Cognito template's local stack.

The attack it stops: Cognito keeps a sign-in session per user-pool domain, so a person who signed in
through client A and then opens the authorize link of an attacker's client B would get no question
from Cognito, and the code would go to B's redirect URI. Cognito's managed login is not in moto, so
a stand-in plays it here exactly as the attack needs it: a user-pool domain where the person is
signed in already, which answers every authorize request at once with a code for its redirect URI
(served over TLS at the pool's real host name, which the browser resolves to this machine). Every
code it hands out is recorded; the redirect URIs of A and B are listeners here that record what
reaches them.
"""

from __future__ import annotations

import re
import secrets
import ssl
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

from tests.e2e.chromium import chromium, require_chromium
from tests.support import RunningStack, local_stack_process
from tests.tls_server import make_certificate

pytestmark = pytest.mark.e2e

CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
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


def signed_in_cognito(path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
    """Managed login with a live session: a code at once for the app client's redirect URI."""
    if path != "/oauth2/authorize":
        return 404, {}, b""
    back = {"code": secrets.token_urlsafe(16), **({"state": query["state"][0]} if "state" in query else {})}
    return 302, {"location": f"{query['redirect_uri'][0]}?{urlencode(back)}"}, b""


def callback_page(path: str, query: dict[str, list[str]]) -> tuple[int, dict[str, str], bytes]:
    if path == "/attack":  # the attacker's own page: a form that posts a consent it prepared itself
        return 200, {"content-type": "text/html"}, ATTACK_PAGE[0].encode()
    return 200, {"content-type": "text/html"}, b"<title>callback</title>received"


ATTACK_PAGE = [""]


@dataclass
class World:
    stack: RunningStack
    cognito: Recorder
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


def cognito_host(stack: RunningStack) -> str:
    prefix = re.sub(r"[^a-z0-9-]+", "-", stack.state["stackName"].lower())
    return f"{prefix}-123456789012.auth.us-east-1.amazoncognito.com"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_chromium()
    with local_stack_process() as stack:
        host = cognito_host(stack)
        tls = make_certificate(tmp_path_factory.mktemp("cognito-tls"), host)
        with (
            listening(Recorder(signed_in_cognito), tls) as cognito,
            listening(Recorder(callback_page)) as client_a,
            listening(Recorder(callback_page)) as client_b,
            chromium(host_rules=f"MAP {host} 127.0.0.1:{cognito.port}", trust_any_certificate=True) as browser,
        ):
            yield World(stack, cognito, client_a, client_b, browser)


def text(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, element_id).text)


def click(browser: Any, element_id: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.ID, element_id).click()


def test_the_consent_page_is_served_with_strict_headers_and_a_strict_form_cookie(world: World) -> None:
    client_id = world.register("Header check", world.client_a)
    reply = httpx.get(world.authorize_url(client_id, world.client_a, "s0"), timeout=30)
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["cache-control"] == "no-store"
    assert reply.headers["x-frame-options"] == "DENY"
    policy = reply.headers["content-security-policy"]
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    assert f"form-action 'self' https://{cognito_host(world.stack)} http://127.0.0.1:{world.client_a.port};" in policy
    assert policy.endswith("frame-ancestors 'none'; base-uri 'none'")
    cookie = reply.headers["set-cookie"]
    assert re.fullmatch(r"mcp-consent-csrf=[A-Za-z0-9_-]{32}; Path=/; Max-Age=600; HttpOnly; SameSite=Strict", cookie)
    assert world.codes(world.client_a) == [] and world.cognito.requests == []


def test_a_second_clients_link_gets_the_consent_page_and_no_code_until_the_person_decides(world: World) -> None:
    browser = world.browser
    client_a = world.register("Claude Desktop", world.client_a)
    # The attacker registers a client of its own under the same name, with its own redirect URI.
    client_b = world.register("Claude Desktop", world.client_b)

    # The person signs in through client A: the consent page first, then Cognito, then A's callback.
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
    assert [query["client_id"] for _, query in world.cognito.requests] == [[client_a]]

    # The attacker's link, opened in the same browser while Cognito still holds the session.
    browser.get(world.authorize_url(client_b, world.client_b, "b-1"))
    assert browser.title == "Allow access?"
    assert text(browser, "redirect-host") == f"127.0.0.1:{world.client_b.port}"
    world.screenshot("consent-attacker-client-b")
    assert world.client_b.requests == []  # no code, no visit at all
    assert len(world.cognito.requests) == 1  # and Cognito was never asked for B

    # Deny: B gets access_denied and its state (RFC 6749 §4.1.2.1), never a code.
    click(browser, "deny")
    (answer,) = await_condition(lambda: world.codes(world.client_b), "the denial reached client B")
    assert answer == {
        "error": ["access_denied"],
        "error_description": ["the user denied the request"],
        "state": ["b-1"],
    }
    assert len(world.cognito.requests) == 1

    # A, approved before in this browser, goes straight through; B still asks.
    browser.get(world.authorize_url(client_a, world.client_a, "a-2"))
    await_condition(lambda: len(world.codes(world.client_a)) == 2, "the second code reached client A")
    assert world.codes(world.client_a)[1]["state"] == ["a-2"]
    browser.get(world.authorize_url(client_b, world.client_b, "b-2"))
    assert browser.title == "Allow access?"
    assert len(world.codes(world.client_b)) == 1 and len(world.cognito.requests) == 2


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
    codes_before, cognito_before = len(world.codes(world.client_b)), len(world.cognito.requests)
    browser.get(f"http://127.0.0.1:{world.client_b.port}/attack")
    click(browser, "prize")
    await_condition(lambda: "access_denied" in browser.page_source, "the forged consent was refused")
    assert "the consent form was posted from another site" in browser.page_source
    assert len(world.codes(world.client_b)) == codes_before and len(world.cognito.requests) == cognito_before

    # Without the Origin check, the token still fails: it is bound to the attacker's cookie, not this browser's.
    forged = httpx.post(
        f"{world.base}/oauth2/consent",
        data={"request": request.group(1), "token": token.group(1), "decision": "approve"},
        headers={"cookie": f"mcp-consent-csrf={secrets.token_urlsafe(24)}"},
        timeout=30,
    )
    assert (forged.status_code, forged.json()["error"]) == (403, "access_denied")
    assert len(world.cognito.requests) == cognito_before


def test_forgetting_approvals_makes_the_browser_ask_again(world: World) -> None:
    browser = world.browser
    client_a = world.register("Forget me", world.client_a)
    browser.get(world.authorize_url(client_a, world.client_a, "f-1"))
    click(browser, "approve")
    await_condition(lambda: any(q.get("state") == ["f-1"] for q in world.codes(world.client_a)), "the code for f-1")
    browser.get(f"{world.base}/oauth2/consent")
    assert re.fullmatch(r"This browser remembers \d+ approved clients?\.", text(browser, "remembered"))
    click(browser, "forget")
    await_condition(lambda: "remembers 0 approved clients" in browser.page_source, "the approvals were forgotten")
    browser.get(world.authorize_url(client_a, world.client_a, "f-2"))
    assert browser.title == "Allow access?"
    assert not any(q.get("state") == ["f-2"] for q in world.codes(world.client_a))
