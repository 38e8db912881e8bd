"""A loopback HTTP server that serves the template's HTTP API as API Gateway would.

Routes come from the template's `AWS::ApiGatewayV2::Route`s: a path no route matches gets API
Gateway's 404, and the function receives the payload 2.0 event API Gateway sends. The project's
template has no authorizer (the API function validates tokens itself); a template whose route has a
JWT authorizer gets it emulated for development tokens (`Authorization: Bearer dev:<user>`), which
carry the route's scopes and the authorizer's first audience as `client_id`, under
`requestContext.authorizer.jwt` (401 without one, 403 without the route's scopes).
Limits as API Gateway applies them: request bodies over 10 MB get 413 (after the body is read, so a
client that writes it all first still gets the answer); a function error or a response that is not
a valid proxy response gets 500.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final
from uuid import uuid4

from local_stack.aws import LambdaThrottled
from local_stack.provision import Route
from local_stack.runtime import InvocationResult, PayloadTooLarge

MAX_BODY_BYTES: Final = 10 * 1024 * 1024  # API Gateway HTTP API's payload limit
DEV_TOKEN_PREFIX: Final = "dev:"
_LOOPBACK_HOST: Final = re.compile(r"^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$", re.IGNORECASE)
NOT_FOUND: Final = b'{"message":"Not Found"}'
UNAUTHORIZED: Final = b'{"message":"Unauthorized"}'
FORBIDDEN: Final = b'{"message":"Forbidden"}'
TOO_LARGE: Final = b'{"message":"Request Entity Too Large"}'
INTERNAL_ERROR: Final = b'{"message":"Internal Server Error"}'

# (function logical id, event bytes) -> the invocation's result
Invoke = Callable[[str, bytes], InvocationResult]

access_log = logging.getLogger("local_stack.access")


class ExchangeLog:
    """LOCAL_RECORD=file: every request and answer of the front as one JSON line (for tests that check the wire)."""

    def __init__(self, path: Path) -> None:
        self._handle = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, exchange: dict[str, Any]) -> None:
        with self._lock:
            self._handle.write(json.dumps(exchange) + "\n")
            self._handle.flush()

    def close(self) -> None:
        with self._lock:
            self._handle.close()


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _json_answer(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Answer:
    return Answer(status, {"content-type": "application/json", **(headers or {})}, body)


def _path_pattern(path: str) -> re.Pattern[str]:
    """`/items/{id}` and `/files/{proxy+}` as API Gateway matches them."""
    parts = []
    for segment in path.strip("/").split("/"):
        if segment.startswith("{") and segment.endswith("+}"):
            parts.append(f"(?P<{segment[1:-2]}>.+)")
        elif segment.startswith("{") and segment.endswith("}"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")
        else:
            parts.append(re.escape(segment))
    return re.compile("^/" + "/".join(parts) + "$")


class RouteTable:
    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        self._compiled = [(route, _path_pattern(route.path)) for route in routes if route.route_key != "$default"]
        self._default = next((route for route in routes if route.route_key == "$default"), None)

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The most specific route: exact paths before parameters, greedy paths last, then `$default`."""
        candidates = []
        for route, pattern in self._compiled:
            found = pattern.match(path)
            if found and route.method in (method, "ANY"):
                greedy = "+}" in route.path
                candidates.append((greedy, route.path.count("{"), route.method == "ANY", route, found.groupdict()))
        if candidates:
            _, _, _, route, parameters = min(candidates, key=lambda c: c[:3])
            return route, parameters
        if self._default is not None:
            return self._default, {}
        return None


class DevTokenAuthorizer:
    """The JWT authorizer, for development tokens: `Bearer dev:<user>` is a valid token for `<user>`.

    `default_user`: a request without the identity header is taken as that user's (LOCAL_DEFAULT_USER,
    for clients that cannot send headers, such as the conformance suite); API Gateway would answer 401.
    """

    def __init__(self, default_user: str | None = None) -> None:
        self.default_user = default_user

    def authorize(self, route: Route, headers: Mapping[str, str]) -> dict[str, Any] | Answer:
        """The `requestContext.authorizer` API Gateway would pass, or the answer it would give instead."""
        source = (route.identity_source or ("$request.header.Authorization",))[0]
        header = source.rsplit(".", 1)[-1].lower()
        value = headers.get(header)
        if not value and self.default_user:
            value = f"Bearer {DEV_TOKEN_PREFIX}{self.default_user}"
        if not value:
            return _json_answer(401, UNAUTHORIZED, {"www-authenticate": "Bearer"})
        scheme, _, token = value.partition(" ")
        user = token[len(DEV_TOKEN_PREFIX) :].strip() if token.startswith(DEV_TOKEN_PREFIX) else ""
        if scheme.lower() != "bearer" or not user or len(user) > 128 or not user.isprintable():
            challenge = 'Bearer error="invalid_token", error_description="the token is not a local development token"'
            return _json_answer(401, UNAUTHORIZED, {"www-authenticate": challenge})
        now = int(time.time())
        claims = {
            "sub": user,
            "iss": route.issuer or "",
            "client_id": route.audience[0] if route.audience else "local",
            "token_use": "access",
            "iat": str(now),
            "exp": str(now + 3600),
        }
        if route.scopes:
            claims["scope"] = " ".join(route.scopes)
        return {"jwt": {"claims": claims, "scopes": list(route.scopes) or None}}


class ApiGatewayFront:
    def __init__(
        self,
        routes: list[Route],
        invoke: Invoke,
        authorizer: DevTokenAuthorizer | None = None,
        record: Callable[[dict[str, Any]], None] | None = None,
        default_user: str | None = None,
    ) -> None:
        self.table = RouteTable(routes)
        self.invoke = invoke
        self.authorizer = authorizer or DevTokenAuthorizer()
        self.record = record
        # LOCAL_DEFAULT_USER (AUTH=dev only): a request without credentials is sent on as this
        # development user's (`Bearer dev:<user>`); API Gateway would pass it on without one.
        self.default_user = default_user

    def serve(self, method: str, raw_path: str, headers: dict[str, str], body: bytes, source_ip: str) -> Answer:
        answer = self._serve(method, raw_path, headers, body, source_ip)
        if self.record is not None:
            self.record(
                {
                    "method": method,
                    "path": raw_path,
                    "requestBody": body.decode("utf-8", "replace"),
                    "status": answer.status,
                    "headers": answer.headers,
                    "body": answer.body.decode("utf-8", "replace"),
                }
            )
        return answer

    def _serve(self, method: str, raw_path: str, headers: dict[str, str], body: bytes, source_ip: str) -> Answer:
        if not _LOOPBACK_HOST.match(headers.get("host", "").strip()):
            # API Gateway serves only the host names it owns; this front owns the loopback ones.
            return _json_answer(403, FORBIDDEN)
        if len(body) > MAX_BODY_BYTES:
            return _json_answer(413, TOO_LARGE)
        path, _, query = raw_path.partition("?")
        matched = self.table.match(method, path)
        if matched is None:
            return _json_answer(404, NOT_FOUND)
        route, parameters = matched
        if self.default_user and not headers.get("authorization"):
            headers = {**headers, "authorization": f"Bearer {DEV_TOKEN_PREFIX}{self.default_user}"}
        authorizer: dict[str, Any] | None = None
        if route.authorization_type == "JWT":
            outcome = self.authorizer.authorize(route, headers)
            if isinstance(outcome, Answer):
                return outcome
            authorizer = outcome
        elif route.authorization_type != "NONE":
            return _json_answer(403, FORBIDDEN)  # AWS_IAM routes are not emulated: nothing signs locally
        event = api_gateway_event(method, path, query, headers, body, source_ip, route, parameters, authorizer)
        try:
            result = self.invoke(route.function_logical_id, json.dumps(event).encode())
        except PayloadTooLarge:
            return _json_answer(413, TOO_LARGE)
        except LambdaThrottled:
            return _json_answer(500, INTERNAL_ERROR)  # API Gateway does not pass Lambda's 429 on
        return proxy_answer(result)


def api_gateway_event(
    method: str,
    path: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
    source_ip: str,
    route: Route,
    parameters: dict[str, str],
    authorizer: dict[str, Any] | None,
) -> dict[str, Any]:
    """The payload 2.0 event of an HTTP API Lambda proxy integration."""
    try:
        text_body, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text_body, is_base64 = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    event_headers = {k: v for k, v in headers.items() if k != "cookie"}
    request_context: dict[str, Any] = {
        "accountId": "123456789012",
        "apiId": "local",
        "domainName": headers.get("host", "127.0.0.1"),
        "domainPrefix": "local",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": uuid4().hex,
        "routeKey": route.route_key,
        "stage": "$default",
        "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
        "timeEpoch": int(now * 1000),
    }
    if authorizer is not None:
        request_context["authorizer"] = authorizer
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": path,
        "rawQueryString": query,
        "headers": event_headers,
        "requestContext": request_context,
        "isBase64Encoded": is_base64,
    }
    if "cookie" in headers:
        event["cookies"] = [c.strip() for c in headers["cookie"].split(";") if c.strip()]
    if query:
        from urllib.parse import parse_qsl

        pairs: dict[str, str] = {}
        for key, value in parse_qsl(query, keep_blank_values=True):
            pairs[key] = f"{pairs[key]},{value}" if key in pairs else value
        event["queryStringParameters"] = pairs
    if parameters:
        event["pathParameters"] = parameters
    if body:
        event["body"] = text_body
    return event


def proxy_answer(result: InvocationResult) -> Answer:
    """What API Gateway makes of the function's answer (payload format 2.0)."""
    if result.function_error is not None:
        return _json_answer(500, INTERNAL_ERROR)
    try:
        value = result.json()
    except ValueError:
        return _json_answer(500, INTERNAL_ERROR)
    if not isinstance(value, dict) or "statusCode" not in value:
        # 2.0 lets a function return any JSON value: it becomes a 200 JSON body.
        return Answer(200, {"content-type": "application/json"}, result.payload)
    try:
        status = int(value["statusCode"])
        headers = {str(k).lower(): str(v) for k, v in (value.get("headers") or {}).items()}
        body = value.get("body") or ""
        raw = base64.b64decode(body) if value.get("isBase64Encoded") else str(body).encode("utf-8")
    except (TypeError, ValueError):
        return _json_answer(500, INTERNAL_ERROR)
    for cookie in value.get("cookies") or ():
        headers.setdefault("set-cookie", str(cookie))
    return Answer(status, headers, raw)


def make_request_handler(front: ApiGatewayFront) -> type[BaseHTTPRequestHandler]:
    class ApiGatewayHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "local-api-gateway"

        def log_message(self, format: str, *args: Any) -> None:  # the access log below says it once
            return

        def _serve(self) -> None:
            started = time.monotonic()
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self._write(Answer(400, {"content-type": "application/json"}, b'{"message":"Bad Request"}'))
                self.close_connection = True
                return
            if length > MAX_BODY_BYTES:
                self._drain(length)
                self._write(_json_answer(413, TOO_LARGE))
                return
            body = self.rfile.read(length) if length else b""
            # API Gateway lower-cases header names and joins repeated headers with commas.
            headers: dict[str, str] = {}
            for name, value in self.headers.items():
                key = name.lower()
                headers[key] = f"{headers[key]},{value}" if key in headers else value
            answer = front.serve(self.command, self.path, headers, body, self.client_address[0])
            self._write(answer)
            access_log.debug(
                "%s %s %d %.0fms",
                self.command,
                self.path.partition("?")[0],
                answer.status,
                (time.monotonic() - started) * 1000,
            )

        def _drain(self, length: int) -> None:
            """Read and drop a body over the limit, so a client that writes it all first still gets the 413."""
            remaining = length
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                remaining -= len(chunk)

        def _write(self, answer: Answer) -> None:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("content-length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_POST = _serve
        do_GET = _serve
        do_DELETE = _serve
        do_PUT = _serve
        do_PATCH = _serve
        do_OPTIONS = _serve
        do_HEAD = _serve

    return ApiGatewayHandler


class LocalHttpServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a burst of clients connecting at once (bench/load.py,
    # 24+ at a time) then gets connections reset. API Gateway has no such limit; neither should we.
    request_queue_size = 512
    daemon_threads = True


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (0: a free port) and listening, as LocalHttpServer's own would be."""
    listener = socket.socket()
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # HTTPServer.allow_reuse_address
        listener.bind((host, port))
        listener.listen(LocalHttpServer.request_queue_size)
    except BaseException:
        listener.close()
        raise
    return listener


def make_server(front: ApiGatewayFront, listener: socket.socket) -> ThreadingHTTPServer:
    """The front served on a socket already listening (listening_socket): the port was never let go."""
    server = LocalHttpServer(listener.getsockname()[:2], make_request_handler(front), bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    return server
