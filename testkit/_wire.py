"""MCP requests as clients send them: JSON-RPC messages, their HTTP headers, and API Gateway events."""

from __future__ import annotations

import json
from typing import Any

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
