"""The task table's shape, shared by the store, the CDK construct and their tests."""

from __future__ import annotations

from typing import Final

PARTITION_KEY: Final = "pk"  # "task#<id>" for tasks, "handle#<id>" for handles
TTL_ATTRIBUTE: Final = "expiresAt"  # epoch seconds; DynamoDB TTL deletes late, reads filter on it
OWNER_INDEX: Final = "by-owner"  # GSI: the caller's own items, newest first
OWNER_INDEX_PARTITION_KEY: Final = "owner"
OWNER_INDEX_SORT_KEY: Final = "createdAt"
TASK_KEY_PREFIX: Final = "task#"
HANDLE_KEY_PREFIX: Final = "handle#"
