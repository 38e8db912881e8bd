"""Bring FastMCP-style tools: `from mcp_runtime.fastmcp import Context, FastMCP` in place of
`from fastmcp import Context, FastMCP` (or `from mcp.server.mcpserver import Context, MCPServer`).

A lookalike of the two libraries' authoring API over this runtime's registry, never the libraries
themselves (neither is imported here, nor ships): a module in functions/tools that defines a server
object and decorates functions with `@mcp.tool`, `@mcp.resource` and `@mcp.prompt` is served as it
is, with durable tasks (`task=True`) and stateless elicitation. What maps and what does not:
docs/fastmcp.md.
"""

from __future__ import annotations

from ..components import NotSet
from ..content import Audio, File, Image
from ..tools import ToolError, ToolResult
from ._context import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    ElicitationResult,
)
from ._server import FastMCP, MCPServer, TasksExtension

__all__ = [
    "AcceptedElicitation",
    "Audio",
    "CancelledElicitation",
    "Context",
    "DeclinedElicitation",
    "ElicitationResult",
    "FastMCP",
    "File",
    "Image",
    "MCPServer",
    "NotSet",
    "TasksExtension",
    "ToolError",
    "ToolResult",
]
