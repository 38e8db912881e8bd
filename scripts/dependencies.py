"""`make add-dependency PKG=...`, `make remove-dependency PKG=...`, `make lock`: the functions' runtime
dependencies in one command (docs/dependencies.md).

Where dependencies live: the platform's own are `[project] dependencies` in pyproject.toml (what the runtime
imports) and its `dev` extra (tests, the CDK app, the linters); the team's are functions/tools/requirements.txt,
one requirement a line, beside its tools (its room: a platform update never touches it). Both runtime lists
ship in the Lambda asset (infra/packaging.py). requirements-dev.lock pins everything together: `make install`
installs it into .venv, and the asset build takes its pins as constraints. The lock is written by the pinned
uv (`uv pip compile --universal`, the pins it already holds kept), so it is the same file on any machine, and
it is derived: after a platform update, `make lock` writes it again from both lists.

`add PKG` (a name, with an optional version range: `httpx`, `httpx==0.28.1`, `httpx>=0.28,<1`):
1. writes PKG into functions/tools/requirements.txt (in place of an earlier requirement on that package);
2. re-locks;
3. installs the runtime dependencies for the functions' platform (arm64, CPython 3.13, wheels only) as
   the asset build does, into a scratch directory: a package without such a wheel is refused now, not
   at `cdk deploy`, and the wheels are kept in build/wheelhouse for the synth;
4. installs the lock into the venv.
Whatever fails puts the requirements file and the lock back as they were. `remove NAME` undoes `add`.
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
# A requirement line of the team's file: the requirement, then an optional comment.
_ENTRY = re.compile(r"^\s*(?P<requirement>[^#\s][^#]*?)\s*(#.*)?$")
TOOLS_REQUIREMENTS_HEADER = (
    "# Your tools' runtime dependencies, one requirement a line: `make add-dependency PKG=...` writes here and\n"
    "# re-locks (docs/dependencies.md). They ship in the functions' asset beside the platform's own.\n"
)
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)")


class Refused(Exception):
    """What the person who ran the command reads; the requirements file and the lock are as they were."""


@dataclass(frozen=True, slots=True)
class Project:
    root: Path
    uv: Path
    wheelhouse_root: Path = WHEELHOUSE_ROOT

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def tools_requirements(self) -> Path:
        return self.root / "functions" / "tools" / "requirements.txt"

    @property
    def lock(self) -> Path:
        return self.root / "requirements-dev.lock"

    def platform_requirement(self, name: str) -> str | None:
        """The platform's runtime requirement on `name` (pyproject.toml), if it has one."""
        for entry in runtime_entries(self.pyproject.read_text(encoding="utf-8")):
            if canonicalize_name(Requirement(entry).name) == canonicalize_name(name):
                return entry
        return None

    def oldest_python(self) -> str:
        """The oldest Python the project supports (`requires-python = ">=X.Y"`): the lock's floor."""
        spec = tomllib.loads(self.pyproject.read_text(encoding="utf-8"))["project"]["requires-python"]
        floor = re.fullmatch(r"\s*>=\s*(\d+\.\d+)(\.\d+)?\s*", spec)
        if floor is None:
            raise Refused(f'requires-python must read ">=X.Y" (the lock\'s oldest Python), not {spec!r}')
        return floor[1]

    def tools_text(self) -> str:
        return self.tools_requirements.read_text(encoding="utf-8") if self.tools_requirements.exists() else ""


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


def _entry_name(line: str) -> str | None:
    entry = _ENTRY.match(line)
    if entry is None:
        return None
    try:
        return canonicalize_name(Requirement(entry["requirement"]).name)
    except InvalidRequirement:
        return None


def tools_entries(text: str) -> list[str]:
    """The requirements of the team's file, in order."""
    return [entry["requirement"] for line in text.splitlines() if (entry := _ENTRY.match(line))]


def with_requirement(text: str, requirement: Requirement) -> str:
    """The team's file with `requirement` in it, replacing one on the same package where there is one, added
    last otherwise; comments and the other lines untouched (a new file starts with a header)."""
    lines = (text or TOOLS_REQUIREMENTS_HEADER).splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    name = canonicalize_name(requirement.name)
    line = f"{requirement}\n"
    same = [index for index, existing in enumerate(lines) if _entry_name(existing) == name]
    if same:
        lines[same[0]] = line
    else:
        lines.append(line)
    return "".join(lines)


def without_requirement(text: str, name: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if _entry_name(line) != canonicalize_name(name)]
    if len(kept) == len(lines):
        listed = ", ".join(Requirement(entry).name for entry in tools_entries(text)) or "none"
        raise Refused(
            f"{name} is not one of your runtime dependencies (functions/tools/requirements.txt: {listed}); "
            "dev dependencies are edited in pyproject.toml's dev extra, then `make lock`"
        )
    return "".join(kept)


def pins(lock_text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in lock_text.splitlines():
        pin = _PIN.match(line)
        if pin:
            found[canonicalize_name(pin["name"])] = pin["version"]
    return found


def relock(project: Project, *, offline: bool = False) -> None:
    """requirements-dev.lock from pyproject.toml (runtime and dev), with the pinned uv: the same file on
    any machine and interpreter (`--universal` from the oldest supported Python: markers, not this
    machine's platform or Python), the pins it holds kept."""
    sources = ["pyproject.toml"]
    if tools_entries(project.tools_text()):
        sources.append(project.tools_requirements.relative_to(project.root).as_posix())
    command = [
        str(project.uv),
        "pip",
        "compile",
        "--universal",
        # For every Python the project supports, whichever interpreter uv would find here (the project's
        # .venv runs 3.13 where the machine has it: markers for 3.11 would be dropped).
        "--python-version",
        project.oldest_python(),
        *sources,
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
        raise Refused(f"uv could not lock the platform's and your dependencies together:\n{done.stderr.strip()}")


def shipped_for_lambda(project: Project) -> dict[str, str]:
    """Install the runtime dependencies for the functions' platform as the asset build does (wheels for
    arm64 / CPython 3.13 only, the lock's pins as constraints): distribution -> version."""
    with tempfile.TemporaryDirectory(prefix="lambda-deps-") as scratch:
        try:
            install_dependencies(
                Path(scratch),
                LAMBDA_TARGET,
                runtime_requirements(project.pyproject, project.tools_requirements),
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
    # Bytecode as `make install` compiles it (the Makefile's UV_COMPILE_BYTECODE, which uv reads).
    install = [uv, "pip", "install", "--quiet", "--python", str(python)]
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
    """The team's requirements file becomes `edit`; then the lock, the Lambda wheels and the venv follow, or
    nothing changes."""
    existed = project.tools_requirements.exists()
    saved = [_Saved.of(project.lock), *([_Saved.of(project.tools_requirements)] if existed else [])]
    before = pins(project.lock.read_text(encoding="utf-8"))
    report = []
    try:
        if edit != project.tools_text():
            project.tools_requirements.parent.mkdir(parents=True, exist_ok=True)
            project.tools_requirements.write_text(edit, encoding="utf-8")
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
        if not existed:
            project.tools_requirements.unlink(missing_ok=True)
        raise
    return report


def add(
    project: Project, spec: str, *, python: Path | None, check_lambda: bool = True, offline: bool = False
) -> list[str]:
    requirement = parse(spec)
    platform = project.platform_requirement(requirement.name)
    if platform is not None:
        raise Refused(
            f"{canonicalize_name(requirement.name)} is a dependency of the platform ({platform} in pyproject.toml): "
            "the functions already import it at that pin, and a platform update moves the pin"
        )
    report = [
        f"functions/tools/requirements.txt: {requirement} is a runtime dependency (shipped in the functions' asset)"
    ]
    edit = with_requirement(project.tools_text(), requirement)
    return report + change(project, edit, python=python, check_lambda=check_lambda, offline=offline)


def remove(project: Project, name: str, *, python: Path | None, offline: bool = False) -> list[str]:
    bare = parse(name)
    edit = without_requirement(project.tools_text(), bare.name)
    report = [f"functions/tools/requirements.txt: {canonicalize_name(bare.name)} is no longer a runtime dependency"]
    # Nothing new to fetch for the functions' platform: the asset only loses a package.
    return report + change(project, edit, python=python, check_lambda=False, offline=offline)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("add", "remove", "lock"))
    parser.add_argument("package", nargs="?", default="")
    parser.add_argument("--uv", type=Path, required=True, help="the pinned uv (the Makefile's UV)")
    parser.add_argument("--python", type=Path, help="the venv's interpreter to install the lock into")
    parser.add_argument(
        "--root",
        type=Path,
        default=REPO,
        help="the project (pyproject.toml, functions/tools/requirements.txt, the lock)",
    )
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
            report = change(project, project.tools_text(), python=args.python)
    except Refused as refused:
        label = {"add": "add-dependency", "remove": "remove-dependency", "lock": "lock"}[args.command]
        print(f"make {label}: {refused}\nnothing changed", file=sys.stderr)
        return 2
    print("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
