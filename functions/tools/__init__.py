"""The project's tools. Add a tool: write one file in this folder and import it below."""

from __future__ import annotations

from mcp_runtime.server import McpServer

from . import archive_project, cart, count_words, deploy_release, my_tasks

# Served everywhere.
MODULES = (count_words, archive_project, deploy_release)
# Served where the task table is configured (AWS, and the local stack): they keep state in it.
TABLE_BACKED_MODULES = (cart, my_tasks)


def register(server: McpServer) -> None:
    for module in MODULES:
        server.tools.include(module)
    if server.handles is not None and server.history is not None:
        for module in TABLE_BACKED_MODULES:
            server.tools.include(module)
