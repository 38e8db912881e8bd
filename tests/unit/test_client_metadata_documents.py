"""Client ID Metadata Document fetching (oauth_bridge/cimd.py) over real TLS on loopback.

A deployment never fetches from loopback; these tests allow it (`allow_loopback`) and trust a
certificate made here, so the limits (size, redirects, content type, the document's own rules) run
against a real HTTPS server. The address rules without `allow_loopback` are tested on the stack
(tests/e2e/test_bridge.py) and below, before any connection.
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oauth_bridge.cimd import MAX_BYTES, MetadataFetcher
from oauth_bridge.web import OAuthError
from tests.tls_server import make_certificate, serve_https, serve_slowly

HOST = "client.test"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"), HOST)


@pytest.fixture(scope="module")
def server(tls: tuple[Path, Path]) -> Iterator[tuple[int, dict[str, tuple[int, dict[str, str], bytes]]]]:
    with serve_https(tls) as running:
        yield running


def fetcher(tls: tuple[Path, Path], **options: Any) -> MetadataFetcher:
    context = ssl.create_default_context(cafile=str(tls[0]))
    resolver = options.pop("resolver", lambda host, port: ["127.0.0.1"])
    return MetadataFetcher(resolver=resolver, ssl_context=context, allow_loopback=True, **options)


def document(url: str, **changes: Any) -> bytes:
    body = {"client_id": url, "client_name": "Example", "redirect_uris": ["http://127.0.0.1:8765/callback"]}
    body.update(changes)
    return json.dumps({k: v for k, v in body.items() if v is not None}).encode()


def serve(routes: dict[str, Any], path: str, body: bytes, status: int = 200, **headers: str) -> None:
    routes[path] = (status, {"content-type": "application/json", **headers}, body)


def test_a_valid_document_is_read_over_tls_to_the_checked_address(server: Any, tls: Any) -> None:
    port, routes = server
    url = f"https://{HOST}:{port}/client.json"
    serve(routes, "/client.json", document(url))
    fetched = fetcher(tls).fetch(url)
    assert (fetched.client_id, fetched.client_name, fetched.redirect_uris) == (
        url,
        "Example",
        ("http://127.0.0.1:8765/callback",),
    )


@pytest.mark.parametrize(
    ("make", "description"),
    [
        (lambda url: (document(url, padding="x" * MAX_BYTES), {}), f"larger than {MAX_BYTES} bytes"),
        (lambda url: (document(url), {"status": 302, "location": "https://elsewhere.test/c.json"}), "HTTP 302"),
        (lambda url: (document(url), {"content-type": "text/html"}), "is not application/json"),
        (lambda url: (document(url, client_id="https://other.test/c.json"), {}), "client_id is not its URL"),
        (lambda url: (document(url, client_name=None), {}), "needs a client_name"),
        (lambda url: (document(url, redirect_uris=["http://evil.test/cb"]), {}), "uses http on a host other than"),
        (
            lambda url: (document(url, token_endpoint_auth_method="client_secret_basic"), {}),
            "token_endpoint_auth_method none",
        ),
        (lambda url: (b"{not json", {}), "is not valid JSON"),
    ],
    ids=["too-large", "redirect", "not-json-type", "other-client-id", "no-name", "bad-redirect", "secret", "garbage"],
)
def test_a_document_that_breaks_a_rule_is_invalid_client(server: Any, tls: Any, make: Any, description: str) -> None:
    port, routes = server
    path = f"/{description[:8].replace(' ', '-')}.json"
    url = f"https://{HOST}:{port}{path}"
    body, options = make(url)
    status = int(options.pop("status", 200))
    headers = {"content-type": options.pop("content-type", "application/json"), **options}
    routes[path] = (status, headers, body)
    with pytest.raises(OAuthError) as refused:
        fetcher(tls).fetch(url)
    assert refused.value.error == "invalid_client"
    assert description in refused.value.description


def test_a_certificate_for_another_name_is_refused(server: Any, tls: Any) -> None:
    port, routes = server
    url = f"https://other-name.test:{port}/client.json"
    serve(routes, "/client.json", document(url))
    with pytest.raises(OAuthError, match="could not be fetched"):
        fetcher(tls).fetch(url)


@pytest.mark.parametrize(
    "addresses",
    [["10.1.2.3"], ["93.184.216.34", "192.168.1.10"], ["fe80::1"], ["::1"], ["100.64.0.1"], ["0.0.0.0"]],
    ids=["private", "one-of-two-private", "link-local-v6", "loopback-v6", "shared-cgnat", "unspecified"],
)
def test_any_private_address_among_the_answers_refuses_before_connecting(addresses: list[str]) -> None:
    connected: list[str] = []

    class Recording(MetadataFetcher):
        def _get(self, address: str, host: str, port: int, path: str) -> bytes:
            connected.append(address)
            return b"{}"

    with pytest.raises(OAuthError, match="resolves to a private address"):
        Recording(resolver=lambda host, port: addresses).fetch("https://client.example.com/c.json")
    assert connected == []


# ---- one deadline over the whole fetch: DNS, connect, TLS, headers and body ------------------------
DEADLINE = 0.5
# The refusal comes at the deadline; this much later still counts as on time on a busy machine.
SLACK = 2.0


def slow_response(port: int) -> bytes:
    """A whole, valid answer, its headers and its document each padded to about 1 KB: dripped a byte
    every 20 ms, either takes about 20 s, well past the deadline and the slack."""
    body = document(f"https://{HOST}:{port}/drip.json", padding="x" * 900)
    return HEAD.format(len(body)).encode() + body


HEAD = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-padding: " + "x" * 900 + "\r\ncontent-length: {}\r\n\r\n"


def refused_within_the_deadline(fetch: MetadataFetcher, url: str) -> str:
    started = time.monotonic()
    with pytest.raises(OAuthError) as refused:
        fetch.fetch(url)
    assert time.monotonic() - started < DEADLINE + SLACK
    assert refused.value.error == "invalid_client"
    return refused.value.description


@pytest.mark.parametrize("stage", ["headers", "body"])
def test_a_server_dripping_a_byte_at_a_time_is_refused_at_the_deadline(tls: Any, stage: str) -> None:
    head = slow_response(0).index(b"\r\n\r\n") + 4  # status line and headers
    with serve_slowly(tls, slow_response, at_once=0 if stage == "headers" else head, every=0.02) as port:
        url = f"https://{HOST}:{port}/drip.json"
        description = refused_within_the_deadline(fetcher(tls, timeout=DEADLINE), url)
    assert description == "the client metadata document did not arrive within 0.5 s"


def test_a_server_that_never_answers_the_tls_handshake_is_refused_at_the_deadline(tls: Any) -> None:
    with serve_slowly(tls, slow_response, at_once=-1, every=1.0) as port:
        description = refused_within_the_deadline(fetcher(tls, timeout=DEADLINE), f"https://{HOST}:{port}/c.json")
    assert description == "the client metadata document did not arrive within 0.5 s"


def test_a_name_that_takes_long_to_resolve_is_refused_at_the_deadline(server: Any, tls: Any) -> None:
    port, routes = server
    url = f"https://{HOST}:{port}/slow-dns.json"
    serve(routes, "/slow-dns.json", document(url))
    released = threading.Event()

    def slow_resolver(host: str, port: int) -> list[str]:
        released.wait(10)  # a resolver stuck on an unanswering name server, until the test ends
        return ["127.0.0.1"]

    try:
        description = refused_within_the_deadline(fetcher(tls, timeout=DEADLINE, resolver=slow_resolver), url)
    finally:
        released.set()
    assert description == f"the client_id host {HOST!r} did not resolve within 0.5 s"
