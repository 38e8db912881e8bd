"""The compact JSON spellings of the hot path, each one encoder built once.

`json.dumps`, and even a kept `JSONEncoder`, builds a new C encoder on every call; on the warm path
(a response, a sealed state, an arguments digest and a metrics line per request) that and the
escaping of non-ASCII text are a measurable part of the runtime's overhead (bench/README.md, warm).
The C encoder of the standard library is built once per spelling instead, without the circular
reference check: every value encoded here was parsed from JSON or built by the runtime, and a cycle
would still end in RecursionError, never in output.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any, Final


def _encoder(*, sort_keys: bool = False, ensure_ascii: bool = False, compact: bool = True) -> Callable[[Any], str]:
    """What `json.dumps` spells with these arguments (`compact`: the separators `,` and `:`)."""
    item_separator, key_separator = (",", ":") if compact else (", ", ": ")
    make = getattr(json.encoder, "c_make_encoder", None)  # the C accelerator, as `json.encoder` finds it
    if make is None:  # an interpreter without it
        return json.JSONEncoder(
            separators=(item_separator, key_separator), ensure_ascii=ensure_ascii, sort_keys=sort_keys
        ).encode
    encode = make(
        None,  # no markers: no circular check (see the module docstring)
        json.JSONEncoder().default,  # TypeError for what JSON cannot spell, as json.dumps raises
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
        None,  # no indent
        key_separator,
        item_separator,
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan, as json.dumps
    )

    def encoded(value: Any) -> str:
        return "".join(encode(value, 0))

    return encoded


# What only this runtime reads back (sealed states, metrics lines): UTF-8 as it is, shorter than escapes.
compact_text: Final[Callable[[Any], str]] = _encoder()
# One spelling per value, for digests: keys sorted.
canonical: Final[Callable[[Any], str]] = _encoder(sort_keys=True)
# `json.dumps(value)` as it is: the text beside a tool's structured result, which the model reads.
readable: Final[Callable[[Any], str]] = _encoder(ensure_ascii=True, compact=False)
_compact_ascii: Final = _encoder(ensure_ascii=True)


def compact(value: Any) -> str:
    """The wire: `\\uXXXX` escapes for anything outside ASCII, so no text can fail to encode downstream.

    Encoded as UTF-8 first, which is the same text whenever the result is ASCII without DEL (control
    characters, quotes and backslashes are escaped alike in both, DEL only by the ASCII encoder); only
    text with other characters is encoded again.
    """
    text = compact_text(value)
    return text if text.isascii() and "\x7f" not in text else _compact_ascii(value)
