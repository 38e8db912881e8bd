"""The stack a user would otherwise pick: the MCP Python SDK (`mcp==2.3.0`) low-level server with its
streamable HTTP session manager (stateless, JSON responses) behind Mangum, as one Lambda handler.

Serves the same `count_words` tool as ours so a first `tools/call` can be compared too. Used by the
cold-start benchmark only; never shipped.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mangum import Mangum
from mcp.server.lowlevel.server import Server
from mcp.server.transport_security import TransportSecuritySettings

COUNT_WORDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 100_000, "description": "The text to count words in."}},
    "required": ["text"],
}


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(
                name="count_words",
                description="Count the words and characters of a text.",
                input_schema=COUNT_WORDS_SCHEMA,
            )
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = str((params.arguments or {}).get("text", ""))
    structured = {"words": len(text.split()), "characters": len(text)}
    return types.CallToolResult(content=[types.TextContent(text=str(structured))], structured_content=structured)


server: Server[Any] = Server("sdk-bench", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)
# Behind API Gateway the Host is the API's domain: the loopback DNS-rebinding guard does not apply.
app = server.streamable_http_app(
    stateless_http=True,
    json_response=True,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
handler = Mangum(app, lifespan="auto")
