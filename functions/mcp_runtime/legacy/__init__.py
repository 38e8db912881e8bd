"""Serving handshake-era clients (MCP 2025-11-25, 2025-06-18, 2025-03-26) from the stateless endpoint.

`build_legacy_leg(server, settings)` gives the transport its second leg; everything else in this
package is private to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._leg import LegacyLeg, derive_stream_key
from ._sessions import Session, SessionInvalid, SessionSealer
from ._store import DynamoLegacyStore, LegacyStore, SessionState, StreamNotFound, StreamRecord

if TYPE_CHECKING:
    from ..observability import Telemetry
    from ..server import McpServer
    from ..settings import Settings

__all__ = [
    "DynamoLegacyStore",
    "LegacyLeg",
    "LegacyStore",
    "Session",
    "SessionInvalid",
    "SessionSealer",
    "SessionState",
    "StreamNotFound",
    "StreamRecord",
    "build_legacy_leg",
    "derive_stream_key",
]


def build_legacy_leg(server: McpServer, settings: Settings, telemetry: Telemetry | None = None) -> LegacyLeg:
    """The leg over `server`, with its DynamoDB store where the task table is configured."""
    store: LegacyStore | None = None
    if settings.state_machine_arn:
        from ..observability import NO_TELEMETRY

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
    )
