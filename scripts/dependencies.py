"""`make add-dependency PKG=...`, `make remove-dependency PKG=...`, `make lock`: the functions' runtime
dependencies in one command (docs/dependencies.md).

Where dependencies live: `[project] dependencies` in pyproject.toml is what the functions import at run
time and the Lambda asset ships (infra/packaging.py); the `dev` extra is what only the tests, the CDK app
and the linters need. requirements-dev.lock pins both and everything they pull in: `make install` installs
it into .venv, and the asset build takes its pins as constraints. The lock is written by the pinned uv
(`uv pip compile --universal`, the pins it already holds kept), so it is the same file on any machine.

`add PKG` (a name, with an optional version range: `httpx`, `httpx==0.28.1`, `httpx>=0.28,<1`):
1. writes PKG into pyproject's runtime dependencies (in place of an earlier requirement on that package);
2. re-locks;
3. installs the runtime dependencies for the functions' platform (arm64, CPython 3.13, wheels only) as
   the asset build does, into a scratch directory: a package without such a wheel is refused now, not
   at `cdk deploy`, and the wheels are kept in build/wheelhouse for the synth;
4. installs the lock into the venv.
Whatever fails puts pyproject.toml and the lock back as they were. `remove NAME` undoes `add`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from infra.packaging import (  # noqa: E402 (the repository's root is put on the path first)
    LAMBDA_TARGET,
    RUNTIME_PROVIDED,
    WHEELHOUSE_ROOT,
    install_dependencies,
    runtime_requirements,
)

# What the lock's header names as the command that writes it.
LOCK_COMMAND = "make lock"
# `dependencies = [` ... `]` of the [project] table, as pyproject.toml writes it: one requirement a line.
_DEPENDENCIES = re.compile(r"^dependencies = \[\n(?P<body>(?:[^\]\n]*\n)*?)\]", re.MULTILINE)
_ENTRY = re.compile(r'^\s*"(?P<requirement>[^"]+)",?\s*(#.*)?$')
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)")


class Refused(Exception):
    """What the person who ran the command reads; pyproject.toml and the lock are as they were."""


@dataclass(frozen=True, slots=True)
class Project:
    root: Path
    uv: Path
    wheelhouse_root: Path = WHEELHOUSE_ROOT

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def lock(self) -> Path:
        return self.root / "requirements-dev.lock"


def parse(spec: str) -> Requirement:
    """A package from the index by name, with an optional version range (no URL, no path)."""
    try:
        requirement = Requirement(spec.strip())
    except InvalidRequirement as error:
        raise Refused(
            f"{spec!r} is not a package requirement ({error}): give a name and an optional version range, "
            "e.g. PKG=httpx, PKG='httpx==0.28.1' or PKG='httpx>=0.28,<1'"
        ) from None
    if requirement.url:
        raise Refused(
            f"{spec!r} names a URL: the asset is built from the index's wheels for {LAMBDA_TARGET.slug}, "
            "so give a name and an optional version range"
        )
    name = canonicalize_name(requirement.name)
    if name in RUNTIME_PROVIDED:
        raise Refused(
            f"{name} comes with the Lambda runtime (python3.13): the asset does not ship it and the functions "
            "import the runtime's (its dev pin in pyproject.toml's dev extra is what the tests use)"
        )
    return requirement


def runtime_entries(pyproject_text: str) -> list[str]:
    return [str(item) for item in tomllib.loads(pyproject_text)["project"].get("dependencies", [])]


def _dependencies_block(text: str) -> re.Match[str]:
    project = text.find("[project]\n")
    block = _DEPENDENCIES.search(text, max(project, 0))
    next_table = text.find("\n[", project + 1)
    if project < 0 or block is None or -1 < next_table < block.start():
        raise Refused("pyproject.toml has no `dependencies = [` list in its [project] table to edit")
    return block


def _entry_name(line: str) -> str | None:
    entry = _ENTRY.match(line)
    return canonicalize_name(Requirement(entry["requirement"]).name) if entry else None


def with_requirement(text: str, requirement: Requirement) -> str:
    """pyproject.toml's text with `requirement` among the runtime dependencies, replacing one on the same
    package where there is one, added last otherwise; comments and the rest of the file untouched."""
    block = _dependencies_block(text)
    lines = block["body"].splitlines(keepends=True)
    name = canonicalize_name(requirement.name)
    line = f'    "{requirement}",\n'
    same = [index for index, existing in enumerate(lines) if _entry_name(existing) == name]
    if same:
        lines[same[0]] = line
    else:
        lines.append(line)
    return text[: block.start("body")] + "".join(lines) + text[block.end("body") :]


def without_requirement(text: str, name: str) -> str:
    block = _dependencies_block(text)
    lines = block["body"].splitlines(keepends=True)
    kept = [line for line in lines if _entry_name(line) != canonicalize_name(name)]
    if len(kept) == len(lines):
        listed = ", ".join(Requirement(entry).name for entry in runtime_entries(text)) or "none"
        raise Refused(
            f"{name} is not a runtime dependency (pyproject.toml [project] dependencies: {listed}); "
            "dev dependencies are edited in the dev extra, then `make lock`"
        )
    return text[: block.start("body")] + "".join(kept) + text[block.end("body") :]


def pins(lock_text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lock_text.splitlines():
        pin = _PIN.match(line)
        if pin:
            found[canonicalize_name(pin["name"])] = pin["version"]
    return found


def relock(project: Project, *, offline: bool = False) -> None:
    """requirements-dev.lock from pyproject.toml (runtime and dev), with the pinned uv: the same file on
    any machine (`--universal`: markers, not this machine's platform), the pins it holds kept."""
    command = [
        str(project.uv),
        "pip",
        "compile",
        "--universal",
        "pyproject.toml",
        "--extra",
        "dev",
        "--no-annotate",
        "--quiet",
        "--custom-compile-command",
        LOCK_COMMAND,
        "--output-file",
        project.lock.name,
        *(["--offline"] if offline else []),
    ]
    done = subprocess.run(command, cwd=project.root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Refused(f"uv could not lock pyproject.toml's dependencies together:\n{done.stderr.strip()}")


def shipped_for_lambda(project: Project) -> dict[str, str]:
    """Install the runtime dependencies for the functions' platform as the asset build does (wheels for
    arm64 / CPython 3.13 only, the lock's pins as constraints): distribution -> version."""
    with tempfile.TemporaryDirectory(prefix="lambda-deps-") as scratch:
        try:
            install_dependencies(
                Path(scratch),
                LAMBDA_TARGET,
                runtime_requirements(project.pyproject),
                project.wheelhouse_root / LAMBDA_TARGET.slug,
                lock=project.lock,
            )
        except RuntimeError as error:
            raise Refused(
                f"the functions' platform ({LAMBDA_TARGET.slug}: arm64, CPython 3.13) gets wheels only, and pip "
                f"found none that fits:\n{error}"
            ) from None
        shipped: dict[str, str] = {}
        for info in Path(scratch).glob("*.dist-info"):
            name, _, version = info.name.removesuffix(".dist-info").partition("-")
            shipped[canonicalize_name(name)] = version
    return shipped


def install_venv(project: Project, python: Path, dropped: Sequence[str]) -> None:
    uv = str(project.uv)
    install = [uv, "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python)]
    done = subprocess.run([*install, "--requirement", str(project.lock)], capture_output=True, text=True, check=False)
    if done.returncode == 0 and dropped:
        uninstall = [uv, "pip", "uninstall", "--quiet", "--python", str(python), *dropped]
        done = subprocess.run(uninstall, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Refused(f"installing the lock into {python.parents[1]} failed:\n{done.stderr.strip()}")


@dataclass(frozen=True, slots=True)
class _Saved:
    path: Path
    content: bytes
    times: tuple[float, float]

    @classmethod
    def of(cls, path: Path) -> _Saved:
        stat = path.stat()
        return cls(path, path.read_bytes(), (stat.st_atime, stat.st_mtime))

    def restore(self) -> None:
        self.path.write_bytes(self.content)
        os.utime(self.path, self.times)  # as it was: make sees nothing newer to install


def _describe(names: dict[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in sorted(names.items())) or "none"


def change(
    project: Project, edit: str, *, python: Path | None, check_lambda: bool = True, offline: bool = False
) -> list[str]:
    """pyproject.toml becomes `edit`; then the lock, the Lambda wheels and the venv follow, or nothing changes."""
    saved = [_Saved.of(project.pyproject), _Saved.of(project.lock)]
    before = pins(project.lock.read_text(encoding="utf-8"))
    report = []
    try:
        project.pyproject.write_text(edit, encoding="utf-8")
        relock(project, offline=offline)
        after = pins(project.lock.read_text(encoding="utf-8"))
        added = {name: version for name, version in after.items() if before.get(name) != version}
        dropped = sorted(set(before) - set(after))
        changes = [f"pinned {_describe(added)}"] if added else []
        if dropped:
            changes.append(f"dropped {', '.join(dropped)}")
        report.append(f"{project.lock.name}: {'; '.join(changes) or 'unchanged'}")
        if check_lambda:
            report.append(f"the functions' asset ({LAMBDA_TARGET.slug}) ships {_describe(shipped_for_lambda(project))}")
        if python is not None:
            install_venv(project, python, dropped)
            report.append(f"{python.parents[1].name}: installed")
    except BaseException:
        for file in saved:
            file.restore()
        raise
    return report


def add(
    project: Project, spec: str, *, python: Path | None, check_lambda: bool = True, offline: bool = False
) -> list[str]:
    requirement = parse(spec)
    text = project.pyproject.read_text(encoding="utf-8")
    report = [f"pyproject.toml: {requirement} is a runtime dependency (shipped in the functions' asset)"]
    edit = with_requirement(text, requirement)
    return report + change(project, edit, python=python, check_lambda=check_lambda, offline=offline)


def remove(project: Project, name: str, *, python: Path | None, offline: bool = False) -> list[str]:
    bare = parse(name)
    text = project.pyproject.read_text(encoding="utf-8")
    edit = without_requirement(text, bare.name)
    report = [f"pyproject.toml: {canonicalize_name(bare.name)} is no longer a runtime dependency"]
    # Nothing new to fetch for the functions' platform: the asset only loses a package.
    return report + change(project, edit, python=python, check_lambda=False, offline=offline)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("add", "remove", "lock"))
    parser.add_argument("package", nargs="?", default="")
    parser.add_argument("--uv", type=Path, required=True, help="the pinned uv (the Makefile's UV)")
    parser.add_argument("--python", type=Path, help="the venv's interpreter to install the lock into")
    parser.add_argument("--root", type=Path, default=REPO, help="the project (pyproject.toml, requirements-dev.lock)")
    args = parser.parse_args(argv)
    project = Project(args.root.resolve(), args.uv.resolve())
    usage = {"add": "PKG='httpx==0.28.1'", "remove": "PKG=httpx"}
    try:
        if args.command != "lock" and not args.package.strip():
            raise Refused(f"usage: make {args.command}-dependency {usage[args.command]}")
        if args.command == "add":
            report = add(project, args.package, python=args.python)
        elif args.command == "remove":
            report = remove(project, args.package, python=args.python)
        else:
            report = change(project, project.pyproject.read_text(encoding="utf-8"), python=args.python)
    except Refused as refused:
        label = {"add": "add-dependency", "remove": "remove-dependency", "lock": "lock"}[args.command]
        print(f"make {label}: {refused}\nnothing changed", file=sys.stderr)
        return 2
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
