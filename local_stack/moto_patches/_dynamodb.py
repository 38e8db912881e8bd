"""DynamoDB and DynamoDB Streams."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from local_stack.moto_patches._registry import Patch, Patcher, register

_ITEM_OPERATIONS: Final = (
    "put_item",
    "get_item",
    "update_item",
    "delete_item",
    "query",
    "scan",
    "transact_write_items",
)
# One lock for every item operation of every table: moto's server answers requests on concurrent threads.
ITEM_LOCK: Final = threading.RLock()


def _serialized(operation: Callable[..., Any]) -> Callable[..., Any]:
    def serialized(self: Any, *args: Any, **kwargs: Any) -> Any:
        with ITEM_LOCK:
            return operation(self, *args, **kwargs)

    return serialized


def _item_writes_are_atomic(patcher: Patcher) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for operation in _ITEM_OPERATIONS:
        patcher.wrap(DynamoDBBackend, operation, _serialized)


def _used_iterators_are_forgotten(patcher: Patcher) -> None:
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    def build(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        def get_records(self: Any, iterator_arn: str, limit: int) -> dict[str, Any]:
            answer = original(self, iterator_arn, limit)
            self.shard_iterators.pop(iterator_arn, None)
            return answer

        return get_records

    patcher.wrap(DynamoDBStreamsBackend, "get_records", build)


register(
    Patch(
        name="conditional_writes_are_atomic",
        group="emulation",
        aws="A conditional write evaluates its condition and applies the write as one atomic step: of "
        "two concurrent PutItem with attribute_not_exists on one key, one fails ConditionalCheckFailedException.",
        moto="The server handles requests on concurrent threads and reads the item, evaluates the "
        "condition and writes without a lock: both writes can pass their condition.",
        reference="https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html",
        install=_item_writes_are_atomic,
    )
)
register(
    Patch(
        name="used_shard_iterators_are_forgotten",
        group="emulation",
        aws="A shard iterator expires (15 minutes after it is returned): the service keeps no iterator for ever.",
        moto="DynamoDBStreamsBackend keeps every shard iterator it handed out, used or not, for the life "
        "of the process (a leak at one poll every 50 ms).",
        reference="https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_streams_GetShardIterator.html",
        install=_used_iterators_are_forgotten,
    )
)
