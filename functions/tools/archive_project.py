"""Pattern 2, a Multi Round-Trip Request (MRTR): confirm with the user before a destructive step.

Use it when the tool needs a short answer from the client before this same call can finish. The
tool reads top to bottom as if the answers were already there: `await ctx.elicit(...)` returns the
user's answer, or ends this round with `input_required`. The client asks its user, then retries the
same call with the answers and the sealed `requestState`; the runtime re-runs the function, and every
question already answered returns at once (the first is `elicit-1`, the second `elicit-2`). Nothing
is written until the last answer arrives, so an abandoned exchange changes nothing.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mcp_runtime.fastmcp import Context, FastMCP

mcp = FastMCP("archive-project")


class Confirmation(BaseModel):
    confirm: bool = Field(description="Archive the project?")


class Reason(BaseModel):
    reason: str = Field(description="Why the project is being archived.", min_length=1, max_length=500)


@mcp.tool(annotations={"destructiveHint": True, "idempotentHint": True})
async def archive_project(
    project: Annotated[str, Field(description="Name of the project to archive.", min_length=1, max_length=100)],
    ctx: Context,
) -> str:
    """Archive a project after the user confirms and gives a reason. Asks the user twice."""
    confirmation = await ctx.elicit(f"Archive project '{project}'? It becomes read-only.", Confirmation)
    if confirmation.action != "accept" or not confirmation.data.confirm:
        return f"Archive of '{project}' cancelled; nothing changed."
    reason = await ctx.elicit(f"Why is '{project}' being archived?", Reason)
    if reason.action != "accept":
        return f"Archive of '{project}' cancelled; nothing changed."
    return f"Archived project '{project}' (reason: {reason.data.reason})."
