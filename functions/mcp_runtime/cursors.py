"""Pagination cursors: the one codec of every `nextCursor` the server hands out.

A cursor is a position (a list of strings and integers) as compact JSON in unpadded base64url. It
is opaque to clients and carries no authority: each page checks the position's shape and range and
takes everything else (the owner, the list) from the request. A cursor this server could not have
issued is `InvalidCursor`, a -32602 "Invalid cursor" unless its caller answers otherwise.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .errors import InvalidParams
from .limits import MAX_CURSOR_CHARS

__all__ = ["InvalidCursor", "decode_cursor", "encode_cursor"]


class InvalidCursor(InvalidParams):
    """A cursor that this server did not issue (or that was altered)."""

    def __init__(self) -> None:
        super().__init__("Invalid cursor")


def encode_cursor(*position: str | int) -> str:
    raw = json.dumps(list(position), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: object) -> list[Any]:
    """The position `encode_cursor` made; its shape and range are for the caller to check."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursor
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor.rstrip("=") + "=" * (-len(cursor.rstrip("=")) % 4)))
    except (ValueError, TypeError, RecursionError):  # binascii.Error and UnicodeError are ValueErrors
        raise InvalidCursor from None
    if not isinstance(position, list):
        raise InvalidCursor
    return position
