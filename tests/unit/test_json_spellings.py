"""The runtime's JSON encoders (`mcp_runtime._json`) spell every value exactly as `json.dumps` would."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_runtime import _json

# Text of every kind the wire can carry: ASCII, control characters, non-ASCII, astral and lone surrogates.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(any_text, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_wire_spelling_is_json_dumps_with_ascii_escapes(value: Any) -> None:
    assert _json.compact(value) == json.dumps(value, separators=(",", ":"))


def test_delete_the_one_ascii_character_the_two_encoders_spell_apart_is_escaped_on_the_wire() -> None:
    value = {"k\x7f": ["\x7f", "a\x7fb"]}
    assert _json.compact(value) == '{"k\\u007f":["\\u007f","a\\u007fb"]}' == json.dumps(value, separators=(",", ":"))


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_internal_spelling_is_json_dumps_with_text_as_it_is(value: Any) -> None:
    assert _json.compact_text(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_canonical_spelling_is_json_dumps_with_sorted_keys(value: Any) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    assert _json.canonical(value) == expected


def test_text_outside_ascii_reaches_the_wire_as_escapes() -> None:
    assert _json.compact({"name": "café ☕ \ud800"}) == '{"name":"caf\\u00e9 \\u2615 \\ud800"}'
    assert _json.compact_text({"name": "café"}) == '{"name":"café"}'


def test_special_floats_are_spelled_as_json_dumps_spells_them() -> None:
    assert _json.compact([math.nan, math.inf, -math.inf, 1.5]) == "[NaN,Infinity,-Infinity,1.5]"


@pytest.mark.parametrize("encode", [_json.compact, _json.compact_text, _json.canonical, _json.readable])
def test_a_value_json_cannot_spell_raises_type_error(encode: Any) -> None:
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        encode({"tags": {"a"}})


@pytest.mark.parametrize("encode", [_json.compact, _json.compact_text, _json.canonical, _json.readable])
def test_the_same_encoder_serves_one_call_after_another_failed(encode: Any) -> None:
    with pytest.raises(TypeError):
        encode([1, object()])
    assert json.loads(encode({"b": [1, 2], "a": None})) == {"b": [1, 2], "a": None}


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_readable_spelling_is_json_dumps_as_it_is(value: Any) -> None:
    assert _json.readable(value) == json.dumps(value)


def test_without_the_c_accelerator_the_same_spellings_come_from_json_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    import json.encoder

    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    value = {"b": ["é", 1.5, None], "a": True}
    assert _json._encoder()(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert _json._encoder(sort_keys=True)(value) == '{"a":true,"b":["é",1.5,null]}'
    assert _json._encoder(ensure_ascii=True, compact=False)(value) == json.dumps(value)
