"""Starts the local stack: configuration for loopback, the embedded AWS (moto: task table and state
machine running the real ASL with the real worker in-process), then the HTTP front around the real handler."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from local_stack.aws import EmbeddedAws


@dataclass
class LocalStack:
    http: ThreadingHTTPServer
    thread: threading.Thread
    aws: EmbeddedAws | None = None

    @property
    def url(self) -> str:
        host, port = self.http.server_address[:2]
        host_text = host.decode() if isinstance(host, bytes) else host
        return f"http://{host_text}:{port}/mcp"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(timeout=5)
        if self.aws is not None:
            self.aws.stop()


def configure_environment(fixtures: str | None = None) -> None:
    """Local defaults, set before the application reads its settings."""
    os.environ.setdefault("MCP_LOCAL_MODE", "1")
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "ServerlessMcpTasksLocal")
    # EMF metrics are one JSON line per dimension set and invocation on stdout: in Lambda, CloudWatch
    # reads them; locally they would only flood the terminal. POWERTOOLS_METRICS_DISABLED=false shows them.
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    if fixtures:
        os.environ["MCP_FIXTURES"] = fixtures


def start_local_aws() -> EmbeddedAws:
    """The embedded moto server with the task resources; exports what the settings read from the environment.

    Dummy credentials are forced: the endpoint is local, and it keeps boto3 from probing for real ones.
    """
    from local_stack.aws import start_embedded_aws

    aws = start_embedded_aws()
    resources = aws.provision(worker=_worker_handler)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(aws.app_environment(resources))
    return aws


def _worker_handler(event: dict[str, object], context: object) -> object:
    from app.worker_handler import lambda_handler

    return lambda_handler(event, context)


def start(port: int = 0, fixtures: str | None = None, embedded_aws: bool = True) -> LocalStack:
    configure_environment(fixtures)
    aws = start_local_aws() if embedded_aws and os.environ.get("LOCAL_EMBEDDED_AWS", "1") != "0" else None
    from app.composition import handle_api_event
    from local_stack.http_front import make_server

    http = make_server(handle_api_event, "127.0.0.1", port)
    thread = threading.Thread(target=http.serve_forever, name="local-api", daemon=True)
    thread.start()
    return LocalStack(http, thread, aws)


def main() -> None:
    port = int(os.environ.get("PORT", "3000"))
    stack = start(port, os.environ.get("FIXTURES") or None)
    print(f"MCP endpoint: {stack.url}  (Ctrl-C stops)", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    stack.stop()
    sys.exit(0)
