"""The template's example tools are the pattern fixtures' code, while a project keeps them.

The runtime's tests call the pattern fixtures (fixtures/patterns.py, fixtures/table_patterns.py), never
the examples in functions/tools, so a project deletes the examples and its tests stay green. The
examples are the fixtures' copies for reading: each definition of an example (its models, helpers
and tool functions) is the same code as the fixture's of its name, so every test of a fixture is a
test of its example. A deleted example drops out of the list here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import REPO

TOOLS = REPO / "functions" / "tools"
# Each example module, and the fixture module holding its twin.
TWINS = {
    "count_words": "patterns",
    "archive_project": "patterns",
    "deploy_release": "patterns",
    "cart": "table_patterns",
    "my_tasks": "table_patterns",
}


def definitions(path: Path) -> dict[str, str]:
    """The module's top-level functions, classes and assignments, by name, as normalized code."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = ast.unparse(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found[target.id] = ast.unparse(node)
    return found


@pytest.mark.parametrize("example", [name for name in TWINS if (TOOLS / f"{name}.py").is_file()])
def test_an_example_is_its_pattern_fixtures_code(example: str) -> None:
    ours = definitions(TOOLS / f"{example}.py")
    twin = definitions(REPO / "fixtures" / f"{TWINS[example]}.py")
    assert ours, f"functions/tools/{example}.py defines nothing"
    assert {name: twin.get(name) for name in ours} == ours


def test_an_examples_own_tests_are_collected_only_while_its_file_exists() -> None:
    from tests.conftest import pytest_ignore_collect

    def ignored(name: str) -> bool | None:
        return pytest_ignore_collect(REPO / "tests" / "integration" / name, None)  # type: ignore[arg-type]

    assert ignored("test_example_no_such_tool.py") is True
    assert ignored("test_examples_of_something.py") is None
    assert ignored("test_task_store.py") is None
    existing = sorted(path.stem for path in TOOLS.glob("*.py") if path.name != "__init__.py")
    assert all(ignored(f"test_example_{name}.py") is None for name in existing)
