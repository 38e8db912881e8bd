"""The caller's own task history: what the protocol recommends in place of the removed `tasks/list`.

Served from the owner index (a GSI: owner + createdAt), newest first, one page per call, never a
scan. The cursor names only a position (createdAt and task id); the owner always comes from the
authenticated caller, so a cursor cannot reach anyone else's tasks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Protocol

from .._dynamo import DynamoStore
from ..cursors import InvalidCursor, decode_cursor, encode_cursor
from ..limits import MAX_HISTORY_PAGE_SIZE
from ..observability import traced
from . import schema
from .errors import TaskStoreUnavailable

_ISO: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
_TASK_ID: Final = re.compile(r"^[A-Za-z0-9_-]{16,128}$")


@dataclass(frozen=True, slots=True)
class TaskSummary:
    task_id: str
    tool_name: str
    status: str
    created_at: str
    last_updated_at: str
    status_message: str | None


@dataclass(frozen=True, slots=True)
class TaskPage:
    tasks: list[TaskSummary]
    next_cursor: str | None


def decode_position(cursor: str) -> tuple[str, str]:
    """The (createdAt, task id) a history page's `nextCursor` names."""
    match decode_cursor(cursor):
        case [str(created_at), str(task_id)] if _ISO.match(created_at) and _TASK_ID.match(task_id):
            return created_at, task_id
    raise InvalidCursor


class TaskHistory(Protocol):
    """The tasks of an owner, newest first, a page at a time (the owner index)."""

    def page(self, owner: str, limit: int = 20, cursor: str | None = None) -> TaskPage: ...


class DynamoTaskHistory(DynamoStore):
    unavailable = TaskStoreUnavailable

    @traced("TaskHistory.page")
    def page(self, owner: str, limit: int = 20, cursor: str | None = None) -> TaskPage:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": schema.OWNER_INDEX,
            "KeyConditionExpression": "#owner = :owner",
            "ExpressionAttributeNames": {"#owner": schema.OWNER_INDEX_PARTITION_KEY},
            "ExpressionAttributeValues": {":owner": {"S": owner}},
            "ScanIndexForward": False,
            "Limit": max(1, min(limit, MAX_HISTORY_PAGE_SIZE)),
        }
        if cursor is not None:
            created_at, task_id = decode_position(cursor)
            request["ExclusiveStartKey"] = {
                schema.OWNER_INDEX_PARTITION_KEY: {"S": owner},
                schema.OWNER_INDEX_SORT_KEY: {"S": created_at},
                schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + task_id},
            }
        response = self._call("query", **request)
        now = self._clock()
        tasks = []
        for item in response.get("Items", []):
            expires_at = item.get(schema.TTL_ATTRIBUTE, {}).get("N")
            if item[schema.OWNER_INDEX_PARTITION_KEY]["S"] != owner or (
                expires_at is not None and now >= int(expires_at)
            ):
                continue  # DynamoDB deletes expired items late; they are gone for the caller
            tasks.append(_summary(item))
        last = response.get("LastEvaluatedKey")
        next_cursor = None
        if last:
            next_cursor = encode_cursor(
                last[schema.OWNER_INDEX_SORT_KEY]["S"],
                last[schema.PARTITION_KEY]["S"].removeprefix(schema.TASK_KEY_PREFIX),
            )
        return TaskPage(tasks, next_cursor)


def _summary(item: dict[str, Any]) -> TaskSummary:
    """A task as the owner index holds it: its keys and `schema.OWNER_INDEX_ATTRIBUTES`, nothing else."""
    message = item.get("statusMessage", {}).get("S")
    return TaskSummary(
        item["taskId"]["S"],
        item["toolName"]["S"],
        item["status"]["S"],
        item[schema.OWNER_INDEX_SORT_KEY]["S"],
        item["lastUpdatedAt"]["S"],
        message,
    )


@dataclass(frozen=True, slots=True)
class CallerTaskHistory:
    """The history as one caller sees it: only their own tasks."""

    history: TaskHistory
    owner: str

    def page(self, limit: int = 20, cursor: str | None = None) -> TaskPage:
        return self.history.page(self.owner, limit, cursor)
