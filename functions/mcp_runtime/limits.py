"""Every protocol and storage limit of the runtime, stated once; each is checked where the data is made.

Each line says where its number comes from: an AWS quota, the MCP specification, or our choice (a
bound that keeps work per request small, with room under the AWS quota it protects).

A task item must stay inside DynamoDB's 400 KB item limit, and whatever travels through the state
machine inside Step Functions' 256 KB payload limit. Input from the client is refused with -32602
before anything is written (`TaskService`); what a tool produces is checked by the worker, and a
task whose tool produced more than these limits fails with an error naming the limit. Results and
durable records larger than an item should hold go to the payload bucket (S3); `tasks/get` inlines
a result up to `MAX_RESULT_BYTES`, which keeps its answer inside Lambda's 6 MB response limit.

Imported on the API's cold start: nothing here may import more than `json` and `wire`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from . import wire

KB: Final = 1024
ONE_YEAR_SECONDS: Final = 365 * 24 * 3600

# ---- a request's JSON (the transport's walk, before any handler) ---------------------------------
MAX_JSON_DEPTH: Final = 64  # our choice: bounds the validation walk's nesting
MAX_JSON_STRING_CHARS: Final = 262_144  # our choice: 256 Ki characters in one string
MAX_JSON_COLLECTION_ITEMS: Final = 10_000  # our choice: entries of one array or object

# ---- tokens -------------------------------------------------------------------------------------
MAX_REQUEST_STATE_CHARS: Final = 16_384  # our choice: a sealed requestState the client echoes back
MAX_ACCESS_TOKEN_CHARS: Final = 16_384  # our choice: a bearer token, refused unread beyond this
MAX_KEY_DOCUMENT_BYTES: Final = 262_144  # our choice: an issuer's discovery or JWKS document we fetch
MAX_SESSION_PAYLOAD_BYTES: Final = 2_048  # our choice: the 2025 leg's sealed session, sent on every request

# ---- listing ------------------------------------------------------------------------------------
LIST_PAGE_SIZE: Final = 100  # our choice: tools, prompts and resources per `*/list` page
MAX_HISTORY_PAGE_SIZE: Final = 50  # our choice: tasks per task-history page (one DynamoDB Query)
MAX_TASK_ID_CHARS: Final = 256  # our choice: the ids we make are 32 characters
MAX_CURSOR_CHARS: Final = 512  # our choice: the cursors we issue are at most 216 characters

# ---- multi round-trip requests (MRTR, no task) --------------------------------------------------
MAX_INPUT_REQUEST_KEYS: Final = 32  # our choice: questions one round may ask
MAX_INPUT_RESPONSES: Final = 64  # our choice: answers one request may bring
# The longest `ctx.wait` a synchronous call (no task) sleeps through instead of refusing.
SYNC_WAIT_LIMIT_SECONDS: Final = 5.0  # our choice: a synchronous call stays short
# A task tool run inline (its client declared no tasks support) ends this long before the invocation's
# answer reserve (`_aws.ANSWER_RESERVE_SECONDS`), with a tool error, instead of at the function's timeout.
INLINE_TASK_MARGIN_SECONDS: Final = 1.0  # our choice: room to unwind the tool and answer

# ---- handles ------------------------------------------------------------------------------------
MAX_HANDLE_DATA_BYTES: Final = 64 * KB  # our choice: inside DynamoDB's 400 KB item

# ---- tasks: from the client (checked before any lookup, so they answer the same for every task id)
MAX_TASK_ARGUMENTS_BYTES: Final = 64 * KB  # our choice: inside DynamoDB's 400 KB item
# A task keeps only what its worker needs of the client (its protocol version and the names of its
# capabilities), but the declaration it came with is bounded too: real clients declare well under 1 KB.
MAX_TASK_CLIENT_BYTES: Final = 16 * KB  # our choice: inside DynamoDB's 400 KB item
# Everything a create stores on the item, counted as DynamoDB counts an item's size: the arguments,
# the client's version and capability names, what the tool's `prepare` returned, and the task's own
# bookkeeping. Over it, the call is refused with -32602 and nothing is written.
MAX_TASK_CREATED_BYTES: Final = 80 * KB  # our choice: inside DynamoDB's 400 KB item, with the rest below
MAX_TASK_ANSWERS: Final = 64  # our choice: answers one `tasks/update` may bring
MAX_TASK_ANSWERS_BYTES: Final = 64 * KB  # our choice: inside DynamoDB's 400 KB item
# What a task keeps of its answers across every round (`kept_answer_bytes` of each): an update that
# would take it past this is refused with -32602 and changes nothing. With what the create stored
# (80 KB, on the parts), the scratch (32 KB, on the work part) and the questions (32 KB), the item stays
# under DynamoDB's 400 KB with 32 KB for the rest of it (issued keys, the task token, the message).
# A terminal write removes all of these and keeps the result (32 KB inline) or an error (bounded by
# MAX_TERMINAL_ERROR_BYTES), so it always fits.
MAX_TASK_KEPT_ANSWERS_BYTES: Final = 96 * KB  # our choice: inside DynamoDB's 400 KB item
# A task's ttlMs: at least 1 ms, at most a Standard execution's life.
MAX_TASK_TTL_MS: Final = ONE_YEAR_SECONDS * 1000  # AWS quota: a Standard execution lasts a year at most

# ---- tasks: from the tool, when it asks (the questions and its `ctx.scratch` travel to WaitForToken)
MAX_INPUT_REQUESTS_BYTES: Final = 32 * KB  # our choice: inside Step Functions' 256 KB payload
MAX_SCRATCH_BYTES: Final = 32 * KB  # our choice: inside Step Functions' 256 KB payload
# ---- tasks: results. One kept on the task item (and carried by the state machine when its write
# must be retried); a larger one goes to S3, up to MAX_RESULT_BYTES, and `tasks/get` inlines it.
MAX_INLINE_RESULT_BYTES: Final = 32 * KB  # our choice: inside Step Functions' 256 KB payload
MAX_RESULT_BYTES: Final = 5 * 1024 * KB  # our choice: under Lambda's 6 MB response, with the envelope
# A result the payload bucket would not take in the run's own invocation travels to the Settle step,
# which stores it; measured as JSON with every non-ASCII character escaped (its worst case on the way).
# A failed task's error as its terminal write keeps it: one larger (a tool's McpError with a large
# `data`) keeps its code and the first MAX_TERMINAL_ERROR_MESSAGE_CHARS of its message.
MAX_TERMINAL_ERROR_BYTES: Final = 32 * KB  # our choice: like an inline result
MAX_TERMINAL_ERROR_MESSAGE_CHARS: Final = 1000  # our choice: a message a person reads
MAX_SETTLE_RESULT_BYTES: Final = 192 * KB  # our choice: inside Step Functions' 256 KB payload, with the state
# What a `tasks/get` answer may take at most: the response limit less the envelope and the proxy
# response's own escaping of the body.
MAX_ANSWER_BYTES: Final = 6_291_456 - 64 * KB  # AWS quota: Lambda's 6 MB synchronous response
# ---- tasks: durable records (a step's value, a callback's result): inline when small, in S3
# otherwise. Each operation's record is an item of its own (`part#<id>#step#<n>`), so a step's writes
# cost the same at step 1,000 as at step 1; the first small ones are kept on the work part instead
# (while they fit WORK_PART_RECORDS_BYTES), so the worker reads a task of a few steps in one request.
MAX_INLINE_RECORD_BYTES: Final = 4 * KB  # our choice: a record's item stays a few KB (its writes a few WRU)
# our choice: the work part (its key, create token, TTL and a small scratch too) stays within 1 KB, 1 WRU a write
WORK_PART_RECORDS_BYTES: Final = 640
MAX_RECORD_BYTES: Final = 5 * 1024 * KB  # our choice: like a result, it is read back inside one answer
MAX_OPERATION_NAME_BYTES: Final = 1 * KB  # our choice: a step's name is on its item, and in its callback's token
# Steps, waits and callbacks one task may record (the setting TASK_MAX_STEPS, at most MAX_OPERATIONS_CEILING):
# the worker reads them all on every run, 100 items a request.
MAX_OPERATIONS: Final = 1000  # our choice: the default
MAX_OPERATIONS_CEILING: Final = 10_000  # our choice: a run's read of them stays under a second
# What an external system may send to complete a callback (its result is a record like a step's).
MAX_CALLBACK_BYTES: Final = MAX_RECORD_BYTES  # our choice: the record it becomes
MAX_CALLBACK_ERROR_CHARS: Final = 1000  # our choice: a failed callback's message, as kept
# ---- tasks: time
MAX_WAIT_SECONDS: Final = ONE_YEAR_SECONDS  # AWS quota: a Standard execution lasts a year at most
MAX_TOKEN_WAIT_SECONDS: Final = ONE_YEAR_SECONDS  # AWS quota: the longest task timeout worth asking for

# ---- the 2025 leg's streams ---------------------------------------------------------------------
MAX_KEPT_STREAM_EVENTS: Final = 32  # our choice: events kept for a resumed stream (`Last-Event-ID`)
# A task's latest `ctx.log` lines, kept on its item for a 2025 client that follows it on a stream.
MAX_KEPT_TASK_LOG_LINES: Final = 16  # our choice: what one relay sends at most
MAX_TASK_LOG_LINE_BYTES: Final = 512  # our choice: a longer line's data is kept as its text, cut


def encoded_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON the store writes."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def kept_answer_bytes(key: str, value: Any) -> int:
    """What one answer adds to its task item: its JSON, and its key three times (the answers map, and
    the wire key and the tool's key in the list of issued keys)."""
    return encoded_size(value) + 3 * len(key.encode())


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


def bounded_error(error: dict[str, Any]) -> dict[str, Any]:
    """`error` as a terminal write keeps it: whole up to MAX_TERMINAL_ERROR_BYTES, else its code and
    the start of its message."""
    if encoded_size(error) <= MAX_TERMINAL_ERROR_BYTES:
        return error
    return {"code": error.get("code"), "message": str(error.get("message") or "")[:MAX_TERMINAL_ERROR_MESSAGE_CHARS]}
