"""requestState attacks through the transport that test_sealing.py and test_mrtr.py do not already make.

Already covered there: tampered characters and bits, garbage and wrong types, expiry (one round),
another principal, another tool, other arguments, prompt/tool swap, key rotation and respelled tags
at the sealer. Here: states forged with a key the server does not hold (including a correctly bound
payload a leaked-format attacker would build), expiry in the middle of a multi-round exchange,
states swapped between two concurrent exchanges of the same tool, truncation at every boundary,
and re-encodings of a genuine token. Each must be a -32602 in-band error, never a result.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from mcp_runtime import wire
from mcp_runtime.sealing import Binding, SealingKey, StateSealer
from mcp_runtime.transport import HttpResponse
from tests.unit.conftest import ALICE, TEST_KEY, Client, FakeClock, result_of

ELICIT: dict[str, Any] = {"elicitation": {}}
TOOL = "archive_project"
APOLLO = {"project": "apollo"}
ZEUS = {"project": "zeus"}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


CONFIRMED = {"confirm": accept(confirm=True)}
REASON = {"reason": accept(reason="done")}


def call(client: Client, arguments: dict[str, Any], state: Any, responses: dict[str, Any]) -> HttpResponse:
    extra: dict[str, Any] = {"inputResponses": responses}
    if state is not None:
        extra["requestState"] = state
    return client.call_tool(TOOL, arguments, capabilities=ELICIT, **extra)


def state_of(response: HttpResponse) -> str:
    result = result_of(response)
    assert result["resultType"] == wire.RESULT_INPUT_REQUIRED, result
    state: str = result["requestState"]
    return state


def round_two_state(client: Client, arguments: dict[str, Any] = APOLLO) -> str:
    """The state that carries the sealed confirmation and asks for the reason."""
    first = state_of(call(client, arguments, None, {}))
    return state_of(call(client, arguments, first, CONFIRMED))


def rejected(response: HttpResponse, reason: str | None = None) -> None:
    assert response.status == 200
    message = response.json()
    assert "result" not in message, message
    assert message["error"]["code"] == wire.INVALID_PARAMS
    assert message["error"]["message"].startswith("Invalid requestState: ")
    if reason is not None:
        assert message["error"]["message"] == f"Invalid requestState: {reason}"


def completed(response: HttpResponse) -> str:
    result = result_of(response)
    assert result["resultType"] == wire.RESULT_COMPLETE and not result.get("isError"), result
    text: str = result["content"][0]["text"]
    return text


# ---- forged with a key the server does not hold ------------------------------------------------------------------
def forged(key: SealingKey, clock: FakeClock, arguments: dict[str, Any] = APOLLO) -> str:
    """A state bound exactly as the server binds it (caller, method, tool, arguments digest, fresh expiry)."""
    binding = Binding(ALICE.id, "tools/call", TOOL, arguments)
    return StateSealer([key], clock=clock).seal(binding, {"answers": CONFIRMED, "state": {}})


def test_the_forgery_recipe_is_right_so_a_rejection_below_is_the_key_alone(client: Client, clock: FakeClock) -> None:
    assert (
        completed(call(client, APOLLO, forged(TEST_KEY, clock), REASON)) == "Archived project 'apollo' (reason: done)."
    )


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (SealingKey(TEST_KEY.key_id, b"attacker-chosen-secret-0123456789abcdef"), "verification failed"),
        (SealingKey(TEST_KEY.key_id, TEST_KEY.secret[:-1] + b"!"), "verification failed"),
        (SealingKey("evil", b"attacker-chosen-secret-0123456789abcdef"), "unknown key"),
        (SealingKey("", TEST_KEY.secret), "unknown key"),
        (SealingKey("dev", TEST_KEY.secret), "unknown key"),
    ],
    ids=["same-id-other-secret", "one-byte-off", "attacker-key-id", "empty-key-id", "dev-key-id"],
)
def test_a_state_forged_with_another_key_is_rejected(
    client: Client, clock: FakeClock, key: SealingKey, reason: str
) -> None:
    rejected(call(client, APOLLO, forged(key, clock), REASON), reason)


def _reassembled(token: str, tag: bytes) -> str:
    version, kid, encoded, _ = token.split(".")
    return f"{version}.{kid}.{encoded}.{base64.urlsafe_b64encode(tag).rstrip(b'=').decode()}"


@pytest.mark.parametrize("scheme", ["sha256-of-payload", "sha256-key-prefix", "empty-tag", "zero-tag"])
def test_a_state_with_a_homemade_tag_is_rejected(client: Client, clock: FakeClock, scheme: str) -> None:
    token = forged(TEST_KEY, clock)
    signed = token.rsplit(".", 1)[0].encode()
    tags = {
        "sha256-of-payload": hashlib.sha256(signed).digest(),
        "sha256-key-prefix": hashlib.sha256(b"guessed-key" + signed).digest(),
        "empty-tag": b"",
        "zero-tag": bytes(32),
    }
    rejected(call(client, APOLLO, _reassembled(token, tags[scheme]), REASON), "verification failed")


# ---- replayed after expiry, mid-exchange -------------------------------------------------------------------------
def test_a_round_two_state_replayed_after_expiry_is_rejected_and_a_fresh_start_asks_again(
    client: Client, clock: FakeClock
) -> None:
    state = round_two_state(client)
    clock.advance(900)
    assert completed(call(client, APOLLO, state, REASON)).startswith("Archived")  # the last second still opens
    clock.advance(1)
    rejected(call(client, APOLLO, state, REASON), "expired")
    rejected(call(client, APOLLO, state, {**CONFIRMED, **REASON}), "expired")  # re-sending every answer does not help
    again = result_of(call(client, APOLLO, None, REASON))
    assert list(again["inputRequests"]) == ["confirm"]  # the confirmation is asked again, never assumed


# ---- swapped between two exchanges of the same tool --------------------------------------------------------------
def test_states_swapped_between_two_exchanges_with_different_arguments_are_rejected(client: Client) -> None:
    apollo, zeus = round_two_state(client, APOLLO), round_two_state(client, ZEUS)
    rejected(call(client, ZEUS, apollo, REASON), "issued for another request")
    rejected(call(client, APOLLO, zeus, REASON), "issued for another request")
    # Each still completes its own exchange.
    assert completed(call(client, APOLLO, apollo, REASON)) == "Archived project 'apollo' (reason: done)."
    assert completed(call(client, ZEUS, zeus, REASON)) == "Archived project 'zeus' (reason: done)."


@pytest.mark.parametrize(
    "arguments",
    [
        {"project": "apollo", "extra": True},
        {"project": ["apollo"]},
        {"project": "Apollo"},
        {"project": "apollo "},
        {"project": "apollo", "project2": "apollo"},
        {},
    ],
    ids=["smuggled-argument", "type-changed", "case-changed", "trailing-space", "added-key", "no-arguments"],
)
def test_a_state_moved_to_a_call_with_near_identical_arguments_is_rejected(
    client: Client, arguments: dict[str, Any]
) -> None:
    response = call(client, arguments, round_two_state(client), REASON)
    message = response.json()
    if "error" in message and not message["error"]["message"].startswith("Invalid requestState"):
        pytest.fail(f"expected the state check, got {message}")
    if "result" in message:  # arguments the tool refuses fail before the state is opened: still not a completion
        assert message["result"].get("isError") is True, message
        return
    rejected(response, "issued for another request")


def test_a_round_one_state_replayed_in_round_three_only_asks_again(client: Client) -> None:
    """Same caller, same arguments: an older state is genuine but carries fewer answers, so nothing is skipped."""
    first = state_of(call(client, APOLLO, None, {}))
    state_of(call(client, APOLLO, first, CONFIRMED))
    again = result_of(call(client, APOLLO, first, REASON))
    assert list(again["inputRequests"]) == ["confirm"]


# ---- truncated ----------------------------------------------------------------------------------------------------
def _truncations(token: str) -> list[str]:
    dots = [i for i, c in enumerate(token) if c == "."]
    cuts = {len(token) - 1, len(token) - 2, len(token) - 43, *dots, *(d + 1 for d in dots), 1, len(token) // 2}
    return [token[:cut] for cut in sorted(cuts) if 0 < cut < len(token)] + [token[1:], token[4:]]


def test_every_truncation_of_a_genuine_state_is_rejected(client: Client) -> None:
    token = round_two_state(client)
    for truncated in _truncations(token):
        rejected(call(client, APOLLO, truncated, REASON))


def test_a_state_with_its_tag_dropped_or_doubled_is_rejected(client: Client) -> None:
    token = round_two_state(client)
    head, tag = token.rsplit(".", 1)
    for variant in (head, head + ".", f"{head}.{tag}.{tag}", f"{head}.{tag}{tag}"):
        rejected(call(client, APOLLO, variant, REASON))


# ---- re-encoded ---------------------------------------------------------------------------------------------------
def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _payload_reencodings(token: str) -> dict[str, str]:
    version, kid, encoded, tag = token.split(".")
    body = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))

    def with_body(raw: bytes) -> str:
        return f"{version}.{kid}.{_b64(raw)}.{tag}"

    return {
        "padded": f"{version}.{kid}.{encoded}{'=' * (-len(encoded) % 4) or '=='}.{tag}",
        "line-wrapped": f"{version}.{kid}.{encoded[:20]}\n{encoded[20:]}.{tag}",
        "tag-line-wrapped": f"{version}.{kid}.{encoded}.{tag[:20]}\r\n{tag[20:]}",
        "spaced-json": with_body(json.dumps(body).encode()),
        "sorted-json": with_body(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()),
        "ascii-escaped-json": with_body(json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode() + b" "),
        "upper-version": f"{version.upper()}.{kid}.{encoded}.{tag}",
        "percent-encoded-dots": token.replace(".", "%2E"),
        "whole-token-base64": base64.urlsafe_b64encode(token.encode()).decode(),
        "leading-space": " " + token,
        "trailing-newline": token + "\n",
        "fullwidth-dots": token.replace(".", "\uff0e"),
        "json-string-in-string": json.dumps(token),
    }


@pytest.mark.parametrize(
    "variant",
    [
        "padded",
        "line-wrapped",
        "tag-line-wrapped",
        "spaced-json",
        "sorted-json",
        "ascii-escaped-json",
        "upper-version",
        "percent-encoded-dots",
        "whole-token-base64",
        "leading-space",
        "trailing-newline",
        "fullwidth-dots",
        "json-string-in-string",
    ],
)
def test_a_re_encoded_genuine_state_is_rejected(client: Client, variant: str) -> None:
    token = round_two_state(client)
    reencoded = _payload_reencodings(token)[variant]
    assert reencoded != token
    rejected(call(client, APOLLO, reencoded, REASON))
    assert completed(call(client, APOLLO, token, REASON)).startswith("Archived")  # the genuine one still works
