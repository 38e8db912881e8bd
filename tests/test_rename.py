"""`make rename NAME=…` on a copy of the repository: every spelling of the old name is replaced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import rename_project

CANDIDATES = ("acme-orders", "beta-shop", "gamma-store")


def other_names(root: Path) -> list[str]:
    """Names to rename to, none of them the project's current one (the suite must pass after a rename too)."""
    return [name for name in CANDIDATES if name != rename_project.current_name(root)]


@pytest.fixture
def copy_of_repository(tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    target.mkdir()
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    for name in filter(None, files.split("\0")):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    return target


def test_renaming_replaces_every_spelling_of_the_old_name(copy_of_repository: Path) -> None:
    old = rename_project.spellings(rename_project.current_name(copy_of_repository))
    new = rename_project.spellings(other_names(copy_of_repository)[0])
    completed = subprocess.run(
        [sys.executable, "scripts/rename_project.py", new["kebab"]],
        cwd=copy_of_repository,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    leftovers = subprocess.run(
        [
            "git",
            "grep",
            "-n",
            "-i",
            "-E",
            "|".join(old.values()),
        ],
        cwd=copy_of_repository,
        capture_output=True,
        text=True,
    ).stdout
    assert leftovers == ""
    assert f'name = "{new["kebab"]}"' in (copy_of_repository / "pyproject.toml").read_text()
    assert f'DEFAULT_STACK_NAME = "{new["pascal"]}"' in (copy_of_repository / "infra" / "cdk_app.py").read_text()
    settings_code = (copy_of_repository / "functions" / "mcp_runtime" / "settings.py").read_text()
    assert f'Field("{new["kebab"]}", alias="MCP_SERVER_NAME")' in settings_code
    assert rename_project.current_name(copy_of_repository) == new["kebab"]


def test_a_name_that_is_not_lower_case_words_with_dashes_is_refused_and_nothing_changes(
    copy_of_repository: Path,
) -> None:
    before = (copy_of_repository / "pyproject.toml").read_text()
    for bad in ("Acme", "acme_orders", "acme orders", "-acme", "", rename_project.current_name(copy_of_repository)):
        with pytest.raises(ValueError):
            rename_project.rename(copy_of_repository, bad)
    assert (copy_of_repository / "pyproject.toml").read_text() == before


def test_spellings_cover_kebab_pascal_and_snake() -> None:
    assert rename_project.spellings("acme-orders") == {
        "kebab": "acme-orders",
        "pascal": "AcmeOrders",
        "snake": "acme_orders",
    }


def test_a_second_rename_renames_again(copy_of_repository: Path) -> None:
    first, second = other_names(copy_of_repository)[:2]
    rename_project.rename(copy_of_repository, first)
    changed = rename_project.rename(copy_of_repository, second)
    assert changed
    assert f'name = "{second}"' in (copy_of_repository / "pyproject.toml").read_text()
    leftovers = subprocess.run(
        ["git", "grep", "-n", "-i", "-E", "|".join(rename_project.spellings(first).values())],
        cwd=copy_of_repository,
        capture_output=True,
        text=True,
    ).stdout
    assert leftovers == ""


def test_the_renamed_projects_own_rename_tests_pass(copy_of_repository: Path) -> None:
    rename_project.rename(copy_of_repository, other_names(copy_of_repository)[0])
    subprocess.run(["git", "add", "-A"], cwd=copy_of_repository, check=True)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_rename.py",
            "-k",
            "not own_rename",
        ],
        cwd=copy_of_repository,
        env={**os.environ, "PYTHONPATH": f"{copy_of_repository / 'functions'}:{copy_of_repository}"},
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
