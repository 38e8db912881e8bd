"""In-process builders for the unit tier: a server, its transport and a small client, no network, no AWS."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from testkit import rpc, standard_headers

from mcp_runtime import wire
from mcp_runtime.context import Principal
from mcp_runtime.sealing import SealingKey, StateSealer
from mcp_runtime.server import McpServer, TaskOperations
from mcp_runtime.settings import Settings
from mcp_runtime.transport import HttpRequest, HttpResponse, McpHttpTransport

ALICE = Principal("test:alice", "test")
BOB = Principal("test:bob", "test")
TEST_KEY = SealingKey("k1", b"unit-test-sealing-key-0123456789abcdef")


@dataclass
class FakeClock:
    """A wall clock the tests move by hand (seconds since the epoch)."""

    now: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_settings(**values: Any) -> Settings:
    """Settings by environment alias, e.g. make_settings(MCP_ALLOWED_HOSTS="localhost")."""
    values.setdefault("MCP_STATE_KEY", "test-only-requestState-key-0123456789abcdef")
    return Settings.model_validate(values)


def make_server(
    *,
    fixtures: bool = True,
    patterns: bool = True,
    settings: Settings | None = None,
    clock: FakeClock | None = None,
    keys: Iterable[SealingKey] = (TEST_KEY,),
    lifetime_seconds: int = 900,
    tasks: TaskOperations | None = None,
) -> McpServer:
    sealer = StateSealer(list(keys), lifetime_seconds=lifetime_seconds, clock=clock or FakeClock())
    server = McpServer(settings or make_settings(), sealer, tasks=tasks)
    if patterns:
        from fixtures import patterns as pattern_tools

        pattern_tools.register(server, table_backed=server.handles is not None)
    if fixtures:
        from fixtures import conformance

        conformance.register(server)
    return server


@dataclass
class Client:
    """Posts JSON-RPC messages to a transport with the headers a well-behaved client sends."""

    transport: McpHttpTransport
    principal: Principal | None = ALICE
    next_id: int = field(default=100)

    def post(
        self,
        message: Any,
        *,
        headers: dict[str, str] | None = None,
        drop: Iterable[str] = (),
        principal: Principal | str | None = "default",
        method: str = "POST",
    ) -> HttpResponse:
        final = (
            standard_headers(message)
            if isinstance(message, dict) and isinstance(message.get("method"), str)
            else {
                "content-type": "application/json",
                "mcp-protocol-version": wire.PROTOCOL_VERSION,
            }
        )
        for name in drop:
            final.pop(name.lower(), None)
        final.update({k.lower(): v for k, v in (headers or {}).items()})
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        who = self.principal if principal == "default" else principal
        assert not isinstance(who, str)
        return self.transport.handle(HttpRequest(method, "/mcp", final, body, who))

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        request_id: int | str | None = None,
        **kwargs: Any,
    ) -> HttpResponse:
        if request_id is None:
            self.next_id += 1
            request_id = self.next_id
        return self.post(rpc(method, params, request_id, capabilities), **kwargs)

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        **extra: Any,
    ) -> HttpResponse:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        kwargs = {k: extra.pop(k) for k in ("headers", "drop", "principal", "request_id") if k in extra}
        params.update(extra)
        return self.request("tools/call", params, capabilities=capabilities, **kwargs)


def error_of(response: HttpResponse) -> dict[str, Any]:
    message = response.json()
    assert "result" not in message, message
    error: dict[str, Any] = message["error"]
    return error


def result_of(response: HttpResponse) -> dict[str, Any]:
    assert response.status == 200, response.body
    message = response.json()
    assert "error" not in message, message
    result: dict[str, Any] = message["result"]
    return result


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def server(clock: FakeClock) -> McpServer:
    return make_server(clock=clock)


@pytest.fixture
def client(server: McpServer) -> Client:
    return Client(McpHttpTransport(server))


@contextmanager
def loggers_kept() -> Iterator[None]:
    """Every logger as it was before, after the block: a container's telemetry (`app.handlers`) puts its
    log handler on the runtime's and the tool packages' loggers, sets their level and stops their records
    there (no propagation), which would hide them from a later test's `caplog` on the same worker."""
    from app.telemetry import RUNTIME_LOGGERS

    for name in RUNTIME_LOGGERS:
        logging.getLogger(name)
    loggers = [logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)]
    kept = [(logger, logger.propagate, list(logger.handlers), logger.level) for logger in loggers]
    try:
        yield
    finally:
        for logger, propagate, handlers, level in kept:
            logger.propagate, logger.handlers[:], logger.level = propagate, handlers, level
        for logger in set(logging.Logger.manager.loggerDict.values()) - set(loggers):
            if isinstance(logger, logging.Logger):
                logger.propagate, logger.handlers[:], logger.level = True, [], logging.NOTSET


@pytest.fixture
def configure_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Configure `app.handlers` from a clean environment: configure_app(DEV_AUTH="1", ...)."""
    from app import handlers

    def configure(**environ: str) -> None:
        for model_field in Settings.model_fields.values():
            if model_field.alias:
                monkeypatch.delenv(model_field.alias, raising=False)
        environ.setdefault("MCP_STATE_KEY", "test-only-requestState-key-0123456789abcdef")
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        handlers.reset()

    with loggers_kept():
        yield configure
        handlers.reset()
