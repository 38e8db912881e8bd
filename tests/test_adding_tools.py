"""Making the template yours keeps the checks green: in a copy of the working tree as a team has it
(untracked files too, ignored ones not), every example tool deleted with its line and its tests
(`rm -r functions/tools/<example>.py tests/tools/*`, README: "Make it yours"), then a plain tool (named
`greet`, as the conformance fixtures' is) and the README's two task tools (the walkthrough's, with
steps, and the long-work one, with steps and a wait) and two modules ported from FastMCP (with a prompt
and a resource) and the SDK's MCPServer (docs/fastmcp.md) added, each one file and one line, none
committed; then `make lint` and the platform's fast tiers: the unit tier, and of the integration tier
the modules that build the functions' catalog (the others build theirs from the platform's fixtures
only, which `test_no_platform_test_outside_the_copys_run_reaches_the_projects_tools` holds them to)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, copy_working_tree, register_tool_modules, unregister_tool_modules

PLAIN_TOOL = '''"""Greet someone: a plain call, as count_words is."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, ToolMode, tool


class GreetArgs(BaseModel):
    name: str = Field(description="Who to greet.", min_length=1, max_length=100)


@tool(description="Greet someone by name.", mode=ToolMode.PLAIN)
def greet(args: GreetArgs, ctx: ToolContext) -> str:
    return f"Hello, {args.name}!"
'''
# Two modules ported the documented way (docs/fastmcp.md): the import line is all that changed.
FASTMCP_MODULE = '''"""Ported from FastMCP: only the import line changed."""

from mcp_runtime.fastmcp import Context, FastMCP

mcp = FastMCP("ported")


@mcp.tool
async def shout(text: str, ctx: Context) -> str:
    """Shout a text back."""
    await ctx.info("shouting")
    return text.upper()


@mcp.prompt
def loud(topic: str) -> str:
    """Ask for a loud take on a topic."""
    return f"Say something loud about {topic}."


@mcp.resource("volume://levels")
def levels() -> str:
    """The volume levels."""
    return "quiet, normal, loud"
'''
MCPSERVER_MODULE = '''"""Ported from the SDK's MCPServer: only the import line changed."""

from mcp_runtime.fastmcp import MCPServer

server = MCPServer("measured")


@server.tool()
def measure(text: str) -> dict[str, int]:
    """Measure a text."""
    return {"length": len(text)}
'''
# The tiers a new tool can break (the stack tiers serve it too; they are the same code paths), and the
# integration modules that build the functions' catalog from the environment (app.composition, app.handlers).
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


def readme_block(marker: str) -> str:
    pages = "".join((REPO / page).read_text(encoding="utf-8") for page in ("README.md", "docs/tasks.md"))
    block = re.search(rf"<!-- {marker}:start -->\n```python\n(.*?)```\n<!-- {marker}:end -->", pages, re.DOTALL)
    assert block, f"the README (or docs/tasks.md) lost its {marker} block"
    return block.group(1)


@pytest.fixture
def project_made_ours(tmp_path: Path) -> Path:
    target = tmp_path / "project"
    copy_working_tree(REPO, target)
    for installed in (".venv", "node_modules", ".tools"):
        if (REPO / installed).exists():
            (target / installed).symlink_to((REPO / installed).resolve())
    # mypy's cache from this checkout's `make lint` (run before the tests): the copy's lint checks
    # what changed, as a team's second `make lint` does.
    if (REPO / ".mypy_cache").is_dir():
        shutil.copytree(REPO / ".mypy_cache", target / ".mypy_cache", symlinks=True)
    tools = target / "functions" / "tools"
    examples = [path for path in tools.glob("*.py") if path.name != "__init__.py"]
    for example in examples:
        example.unlink()
    unregister_tool_modules(tools / "__init__.py", *(path.stem for path in examples))
    for team_test in (target / "tests" / "tools").glob("*"):
        shutil.rmtree(team_test) if team_test.is_dir() else team_test.unlink()
    (tools / "greet.py").write_text(PLAIN_TOOL, encoding="utf-8")
    (tools / "export_dataset.py").write_text(readme_block("walkthrough"), encoding="utf-8")
    (tools / "run_pipeline.py").write_text(readme_block("long-work"), encoding="utf-8")
    (tools / "ported_shout.py").write_text(FASTMCP_MODULE, encoding="utf-8")
    (tools / "ported_measure.py").write_text(MCPSERVER_MODULE, encoding="utf-8")
    register_tool_modules(
        tools / "__init__.py", "greet", "export_dataset", "run_pipeline", "ported_shout", "ported_measure"
    )
    return target


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "MAKE")) and key != "PYTHONPATH"
    }
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False)


def test_without_the_examples_and_with_tools_of_its_own_a_project_keeps_lint_and_the_affected_tiers_green(
    project_made_ours: Path,
) -> None:
    project = project_made_ours
    init = (project / "functions" / "tools" / "__init__.py").read_text(encoding="utf-8")
    listed = ("greet", "export_dataset", "run_pipeline", "ported_shout", "ported_measure")
    assert "MODULES = _modules(\n" + "".join(f'    "{name}",\n' for name in listed) + ")\n" in init
    assert "TABLE_BACKED_MODULES = _modules()\n" in init
    lint = run(["make", "lint"], project)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    assert "pip install" not in lint.stdout

    # In one process: beside this suite's own workers, more would only share the same two cores.
    left_out = " ".join(f"--ignore=tests/unit/{module}" for module in LEFT_OUT_UNIT_MODULES)
    unit = run(["make", "test-unit", f"PYTEST_PARALLEL={left_out}"], project)
    assert unit.returncode == 0, unit.stdout[-5000:] + unit.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", unit.stdout.splitlines()[-1]), unit.stdout[-500:]

    python = str(project / ".venv" / "bin" / "python")
    checks = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *AFFECTED[1:], "-k", NO_STACK], project)
    assert checks.returncode == 0, checks.stdout[-5000:] + checks.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", checks.stdout.splitlines()[-1]), checks.stdout[-500:]


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
