"""The layout of infra/: no import cycle, counting every import (those under TYPE_CHECKING too), and
the module the capabilities share imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
SHARED = "infra.capabilities._lambda"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted((REPO / "infra").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The infra modules `name` imports anywhere in its body, including `from infra import x`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base in modules:
                found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules)
    # A package's __init__ is imported with any of its modules; it is not an edge of its own.
    return found - {name, "infra", "infra.capabilities"}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for successor in sorted(graph[node]):
            if state.get(successor) == "open":
                found.append([*path[path.index(successor) :], successor])
            elif successor not in state:
                visit(successor)
        path.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_infra_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "infra.capabilities.functions" in graph and "infra.stack" in graph  # the walk found the modules
    assert cycles(graph) == []


def test_the_shared_building_blocks_import_no_capability() -> None:
    imported = import_graph()[SHARED]
    assert not {name for name in imported if name.startswith("infra.capabilities.")}, imported
