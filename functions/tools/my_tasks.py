"""Task history for the caller: the protocol has no `tasks/list`, and recommends a tool like this.

A plain call (pattern 1) over the runtime's task history: only the caller's own tasks, newest
first, one page at a time, served from the owner index (never a table scan). Pass `cursor` from
the previous answer to get the next page.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mcp_runtime import InvalidCursor
from mcp_runtime.fastmcp import Context, FastMCP, ToolError

mcp = FastMCP("my-tasks")


class TaskEntry(BaseModel):
    taskId: str
    tool: str
    status: str
    createdAt: str
    lastUpdatedAt: str
    statusMessage: str | None = None


class TaskHistoryPage(BaseModel):
    tasks: list[TaskEntry]
    nextCursor: str | None = None


@mcp.tool(annotations={"readOnlyHint": True, "openWorldHint": False})
def list_my_tasks(
    ctx: Context,
    limit: Annotated[int, Field(description="How many tasks per page.", ge=1, le=50)] = 20,
    cursor: Annotated[str | None, Field(description="nextCursor from the previous page.", max_length=512)] = None,
) -> TaskHistoryPage:
    """List the tasks you started, newest first, with their status. Pages with nextCursor."""
    try:
        page = ctx.task_history.page(limit, cursor)
    except InvalidCursor:
        raise ToolError("Invalid cursor: pass nextCursor from the previous page unchanged.") from None
    return TaskHistoryPage(
        tasks=[
            TaskEntry(
                taskId=task.task_id,
                tool=task.tool_name,
                status=task.status,
                createdAt=task.created_at,
                lastUpdatedAt=task.last_updated_at,
                statusMessage=task.status_message,
            )
            for task in page.tasks
        ],
        nextCursor=page.next_cursor,
    )
