"""Helpers shared by the test tiers: building requests, running the local stack as a process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROTOCOL_VERSION = "2026-07-28"


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1.0.0"},
        **extra,
    }


def rpc(
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int | str = 1,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body_params = dict(params or {})
    body_params.setdefault("_meta", meta(capabilities))
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}


def standard_headers(message: dict[str, Any]) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL_VERSION,
        "mcp-method": message["method"],
    }
    params = message.get("params") or {}
    for key in ("name", "uri", "taskId"):
        if isinstance(params.get(key), str):
            headers["mcp-name"] = params[key]
            break
    return headers


def api_event(
    body: str | dict[str, Any], headers: dict[str, str] | None = None, method: str = "POST", path: str = "/mcp"
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event as the front would send it."""
    if isinstance(body, dict):
        final_headers = standard_headers(body)
        body = json.dumps(body)
    else:
        final_headers = {"content-type": "application/json"}
    final_headers.update(headers or {})
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": path,
        "rawQueryString": "",
        "headers": final_headers,
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}},
        "body": body,
        "isBase64Encoded": False,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningStack:
    url: str
    process: subprocess.Popen[str]


@contextmanager
def local_stack_process(
    fixtures: str | None = None, extra_env: dict[str, str] | None = None, timeout: float = 60.0
) -> Iterator[RunningStack]:
    """`make run` as a child process on a free port; yields once it prints its endpoint."""
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}",
        **(extra_env or {}),
    }
    env.pop("FIXTURES", None)
    if fixtures:
        env["FIXTURES"] = fixtures
    process = subprocess.Popen(
        [sys.executable, "-m", "local_stack"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + timeout
    url = None
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("MCP endpoint:"):
            url = line.split()[2]
            break
    if url is None:
        process.kill()
        output = process.stdout.read() if process.stdout else ""
        raise RuntimeError(f"local stack did not start: {output[-2000:]}")
    try:
        yield RunningStack(url, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
