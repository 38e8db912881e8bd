"""A loopback HTTP server that turns each request into the event API Gateway (HTTP API, payload 2.0)
would send, calls the same Lambda handler, and writes its response back."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import uuid4

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]
MAX_BODY_BYTES = 8 * 1024 * 1024


def to_api_gateway_event(
    method: str, raw_path: str, headers: dict[str, str], body: bytes, source_ip: str
) -> dict[str, Any]:
    path, _, query = raw_path.partition("?")
    try:
        text_body, is_base64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text_body, is_base64 = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": f"{method} {path}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000",
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
            "routeKey": f"{method} {path}",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text_body,
        "isBase64Encoded": is_base64,
    }


class LocalLambdaContext:
    function_name = "local-api"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:local-api"
    aws_request_id = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


def make_request_handler(handler: LambdaHandler, path: str = "/mcp") -> type[BaseHTTPRequestHandler]:
    class ApiGatewayFront(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "local-api-gateway"

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            return

        def _serve(self) -> None:
            route = self.path.partition("?")[0]
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY_BYTES:
                self._write(413, {"content-type": "text/plain"}, b"Request body too large")
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else b""
            if route != path and not route.startswith("/.well-known/oauth-protected-resource"):
                self._write(404, {"content-type": "application/json"}, b'{"message":"Not Found"}')
                return
            # API Gateway joins repeated headers with commas and lower-cases names.
            headers: dict[str, str] = {}
            for name, value in self.headers.items():
                key = name.lower()
                headers[key] = f"{headers[key]},{value}" if key in headers else value
            event = to_api_gateway_event(self.command, self.path, headers, body, self.client_address[0])
            result = handler(event, LocalLambdaContext())
            payload = result.get("body") or ""
            raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
            self._write(int(result.get("statusCode", 200)), result.get("headers") or {}, raw)

        def _write(self, status: int, headers: dict[str, str], raw: bytes) -> None:
            self.send_response(status)
            for name, value in headers.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_POST = _serve
        do_GET = _serve
        do_DELETE = _serve
        do_PUT = _serve
        do_PATCH = _serve
        do_OPTIONS = _serve

    return ApiGatewayFront


class LocalHttpServer(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: a burst of clients connecting at once (bench/load.py,
    # 24+ at a time) then gets connections reset. API Gateway has no such limit; neither should we.
    request_queue_size = 512


def make_server(handler: LambdaHandler, host: str = "127.0.0.1", port: int = 3000) -> ThreadingHTTPServer:
    server = LocalHttpServer((host, port), make_request_handler(handler))
    server.daemon_threads = True
    return server
