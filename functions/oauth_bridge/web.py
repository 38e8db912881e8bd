"""HTTP in and out of the bridge: API Gateway (payload 2.0) events, OAuth error answers, redirects."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

from mcp_runtime.proxy_event import InvalidBase64Body, event_body, event_headers

MAX_BODY_BYTES: Final = 65_536
_LOOPBACK_HOST: Final = re.compile(r"^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$", re.IGNORECASE)
NO_STORE: Final = {"cache-control": "no-store", "pragma": "no-cache"}


class OAuthError(Exception):
    """An error answered as RFC 6749 §5.2 / RFC 7591 §3.2.2 describe: JSON `error` and `error_description`."""

    def __init__(self, status: int, error: str, description: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{error}: {description}")
        self.status = status
        self.error = error
        self.description = description
        self.headers = dict(headers or {})


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes
    source_ip: str
    raw_query: str = ""
    cookie: str = ""  # payload 2.0 moves the Cookie header into `cookies`; joined again here

    @property
    def base_url(self) -> str:
        """This API's origin as the client reached it (API Gateway only routes its own host names)."""
        host = self.headers.get("host", "localhost")
        default = "http" if _LOOPBACK_HOST.match(host) else "https"
        scheme = self.headers.get("x-forwarded-proto", default).split(",")[0].strip() or default
        return f"{scheme}://{host}"

    def single(self, params: Mapping[str, list[str]], name: str) -> str | None:
        """A parameter that may appear once (RFC 6749 §3.1: repeated parameters are an error)."""
        values = params.get(name) or []
        if len(values) > 1:
            raise OAuthError(400, "invalid_request", f"the {name} parameter is repeated")
        return values[0] if values else None

    def form(self) -> dict[str, list[str]]:
        content_type = self.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            raise OAuthError(400, "invalid_request", "the body must be application/x-www-form-urlencoded")
        return parse_pairs(self.body)

    def json_object(self) -> dict[str, Any]:
        content_type = self.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise OAuthError(400, "invalid_client_metadata", "the body must be a JSON object (application/json)")
        try:
            value = json.loads(self.body)
        except (ValueError, RecursionError):
            raise OAuthError(400, "invalid_client_metadata", "the body is not valid JSON") from None
        if not isinstance(value, dict):
            raise OAuthError(400, "invalid_client_metadata", "the body must be a JSON object")
        return value


def parse_pairs(raw: bytes | str) -> dict[str, list[str]]:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    params: dict[str, list[str]] = {}
    for key, value in parse_qsl(text, keep_blank_values=True, max_num_fields=64):
        params.setdefault(key, []).append(value)
    return params


def request_from_event(event: Mapping[str, Any]) -> Request:
    headers = event_headers(event)
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    try:
        body = event_body(event)
    except InvalidBase64Body:
        raise OAuthError(400, "invalid_request", "the body is not valid base64") from None
    if len(body) > MAX_BODY_BYTES:
        raise OAuthError(413, "invalid_request", "the body is too large")
    try:
        query = parse_pairs(str(event.get("rawQueryString") or ""))
    except ValueError:
        raise OAuthError(400, "invalid_request", "too many query parameters") from None
    return Request(
        method=str(http.get("method") or "GET").upper(),
        path=str(event.get("rawPath") or http.get("path") or "/"),
        query=query,
        headers=headers,
        body=body,
        source_ip=str(http.get("sourceIp") or "unknown"),
        raw_query=str(event.get("rawQueryString") or ""),
        cookie=_cookie_header(event, headers),
    )


def _cookie_header(event: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    cookies = event.get("cookies")
    if isinstance(cookies, list) and cookies:
        return "; ".join(str(c) for c in cookies)
    return headers.get("cookie", "")


def json_response(status: int, document: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"content-type": "application/json", **(headers or {})},
        "body": json.dumps(document, separators=(",", ":")),
        "isBase64Encoded": False,
    }


def error_response(error: OAuthError) -> dict[str, Any]:
    document = {"error": error.error, "error_description": error.description}
    return json_response(error.status, document, {**NO_STORE, **error.headers})


def redirect(location: str, cookie: str | list[str] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "statusCode": 302,
        "headers": {"location": location, **NO_STORE},
        "body": "",
        "isBase64Encoded": False,
    }
    if cookie:
        answer["cookies"] = [cookie] if isinstance(cookie, str) else cookie
    return answer


def redirect_with(uri: str, params: Mapping[str, str]) -> dict[str, Any]:
    separator = "&" if "?" in uri else "?"
    return redirect(f"{uri}{separator}{urlencode(params)}")


def html_response(
    status: int, body: str, headers: Mapping[str, str], cookie: str | list[str] | None = None
) -> dict[str, Any]:
    answer: dict[str, Any] = {"statusCode": status, "headers": dict(headers), "body": body, "isBase64Encoded": False}
    if cookie:
        answer["cookies"] = [cookie] if isinstance(cookie, str) else cookie
    return answer
