"""Header value rules of the 2026-07-28 transport: trimming, base64 sentinels, numeric comparison."""

from __future__ import annotations

import base64
import binascii
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from .errors import HeaderMismatch

_SENTINEL: Final = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)


def decode_header_value(raw: str) -> str:
    """Trim optional whitespace and decode a `=?base64?…?=` value; malformed base64 is rejected."""
    value = raw.strip(" \t")
    found = _SENTINEL.match(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found.group(1), validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as exc:
        raise HeaderMismatch("Malformed base64 header value") from exc


def header_matches(header_value: str, body_value: Any) -> bool:
    if isinstance(body_value, bool):
        return header_value == ("true" if body_value else "false")
    if isinstance(body_value, int | float):
        # Exact decimal comparison: `42` equals `42.0`, and huge integers keep every digit.
        try:
            return bool(Decimal(header_value) == Decimal(str(body_value)))
        except InvalidOperation:
            return False
    return bool(header_value == body_value)
