"""What every function behind API Gateway's HTTP API (payload 2.0) or a Lambda Function URL reads from
its event the same way: the headers and the body as sent.

Standard library only, and nothing else of the runtime: the OAuth bridge's function imports it too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any


class InvalidBase64Body(ValueError):
    """The event says its body is base64, and it is not."""


def event_headers(event: Mapping[str, Any]) -> dict[str, str]:
    """The request's headers, names lower-cased; none when the event's are not a mapping."""
    raw_headers = event.get("headers") or {}
    return {str(k).lower(): str(v) for k, v in raw_headers.items()} if isinstance(raw_headers, dict) else {}


def event_body(event: Mapping[str, Any]) -> bytes:
    """The body's bytes: base64-decoded when the event says it is encoded (else `InvalidBase64Body`),
    the text's UTF-8 otherwise; empty when the event carries no text."""
    body_text = event.get("body") or ""
    if not isinstance(body_text, str):
        body_text = ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body_text, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidBase64Body("the body is not valid base64") from None
    return body_text.encode("utf-8", "surrogatepass")
