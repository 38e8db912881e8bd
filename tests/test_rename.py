"""`make rename NAME=…` on a copy of the repository: every spelling of the old name is replaced."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

sys.path.insert(0, str(REPO / "scripts"))
import rename_project


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
    completed = subprocess.run(
        [sys.executable, "scripts/rename_project.py", "acme-orders"],
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
            "serverless-mcp-tasks|ServerlessMcpTasks|serverless_mcp_tasks",
            "--",
            ".",
            ":!scripts/rename_project.py",
        ],
        cwd=copy_of_repository,
        capture_output=True,
        text=True,
    ).stdout
    assert leftovers == ""
    assert 'name = "acme-orders"' in (copy_of_repository / "pyproject.toml").read_text()
    assert 'DEFAULT_STACK_NAME = "AcmeOrders"' in (copy_of_repository / "infra" / "cdk_app.py").read_text()
    settings_code = (copy_of_repository / "functions" / "mcp_runtime" / "settings.py").read_text()
    assert 'Field("acme-orders", alias="MCP_SERVER_NAME")' in settings_code


def test_a_name_that_is_not_lower_case_words_with_dashes_is_refused_and_nothing_changes(
    copy_of_repository: Path,
) -> None:
    before = (copy_of_repository / "pyproject.toml").read_text()
    for bad in ("Acme", "acme_orders", "acme orders", "-acme", ""):
        with pytest.raises(ValueError):
            rename_project.rename(copy_of_repository, bad)
    assert (copy_of_repository / "pyproject.toml").read_text() == before


def test_spellings_cover_kebab_pascal_and_snake() -> None:
    assert rename_project.spellings("acme-orders") == {
        "kebab": "acme-orders",
        "pascal": "AcmeOrders",
        "snake": "acme_orders",
    }
