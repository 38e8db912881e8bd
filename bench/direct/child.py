"""Children of bench/direct.py, each in a fresh interpreter (never shipped, never imported by tests).

    python bench/direct/child.py mangum          two invocations of mcp 2.3.0's MCPServer app behind Mangum
    python bench/direct/child.py task-create     a FastMCP 4.1.4 task on its default memory:// store: its id
    python bench/direct/child.py task-get ID     tasks/get for that id from another process's server

Each prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


def mangum_twice() -> dict[str, Any]:
    """The SDK's streamable HTTP app as a Lambda handler: the first invocation and the second, warm."""
    from mangum import Mangum
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    server = MCPServer("direct")

    @server.tool()
    def count_words(text: str) -> int:
        return len(text.split())

    # Behind API Gateway the Host is the API's domain: the loopback DNS-rebinding guard does not apply.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security)
    handler = Mangum(app, lifespan="auto")
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "count_words",
                "arguments": {"text": "a b c"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                },
            },
        }
    )
    event = {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "host": "localhost",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": "count_words",
        },
        "requestContext": {
            "http": {"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"},
            "stage": "$default",
        },
        "body": body,
        "isBase64Encoded": False,
    }

    class Context:
        aws_request_id = "bench"

        def get_remaining_time_in_millis(self) -> int:
            return 29_000

    answers = []
    for _ in range(2):
        try:
            answers.append(str(handler(event, Context()).get("statusCode")))
        except Exception as exc:  # what a warm environment's second invocation meets
            answers.append(type(exc).__name__)
    return {"invocations": answers}


def _tasks_server() -> Any:
    from fastmcp import FastMCP
    from fastmcp_tasks import TasksExtension

    server = FastMCP("direct-tasks")
    server.add_extension(TasksExtension(url="memory://"))

    @server.tool(task=True)
    async def export(rows: int) -> str:
        await asyncio.sleep(30)
        return f"exported {rows}"

    return server


async def task_create() -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp_tasks.client import _send_get

    async with Client(_tasks_server(), mode="2026-07-28") as client:
        created = await client.session.call_tool("export", {"rows": 10}, allow_claimed=True)
        task_id = created.task_id  # type: ignore[union-attr]
        seen = await _send_get(client.session, task_id)
        return {"task_id": task_id, "same_process": seen.status}


async def task_get(task_id: str) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp_tasks.client import _send_get

    async with Client(_tasks_server(), mode="2026-07-28") as client:
        try:
            seen = await _send_get(client.session, task_id)
            return {"other_process": seen.status}
        except Exception as exc:
            return {"other_process": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "mangum":
        print(json.dumps(mangum_twice()))
    elif what == "task-create":
        print(json.dumps(asyncio.run(task_create())))
    elif what == "task-get":
        print(json.dumps(asyncio.run(task_get(sys.argv[2]))))
    else:
        raise SystemExit(f"unknown child {what}")
