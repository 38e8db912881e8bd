"""Stateless 2025 sessions: what the sealed Mcp-Session-Id holds, and which ids never open."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_runtime import wire
from mcp_runtime.legacy import is_legacy_message
from mcp_runtime.legacy._sessions import SessionInvalid, SessionSealer
from mcp_runtime.limits import MAX_SESSION_PAYLOAD_BYTES
from mcp_runtime.sealing import StateSealer
from tests.unit.conftest import TEST_KEY, FakeClock

LIFETIME = 3_600
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
INFO = {"name": "vscode", "version": "1.99"}


def sealers(clock: FakeClock) -> SessionSealer:
    return SessionSealer(StateSealer([TEST_KEY], clock=clock), LIFETIME, clock)


def test_a_session_opens_for_its_principal_with_what_initialize_negotiated() -> None:
    clock = FakeClock()
    issued, token = sealers(clock).issue("jwt:alice|app", "2025-06-18", CAPABILITIES, INFO)
    opened = sealers(clock).open("jwt:alice|app", token)
    assert opened == issued
    assert (opened.protocol_version, opened.capabilities, opened.client_info) == ("2025-06-18", CAPABILITIES, INFO)
    assert opened.expires_at == int(clock.now) + LIFETIME
    assert len(opened.nonce) >= 24
    assert all(0x21 <= ord(char) <= 0x7E for char in token)


def test_each_initialize_names_a_new_session() -> None:
    clock = FakeClock()
    first, _ = sealers(clock).issue("p", wire.LEGACY_PROTOCOL_VERSION, {}, INFO)
    second, _ = sealers(clock).issue("p", wire.LEGACY_PROTOCOL_VERSION, {}, INFO)
    assert first.nonce != second.nonce


def test_another_principals_session_does_not_open() -> None:
    clock = FakeClock()
    _, token = sealers(clock).issue("jwt:alice|app", wire.LEGACY_PROTOCOL_VERSION, {}, INFO)
    with pytest.raises(SessionInvalid):
        sealers(clock).open("jwt:mallory|app", token)


@pytest.mark.parametrize("index", [3, 10, -5, -1])
def test_a_tampered_session_does_not_open(index: int) -> None:
    clock = FakeClock()
    _, token = sealers(clock).issue("p", wire.LEGACY_PROTOCOL_VERSION, {}, INFO)
    position = index % len(token)
    changed = token[:position] + ("A" if token[position] != "A" else "B") + token[position + 1 :]
    assert changed != token
    with pytest.raises(SessionInvalid):
        sealers(clock).open("p", changed)


def test_an_expired_session_does_not_open() -> None:
    clock = FakeClock()
    _, token = sealers(clock).issue("p", wire.LEGACY_PROTOCOL_VERSION, {}, INFO)
    clock.now += LIFETIME - 1
    sealers(clock).open("p", token)
    clock.now += 2
    with pytest.raises(SessionInvalid):
        sealers(clock).open("p", token)


def test_a_request_state_never_opens_as_a_session() -> None:
    clock = FakeClock()
    from mcp_runtime.sealing import Binding

    state = StateSealer([TEST_KEY], clock=clock).seal(Binding("p", "tools/call", "x", {}), {"answers": {}})
    with pytest.raises(SessionInvalid):
        sealers(clock).open("p", state)


def test_oversized_client_capabilities_and_info_keep_only_what_the_server_reads() -> None:
    clock = FakeClock()
    huge = {"experimental": {"x": "y" * MAX_SESSION_PAYLOAD_BYTES}, "elicitation": {}, "roots": {"listChanged": True}}
    info = {"name": "n" * 300, "version": "1", "description": "d" * MAX_SESSION_PAYLOAD_BYTES}
    session, token = sealers(clock).issue("p", wire.LEGACY_PROTOCOL_VERSION, huge, info)
    assert session.capabilities == {"elicitation": {}, "roots": {"listChanged": True}}
    assert session.client_info == {"name": "n" * 128, "version": "1"}
    assert len(token) < 2 * MAX_SESSION_PAYLOAD_BYTES


@pytest.mark.parametrize(
    ("headers", "message", "legacy"),
    [
        ({}, {"method": "initialize", "params": {"protocolVersion": "2025-11-25"}}, True),
        ({wire.HEADER_SESSION_ID: "s"}, {"method": "tools/list"}, True),
        ({wire.HEADER_PROTOCOL_VERSION: "2025-06-18"}, {"method": "tools/list"}, True),
        ({wire.HEADER_SESSION_ID: "s"}, {"id": "a.1.k", "result": {}}, True),
        ({}, {"method": "tools/list"}, False),
        ({wire.HEADER_PROTOCOL_VERSION: wire.PROTOCOL_VERSION, wire.HEADER_SESSION_ID: "s"}, {"method": "x"}, False),
        (
            {wire.HEADER_SESSION_ID: "s"},
            {"method": "initialize", "params": {"_meta": {wire.META_PROTOCOL_VERSION: wire.PROTOCOL_VERSION}}},
            False,
        ),
        ({wire.HEADER_PROTOCOL_VERSION: "1999-01-01"}, {"method": "initialize"}, False),
    ],
)
def test_only_handshake_era_traffic_takes_the_legacy_leg(
    headers: dict[str, str], message: dict[str, Any], legacy: bool
) -> None:
    assert is_legacy_message({"jsonrpc": "2.0", "id": 1, **message}, headers) is legacy
