"""Pattern 2, a Multi Round-Trip Request (MRTR): confirm with the user before a destructive step.

Use it when the tool needs a short answer from the client before this same call can finish. The
tool reads top to bottom as if the answers were already there: `ctx.elicit` returns the user's
answer, or ends this round with `input_required`. The client asks its user, then retries the same
call with the answers and the sealed `requestState`; the runtime re-runs the function, and every
question already answered returns at once. Nothing is written until the last answer arrives, so
an abandoned exchange changes nothing.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, tool


class ArchiveProjectArgs(BaseModel):
    project: str = Field(description="Name of the project to archive.", min_length=1, max_length=100)


class Confirmation(BaseModel):
    confirm: bool = Field(description="Archive the project?")


class Reason(BaseModel):
    reason: str = Field(description="Why the project is being archived.", min_length=1, max_length=500)


@tool(
    description="Archive a project after the user confirms and gives a reason. Asks the user twice.",
    asks=("elicitation",),
    annotations={"destructiveHint": True, "idempotentHint": True},
)
def archive_project(args: ArchiveProjectArgs, ctx: ToolContext) -> str:
    confirmation = ctx.elicit("confirm", f"Archive project '{args.project}'? It becomes read-only.", Confirmation)
    if not confirmation.accepted or confirmation.content is None or not confirmation.content.confirm:
        return f"Archive of '{args.project}' cancelled; nothing changed."
    reason = ctx.elicit("reason", f"Why is '{args.project}' being archived?", Reason)
    if not reason.accepted or reason.content is None:
        return f"Archive of '{args.project}' cancelled; nothing changed."
    return f"Archived project '{args.project}' (reason: {reason.content.reason})."
