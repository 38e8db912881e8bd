"""The compact JSON spellings of the hot path, each one encoder built once.

`json.dumps` with any non-default argument builds a new `JSONEncoder` on every call; on the warm
path (a response, a sealed state, an arguments digest per request) that is a measurable part of the
runtime's overhead (bench/README.md, warm).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

# The wire: `\uXXXX` escapes for anything outside ASCII, so no text can fail to encode downstream.
compact: Final[Callable[[Any], str]] = json.JSONEncoder(separators=(",", ":")).encode
# What only this runtime reads back (sealed states): UTF-8 as it is, shorter than escapes.
compact_text: Final[Callable[[Any], str]] = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# One spelling per value, for digests: keys sorted.
canonical: Final[Callable[[Any], str]] = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, sort_keys=True
).encode
