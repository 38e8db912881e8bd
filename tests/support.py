"""The platform's own test helpers: the stacks its tests share, serving the platform's fixture tools
(fixtures/, never the project's), and copies of the project. The public test kit is `testkit`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import testkit
from testkit import REPO, RunningStack

if TYPE_CHECKING:
    from mcp_runtime import Catalog

# README.md is the template's own where copier.yml is (this repository); in a project made from it, it is the
# team's, which the platform's tests never read.
template_readme = pytest.mark.skipif(
    not (REPO / "copier.yml").exists(), reason="README.md is the team's in a project made from the template"
)

# The tools the runtime's own tests call (fixtures/patterns.py, one of each pattern), by name, sorted.
# Every stack the tests start serves them (`local_stack_process`), and never the project's tools.
PATTERN_TOOLS = [
    "archive_project",
    "cart_add",
    "cart_checkout",
    "cart_open",
    "count_words",
    "deploy_release",
    "list_my_tasks",
]
# The ported modules' tools (fixtures/support_desk.py, FastMCP; fixtures/weather_station.py, MCPServer), sorted:
# the developer stack serves them beside the patterns.
PORTED_TOOLS = [
    "average_temperature",
    "close_ticket",
    "export_tickets",
    "find_customer",
    "forecast",
    "open_ticket_count",
    "station_reading",
    "ticket_counts",
    "ticket_summary",
]


def project_catalog(*, table_backed: bool = True) -> Catalog:
    """What functions/tools registers (whatever the project has there): what a deployment serves."""
    import tools
    from mcp_runtime import Catalog

    catalog = Catalog()
    tools.register(catalog, table_backed=table_backed)
    return catalog


def project_tools(*, table_backed: bool = True) -> list[str]:
    """The tools functions/tools registers, sorted."""
    return sorted(spec.name for spec in project_catalog(table_backed=table_backed).tools)


def deployed_server_name(root: Path = REPO) -> str:
    """The name the project's stack serves under (cdk.json's serverName, else its projectName): a copy's own."""
    from infra import naming

    context = naming.project_context(root)
    return str(context.get("serverName") or naming.project_name(context))


def fixture_packages(fixtures: str | None = None, *, patterns: bool = True) -> str:
    """MCP_TOOL_PACKAGES for the platform's fixtures: `fixtures.<name>` for each name `fixtures` lists,
    after the pattern fixtures unless `patterns` is false."""
    names = [*(["patterns"] if patterns else []), *(fixtures.split(",") if fixtures else [])]
    return ",".join(f"fixtures.{name}" for name in names)


@contextmanager
def local_stack_process(
    fixtures: str | None = None, *, patterns: bool = True, tool_packages: str | None = None, **options: Any
) -> Iterator[RunningStack]:
    """`testkit.local_stack_process` serving the platform's fixtures (`fixture_packages`), never the
    project's tools unless `tool_packages` names them. The fixtures are registered when each function
    starts (MCP_REGISTER_TOOLS_AT_START): the conformance suites expect their prompts and resources
    advertised by the first server/discover or initialize."""
    packages = fixture_packages(fixtures, patterns=patterns) if tool_packages is None else tool_packages
    if tool_packages is None:
        options["extra_env"] = {"MCP_REGISTER_TOOLS_AT_START": "1", **(options.get("extra_env") or {})}
    with testkit.local_stack_process(packages, **options) as running:
        yield running


def serve_only(tools: Path, *names: str) -> None:
    """Make a scratch copy's `tools` package serve exactly the named modules of its folder: the team's
    other modules are taken out of the copy and its `__init__.py` is written anew, so the test meets no
    tool of the team's and no form of their file."""
    for entry in tools.iterdir():
        if entry.name == "__pycache__" or (entry.suffix == ".py" and entry.stem not in names):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        elif entry.is_dir() and (entry / "__init__.py").exists() and entry.name not in names:
            shutil.rmtree(entry)
    listed = ", ".join(f'"{name}"' for name in names)
    (tools / "__init__.py").write_text(
        '"""The tools of this scratch copy."""\n\n'
        "from importlib import import_module\n\n"
        "from mcp_runtime import Catalog\n\n"
        f'MODULES = tuple(import_module(f"{{__name__}}.{{name}}") for name in ({listed},))\n\n\n'
        "def register(catalog: Catalog, *, table_backed: bool) -> None:\n"
        "    for module in MODULES:\n"
        "        catalog.tools.include(module)\n",
        encoding="utf-8",
    )


def register_tool_modules(init: Path, *names: str) -> None:
    """Add each name as the last line of `MODULES = _modules(...)` in a tools `__init__.py`, as the README
    says (a call on one line, such as the empty `_modules()` deleting every example leaves, is opened up
    first: a name a line)."""
    text = init.read_text(encoding="utf-8")
    one_line = re.search(r"^MODULES = _modules\(([^\n]*)\)\n", text, re.MULTILINE)
    if one_line is not None:
        listed = "".join(f"    {name.strip()},\n" for name in one_line.group(1).split(",") if name.strip())
        text = f"{text[: one_line.start()]}MODULES = _modules(\n{listed})\n{text[one_line.end() :]}"
    start = text.index("\nMODULES = _modules(\n")
    end = text.index("\n)\n", start) + 1
    lines = "".join(f'    "{name}",\n' for name in names)
    init.write_text(text[:end] + lines + text[end:], encoding="utf-8")


def unregister_tool_modules(init: Path, *names: str) -> None:
    """Take each name out of `MODULES` and `TABLE_BACKED_MODULES` in a tools `__init__.py` (a project
    deleting those tool files, as the README's "Make it yours" says)."""
    text = init.read_text(encoding="utf-8")
    for name in names:
        text = re.sub(rf'^ +"{name}",\n', "", text, flags=re.MULTILINE)
        text = re.sub(rf'"{name}"(, )?', "", text)
    text = text.replace("_modules(\n)", "_modules()").replace(", )", ")")
    init.write_text(text, encoding="utf-8")


def copy_working_tree(source: Path, target: Path) -> None:
    """The files of a checkout as its team has them: tracked and untracked ones, not those git ignores
    (installs, caches, build output), nor tracked files deleted and not yet committed."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


def copy_project(target: Path) -> Path:
    """A copy of this checkout's working tree at `target` (`copy_working_tree`: a tool not yet
    `git add`-ed comes too), sharing this checkout's installs (.venv, node_modules, .tools) and its
    synthesized templates (a tool is not among their inputs, `local_stack.synth`), so nothing is
    installed or synthesized again."""
    copy_working_tree(REPO, target)
    for installed in (".venv", "node_modules", ".tools"):
        if (REPO / installed).exists():
            (target / installed).symlink_to((REPO / installed).resolve())
    synthesized = REPO / "build" / "local-stack" / "synth"
    if synthesized.is_dir():
        shutil.copytree(synthesized, target / "build" / "local-stack" / "synth", symlinks=True)
    # The installs are the repository's: make must not see the copied pins as newer and reinstall.
    for pins in ("pyproject.toml", "requirements-dev.lock", "package.json", "package-lock.json"):
        os.utime(target / pins, (0, 0))
    return target


def run_python(code: str, extra_env: dict[str, str] | None = None, timeout: float = 120) -> list[str]:
    """Run `code` in a child interpreter at the repository's root; it must exit 0. Its output's lines."""
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout.splitlines()


# The stack configurations that test modules share (tests/conftest.py starts each one once, when a
# test first asks for it by its fixture name, and stops it after the last test that uses it), and the
# modules that use each: they run one after another on one xdist worker. A module that needs another
# configuration starts its own with `local_stack_process`.
SHORT_TIMEOUT_CONTEXT: dict[str, Any] = {"workerTimeoutSeconds": 5, "apiTimeoutSeconds": 8}
# What cdk.json gives the tools (docs/configuration.md), for the fixtures of `fixtures/configuration.py`:
# a variable, a secret by name (created on the stack with `make secret`), and one object of a bucket.
TOOL_BUCKET = "acme-tool-reports"
TOOL_SECRET_NAME = "tool-fixtures/api-key"
TOOL_CONTEXT: dict[str, Any] = {
    "toolEnvironment": {"REPORTS_URL": "https://reports.example.com/v1"},
    "toolSecrets": {"api_key": TOOL_SECRET_NAME},
    "toolPolicyStatements": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{TOOL_BUCKET}/granted.txt"}
    ],
}


@dataclass(frozen=True)
class SharedStack:
    options: dict[str, Any]  # local_stack_process's arguments
    users: tuple[str, ...]  # the test modules that use it, by path from the repository's root


SHARED_STACKS: dict[str, SharedStack] = {
    # cdk.json as it is, no fixtures but the patterns, every request needs a token (`Bearer dev:<user>` here).
    "template_stack": SharedStack(
        {},
        (
            "tests/e2e/test_authorization_conformance.py",
            "tests/e2e/test_isolation.py",
            "tests/local_stack/test_sam_env.py",
            "tests/local_stack/test_testkit_stack.py",
            "tests/test_events.py",
        ),
    ),
    # As `make run` starts it: a request without a token is the development user's; the ported modules too.
    "developer_stack": SharedStack(
        {"default_user": "developer", "fixtures": "support_desk,weather_station"},
        ("tests/e2e/test_fastmcp_port.py", "tests/e2e/test_legacy_clients.py", "tests/e2e/test_readme_snippets.py"),
    ),
    # The conformance fixtures (the suite calls them by name); the suite sends no token.
    # Its API environments warmed first (LOCAL_WARM_ENVIRONMENTS): the suite reads some streams within 600 ms.
    "conformance_stack": SharedStack(
        {"fixtures": "conformance", "default_user": "conformance", "extra_env": {"LOCAL_WARM_ENVIRONMENTS": "4"}},
        (
            "tests/e2e/test_conformance.py",
            "tests/e2e/test_legacy_wire.py",
            "tests/e2e/test_tasks_client.py",
            "tests/e2e/test_tasks_conformance.py",
        ),
    ),
    # A 5 s worker and 8 s API timeout, short enough to test, long enough for the ordinary tools; the lifecycle
    # fixtures; and the tools configured from cdk.json (TOOL_CONTEXT) with the fixtures that use it.
    "short_timeout_stack": SharedStack(
        {
            "fixtures": "conformance,lifecycle,configuration,oncall",
            "extra_env": {"LOCAL_CDK_CONTEXT": json.dumps({**SHORT_TIMEOUT_CONTEXT, **TOOL_CONTEXT})},
        },
        (
            "tests/local_stack/test_inline_deadline.py",
            "tests/local_stack/test_task_lifecycle.py",
            "tests/local_stack/test_operator_view.py",
            "tests/local_stack/test_tool_configuration.py",
        ),
    ),
}
