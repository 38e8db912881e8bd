"""An in-process local stack whose every response is recorded, so tests can validate the wire."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.support import local_stack_process


@dataclass
class Exchange:
    method: str
    status: int
    content_type: str
    messages: list[dict[str, Any]]


@dataclass
class RecordingStack:
    url: str
    exchanges: list[Exchange] = field(default_factory=list)


def _messages(response: dict[str, Any]) -> list[dict[str, Any]]:
    body = response.get("body") or ""
    content_type = (response.get("headers") or {}).get("content-type", "")
    if content_type.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    return [json.loads(body)] if body else []


@pytest.fixture(scope="module")
def recording_stack(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[RecordingStack]:
    from local_stack.stack import configure_environment

    saved_environment = dict(os.environ)
    monkeypatch_module.setenv("MCP_FIXTURES", "conformance")
    configure_environment()
    from app import composition
    from local_stack.http_front import make_server

    composition.reset()
    exchanges: list[Exchange] = []

    def recording_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        response = composition.handle_api_event(event, context)
        try:
            method = json.loads(event.get("body") or "{}").get("method", "?")
        except ValueError:
            method = "?"
        exchanges.append(
            Exchange(method, response["statusCode"], response["headers"].get("content-type", ""), _messages(response))
        )
        return response

    server = make_server(recording_handler, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield RecordingStack(f"http://{host}:{port}/mcp", exchanges)
    finally:
        server.shutdown()
        server.server_close()
        os.environ.clear()
        os.environ.update(saved_environment)
        composition.reset()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def stack_process() -> Iterator[Any]:
    with local_stack_process() as stack:
        yield stack
