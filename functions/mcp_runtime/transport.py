"""Streamable HTTP (2026-07-28, stateless): the validation ladder and the one exception-to-wire mapping.

Order (docs/architecture.md): HTTP method -> Origin/Host -> parse -> JSON-RPC shape -> required `_meta`
-> header/body version cross-check -> version support -> Mcp-Method/Mcp-Name -> method known ->
capability gate -> Mcp-Param-* -> handler params.

Handshake-era traffic (an `initialize`, an `Mcp-Session-Id`, a 2025 `MCP-Protocol-Version`, a
client's answer, `GET`/`DELETE`) is handed to the legacy leg when one is configured, after the
Origin/Host, authentication, size, parse and shape checks every request gets.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from . import _json, wire
from ._value import ValueObject
from .bearer import BearerAuthenticator, Refusal
from .context import LOG_LEVELS, Principal, RequestContext, RequestMeta
from .errors import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidRequest,
    McpError,
    MethodNotFound,
    ParseError,
    RequestRejected,
    UnsupportedProtocolVersion,
)
from .headers import decode_header_value
from .legacy import is_legacy_message
from .limits import MAX_JSON_COLLECTION_ITEMS, MAX_JSON_DEPTH, MAX_JSON_STRING_CHARS
from .observability import REJECTED_REQUESTS
from .resource_uri import canonical_origin
from .server import McpServer

if TYPE_CHECKING:
    from .legacy import LegacyEndpoint

JSON_CONTENT_TYPE: Final = "application/json"
SSE_CONTENT_TYPE: Final = "text/event-stream"
_LOOPBACK_HOST: Final = re.compile(r"^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$", re.IGNORECASE)
PROTECTED_RESOURCE_PATH: Final = "/.well-known/oauth-protected-resource"

log = logging.getLogger(__name__)


class HttpRequest(ValueObject):
    """An HTTP request as the transport reads it, with the principal the front authenticated, if any."""

    __slots__ = ("body", "headers", "method", "path", "principal")
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    principal: Principal | None
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self, method: str, path: str, headers: dict[str, str], body: bytes, principal: Principal | None = None
    ) -> None:
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.principal = principal


class HttpResponse(ValueObject):
    """The transport's answer: status, headers (names lower-cased) and body."""

    __slots__ = ("body", "headers", "status")
    status: int
    headers: dict[str, str]
    body: str
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, status: int, headers: dict[str, str] | None = None, body: str = "") -> None:
        self.status = status
        self.headers = {} if headers is None else headers
        self.body = body

    def json(self) -> Any:
        """The JSON-RPC message of a JSON or SSE body (the last one on a stream)."""
        if self.headers.get("content-type", "").startswith(SSE_CONTENT_TYPE):
            return sse_messages(self.body)[-1]
        return json.loads(self.body)


def sse_messages(body: str) -> list[Any]:
    return [json.loads(line[5:].strip()) for line in body.splitlines() if line.startswith("data:")]


def _json_response(status: int, message: dict[str, Any], extra_headers: dict[str, str] | None = None) -> HttpResponse:
    headers = {"content-type": JSON_CONTENT_TYPE}
    if extra_headers:
        headers.update(extra_headers)
    return HttpResponse(status, headers, _json.compact(message))


def _error_message(request_id: wire.RequestId | None, error: McpError) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": wire.JSONRPC_VERSION}
    if request_id is not None:
        message["id"] = request_id
    message["error"] = error.to_error_object()
    return message


def _is_unicode(text: str) -> bool:
    """False for text with an unpaired surrogate (JSON allows the escape; nothing downstream can encode it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _may_breach_limits(body: bytes) -> bool:
    """False when the raw body is too small or too simple to break any limit, so the walk is skipped:
    a string needs at least as many bytes as characters, nesting needs a bracket per level, n items
    need n - 1 commas, and an unpaired surrogate needs a \\u escape or a raw 0xED lead byte."""
    size = len(body)
    return (
        size > MAX_JSON_STRING_CHARS
        or body.count(b"{") + body.count(b"[") >= MAX_JSON_DEPTH
        or (size >= MAX_JSON_COLLECTION_ITEMS - 1 and body.count(b",") >= MAX_JSON_COLLECTION_ITEMS - 1)
        or b"\\u" in body
        or b"\xed" in body
    )


def _limit_breach(value: Any) -> str | None:
    """Why a parsed body is too large to serve, or None: depth, string length and array length."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return "nested too deeply"
        if isinstance(item, str):
            if len(item) > MAX_JSON_STRING_CHARS:
                return "a string is too long"
            if not item.isascii() and not _is_unicode(item):
                return "a string has an unpaired surrogate"
        elif isinstance(item, dict):
            if len(item) > MAX_JSON_COLLECTION_ITEMS:
                return "an object has too many members"
            stack.extend((key, depth + 1) for key in item)
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            if len(item) > MAX_JSON_COLLECTION_ITEMS:
                return "an array has too many items"
            stack.extend((child, depth + 1) for child in item)
    return None


def _request_base_url(headers: dict[str, str]) -> str:
    """This endpoint's origin as the client reached it: `Host`, and the scheme the front reports."""
    host = headers.get("host", "localhost")
    default_scheme = "http" if _LOOPBACK_HOST.match(host) else "https"
    scheme = headers.get("x-forwarded-proto", default_scheme).split(",")[0].strip() or default_scheme
    return f"{scheme}://{host}"


def _hostname(host: str) -> str:
    """`example.com:443` -> `example.com`, `[::1]:3000` -> `[::1]`, lower case."""
    text = host.strip().lower()
    if text.startswith("["):
        return text.split("]", 1)[0] + "]"
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _readable_id(message: Any) -> wire.RequestId | None:
    if isinstance(message, dict):
        candidate = message.get("id")
        if isinstance(candidate, str | int) and not isinstance(candidate, bool):
            return candidate
    return None


class McpHttpTransport:
    def __init__(
        self,
        server: McpServer,
        on_request: Callable[[RequestContext], None] | None = None,
        legacy: LegacyEndpoint | None = None,
        authenticator: BearerAuthenticator | None = None,
    ) -> None:
        self.server = server
        self.settings = server.settings
        # Called once the JSON-RPC id and method are known (correlation ids, metrics).
        self.on_request = on_request
        self._server_info = {"name": self.settings.server_name, "version": self.settings.server_version}
        # The 2025 leg (sessions, resumable streams); without it 2025 traffic is answered -32022.
        self.legacy = legacy
        # Validates bearer tokens when the front did not authenticate the caller (see bearer.py).
        self.authenticator = authenticator

    def handle(self, request: HttpRequest) -> HttpResponse:
        try:
            return self._handle(request)
        except RequestRejected as rejected:
            self.server.telemetry.count(REJECTED_REQUESTS, code=str(rejected.status))
            headers = {"content-type": JSON_CONTENT_TYPE, **rejected.headers}
            refusal: dict[str, Any] = {"jsonrpc": wire.JSONRPC_VERSION}
            if rejected.request_id is not None:
                refusal["id"] = rejected.request_id
            refusal["error"] = {"code": wire.INVALID_REQUEST, "message": rejected.message}
            body = json.dumps(refusal)
            return HttpResponse(rejected.status, headers, body)

    def _handle(self, request: HttpRequest) -> HttpResponse:
        self._check_host_and_origin(request.headers)
        if request.path.startswith(PROTECTED_RESOURCE_PATH):
            if request.method.upper() not in ("GET", "HEAD"):
                raise RequestRejected(405, "Method not allowed: use GET", {"allow": "GET"})
            return _json_response(200, self._resource_metadata(request), {"cache-control": "max-age=3600"})
        if request.path.rstrip("/") != self._endpoint_path():
            # A Function URL sends every path to the function: only the endpoint is served.
            raise RequestRejected(404, f"Not found: the MCP endpoint is {self._endpoint_path()}")
        http_method = request.method.upper()
        legacy_stream_request = self.legacy is not None and http_method in ("GET", "DELETE")
        if http_method != "POST" and not legacy_stream_request:
            raise RequestRejected(405, "Method not allowed: use POST", {"allow": "POST"})
        if request.principal is None:
            self._authenticate(request)
        if legacy_stream_request:
            return self._legacy_stream_request(http_method, request)
        if len(request.body) > self.settings.max_body_bytes:
            raise RequestRejected(413, "Request body too large")

        message: Any = None
        try:
            try:
                message = json.loads(request.body)
            except (ValueError, RecursionError):
                raise ParseError("Parse error: the body is not valid JSON") from None
            return self._handle_message(message, request)
        except McpError as error:
            self.server.telemetry.count(REJECTED_REQUESTS, code=str(error.code))
            if error.code == wire.INTERNAL_ERROR:
                # The client gets the generic message; the log gets the cause (an AWS error, chained).
                log.error("request failed: %s", error, exc_info=error)
            return _json_response(error.http_status, _error_message(_readable_id(message), error))
        except RequestRejected as rejected:
            # An HTTP-level refusal from the legacy leg (a 404 session, a 400 answer): mapped in handle().
            rejected.request_id = _readable_id(message)
            raise
        except Exception:
            # The one place an unexpected failure becomes a wire error: no detail leaves.
            log.exception("unhandled error while serving a request")
            self.server.telemetry.count(REJECTED_REQUESTS, code=str(wire.INTERNAL_ERROR))
            return _json_response(200, _error_message(_readable_id(message), InternalError("Internal error")))

    def _legacy_stream_request(self, http_method: str, request: HttpRequest) -> HttpResponse:
        """GET (resume a stream) and DELETE (end a session) of the legacy leg, with the same last resort."""
        assert self.legacy is not None
        try:
            if http_method == "GET":
                return self.legacy.handle_get(request)
            return self.legacy.handle_delete(request)
        except RequestRejected:
            raise
        except Exception:
            log.exception("unhandled error while serving a legacy stream request")
            self.server.telemetry.count(REJECTED_REQUESTS, code=str(wire.INTERNAL_ERROR))
            return _json_response(200, _error_message(None, InternalError("Internal error")))

    def _authenticate(self, request: HttpRequest) -> None:
        """Set the principal from the bearer token, or refuse with the challenge that leads a client to sign in."""
        resource = self.settings.resource_url or self._base_url(request) + self._resource_path(request)
        outcome: Principal | Refusal = (
            self.authenticator.authenticate(request.headers.get("authorization"), resource)
            if self.authenticator is not None
            else Refusal(401)
        )
        if isinstance(outcome, Principal):
            request.principal = outcome
            return
        metadata_url = self._base_url(request) + PROTECTED_RESOURCE_PATH + self._resource_path(request)
        raise RequestRejected(outcome.status, outcome.message, {"www-authenticate": outcome.challenge(metadata_url)})

    def _base_url(self, request: HttpRequest) -> str:
        if self.settings.resource_url:
            scheme, _, rest = self.settings.resource_url.partition("://")
            return f"{scheme}://{rest.split('/', 1)[0]}"
        return _request_base_url(request.headers)

    def _endpoint_path(self) -> str:
        if self.settings.resource_url:
            path = self.settings.resource_url.partition("://")[2].partition("/")[2].rstrip("/")
            return f"/{path}" if path else "/mcp"
        return "/mcp"

    def _resource_path(self, request: HttpRequest) -> str:
        if self.settings.resource_url:
            path = self.settings.resource_url.partition("://")[2].partition("/")[2]
            return f"/{path}" if path else ""
        return "/mcp"

    def _resource_metadata(self, request: HttpRequest) -> dict[str, Any]:
        """OAuth 2.0 Protected Resource Metadata (RFC 9728) for the MCP endpoint."""
        metadata: dict[str, Any] = {
            "resource": self.settings.resource_url or self._base_url(request) + self._resource_path(request),
            "bearer_methods_supported": ["header"],
            "resource_name": self.settings.server_name,
        }
        servers = [s.strip() for s in self.settings.authorization_servers.split(",") if s.strip()]
        # "self": the authorization server is this API's own origin (the Cognito bridge).
        servers = [self._base_url(request) if s == "self" else s for s in servers]
        if servers:
            metadata["authorization_servers"] = servers
        scopes = [s.strip() for s in self.settings.scopes_supported.split(",") if s.strip()]
        if scopes:
            metadata["scopes_supported"] = scopes
        return metadata

    def _check_host_and_origin(self, headers: dict[str, str]) -> None:
        """DNS-rebinding protection (transport rules): an `Origin` must be this server's own (same host
        as `Host`) or one it allows (MCP_ALLOWED_ORIGINS; clients that are not browsers send none).
        Where MCP_ALLOWED_HOSTS is set, the `Host` must be one of those; API Gateway (and the local
        front) already refuse host names they do not serve, which is what defeats a rebound name."""
        allowed_hosts = self.settings.allowed_hosts_set
        host = headers.get("host")
        if allowed_hosts and host is not None and _hostname(host) not in allowed_hosts:
            raise RequestRejected(403, "Forbidden: Host is not allowed")
        origin = headers.get("origin")
        if origin is None:
            return
        normalized = origin.strip().lower().rstrip("/")
        # Same origin is scheme, host and port: http://host is not https://host.
        own = canonical_origin(_request_base_url(headers)) if host is not None else None
        same_origin = own is not None and canonical_origin(origin) == own
        if not same_origin and normalized not in self.settings.allowed_origins_set:
            raise RequestRejected(403, "Forbidden: Origin is not allowed")

    def _handle_message(self, message: Any, request: HttpRequest) -> HttpResponse:
        if isinstance(message, list):
            raise InvalidRequest("Invalid request: batches are not supported")
        if not isinstance(message, dict):
            raise InvalidRequest("Invalid request: expected a JSON-RPC object")
        breach = _limit_breach(message) if _may_breach_limits(request.body) else None
        if breach is not None:
            raise InvalidRequest(f"Invalid request: {breach}")
        if self.legacy is not None and is_legacy_message(message, request.headers):
            return self.legacy.handle_post(request, message)
        if message.get("jsonrpc") != wire.JSONRPC_VERSION:
            raise InvalidRequest('Invalid request: jsonrpc must be "2.0"')
        method = message.get("method")
        if not isinstance(method, str) or not method:
            raise InvalidRequest("Invalid request: method must be a non-empty string")
        if "id" not in message:
            return HttpResponse(202)  # a notification: accepted, nothing to answer
        request_id = _readable_id(message)
        if request_id is None:
            raise InvalidRequest("Invalid request: id must be a string or an integer")

        params = message.get("params")
        headers = request.headers
        meta = self._request_meta(params, headers)
        self._check_version(meta, headers)
        self._check_routing_headers(method, params, headers)
        spec = self.server.method(method)
        if spec is None:
            raise MethodNotFound(f"Method not found: {method}")
        assert isinstance(params, dict)
        ctx = RequestContext(request_id, method, meta, request.principal or Principal("anonymous"), headers)
        if self.on_request is not None:
            self.on_request(ctx)
        result = self.server.dispatch(spec, params, ctx)
        # Every result names the server (its server info `_meta`), keeping whatever `_meta` the result has.
        result_meta = result.get("_meta")
        result["_meta"] = {
            wire.META_SERVER_INFO: self._server_info,
            **(result_meta if isinstance(result_meta, dict) else {}),
        }
        response = {"jsonrpc": wire.JSONRPC_VERSION, "id": request_id, "result": result}
        if ctx.notifications:
            frames = [*ctx.notifications, response]
            body = "".join(f"event: message\ndata: {_json.compact(frame)}\n\n" for frame in frames)
            return HttpResponse(
                200, {"content-type": SSE_CONTENT_TYPE, "cache-control": "no-cache", "x-accel-buffering": "no"}, body
            )
        return _json_response(200, response)

    @staticmethod
    def _request_meta(params: Any, headers: dict[str, str]) -> RequestMeta:
        meta = params.get("_meta") if isinstance(params, dict) else None
        if not isinstance(meta, dict):
            if wire.HEADER_PROTOCOL_VERSION not in headers:
                # Legacy traffic (e.g. a 2025 `initialize`): name the versions we serve.
                requested = params.get("protocolVersion") if isinstance(params, dict) else None
                raise UnsupportedProtocolVersion(requested if isinstance(requested, str) else "unspecified")
            if not isinstance(params, dict):
                raise InvalidParams("Invalid params: params with _meta are required", http_status=400)
            raise InvalidParams("Invalid params: _meta is required", http_status=400)
        version = meta.get(wire.META_PROTOCOL_VERSION)
        if not isinstance(version, str):
            raise InvalidParams(f"Invalid params: _meta[{wire.META_PROTOCOL_VERSION!r}] is required", http_status=400)
        capabilities = meta.get(wire.META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise InvalidParams(
                f"Invalid params: _meta[{wire.META_CLIENT_CAPABILITIES!r}] is required", http_status=400
            )
        token = meta.get(wire.META_PROGRESS_TOKEN)
        if isinstance(token, bool) or not isinstance(token, str | int | None):
            raise InvalidParams("Invalid params: progressToken must be a string or an integer", http_status=400)
        log_level = meta.get(wire.META_LOG_LEVEL)
        if log_level is not None and log_level not in LOG_LEVELS:
            raise InvalidParams("Invalid params: unknown log level")
        client_info = meta.get(wire.META_CLIENT_INFO)
        return RequestMeta(
            protocol_version=version,
            client_capabilities=capabilities,
            client_info=client_info if isinstance(client_info, dict) else None,
            progress_token=token,
            log_level=log_level,
        )

    @staticmethod
    def _check_version(meta: RequestMeta, headers: dict[str, str]) -> None:
        header = headers.get(wire.HEADER_PROTOCOL_VERSION)
        if header is None:
            raise HeaderMismatch("Missing MCP-Protocol-Version header")
        if header.strip() != meta.protocol_version:
            raise HeaderMismatch("MCP-Protocol-Version header does not match _meta protocolVersion")
        if meta.protocol_version not in wire.SUPPORTED_PROTOCOL_VERSIONS:
            raise UnsupportedProtocolVersion(meta.protocol_version)

    @staticmethod
    def _check_routing_headers(method: str, params: Any, headers: dict[str, str]) -> None:
        method_header = headers.get(wire.HEADER_METHOD)
        if method_header is None:
            raise HeaderMismatch("Missing Mcp-Method header")
        if method_header.strip() != method:
            raise HeaderMismatch("Mcp-Method header does not match the request method")
        field_name = wire.NAME_HEADER_SOURCES.get(method)
        if field_name is None:
            return
        raw = headers.get(wire.HEADER_NAME)
        body_value = params.get(field_name) if isinstance(params, dict) else None
        if raw is None:
            if method in wire.NAME_HEADER_OPTIONAL or body_value is None:
                return
            raise HeaderMismatch("Missing Mcp-Name header")
        if decode_header_value(raw) != body_value:
            raise HeaderMismatch(f"Mcp-Name header does not match params.{field_name}")
