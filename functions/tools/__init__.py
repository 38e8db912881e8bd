"""The project's tools. Add a tool: write one file in this folder and add its name to MODULES below."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from mcp_runtime import Catalog


def _modules(*names: str) -> tuple[ModuleType, ...]:
    return tuple(import_module(f"{__name__}.{name}") for name in names)


# Served everywhere, in this order: one line per tool file of this folder.
MODULES = _modules(
    "count_words",
    "archive_project",
    "deploy_release",
    "support_desk",
    "weather_station",
)
# Served where the task table is configured (AWS, and the local stack): they keep state in it.
TABLE_BACKED_MODULES = _modules("cart", "my_tasks")


def register(catalog: Catalog, *, table_backed: bool) -> None:
    """Serve this package's tools (and the prompts and resources of its server objects)."""
    for module in MODULES:
        catalog.tools.include(module)
    if table_backed:
        for module in TABLE_BACKED_MODULES:
            catalog.tools.include(module)
