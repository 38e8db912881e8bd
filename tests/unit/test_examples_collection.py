"""An example tool's own tests (`tests/tools/test_example_<module>.py`) are collected only while its file
(`functions/tools/<module>.py`) exists, so deleting an example takes its tests with it. The examples are
the team's: the platform's tests call its own fixtures (fixtures/), never them."""

from __future__ import annotations

from tests.support import REPO

TOOLS = REPO / "functions" / "tools"


def test_an_examples_own_tests_are_collected_only_while_its_file_exists() -> None:
    from tests.conftest import pytest_ignore_collect

    def ignored(name: str) -> bool | None:
        return pytest_ignore_collect(REPO / "tests" / "tools" / name, None)  # type: ignore[arg-type]

    assert ignored("test_example_no_such_tool.py") is True
    assert ignored("test_examples_of_something.py") is None
    assert ignored("test_task_store.py") is None
    existing = sorted(path.stem for path in TOOLS.glob("*.py") if path.name != "__init__.py")
    assert all(ignored(f"test_example_{name}.py") is None for name in existing)
