"""Server-minted handles on DynamoDB (moto): ownership, kinds, expiry and optimistic locking."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_runtime.handles import DynamoHandleStore, HandleConflict, HandleNotFound
from mcp_runtime.tasks import schema
from tests.integration.table_harness import TABLE
from tests.integration.task_harness import Clock


@pytest.fixture
def store(dynamodb: Any, clock: Clock) -> DynamoHandleStore:
    return DynamoHandleStore(TABLE, dynamodb, clock=clock)


def test_a_minted_handle_resolves_for_its_owner_with_its_data(store: DynamoHandleStore) -> None:
    handle = store.mint("alice", "cart", {"lines": {"apple": 2}}, 3600)
    resolved = store.resolve("alice", "cart", handle.handle_id)
    assert resolved.data == {"lines": {"apple": 2}}
    assert resolved.version == 1
    assert handle.handle_id.startswith("cart_")
    assert len(handle.handle_id) >= len("cart_") + 32  # 192 bits, base64url


def test_another_principal_gets_exactly_what_an_unknown_handle_gets(store: DynamoHandleStore) -> None:
    handle = store.mint("alice", "cart", {"lines": {}}, 3600)
    with pytest.raises(HandleNotFound) as foreign:
        store.resolve("mallory", "cart", handle.handle_id)
    with pytest.raises(HandleNotFound) as unknown:
        store.resolve("mallory", "cart", "cart_" + "A" * 32)
    assert type(foreign.value) is type(unknown.value)


def test_a_handle_of_another_kind_is_not_found(store: DynamoHandleStore) -> None:
    handle = store.mint("alice", "cart", {"lines": {}}, 3600)
    with pytest.raises(HandleNotFound):
        store.resolve("alice", "order", handle.handle_id)


def test_an_expired_handle_is_not_found_although_dynamodb_still_holds_it(
    store: DynamoHandleStore, dynamodb: Any, clock: Clock
) -> None:
    handle = store.mint("alice", "cart", {"lines": {}}, 60)
    item = dynamodb.get_item(
        TableName=TABLE, Key={schema.PARTITION_KEY: {"S": schema.HANDLE_KEY_PREFIX + handle.handle_id}}
    )["Item"]
    assert int(item[schema.TTL_ATTRIBUTE]["N"]) == int(clock.now) + 60
    clock.now += 61
    with pytest.raises(HandleNotFound):
        store.resolve("alice", "cart", handle.handle_id)


def test_an_update_from_a_stale_read_loses_and_changes_nothing(store: DynamoHandleStore) -> None:
    handle = store.mint("alice", "cart", {"lines": {}}, 3600)
    first = store.resolve("alice", "cart", handle.handle_id)
    second = store.resolve("alice", "cart", handle.handle_id)
    store.update(first, {"lines": {"apple": 1}})
    with pytest.raises(HandleConflict):
        store.update(second, {"lines": {"milk": 1}})
    assert store.resolve("alice", "cart", handle.handle_id).data == {"lines": {"apple": 1}}


def test_a_deleted_handle_is_gone_and_a_stale_delete_is_refused(store: DynamoHandleStore) -> None:
    handle = store.mint("alice", "cart", {"lines": {}}, 3600)
    current = store.update(store.resolve("alice", "cart", handle.handle_id), {"lines": {"bread": 1}})
    with pytest.raises(HandleConflict):
        store.delete(handle)
    store.delete(current)
    with pytest.raises(HandleNotFound):
        store.resolve("alice", "cart", handle.handle_id)


def test_malformed_handle_ids_are_not_found_without_a_lookup(store: DynamoHandleStore) -> None:
    for bad in ("", "cart", "order_abc", "cart_" + "x" * 200):
        with pytest.raises(HandleNotFound):
            store.resolve("alice", "cart", bad)
