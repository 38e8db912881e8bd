"""Making the template yours keeps the checks green. The release rehearsal (tests/test_template.py) makes a
team's copy, deletes every example, adds its own modules, dependency and configuration, takes an update,
and runs there the checks a team's room can reach: `make lint-team`, the unit tier, the team's own tests and,
of the integration tier, the modules that build the functions' catalog (`AFFECTED`). The other fast modules
build theirs from the platform's fixtures only, which the guard below holds them to; the copy used is the
working tree as its team has it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support import REPO, copy_working_tree

# What the rehearsal's copy runs of the platform's tests: what a team's room can reach.
AFFECTED = [
    "tests/unit",
    "tests/test_readme.py",
    "tests/test_events.py",
    "tests/test_tiers.py",
    "tests/integration/test_readme_walkthrough.py",
    "tests/integration/test_task_handlers.py",
    "tests/integration/test_hardening.py",
]
# Left out of the copy's unit run, which this suite runs as they are: the modules of pure functions no tool
# reaches (JSON spellings, JWS), and the handler's fuzzing (random requests against the fixtures' tools: the
# project's own reach it only through tools/list, which the validation ladder and tool loading check).
LEFT_OUT_UNIT_MODULES = ("test_json_spellings.py", "test_jws.py", "test_fuzz_http_handler.py")
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


def test_no_platform_test_outside_the_copys_run_reaches_the_projects_tools() -> None:
    """The fast tiers' modules the copy above does not run build their tools from the platform's fixtures."""
    fast = [*(REPO / "tests" / "integration").glob("*.py"), REPO / "tests" / "test_rename.py"]
    run_in_the_copy = {REPO / path for path in AFFECTED}
    reaching = sorted(
        str(path.relative_to(REPO))
        for path in fast
        if path not in run_in_the_copy and REACHES_TOOLS.search(path.read_text(encoding="utf-8"))
    )
    assert reaching == []
