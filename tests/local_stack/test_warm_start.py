"""LOCAL_WARM_ENVIRONMENTS: before the stack announces its endpoint, rounds of that many requests go through
the front at once, so as many API environments have served requests (as under a deployed endpoint's
traffic) and a harness with a short deadline never meets a cold interpreter."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from local_stack import stack
from mcp_runtime import wire


class Front:
    """A stand-in front that holds each request until `expected` are in flight at once."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.in_flight = 0
        self.most_at_once = 0
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.all_arrived = threading.Event()
        self.lock = threading.Lock()


@pytest.fixture
def front() -> Iterator[tuple[Front, str]]:
    seen = Front(expected=4)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with seen.lock:
                seen.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                seen.in_flight += 1
                seen.most_at_once = max(seen.most_at_once, seen.in_flight)
                if seen.in_flight == seen.expected:
                    seen.all_arrived.set()
            seen.all_arrived.wait(timeout=30)
            with seen.lock:
                seen.in_flight -= 1
                if seen.in_flight == 0:
                    seen.all_arrived.clear()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc":"2.0","id":"local-stack-warm-up","result":{}}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen, f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()


def test_warming_sends_rounds_of_that_many_requests_at_once_a_sealing_initialize_then_tools_list(
    front: tuple[Front, str],
) -> None:
    seen, url = front

    stack._warm_the_endpoint(url, 4)

    assert (len(seen.requests), seen.most_at_once) == (8, 4)
    methods = [body["method"] for _, body in seen.requests]
    assert methods == ["initialize"] * 4 + ["tools/list"] * 4
    assert {headers["authorization"] for headers, _ in seen.requests} == {"Bearer dev:local-stack-warm-up"}
    for headers, body in seen.requests[:4]:  # the handshake era: its session id is sealed (reads the key)
        assert body["params"]["protocolVersion"] == wire.LEGACY_PROTOCOL_VERSION
        assert "mcp-protocol-version" not in headers
    for headers, body in seen.requests[4:]:
        assert (headers["mcp-method"], headers["mcp-protocol-version"]) == ("tools/list", wire.PROTOCOL_VERSION)
        assert body["params"]["_meta"][wire.META_PROTOCOL_VERSION] == wire.PROTOCOL_VERSION


def test_the_stack_reads_how_many_environments_to_warm_from_its_environment() -> None:
    assert stack.Options.from_environ({}).warm_environments == 0
    assert stack.Options.from_environ({"LOCAL_WARM_ENVIRONMENTS": "4"}).warm_environments == 4
