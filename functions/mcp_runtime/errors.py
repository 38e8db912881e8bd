"""Protocol errors raised anywhere in the runtime and mapped to the wire in one place."""

from __future__ import annotations

from typing import Any

from . import wire


class McpError(Exception):
    """A JSON-RPC error with the HTTP status it travels with."""

    code: int = wire.INTERNAL_ERROR
    http_status: int = 200

    def __init__(self, message: str, *, data: Any = None, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
        if http_status is not None:
            self.http_status = http_status

    def to_error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(McpError):
    code = wire.PARSE_ERROR
    http_status = 400


class InvalidRequest(McpError):
    code = wire.INVALID_REQUEST
    http_status = 400


class MethodNotFound(McpError):
    code = wire.METHOD_NOT_FOUND
    http_status = 404


class InvalidParams(McpError):
    """In-band -32602 (HTTP 200) unless raised for malformed `_meta` (HTTP 400)."""

    code = wire.INVALID_PARAMS


class InternalError(McpError):
    code = wire.INTERNAL_ERROR


class HeaderMismatch(McpError):
    code = wire.HEADER_MISMATCH
    http_status = 400


class MissingRequiredClientCapability(McpError):
    code = wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    http_status = 400

    def __init__(self, message: str, required_capabilities: dict[str, Any]) -> None:
        super().__init__(message, data={"requiredCapabilities": required_capabilities})


class UnsupportedProtocolVersion(McpError):
    code = wire.UNSUPPORTED_PROTOCOL_VERSION
    http_status = 400

    def __init__(self, requested: str) -> None:
        super().__init__(
            "Unsupported protocol version",
            data={"supported": list(wire.SUPPORTED_PROTOCOL_VERSIONS), "requested": requested},
        )


class RequestRejected(Exception):
    """An HTTP-level refusal before JSON-RPC processing (405, 403, 401, 413, 415)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        # The id of the request refused, once the body was read (a 404 session, say); None before.
        self.request_id: str | int | None = None


class HandleError(Exception):
    """Base of the server-minted handle errors (see handles.py)."""


class HandleNotFound(HandleError):
    """Unknown, expired, of another kind, or owned by someone else: callers cannot tell which."""


class HandleConflict(HandleError):
    """Someone else updated the handle since it was read."""


class HandleStoreUnavailable(HandleError):
    """DynamoDB throttled or failed; safe to retry."""
