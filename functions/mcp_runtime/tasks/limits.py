"""Size limits of a task, stated once and checked where the data is made.

A task item must stay inside DynamoDB's 400 KB item limit, and whatever travels through the state
machine inside Step Functions' 256 KB payload limit. Input from the client is refused with -32602
before anything is written (`TaskService`); what a tool produces is checked by the worker, and a
task whose tool produced more than these limits fails with an error naming the limit. Results and
durable records larger than an item should hold go to the payload bucket (S3); `tasks/get` inlines
a result up to `MAX_RESULT_BYTES`, which keeps its answer inside Lambda's 6 MB response limit.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .. import wire

KB: Final = 1024

# From the client (checked before any lookup, so they answer the same for every task id).
MAX_TASK_ARGUMENTS_BYTES: Final = 64 * KB
MAX_TASK_ANSWERS: Final = 64
MAX_TASK_ANSWERS_BYTES: Final = 64 * KB
# From the tool, when it asks: the questions and its `ctx.state` travel to the park step.
MAX_INPUT_REQUESTS_BYTES: Final = 32 * KB
MAX_STATE_BYTES: Final = 32 * KB
# A result kept on the task item (and carried by the state machine when its write must be retried);
# a larger one goes to S3, up to MAX_RESULT_BYTES, and `tasks/get` inlines it.
MAX_INLINE_RESULT_BYTES: Final = 32 * KB
MAX_RESULT_BYTES: Final = 5 * 1024 * KB
# Lambda's synchronous response limit, less room for the JSON-RPC envelope and the proxy response's
# own escaping of the body: what a `tasks/get` answer may take at most.
MAX_ANSWER_BYTES: Final = 6_291_456 - 64 * KB
# Durable records (a step's value, a callback's result): inline when small, in S3 otherwise; the
# item keeps at most ITEM_RECORDS_BYTES of them inline, and a task at most MAX_OPERATIONS of them.
MAX_INLINE_RECORD_BYTES: Final = 4 * KB
ITEM_RECORDS_BYTES: Final = 128 * KB
MAX_RECORD_BYTES: Final = 5 * 1024 * KB
MAX_OPERATIONS: Final = 1000
# What an external system may send to complete a callback (its result is a record like a step's).
MAX_CALLBACK_BYTES: Final = MAX_RECORD_BYTES


def encoded_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON the store writes."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def answer_size(result: Any) -> int:
    """Bytes the result takes in a `tasks/get` answer, escaped again inside the proxy response's body."""
    return len(json.dumps(json.dumps(result, separators=(",", ":"), ensure_ascii=False), ensure_ascii=False).encode())


def too_large_error(what: str, size: int, limit: int) -> dict[str, Any]:
    """The JSON-RPC error a task fails with when its tool made `what` larger than `limit`."""
    return {
        "code": wire.INTERNAL_ERROR,
        "message": f"Task {what} is {size} bytes, over the limit of {limit} bytes",
        "data": {"limitBytes": limit, "sizeBytes": size},
    }
