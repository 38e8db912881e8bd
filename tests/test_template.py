"""The template's releases as a team takes them (docs/upgrading.md).

A scratch template repository holds two releases: the newest release tag of this repository (or, where the
clone has no tag, the working tree as it is, nothing committed) and a next release made of the working tree
plus platform changes of every kind (the runtime, `infra/`, the Makefile, the platform's pins, cdk.json's
platform part). `copier copy` makes a project from the first; the project has a team's first week (every
example deleted, a FastMCP module with a prompt and a resource and a module in the native form as release
1.0.0 wrote it (`ToolMode`, `mode=`: deprecated since, still served), a dependency
with `make add-dependency`, every cdk.json tool key, a test of its own), committed; `copier update` takes the
next release. No conflict, every team change kept, every platform change arrived, the lock holds both, and the
copy's lint, its own tests and the platform's tests its room reaches pass (the whole `make test` there by hand).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, copy_working_tree
from tests.test_adding_tools import NO_STACK, reaching_the_projects_tools

sys.path.insert(0, str(REPO / "scripts"))
import upgrade

# The template's own machinery: a project made from it has no copier.yml (and its tags are its own).
IS_TEMPLATE = (REPO / "copier.yml").exists()
template_only = pytest.mark.skipif(
    not IS_TEMPLATE, reason="the template's release machinery: not in a project made from it"
)
GIT = ["git", "-c", "user.name=rehearsal", "-c", "user.email=rehearsal@example.com", "-c", "init.defaultBranch=main"]
PROJECT_NAME = "acme-ops"
TEAM_DEPENDENCY = "humanize==4.17.0"
# The next release's platform pin: the dev extra's PyJWT moved (a release moves pins like this).
PLATFORM_PIN = ('"PyJWT==2.15.1"', '"PyJWT==2.10.1"')
RUNTIME_CHANGE = ("functions/mcp_runtime/limits.py", '\n# The next release\'s runtime fix.\nNEXT_RELEASE = "arrived"\n')
INFRA_CHANGE = ("infra/stack.py", "\n# The next release's infrastructure change.\n")
MAKEFILE_TARGET = "\n.PHONY: next-release\nnext-release:\n\t@echo arrived\n"
WATCH_EXCLUDE = "**/.pytest_cache/**"
# The next release moves a part of the team's room (its events go beside its tests) and ships the migration.
MOVED_ROOM = ("events/examples", "tests/tools/events")
TEAM_EVENT = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "page_engineer"}}

FASTMCP_MODULE = '''"""The on-call desk, ported from FastMCP by its import line."""

from mcp_runtime.fastmcp import Context, FastMCP

mcp = FastMCP("oncall")


@mcp.tool
async def page_engineer(service: str, ctx: Context) -> str:
    """Page the engineer on call for a service."""
    await ctx.info(f"paging for {service}")
    return f"paged the on-call engineer of {service}"


@mcp.prompt
def incident_summary(service: str) -> str:
    """Ask for an incident summary."""
    return f"Summarize the open incidents of {service}."


@mcp.resource("oncall://rota")
def rota() -> str:
    """Who is on call this week."""
    return "alice, bob"
'''
# Written as release 1.0.0 taught (ToolMode, mode=): deprecated since, it keeps working after the update.
NATIVE_MODULE = '''"""Days until a date, humanized: a tool in the native form, with the team's own dependency."""

from __future__ import annotations

import datetime

import humanize
from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, ToolMode, tool


class UntilArgs(BaseModel):
    days: int = Field(description="Days from now.", ge=0, le=3650)


@tool(description="How long until a number of days from now, in words.", mode=ToolMode.PLAIN)
def time_until(args: UntilArgs, ctx: ToolContext) -> str:
    return humanize.naturaldelta(datetime.timedelta(days=args.days))
'''
NATIVE_MODE_LINE = (
    NATIVE_MODULE.splitlines().index(
        '@tool(description="How long until a number of days from now, in words.", mode=ToolMode.PLAIN)'
    )
    + 1
)
DEPRECATED_MODE = (
    "@tool(mode=ToolMode.PLAIN) is deprecated and goes away in 3.0.0: drop mode= (task= is the one switch for task "
    "behaviour; the other modes changed nothing)"
)
TEAM_INIT = '''"""Our tools: one module a line."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from mcp_runtime import Catalog


def _modules(*names: str) -> tuple[ModuleType, ...]:
    return tuple(import_module(f"{__name__}.{name}") for name in names)


MODULES = _modules("oncall", "time_until")


def register(catalog: Catalog, *, table_backed: bool) -> None:
    for module in MODULES:
        catalog.tools.include(module)
'''
TEAM_TEST = '''"""Our own tools, tested in-process with the test kit."""

from testkit import ToolClient


def test_a_week_is_seven_days() -> None:
    result = ToolClient().call("time_until", {"days": 7})
    assert result["content"][0]["text"] == "7 days"


def test_paging_names_the_service() -> None:
    result = ToolClient().call("page_engineer", {"service": "checkout"})
    assert result["content"][0]["text"] == "paged the on-call engineer of checkout"
'''
# The copy's lock is what `make lock` writes there, whichever Python its venv runs.
LOCK_TESTS = (
    "tests/test_dependencies.py::test_the_committed_lock_is_what_make_lock_writes_from_the_platform_and_the_team_lists",
    "tests/test_dependencies.py::test_the_lock_is_the_same_whichever_python_the_project_s_venv_runs",
)
TEAM_TESTS = re.findall(r"^def (test_\w+)", TEAM_TEST, flags=re.MULTILINE)
TOOL_CONTEXT = {
    "toolEnvironment": {"ROTA_URL": "https://rota.example.com/v1"},
    "toolSecrets": {"pager": "acme/pager-api-key"},
    "toolPolicyStatements": [
        {
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::acme-runbooks/*",
            "reason": "The runbook tool reads any runbook of the team's bucket.",
        },
    ],
    "vpc": {
        "vpcId": "vpc-0123456789abcdef0",
        "subnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
        "securityGroupIds": ["sg-0123456789abcdef0"],
        "routeTableIds": ["rtb-0123456789abcdef0"],
    },
}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def clean_env() -> dict[str, str]:
    """The environment a team's shell has: none of this suite's pytest, make or import-path settings."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "MAKE", "LOCAL_SYNTH", "UV_")) and key not in ("PYTHONPATH", "VIRTUAL_ENV")
    }


def run(command: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # The copy's installs compile no bytecode ahead (its interpreters compile what they import): the same
    # packages, without compiling all of aws-cdk-lib twice on this suite's two cores.
    env = {**clean_env(), "UV_COMPILE_BYTECODE": "0"}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def share_bytecode(source_venv: Path, venv: Path) -> int:
    """Give `venv` the bytecode `source_venv` compiled for the same files (uv links both venvs' files to its
    cache: one inode, so one mtime and size, which is what a .pyc is checked against): the copy's venv as
    `make install` leaves it, compiled, without compiling it again. How many .pyc files it linked."""
    (source_site,) = source_venv.glob("lib/python3.*/site-packages")
    (site,) = venv.glob("lib/python3.*/site-packages")
    linked = 0
    for compiled in source_site.rglob("__pycache__/*.pyc"):
        folder = compiled.parent.parent.relative_to(source_site)
        module = compiled.name.split(".", 1)[0] + ".py"
        target = site / folder / module
        if not target.is_file() or not os.path.samefile(target, source_site / folder / module):
            continue
        destination = site / folder / "__pycache__" / compiled.name
        destination.parent.mkdir(exist_ok=True)
        if not destination.exists():
            os.link(compiled, destination)
            linked += 1
    return linked


def version_of(root: Path) -> tuple[int, int, int]:
    version = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    major, minor, patch = (int(part) for part in version.split("."))
    return major, minor, patch


def newest_release_tag() -> str | None:
    tags = subprocess.run(
        ["git", "tag", "--merged", "HEAD", "--list", "v*", "--sort=-version:refname"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    return tags[0] if tags else None


def replace_tree(root: Path, source: Path) -> None:
    for entry in root.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    shutil.copytree(source, root, dirs_exist_ok=True, symlinks=True)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path} no longer has {old!r}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def make_next_release(root: Path, version: str) -> None:
    """Platform changes of every kind, as a release makes them, and a move of part of the team's room."""
    path, line = RUNTIME_CHANGE
    (root / path).write_text((root / path).read_text(encoding="utf-8") + line, encoding="utf-8")
    path, line = INFRA_CHANGE
    (root / path).write_text((root / path).read_text(encoding="utf-8") + line, encoding="utf-8")
    (root / "Makefile").write_text((root / "Makefile").read_text(encoding="utf-8") + MAKEFILE_TARGET, encoding="utf-8")
    edit(root / "pyproject.toml", *PLATFORM_PIN)
    for config in ("infra/cdk.platform.json", "cdk.json"):
        data = json.loads((root / config).read_text(encoding="utf-8"))
        data["watch"]["exclude"].append(WATCH_EXCLUDE)
        (root / config).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    source, destination = MOVED_ROOM
    edit(root / "copier.yml", f"""  - "{{% if _copier_operation == 'update' %}}{source}{{% endif %}}"\n""", "")
    migration = (
        "\n_migrations:\n"
        f"  - version: {version}\n"
        f'    command: ["{{{{ _copier_python }}}}", "scripts/migrate.py", "move", "{source}", "{destination}"]\n'
        "    when: \"{{ _stage == 'after' }}\"\n"
    )
    (root / "copier.yml").write_text((root / "copier.yml").read_text(encoding="utf-8") + migration, encoding="utf-8")
    edit(root / "scripts" / "upgrade.py", f'"{source}", ', "")
    if (root / source).exists():
        (root / destination).parent.mkdir(parents=True, exist_ok=True)
        (root / source).rename(root / destination)


@dataclass(frozen=True)
class Rehearsal:
    template: Path
    project: Path
    first: str
    next: str
    team_files: dict[str, bytes]
    team_context: dict[str, object]
    update: subprocess.CompletedProcess[str]
    changed: list[str]


def team_room_files(project: Path) -> dict[str, bytes]:
    found = {}
    for entry in upgrade.TEAM_ROOM:
        path = project / entry
        files = (
            [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts] if path.is_dir() else [path]
        )
        for file in files:
            if file.exists():
                found[file.relative_to(project).as_posix()] = file.read_bytes()
    return found


def team_room_files_under(project: Path, folder: str) -> dict[str, bytes]:
    return {
        file.relative_to(project).as_posix(): file.read_bytes()
        for file in (project / folder).rglob("*")
        if file.is_file()
    }


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    scratch = tmp_path_factory.mktemp("rehearsal")
    working_tree = scratch / "working-tree"
    copy_working_tree(REPO, working_tree)
    template = scratch / "template"
    template.mkdir()
    git("init", "-q", cwd=template)
    tag = newest_release_tag()
    if tag is None:
        replace_tree(template, working_tree)
        first = "v{}.{}.{}".format(*version_of(working_tree))
    else:
        subprocess.run(f"git archive {tag} | tar -x -C {template}", shell=True, cwd=REPO, check=True)
        first = tag
    git("add", "-A", cwd=template)
    git("commit", "-q", "-m", f"release {first}", cwd=template)
    git("tag", first, cwd=template)
    replace_tree(template, working_tree)
    major, minor, patch = max(version_of(template), tuple(int(part) for part in first[1:].split(".")))
    following = f"v{major}.{minor}.{patch + 1}"
    make_next_release(template, following)
    git("add", "-A", cwd=template)
    git("commit", "-q", "-m", f"release {following}", cwd=template)
    git("tag", following, cwd=template)
    # Packed, as a published template's clone is: copier walks the clone's .git too, a path at a time.
    git("repack", "-a", "-d", "-q", cwd=template)

    project = scratch / PROJECT_NAME
    copied = run(
        [
            str(REPO / ".venv/bin/copier"),
            "copy",
            "--trust",
            "--defaults",
            "--vcs-ref",
            first,
            "--data",
            f"project_name={PROJECT_NAME}",
            str(template),
            str(project),
        ],
        scratch,
    )
    assert copied.returncode == 0, copied.stderr[-3000:]
    # A team's machine has installed once: the pinned uv and the Node packages, as `make install` left them
    # (the Python environments are installed in the copy for real, below).
    (project / ".tools").mkdir()
    for uv in (REPO / ".tools").glob("uv-*"):
        (project / ".tools" / uv.name).symlink_to(uv.resolve())
    shutil.copytree(REPO / "node_modules", project / "node_modules", symlinks=True, copy_function=os.link)
    (project / "node_modules" / ".installed").touch()
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "From the template", cwd=project)

    # The team's first week.
    tools = project / "functions" / "tools"
    for example in tools.glob("*.py"):
        example.unlink()
    for test in (project / "tests" / "tools").glob("*"):
        shutil.rmtree(test) if test.is_dir() else test.unlink()
    shutil.rmtree(project / "events" / "examples", ignore_errors=True)
    (project / "events" / "examples").mkdir()
    (project / "events" / "examples" / "page-engineer.json").write_text(json.dumps(TEAM_EVENT, indent=2) + "\n")
    (tools / "__init__.py").write_text(TEAM_INIT, encoding="utf-8")
    (tools / "oncall.py").write_text(FASTMCP_MODULE, encoding="utf-8")
    (tools / "time_until.py").write_text(NATIVE_MODULE, encoding="utf-8")
    (project / "tests" / "tools").mkdir(exist_ok=True)
    (project / "tests" / "tools" / "test_time_until.py").write_text(TEAM_TEST, encoding="utf-8")
    added = run(["make", "add-dependency", f"PKG={TEAM_DEPENDENCY}"], project)
    assert added.returncode == 0, added.stdout[-3000:] + added.stderr[-3000:]
    config = json.loads((project / "cdk.json").read_text(encoding="utf-8"))
    config["context"].update(TOOL_CONTEXT)
    (project / "cdk.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    git("add", "-A", cwd=project)
    git("commit", "-q", "-m", "Our first week", cwd=project)
    team_files = team_room_files(project)

    update = run(["make", "update", f"VERSION={following}"], project)
    assert share_bytecode(REPO / ".venv", project / ".venv") > 1000
    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=all", cwd=project).splitlines()]
    return Rehearsal(template, project, first, following, team_files, config["context"], update, changed)


@template_only
def test_the_update_takes_the_next_release_without_a_conflict(rehearsal: Rehearsal) -> None:
    assert rehearsal.update.returncode == 0, rehearsal.update.stdout[-3000:] + rehearsal.update.stderr[-3000:]
    answers = (rehearsal.project / ".copier-answers.yml").read_text(encoding="utf-8")
    assert f"_commit: {rehearsal.next}\n" in answers
    assert f"project_name: {PROJECT_NAME}\n" in answers
    assert not [name for name in rehearsal.changed if name.endswith((".rej", ".orig"))]
    marked = run(["git", "grep", "-l", "-E", "^(<<<<<<<|>>>>>>>) "], rehearsal.project)
    assert marked.stdout == ""


@template_only
def test_every_file_of_the_teams_room_is_as_the_team_left_it_where_the_release_moved_it(rehearsal: Rehearsal) -> None:
    after = team_room_files(rehearsal.project)
    after.update({name: content for name, content in team_room_files_under(rehearsal.project, MOVED_ROOM[1]).items()})
    cdk_json = after.pop("cdk.json")
    source, destination = MOVED_ROOM
    before = {
        name.replace(source, destination, 1) if name.startswith(f"{source}/") else name: content
        for name, content in rehearsal.team_files.items()
    }
    before.pop("cdk.json")
    assert f"{destination}/page-engineer.json" in before
    assert after == before
    assert not (rehearsal.project / source).exists()
    context = json.loads(cdk_json)["context"]
    assert {key: value for key, value in context.items() if not key.startswith("@")} == {
        key: value for key, value in rehearsal.team_context.items() if not key.startswith("@")
    }
    assert not [name for name in rehearsal.changed if name.startswith(("functions/tools", "tests/tools"))]


@template_only
def test_every_platform_change_of_the_release_arrived(rehearsal: Rehearsal) -> None:
    project = rehearsal.project
    for path, line in (RUNTIME_CHANGE, INFRA_CHANGE):
        assert (project / path).read_text(encoding="utf-8").endswith(line)
    assert (project / "Makefile").read_text(encoding="utf-8").endswith(MAKEFILE_TARGET)
    assert PLATFORM_PIN[1] in (project / "pyproject.toml").read_text(encoding="utf-8")
    config = json.loads((project / "cdk.json").read_text(encoding="utf-8"))
    assert WATCH_EXCLUDE in config["watch"]["exclude"]
    assert {key: config[key] for key in ("app", "watch")} == {
        key: json.loads((project / "infra/cdk.platform.json").read_text(encoding="utf-8"))[key]
        for key in ("app", "watch")
    }
    assert {"Makefile", "pyproject.toml", RUNTIME_CHANGE[0], INFRA_CHANGE[0]} <= set(rehearsal.changed)


@template_only
def test_the_lock_is_written_again_with_the_platforms_pins_and_the_teams(rehearsal: Rehearsal) -> None:
    lock = (rehearsal.project / "requirements-dev.lock").read_text(encoding="utf-8").lower()
    assert "\npyjwt==2.10.1\n" in lock
    assert f"\n{TEAM_DEPENDENCY}\n" in lock
    installed = run([".venv/bin/python", "-c", "import jwt, humanize; print(jwt.__version__)"], rehearsal.project)
    assert installed.stdout.strip() == "2.10.1", installed.stderr[-2000:]


@template_only
def test_the_updated_copy_keeps_its_lint_its_own_tests_and_the_platforms_tests_its_room_reaches_green(
    rehearsal: Rehearsal,
) -> None:
    """The team's lint, its tests (written with the kit) and the platform's fast modules that build the catalog
    from the team's tools (test_adding_tools.reaching_the_projects_tools: the others serve fixtures only, so
    this suite's own run of them stands for the copy's), in one process beside this suite's workers."""
    lint = run(["make", "lint-team"], rehearsal.project)
    assert lint.returncode == 0, lint.stdout[-3000:] + lint.stderr[-3000:]
    python = str(rehearsal.project / ".venv" / "bin" / "python")
    paths = [*reaching_the_projects_tools(rehearsal.project), *LOCK_TESTS, "tests/test_tiers.py", "tests/tools"]
    tests = run(
        [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *paths, "-k", NO_STACK], rehearsal.project
    )
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-2000:]
    summary = tests.stdout.splitlines()[-1]
    assert re.search(r"\b\d+ passed\b", summary) and "failed" not in summary, tests.stdout[-500:]
    passed = set(re.findall(r"^PASSED (\S+)$", tests.stdout, flags=re.MULTILINE))
    assert {f"tests/tools/test_time_until.py::{name}" for name in TEAM_TESTS} <= passed, tests.stdout[-3000:]
    # The native module's 1.0.0 form is shown to the team (a warning naming what to write), never a failure.
    shown = f"time_until.py:{NATIVE_MODE_LINE}: DeprecationWarning: {DEPRECATED_MODE}"
    assert shown in tests.stdout, tests.stdout[-3000:]


def copier_config() -> str:
    return (REPO / "copier.yml").read_text(encoding="utf-8")


@template_only
def test_copier_leaves_out_of_every_update_exactly_the_teams_room_and_the_lock() -> None:
    excluded = re.findall(r"\{% if _copier_operation == 'update' %\}([^{]+)\{% endif %\}", copier_config())
    assert excluded == [*upgrade.TEAM_ROOM, "requirements-dev.lock"]


@template_only
def test_the_projects_cdk_json_carries_the_platforms_part_as_the_platform_has_it() -> None:
    project = json.loads((REPO / "cdk.json").read_text(encoding="utf-8"))
    platform = json.loads((REPO / upgrade.PLATFORM_CONFIG).read_text(encoding="utf-8"))
    assert upgrade.with_platform_part(project, platform) == project


def test_the_platforms_part_replaces_app_watch_and_flags_and_keeps_every_key_of_the_team() -> None:
    team = {
        "app": "old app",
        "watch": {"include": ["infra/**"]},
        "requireApproval": "never",
        "context": {"projectName": "acme-ops", "@aws-cdk/old:flag": True, "toolEnvironment": {"A": "1"}},
    }
    platform = {"app": "new app", "watch": {"include": ["functions/**"]}, "context": {"@aws-cdk/new:flag": True}}
    assert upgrade.with_platform_part(team, platform) == {
        "app": "new app",
        "watch": {"include": ["functions/**"]},
        "context": {"projectName": "acme-ops", "toolEnvironment": {"A": "1"}, "@aws-cdk/new:flag": True},
        "requireApproval": "never",
    }


def test_the_update_task_does_nothing_in_copiers_scratch_renders(tmp_path: Path) -> None:
    (tmp_path / "cdk.json").write_text('{"app": "old", "context": {}}\n')
    ran: list[list[str]] = []
    assert upgrade.upgrade(tmp_path, runner=lambda command, root: ran.append(list(command))) == []
    assert ran == []
    assert (tmp_path / "cdk.json").read_text() == '{"app": "old", "context": {}}\n'


def test_the_update_task_applies_the_platform_part_then_locks_and_installs(tmp_path: Path) -> None:
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "cdk.platform.json").write_text('{"app": "new", "context": {"@f": true}}\n')
    (tmp_path / "cdk.json").write_text('{"app": "old", "context": {"projectName": "acme-ops"}}\n')
    git("init", "-q", cwd=tmp_path)
    ran: list[list[str]] = []
    done = upgrade.upgrade(tmp_path, runner=lambda command, root: ran.append(list(command)))
    assert json.loads((tmp_path / "cdk.json").read_text()) == {
        "app": "new",
        "context": {"projectName": "acme-ops", "@f": True},
    }
    assert ran == [["make", "--no-print-directory", "lock"], ["make", "--no-print-directory", "install"]]
    assert done[0] == "cdk.json: the platform's part (infra/cdk.platform.json) applied, your keys kept"


def test_one_version_the_changelogs_newest_release_and_its_tag() -> None:
    version = "{}.{}.{}".format(*version_of(REPO))
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", changelog, re.MULTILINE)
    assert changelog.startswith("# Changelog\n")
    assert "\n## [Unreleased]\n" in changelog
    assert releases[0] == version
    assert releases == sorted(
        releases, key=lambda release: tuple(int(part) for part in release.split(".")), reverse=True
    )
    tags = subprocess.run(["git", "tag", "--list", "v*"], cwd=REPO, capture_output=True, text=True).stdout.split()
    if tags and IS_TEMPLATE:  # a clone made without tags has none to compare; a project's tags are its own
        assert f"v{version}" in tags


def test_a_migration_moves_the_teams_files_keeps_them_tracked_and_a_second_run_moves_nothing(tmp_path: Path) -> None:
    import migrate

    (tmp_path / "events" / "examples" / "nested").mkdir(parents=True)
    (tmp_path / "events" / "examples" / "page.json").write_text("{}\n")
    (tmp_path / "events" / "examples" / "nested" / "rota.json").write_text("[]\n")
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-q", "-m", "events", cwd=tmp_path)
    (tmp_path / "events" / "examples" / "draft.json").write_text("{}\n")  # not yet committed

    assert migrate.move(tmp_path, "events/examples", "tests/tools/events") == [
        "events/examples/draft.json -> tests/tools/events/draft.json",
        "events/examples/nested/rota.json -> tests/tools/events/nested/rota.json",
        "events/examples/page.json -> tests/tools/events/page.json",
    ]
    assert not (tmp_path / "events").exists()
    assert (tmp_path / "tests/tools/events/nested/rota.json").read_text() == "[]\n"
    assert git("ls-files", cwd=tmp_path).split() == [
        "tests/tools/events/nested/rota.json",
        "tests/tools/events/page.json",
    ]
    assert migrate.move(tmp_path, "events/examples", "tests/tools/events") == []


def test_a_migration_never_overwrites_a_file_and_names_the_clash(tmp_path: Path) -> None:
    import migrate

    for folder in ("events/examples", "tests/tools/events"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "page.json").write_text(folder)
    with pytest.raises(migrate.Refused) as refused:
        migrate.move(tmp_path, "events/examples", "tests/tools/events")
    assert str(refused.value) == (
        "events/examples -> tests/tools/events: tests/tools/events/page.json exist already; move them by hand"
    )
    assert (tmp_path / "events/examples/page.json").read_text() == "events/examples"


def test_the_code_and_docs_cite_only_files_a_project_has() -> None:
    """The design notes the template was built from are not in the repository: nothing may send a reader there."""
    cited = subprocess.run(
        ["git", "grep", "-n", "-E", r"(WIRE|DESIGN|LOCAL-AWS|FASTMCP|CONFORMANCE|SOURCES)\.md|\.\./shared/"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert cited.stdout == ""
