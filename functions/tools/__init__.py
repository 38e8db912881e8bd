"""The project's tools. Add a tool: write one file in this folder and import it below."""

from __future__ import annotations

from mcp_runtime.server import McpServer

from . import archive_project, count_words, deploy_release

MODULES = (count_words, archive_project, deploy_release)


def register(server: McpServer) -> None:
    for module in MODULES:
        server.tools.include(module)
