"""The task table's shape, shared by the store, the CDK construct and their tests."""

from __future__ import annotations

from typing import Final

PARTITION_KEY: Final = "pk"  # "task#<id>", "handle#<id>", "session#<nonce>", "stream#<key>"
TTL_ATTRIBUTE: Final = "expiresAt"  # epoch seconds; DynamoDB TTL deletes late, reads filter on it
OWNER_INDEX: Final = "by-owner"  # GSI: the caller's own items, newest first
OWNER_INDEX_PARTITION_KEY: Final = "owner"
OWNER_INDEX_SORT_KEY: Final = "createdAt"
TASK_KEY_PREFIX: Final = "task#"
HANDLE_KEY_PREFIX: Final = "handle#"
# The legacy (2025) leg: a terminated or re-levelled session, and a resumable event stream.
SESSION_KEY_PREFIX: Final = "session#"
STREAM_KEY_PREFIX: Final = "stream#"
