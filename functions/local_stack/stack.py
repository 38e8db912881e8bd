"""Starts the local stack: configuration for loopback, then the HTTP front around the real handler."""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer


@dataclass
class LocalStack:
    http: ThreadingHTTPServer
    thread: threading.Thread

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        return f"http://{host}:{port}/mcp"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=5)


def configure_environment(fixtures: str | None = None) -> None:
    """Local defaults, set before the application reads its settings."""
    os.environ.setdefault("MCP_LOCAL_MODE", "1")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ServerlessMcpTasksLocal")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    if fixtures:
        os.environ["MCP_FIXTURES"] = fixtures


def start(port: int = 0, fixtures: str | None = None) -> LocalStack:
    configure_environment(fixtures)
    from app.composition import handle_api_event
    from local_stack.http_front import make_server

    http = make_server(handle_api_event, "127.0.0.1", port)
    thread = threading.Thread(target=http.serve_forever, name="local-api", daemon=True)
    thread.start()
    return LocalStack(http, thread)


def main() -> None:
    port = int(os.environ.get("PORT", "3000"))
    stack = start(port, os.environ.get("FIXTURES") or None)
    print(f"MCP endpoint: {stack.url}  (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    stack.stop()
    sys.exit(0)
