"""The few places where a 2025 message differs in shape from what the shared handlers produce."""

from __future__ import annotations

from typing import Any

from .. import wire


def legacy_result(method: str, result: dict[str, Any], version: str) -> dict[str, Any]:
    """A shared handler's result as the negotiated 2025 revision spells it."""
    shaped = {key: value for key, value in result.items() if key not in wire.MODERN_ONLY_RESULT_KEYS}
    if version in wire.LEGACY_VERSIONS_WITHOUT_STRUCTURED_OUTPUT:
        if method == "tools/list":
            shaped["tools"] = [
                {k: v for k, v in tool.items() if k not in ("outputSchema", "title")} for tool in shaped["tools"]
            ]
        elif method == "tools/call":
            shaped.pop("structuredContent", None)
    return shaped


def legacy_capabilities(modern: dict[str, Any]) -> dict[str, Any]:
    """Server capabilities for `initialize`: no 2026 extensions; logging is served per session."""
    capabilities = {key: value for key, value in modern.items() if key != "extensions"}
    capabilities["logging"] = {}
    return capabilities


def server_request(request_id: str, method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
    """A server-to-client JSON-RPC request (elicitation, sampling, roots) for the negotiated revision."""
    shaped = dict(params)
    if method == wire.INPUT_METHOD_ELICIT and version in wire.LEGACY_VERSIONS_WITHOUT_ELICITATION_MODE:
        shaped.pop("mode", None)
    message: dict[str, Any] = {"jsonrpc": wire.JSONRPC_VERSION, "id": request_id, "method": method}
    if shaped or method != wire.INPUT_METHOD_ROOTS:
        message["params"] = shaped
    return message


def response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": wire.JSONRPC_VERSION, "id": request_id, "result": result}


def error_response(request_id: Any, error: dict[str, Any]) -> dict[str, Any]:
    """An error answer; one to a request whose id cannot be read carries no id (the schema's `id?`)."""
    if request_id is None:
        return {"jsonrpc": wire.JSONRPC_VERSION, "error": error}
    return {"jsonrpc": wire.JSONRPC_VERSION, "id": request_id, "error": error}
