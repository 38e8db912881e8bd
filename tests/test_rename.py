"""`make rename NAME=…` (and `copier copy`'s task): the project's name is cdk.json's `projectName`, the one
place it lives; the stack, server and metrics are named after it at synth, and no other file changes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from infra.naming import pascal, project_name, stack_name

from tests.support import REPO

sys.path.insert(0, str(REPO / "scripts"))
CDK_JSON = """{
  "app": "PYTHONPATH=functions .venv/bin/python -m infra.cdk_app",
  "context": {
    "projectName": "acme-orders",
    "toolEnvironment": {"REPORT_LIMIT": "10"}
  }
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "cdk.json").write_text(CDK_JSON)
    (tmp_path / "README.md").write_text("# acme-orders\n\nOur orders server.\n")
    return tmp_path


def rename(root: Path, name: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "scripts" / "rename_project.py"), "--root", str(root), "--", name]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_renaming_sets_project_name_and_the_readmes_title_and_nothing_else(project: Path) -> None:
    done = rename(project, "beta-shop")
    assert (done.returncode, done.stdout) == (0, "Named beta-shop (stack BetaShop): cdk.json, README.md.\n")
    assert (project / "cdk.json").read_text() == CDK_JSON.replace('"acme-orders"', '"beta-shop"')
    assert (project / "README.md").read_text() == "# beta-shop\n\nOur orders server.\n"
    context = json.loads((project / "cdk.json").read_text())["context"]
    assert (project_name(context), stack_name(context)) == ("beta-shop", "BetaShop")


def test_a_cdk_json_without_project_name_gets_it_first_in_its_context(project: Path) -> None:
    (project / "cdk.json").write_text(CDK_JSON.replace('    "projectName": "acme-orders",\n', ""))
    assert rename(project, "gamma-store").returncode == 0
    assert (project / "cdk.json").read_text() == CDK_JSON.replace('"acme-orders"', '"gamma-store"')


@pytest.mark.parametrize("bad", ["Acme", "acme_orders", "acme orders", "-acme", "acme-", "acme--mcp", "", "a" * 41])
def test_a_name_that_is_not_lower_case_words_with_dashes_is_refused_and_nothing_changes(
    project: Path, bad: str
) -> None:
    done = rename(project, bad)
    assert done.returncode == 2
    assert done.stderr == (
        f"NAME must be lower-case words joined by dashes, at most 40 characters, like acme-mcp (got {bad!r})\n"
    )
    assert (project / "cdk.json").read_text() == CDK_JSON


def test_the_same_name_again_is_refused(project: Path) -> None:
    done = rename(project, "acme-orders")
    assert (done.returncode, done.stderr) == (2, "the project is already called acme-orders\n")


def test_the_stack_is_named_after_the_project_unless_stack_name_says_otherwise() -> None:
    assert pascal("acme-orders") == "AcmeOrders"
    assert stack_name({"projectName": "acme-orders"}) == "AcmeOrders"
    assert stack_name({"projectName": "acme-orders", "stackName": "Orders-Prod"}) == "Orders-Prod"
    assert stack_name({}) == "ServerlessMcpTasks"  # a cdk.json that names no project: the template's name
    with pytest.raises(ValueError, match="context 'projectName' must be lower-case words joined by dashes"):
        project_name({"projectName": "Acme"})


def test_make_rename_runs_the_script_with_the_given_name(tmp_path: Path) -> None:
    shutil.copy2(REPO / "Makefile", tmp_path / "Makefile")
    planned = subprocess.run(
        ["make", "-n", "rename", "NAME=acme-mcp"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    commands = [line for line in planned.stdout.splitlines() if not line.startswith("make")]  # make -w's own lines
    assert commands[-1].endswith('scripts/rename_project.py "acme-mcp"')
