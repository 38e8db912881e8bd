"""`make lint` holds the platform to its strict configuration and the team's files (functions/tools,
tests/tools) to the ecosystem's defaults: ruff's own rules and plain mypy, so a module written for
FastMCP passes as it is."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import REPO

FASTMCP_MODULE = """from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("ops")


@mcp.tool
def status(service: str) -> dict:
    return {"service": service, "up": True}


def f(x) -> dict:
    return {"x": x}
"""


def lint_team(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", "-s", "lint-team", f"TEAM_PATHS={folder}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_team_module_with_a_bare_dict_return_passes_the_team_checks_and_fails_the_platforms(tmp_path: Path) -> None:
    folder = tmp_path / "ops_tools"
    folder.mkdir()
    (folder / "ops.py").write_text(FASTMCP_MODULE, encoding="utf-8")

    team = lint_team(folder)
    assert team.returncode == 0, team.stdout + team.stderr
    assert team.stdout.splitlines()[-1] == "Success: no issues found in 1 source file"

    strict = subprocess.run(
        [str(REPO / ".venv" / "bin" / "mypy"), "--explicit-package-bases", str(folder / "ops.py")],
        cwd=REPO,
        env={**os.environ, "MYPYPATH": str(REPO / "functions")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 'ops.py:7: error: Missing type arguments for generic type "dict"  [type-arg]' in strict.stdout


def test_the_team_checks_still_refuse_what_would_fail_at_run_time(tmp_path: Path) -> None:
    folder = tmp_path / "broken_tools"
    folder.mkdir()
    (folder / "broken.py").write_text("def f() -> int:\n    return undefined_name\n", encoding="utf-8")

    team = lint_team(folder)
    assert team.returncode != 0
    assert "F821 Undefined name `undefined_name`" in team.stdout


def test_a_team_folder_deleted_with_the_examples_is_not_linted_and_not_an_error(tmp_path: Path) -> None:
    team = lint_team(tmp_path / "tests_tools_deleted")
    assert (team.returncode, team.stdout, team.stderr) == (0, "", "")
