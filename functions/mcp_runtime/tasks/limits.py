"""Size limits of a task, stated once and checked where the data is made.

A task item must stay inside DynamoDB's 400 KB item limit, and whatever travels through the state
machine inside Step Functions' 256 KB payload limit. Input from the client is refused with -32602
before anything is written (`TaskService`); what a tool produces is checked by the worker, and a
task whose tool produced more than these limits fails with an error naming the limit.
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
# A result kept on the task item (and carried by the state machine when its write must be retried).
MAX_STORED_RESULT_BYTES: Final = 128 * KB


def encoded_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON the store writes."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def too_large_error(what: str, size: int, limit: int) -> dict[str, Any]:
    """The JSON-RPC error a task fails with when its tool made `what` larger than `limit`."""
    return {
        "code": wire.INTERNAL_ERROR,
        "message": f"Task {what} is {size} bytes, over the limit of {limit} bytes",
        "data": {"limitBytes": limit, "sizeBytes": size},
    }
