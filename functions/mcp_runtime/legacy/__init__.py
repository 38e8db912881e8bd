"""Serving handshake-era clients (MCP 2025-11-25, 2025-06-18, 2025-03-26) from the stateless endpoint.

The transport asks `is_legacy_message` of every POST (cheap: it imports nothing else) and hands
what it claims, and every GET and DELETE, to the leg `build_legacy_leg` makes. The leg's modules
are private to this package and load only when the first 2025 request arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._routing import is_legacy_message

if TYPE_CHECKING:
    from ..context import RequestContext
    from ..observability import Telemetry
    from ..server import McpServer
    from ..settings import Settings
    from ._leg import LegacyLeg

__all__ = ["build_legacy_leg", "is_legacy_message"]


def build_legacy_leg(
    server: McpServer,
    settings: Settings,
    telemetry: Telemetry | None = None,
    on_request: Callable[[RequestContext], None] | None = None,
) -> LegacyLeg:
    """The leg over `server`, with its DynamoDB store where the task table is configured;
    `on_request` is called once a request's id and method are known (correlation ids)."""
    from ..observability import NO_TELEMETRY
    from ._leg import LegacyLeg
    from ._store import DynamoLegacyStore, LegacyStore

    store: LegacyStore | None = None
    if settings.state_machine_arn:
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
