"""Sealed requestState: integrity, binding to its origin, expiry and key rotation."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from mcp_runtime import wire
from mcp_runtime.errors import InvalidParams
from mcp_runtime.limits import MAX_REQUEST_STATE_CHARS
from mcp_runtime.sealing import Binding, SealingKey, StateRejected, StateSealer
from tests.unit.conftest import FakeClock

K1 = SealingKey("k1", b"1" * 32)
K2 = SealingKey("k2", b"2" * 40)
ARGS = {"project": "apollo", "count": 3}
BINDING = Binding("jwt:alice|app", "tools/call", "archive_project", ARGS)
PAYLOAD: dict[str, Any] = {
    "answers": {"confirm": {"action": "accept", "content": {"confirm": True}}},
    "state": {"n": 1},
}


def sealer(*keys: SealingKey, clock: FakeClock | None = None, lifetime: int = 900) -> StateSealer:
    return StateSealer(list(keys or (K1,)), lifetime_seconds=lifetime, clock=clock or FakeClock())


def assert_rejected(action: Any) -> StateRejected:
    with pytest.raises(StateRejected) as caught:
        action()
    assert caught.value.code == wire.INVALID_PARAMS
    assert isinstance(caught.value, InvalidParams)
    return caught.value


def replace_char(text: str, index: int) -> str:
    swapped = "A" if text[index] != "A" else "B"
    return text[:index] + swapped + text[index + 1 :]


def test_a_sealed_state_opens_to_the_same_payload_for_the_same_binding() -> None:
    box = sealer()
    token = box.seal(BINDING, PAYLOAD)
    assert token.startswith("v1.k1.")
    assert box.open(token, BINDING) == PAYLOAD


def test_the_arguments_digest_does_not_depend_on_key_order() -> None:
    box = sealer()
    token = box.seal(BINDING, PAYLOAD)
    reordered = Binding("jwt:alice|app", "tools/call", "archive_project", {"count": 3, "project": "apollo"})
    assert box.open(token, reordered) == PAYLOAD


@pytest.mark.parametrize("part", [2, 3], ids=["payload", "tag"])
@pytest.mark.parametrize("position", [0, 5, -1])
def test_a_changed_character_in_the_payload_or_the_tag_is_rejected(part: int, position: int) -> None:
    box = sealer()
    parts = box.seal(BINDING, PAYLOAD).split(".")
    parts[part] = replace_char(parts[part], position)
    assert_rejected(lambda: box.open(".".join(parts), BINDING))


def test_a_flipped_bit_in_the_decoded_payload_is_rejected() -> None:
    box = sealer()
    version, kid, encoded, tag = box.seal(BINDING, PAYLOAD).split(".")
    raw = bytearray(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    raw[len(raw) // 2] ^= 0x01
    forged = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    assert_rejected(lambda: box.open(f"{version}.{kid}.{forged}.{tag}", BINDING))


@pytest.mark.parametrize("cut", [1, 4, 20])
def test_a_truncated_token_is_rejected(cut: int) -> None:
    box = sealer()
    token = box.seal(BINDING, PAYLOAD)
    assert_rejected(lambda: box.open(token[:-cut], BINDING))


@pytest.mark.parametrize("prefix_parts", [1, 2, 3])
def test_a_token_missing_whole_parts_is_rejected(prefix_parts: int) -> None:
    box = sealer()
    token = box.seal(BINDING, PAYLOAD)
    assert_rejected(lambda: box.open(".".join(token.split(".")[:prefix_parts]), BINDING))


@pytest.mark.parametrize(
    "other",
    [
        Binding("jwt:alice|app", "tools/call", "count_words", ARGS),
        Binding("jwt:alice|app", "tools/call", "archive_project", {"project": "apollo", "count": 4}),
        Binding("jwt:alice|app", "tools/call", "archive_project", {"project": "apollo"}),
        Binding("jwt:mallory|app", "tools/call", "archive_project", ARGS),
        Binding("jwt:alice|other-app", "tools/call", "archive_project", ARGS),
        Binding("jwt:alice|app", "prompts/get", "archive_project", ARGS),
    ],
    ids=["other-target", "other-argument-value", "fewer-arguments", "other-principal", "other-client", "other-method"],
)
def test_a_state_does_not_open_for_another_binding(other: Binding) -> None:
    box = sealer()
    token = box.seal(BINDING, PAYLOAD)
    assert_rejected(lambda: box.open(token, other))


def test_a_state_opens_until_its_expiry_and_not_a_second_after(clock: FakeClock) -> None:
    box = sealer(clock=clock, lifetime=60)
    token = box.seal(BINDING, PAYLOAD)
    clock.advance(60)
    assert box.open(token, BINDING) == PAYLOAD
    clock.advance(1)
    assert_rejected(lambda: box.open(token, BINDING))


def test_an_unknown_key_id_is_rejected() -> None:
    token = sealer(K2).seal(BINDING, PAYLOAD)
    assert_rejected(lambda: sealer(K1).open(token, BINDING))


def test_the_key_id_is_covered_by_the_tag() -> None:
    box = sealer(K1, K2)
    version, _, encoded, tag = box.seal(BINDING, PAYLOAD).split(".")
    assert_rejected(lambda: box.open(f"{version}.k2.{encoded}.{tag}", BINDING))


def test_a_key_with_the_same_id_but_another_secret_does_not_open_the_state() -> None:
    token = sealer(SealingKey("k1", b"x" * 32)).seal(BINDING, PAYLOAD)
    assert_rejected(lambda: sealer(K1).open(token, BINDING))


@pytest.mark.parametrize("prefix", ["v2", "V1", "v0", "", "v1 "])
def test_a_wrong_version_prefix_is_rejected(prefix: str) -> None:
    box = sealer()
    _, rest = box.seal(BINDING, PAYLOAD).split(".", 1)
    assert_rejected(lambda: box.open(f"{prefix}.{rest}", BINDING))


def test_an_oversize_token_is_rejected_before_any_work() -> None:
    box = sealer()
    small = box.seal(BINDING, {"blob": "x"})
    signed_part, _, tag = small.rpartition(".")
    token = f"{signed_part}{'A' * MAX_REQUEST_STATE_CHARS}.{tag}"
    assert_rejected(lambda: box.open(token, BINDING))


def test_a_payload_too_large_for_a_token_is_refused_when_sealed() -> None:
    from mcp_runtime.sealing import StateTooLarge

    with pytest.raises(StateTooLarge):
        sealer().seal(BINDING, {"blob": "x" * MAX_REQUEST_STATE_CHARS})


@pytest.mark.parametrize("token", [None, 123, 1.5, True, [], {}, ["v1"], b"v1.k1.a.b", ""])
def test_a_state_that_is_not_a_non_empty_string_is_rejected(token: Any) -> None:
    assert_rejected(lambda: sealer().open(token, BINDING))


@pytest.mark.parametrize(
    "token",
    [
        "v1.k1.\u00e9t\u00e9.AAAA",
        "v1.k1.AAAA.\u00e9",
        "v1.k1.\ud800.AAAA",
        "v1.k\u00e9.AAAA.AAAA",
        "v1.k1.AA\x00AA.AAAA",
    ],
)
def test_a_token_with_characters_outside_its_alphabet_is_rejected_not_a_crash(token: str) -> None:
    assert_rejected(lambda: sealer().open(token, BINDING))


def _signed_with(key: SealingKey, body: Any) -> str:
    encoded = base64.urlsafe_b64encode(json.dumps(body).encode()).rstrip(b"=").decode()
    signed = f"v1.{key.key_id}.{encoded}"
    tag = hmac.new(key.secret, signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{base64.urlsafe_b64encode(tag).rstrip(b'=').decode()}"


@pytest.mark.parametrize(
    "body",
    [
        {"p": "jwt:alice|app", "m": "tools/call", "t": "archive_project", "a": BINDING.arguments_digest, "d": {}},
        {
            "p": "jwt:alice|app",
            "m": "tools/call",
            "t": "archive_project",
            "a": BINDING.arguments_digest,
            "x": "9",
            "d": {},
        },
        {"p": "jwt:alice|app", "m": "tools/call", "t": "archive_project", "a": BINDING.arguments_digest, "x": 2**40},
        ["not", "an", "object"],
    ],
    ids=["no-expiry", "string-expiry", "no-payload", "not-an-object"],
)
def test_a_genuinely_signed_but_malformed_body_is_still_rejected(body: Any) -> None:
    assert_rejected(lambda: sealer().open(_signed_with(K1, body), BINDING))


# ---- rotation --------------------------------------------------------------------------------------------------
def test_a_state_sealed_with_an_old_key_opens_while_that_key_is_still_listed() -> None:
    old_token = sealer(K1).seal(BINDING, PAYLOAD)
    rotated = sealer(K2, K1)
    assert rotated.open(old_token, BINDING) == PAYLOAD


def test_after_rotation_new_states_are_sealed_with_the_first_key() -> None:
    rotated = sealer(K2, K1)
    token = rotated.seal(BINDING, PAYLOAD)
    assert token.split(".")[1] == "k2"
    assert sealer(K2).open(token, BINDING) == PAYLOAD


def test_a_state_sealed_with_a_removed_key_no_longer_opens() -> None:
    old_token = sealer(K1).seal(BINDING, PAYLOAD)
    assert_rejected(lambda: sealer(K2).open(old_token, BINDING))


@pytest.mark.parametrize("length", [0, 1, 16, 31])
def test_a_key_shorter_than_32_bytes_is_refused(length: int) -> None:
    with pytest.raises(ValueError):
        SealingKey("short", b"k" * length)


def test_a_key_of_exactly_32_bytes_is_accepted() -> None:
    assert SealingKey("ok", b"k" * 32).secret == b"k" * 32


def test_a_sealer_without_keys_is_refused() -> None:
    with pytest.raises(ValueError):
        StateSealer([])


def _respelled_tags(tag: str) -> list[str]:
    """Other spellings of the same tag bytes: padding, an ignored character, the unused low bits of the last one."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(tag[-1])
    low_bits = [alphabet[(last & ~0b11) | bits] for bits in range(4) if (last & ~0b11) | bits != last]
    return [tag + "=", tag[:5] + "!" + tag[5:], *(tag[:-1] + c for c in low_bits)]


@pytest.mark.parametrize("spelling", range(5))
def test_a_tag_spelled_differently_is_rejected_even_when_it_decodes_to_the_same_bytes(spelling: int) -> None:
    box = sealer()
    version, kid, encoded, tag = box.seal(BINDING, PAYLOAD).split(".")
    respelled = _respelled_tags(tag)[spelling]
    assert respelled != tag
    assert_rejected(lambda: box.open(f"{version}.{kid}.{encoded}.{respelled}", BINDING))


def test_a_sealed_tag_is_the_hmac_sha256_of_everything_before_it() -> None:
    token = sealer(K1).seal(BINDING, PAYLOAD)
    signed, _, tag = token.rpartition(".")
    expected = hmac.new(K1.secret, signed.encode(), hashlib.sha256).digest()
    assert tag == base64.urlsafe_b64encode(expected).rstrip(b"=").decode()


def test_keys_given_as_a_source_are_read_by_the_first_seal_only_and_a_failed_read_is_tried_again() -> None:
    reads: list[str] = []

    def source() -> list[SealingKey]:
        reads.append("read")
        if len(reads) == 1:
            raise ConnectionError("Secrets Manager unreachable")
        return [K1]

    lazy = StateSealer(source, clock=FakeClock())
    assert reads == []
    with pytest.raises(ConnectionError):
        lazy.seal(BINDING, PAYLOAD)
    token = lazy.seal(BINDING, PAYLOAD)
    assert lazy.open(token, BINDING) == PAYLOAD
    assert reads == ["read", "read"]
    assert sealer(K1).open(token, BINDING) == PAYLOAD


def test_keys_given_as_a_source_are_read_by_a_first_open_too() -> None:
    token = sealer(K1).seal(BINDING, PAYLOAD)
    reads: list[str] = []
    lazy = StateSealer(lambda: reads.append("read") or [K1], clock=FakeClock())
    assert lazy.open(token, BINDING) == PAYLOAD
    assert reads == ["read"]


def test_a_key_source_that_yields_no_key_is_refused_when_read() -> None:
    lazy = StateSealer(list, clock=FakeClock())
    with pytest.raises(ValueError, match="at least one sealing key"):
        lazy.seal(BINDING, PAYLOAD)
