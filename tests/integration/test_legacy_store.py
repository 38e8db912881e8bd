"""The legacy leg's items on DynamoDB (moto): sessions ended for good, and streams whose every
state change is a conditional write bound to the caller (principal and session)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from mcp_runtime.legacy._store import (
    DONE,
    KIND_INPUT,
    OPEN,
    RUNNING,
    STREAM_OWNER,
    DynamoLegacyStore,
    SessionEnded,
    SessionState,
    StreamConflict,
    StreamNotFound,
    StreamRecord,
)
from mcp_runtime.tasks import schema
from tests.integration.table_harness import TABLE
from tests.integration.task_harness import Clock

KEY = "0123456789abcdef0123456789abcdef"
QUESTION = {"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": {}}}
ACCEPT = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture
def store(dynamodb: Any, clock: Clock) -> DynamoLegacyStore:
    return DynamoLegacyStore(TABLE, dynamodb, clock=clock)


def stream(clock: Clock, **changes: Any) -> StreamRecord:
    record = StreamRecord(
        key=KEY,
        owner="dev:alice",
        session="nonce-a",
        request_id=7,
        method="tools/call",
        params={"name": "archive_project", "arguments": {"project": "apollo"}},
        kind=KIND_INPUT,
        status=OPEN,
        version=1,
        expires_at=int(clock.now) + 900,
        pending={"confirm": QUESTION},
        request_state="v1.k.sealed.tag",
    )
    return replace(record, **changes)


def test_a_stream_round_trips_through_its_item_and_stays_out_of_the_owner_index(
    store: DynamoLegacyStore, dynamodb: Any, clock: Clock
) -> None:
    record = stream(clock).with_events([{"jsonrpc": "2.0", "id": f"{KEY}.1.confirm", **QUESTION}])
    store.create_stream(record)
    assert store.get_stream(KEY, "dev:alice", "nonce-a") == record
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"{schema.STREAM_KEY_PREFIX}{KEY}"}})["Item"]
    assert STREAM_OWNER in item and schema.OWNER_INDEX_PARTITION_KEY not in item
    assert item[schema.TTL_ATTRIBUTE] == {"N": str(int(clock.now) + 900)}


def test_another_principal_or_session_reads_a_stream_as_missing(store: DynamoLegacyStore, clock: Clock) -> None:
    store.create_stream(stream(clock))
    for owner, session in (("dev:mallory", "nonce-a"), ("dev:alice", "nonce-b"), ("dev:mallory", "nonce-m")):
        with pytest.raises(StreamNotFound):
            store.get_stream(KEY, owner, session)


def test_an_expired_stream_reads_as_missing_before_dynamodb_deletes_it(store: DynamoLegacyStore, clock: Clock) -> None:
    store.create_stream(stream(clock))
    clock.now += 900
    with pytest.raises(StreamNotFound):
        store.get_stream(KEY, "dev:alice", "nonce-a")


def test_an_open_stream_is_never_replaced_but_a_settled_one_is(store: DynamoLegacyStore, clock: Clock) -> None:
    store.create_stream(stream(clock))
    with pytest.raises(StreamConflict):
        store.create_stream(stream(clock, request_state="other"))
    current = store.get_stream(KEY, "dev:alice", "nonce-a")
    store.save_stream(replace(current, status=DONE), current.version)
    store.create_stream(stream(clock, request_state="next"))
    assert store.get_stream(KEY, "dev:alice", "nonce-a").request_state == "next"


def test_an_answer_is_accepted_once_for_an_outstanding_question_of_this_round_from_its_caller(
    store: DynamoLegacyStore, clock: Clock
) -> None:
    store.create_stream(stream(clock))
    refused = [
        ("dev:mallory", "nonce-a", 1, "confirm"),  # another principal
        ("dev:alice", "nonce-b", 1, "confirm"),  # another session
        ("dev:alice", "nonce-a", 2, "confirm"),  # another round
        ("dev:alice", "nonce-a", 1, "reason"),  # a question nobody asked
    ]
    for owner, session, round_number, key in refused:
        with pytest.raises(StreamNotFound):
            store.record_answer(KEY, owner, session, round_number, key, ACCEPT)
    store.record_answer(KEY, "dev:alice", "nonce-a", 1, "confirm", ACCEPT)
    with pytest.raises(StreamNotFound):
        store.record_answer(KEY, "dev:alice", "nonce-a", 1, "confirm", {"action": "decline"})
    record = store.get_stream(KEY, "dev:alice", "nonce-a")
    assert (record.answers, record.version) == ({"confirm": ACCEPT}, 2)


def test_only_one_reconnect_claims_a_stream_to_rerun_it_until_its_lease_lapses(
    store: DynamoLegacyStore, clock: Clock
) -> None:
    store.create_stream(stream(clock))
    record = store.get_stream(KEY, "dev:alice", "nonce-a")
    claimed = store.claim_stream(record, lease_seconds=30)
    assert (claimed.status, claimed.version) == (RUNNING, record.version + 1)
    with pytest.raises(StreamConflict):
        store.claim_stream(record, lease_seconds=30)
    with pytest.raises(StreamConflict):
        store.claim_stream(claimed, lease_seconds=30)  # running, lease still held
    with pytest.raises(StreamNotFound):
        store.record_answer(KEY, "dev:alice", "nonce-a", 1, "confirm", ACCEPT)  # no answers while it runs
    clock.now += 31
    assert store.claim_stream(claimed, lease_seconds=30).version == claimed.version + 1


def test_a_stale_save_conflicts(store: DynamoLegacyStore, clock: Clock) -> None:
    store.create_stream(stream(clock))
    record = store.get_stream(KEY, "dev:alice", "nonce-a")
    store.save_stream(record.with_events([{"n": 1}]), record.version)
    with pytest.raises(StreamConflict):
        store.save_stream(record.with_events([{"n": 2}]), record.version)
    with pytest.raises(StreamConflict):
        store.save_stream(replace(record, owner="dev:mallory"), record.version + 1)


def test_a_terminated_session_stays_terminated_and_takes_no_log_level(store: DynamoLegacyStore, clock: Clock) -> None:
    expires = int(clock.now) + 3600
    assert store.session_state("nonce-a") == SessionState()
    store.set_log_level("nonce-a", "debug", expires)
    assert store.session_state("nonce-a") == SessionState(revoked=False, log_level="debug")
    store.revoke_session("nonce-a", expires)
    assert store.session_state("nonce-a").revoked is True
    with pytest.raises(SessionEnded):
        store.revoke_session("nonce-a", expires)
    with pytest.raises(SessionEnded):
        store.set_log_level("nonce-a", "info", expires)
    assert store.session_state("nonce-b") == SessionState()
