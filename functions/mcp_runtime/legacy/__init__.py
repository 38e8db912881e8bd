"""Serving handshake-era clients (MCP 2025-11-25, 2025-06-18, 2025-03-26) from the stateless endpoint.

The transport asks `is_legacy_message` of every POST (cheap: it imports nothing else) and hands
what it claims, and every GET and DELETE, to the `LegacyEndpoint` that `legacy_leg` gives it. The
leg's modules are private to this package and load only when the first 2025 request arrives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._routing import is_legacy_message

if TYPE_CHECKING:
    from ..context import RequestContext
    from ..observability import Telemetry
    from ..server import McpServer
    from ..settings import Settings
    from ..transport import HttpRequest, HttpResponse
    from ._leg import LegacyLeg

__all__ = ["LegacyEndpoint", "build_legacy_leg", "is_legacy_message", "legacy_leg"]

OnRequest = Callable[["RequestContext"], None]


class LegacyEndpoint(Protocol):
    """What the transport hands the handshake era: its POSTs, and every GET and DELETE."""

    def handle_post(self, request: HttpRequest, message: dict[str, Any]) -> HttpResponse: ...

    def handle_get(self, request: HttpRequest) -> HttpResponse: ...

    def handle_delete(self, request: HttpRequest) -> HttpResponse: ...


class _LazyLeg:
    """Builds the leg on the first 2025 request (thread-safe), so a 2026 container never loads it."""

    def __init__(self, factory: Callable[[], LegacyLeg]) -> None:
        self._factory = factory
        self._leg: LegacyLeg | None = None
        self._lock = threading.Lock()

    def _built(self) -> LegacyLeg:
        if self._leg is None:
            with self._lock:
                if self._leg is None:
                    self._leg = self._factory()
        return self._leg

    def handle_post(self, request: HttpRequest, message: dict[str, Any]) -> HttpResponse:
        return self._built().handle_post(request, message)

    def handle_get(self, request: HttpRequest) -> HttpResponse:
        return self._built().handle_get(request)

    def handle_delete(self, request: HttpRequest) -> HttpResponse:
        return self._built().handle_delete(request)


def legacy_leg(
    server: McpServer, settings: Settings, telemetry: Telemetry | None = None, on_request: OnRequest | None = None
) -> LegacyEndpoint | None:
    """The transport's 2025 leg over `server`, unless MCP_LEGACY_CLIENTS=0; `on_request` is called
    once a request's id and method are known (correlation ids)."""
    if not settings.legacy_clients:
        return None
    return _LazyLeg(lambda: build_legacy_leg(server, settings, telemetry, on_request))


def build_legacy_leg(
    server: McpServer,
    settings: Settings,
    telemetry: Telemetry | None = None,
    on_request: OnRequest | None = None,
) -> LegacyLeg:
    """The leg itself, with its DynamoDB store where the task table is configured."""
    from ..observability import NO_TELEMETRY
    from ._leg import LegacyLeg
    from ._store import DynamoLegacyStore, LegacyStore

    store: LegacyStore | None = None
    if settings.state_machine_arn and settings.task_table_name:
        store = DynamoLegacyStore(
            settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry or NO_TELEMETRY
        )
    return LegacyLeg(
        server,
        store,
        session_lifetime_seconds=settings.legacy_session_lifetime_seconds,
        stream_ttl_seconds=settings.legacy_stream_ttl_seconds,
        retry_ms=settings.legacy_retry_ms,
        wait_seconds=settings.legacy_stream_wait_seconds,
        on_request=on_request,
    )
