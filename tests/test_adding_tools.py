"""Making the template yours keeps the checks green. The release rehearsal (tests/test_template.py) makes a
team's copy, deletes every example, adds its own modules, dependency and configuration, takes an update, and
runs there `make lint-team`, the team's own tests and the platform's fast modules that build the catalog from
the team's tools (`reaching_the_projects_tools`, found in their code); the others serve the platform's fixtures
only, so this suite's run of them stands for the copy's. The copy is the working tree as its team has it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support import REPO, copy_working_tree

# Left out of the copy's run, which this suite runs as they are: the handler's fuzzing (random requests against
# the fixtures' tools: the project's own reach it only through tools/list, which tool loading checks).
LEFT_OUT_UNIT_MODULES = ("test_fuzz_http_handler.py",)
NO_STACK = "not through_the_handler and not example_ and not callback_event"


def test_the_copy_is_the_working_tree_as_its_team_has_it(tmp_path: Path) -> None:
    """A tool added and not yet committed is part of the project; what git ignores, or what was deleted
    and not yet committed, is not."""
    checkout = tmp_path / "checkout"
    (checkout / "functions" / "tools").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=checkout, check=True)
    (checkout / ".gitignore").write_text("build/\n*.pyc\n")
    (checkout / "functions" / "tools" / "__init__.py").write_text("")
    (checkout / "functions" / "tools" / "old_tool.py").write_text("")
    subprocess.run([*git, "add", "-A"], cwd=checkout, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], cwd=checkout, check=True)
    (checkout / "functions" / "tools" / "new_tool.py").write_text("# not committed yet\n")
    (checkout / "functions" / "tools" / "new_tool.pyc").write_bytes(b"")
    (checkout / "build").mkdir()
    (checkout / "build" / "output.json").write_text("{}")
    (checkout / "functions" / "tools" / "old_tool.py").unlink()

    copy = tmp_path / "copy"
    copy_working_tree(checkout, copy)

    assert sorted(str(path.relative_to(copy)) for path in copy.rglob("*") if path.is_file()) == [
        ".gitignore",
        "functions/tools/__init__.py",
        "functions/tools/new_tool.py",
    ]


# What reaches the project's tools: importing them, reading their folder, or building the functions' catalog
# from the environment (whose default serves `tools`).
REACHES_TOOLS = re.compile(
    r"\bimport tools\b|\bfrom tools\b|functions/tools|\"functions\" / \"tools\"|\bapp\.(composition|handlers)\b"
    r"|\bfrom app\b|\bimport app\b|\bbuild_(catalog|server)\b"
)


def reaching_the_projects_tools(root: Path = REPO) -> list[str]:
    """The platform's fast modules that build the functions' catalog from the project's tools, as found in the
    code (the others serve the platform's fixtures only): what the rehearsal's copy runs of them."""
    fast = [
        *sorted((root / "tests" / "unit").glob("test_*.py")),
        *sorted((root / "tests" / "integration").glob("test_*.py")),
    ]
    return [
        str(path.relative_to(root))
        for path in fast
        if path.name not in LEFT_OUT_UNIT_MODULES and REACHES_TOOLS.search(path.read_text(encoding="utf-8"))
    ]


def test_the_modules_that_reach_the_projects_tools_are_found_and_the_rest_serve_fixtures_only() -> None:
    reaching = reaching_the_projects_tools()
    assert {"tests/unit/test_tool_loading.py", "tests/integration/test_task_handlers.py"} <= set(reaching)
    assert "tests/integration/test_task_store.py" not in reaching
