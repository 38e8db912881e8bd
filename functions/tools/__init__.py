"""The project's tools. Add a tool: write one file in this folder and import it below."""

from __future__ import annotations

from mcp_runtime import ToolRegistry

from . import archive_project, cart, count_words, deploy_release, my_tasks

# Served everywhere.
MODULES = (count_words, archive_project, deploy_release)
# Served where the task table is configured (AWS, and the local stack): they keep state in it.
TABLE_BACKED_MODULES = (cart, my_tasks)


def register(tools: ToolRegistry, *, table_backed: bool) -> None:
    for module in MODULES:
        tools.include(module)
    if table_backed:
        for module in TABLE_BACKED_MODULES:
            tools.include(module)
