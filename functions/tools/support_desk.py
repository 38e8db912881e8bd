"""Tools written for FastMCP 4.1, ported by changing one import line (docs/fastmcp.md).

Before the port the first line below read `from fastmcp import Context, FastMCP`; nothing else
changed. Plain and async tools, a dataclass, a dict and a number as results, progress, logs, a
question to the user (`ctx.elicit`: an MRTR round here) and a durable task (`task=True`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Literal

from pydantic import Field

from mcp_runtime.fastmcp import Context, FastMCP, ToolError

mcp = FastMCP("support-desk")

TICKETS = {
    101: {"title": "Printer on fire", "status": "open", "priority": "high"},
    102: {"title": "Password reset", "status": "closed", "priority": "low"},
    103: {"title": "VPN drops every hour", "status": "open", "priority": "normal"},
}
# Created once per process, on the first call, and used by every later call (one event loop per process).
_lookups = asyncio.Lock()


@dataclass
class Customer:
    email: str
    name: str
    open_tickets: int


@mcp.tool
def ticket_summary(ticket_id: int, max_words: Annotated[int, Field(ge=1, le=50)] = 10) -> str:
    """Summarize a support ticket.

    Args:
        ticket_id: The ticket's number.
        max_words: At most this many words.
    """
    ticket = TICKETS.get(ticket_id)
    if ticket is None:
        raise ToolError(f"No ticket {ticket_id}.")
    words = f"#{ticket_id} {ticket['title']} ({ticket['status']}, {ticket['priority']})".split()
    return " ".join(words[:max_words])


@mcp.tool(annotations={"readOnlyHint": True})
async def find_customer(email: str, ctx: Context) -> Customer:
    """Look a customer up by email."""
    async with _lookups:
        await ctx.debug(f"looking up {email}")
        name = email.split("@")[0].replace(".", " ").title()
    return Customer(email=email, name=name, open_tickets=sum(t["status"] == "open" for t in TICKETS.values()))


@mcp.tool
def ticket_counts(status: Literal["open", "closed"] | None = None) -> dict[str, int]:
    """Count tickets by priority, of one status or of all."""
    counts: dict[str, int] = {}
    for ticket in TICKETS.values():
        if status is None or ticket["status"] == status:
            counts[ticket["priority"]] = counts.get(ticket["priority"], 0) + 1
    return counts


@mcp.tool
def open_ticket_count() -> int:
    """How many tickets are open."""
    return sum(ticket["status"] == "open" for ticket in TICKETS.values())


@mcp.tool(annotations={"destructiveHint": True})
async def close_ticket(ticket_id: int, ctx: Context) -> str:
    """Close a ticket, after the user confirms."""
    if ticket_id not in TICKETS:
        raise ToolError(f"No ticket {ticket_id}.")
    answer = await ctx.elicit(f"Close ticket #{ticket_id}?", bool)
    if answer.action != "accept" or not answer.data:
        return f"Ticket #{ticket_id} stays open."
    await ctx.info(f"closing ticket {ticket_id}")
    return f"Closed ticket #{ticket_id}."


async def export_batch(batch: int) -> int:
    """The real work goes here: write a batch of tickets out. Returns how many it wrote."""
    await asyncio.sleep(0.6)  # a stand-in for that work, so the progress can be watched
    return len(TICKETS)


@mcp.tool(task=True)
async def export_tickets(batches: Annotated[int, Field(ge=1, le=10)], ctx: Context) -> str:
    """Export every ticket, batch by batch: a durable task that reports its progress."""
    exported = 0
    for batch in range(batches):
        # A durable step: runs once for the task; a later run of the task gets its value back.
        exported += await ctx.step(f"batch-{batch}", partial(export_batch, batch))
        await ctx.report_progress(batch + 1, batches, f"batch {batch + 1} of {batches}")
    await ctx.info(f"exported {exported} tickets")
    return f"Exported {exported} tickets in {batches} batches."
