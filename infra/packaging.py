"""Build a Lambda asset without Docker: pip for the target platform, then our own packages.

No CDK here: `infra/bundling.py` hands `build_package` to CDK as its local bundling, and the local
stack builds the same layout for the host interpreter (`local_stack`), without jsii.

Offline use: wheels are downloaded once into a wheelhouse under `build/` (git-ignored) and every
install reads only from there, so a second build needs no network.

Bytecode: `/var/task` is read-only, so an asset without `__pycache__` compiles every module it
imports on every cold start. The asset ships bytecode written by an interpreter of the target's
version (`find_compiler`: this one, a native CPython of that version, or Pyodide's CPython from npm
running on Node.js), hash-based and unchecked so that it is valid whatever the files' mtimes and
the same bytes for the same sources and compiler.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS_DIR = REPO_ROOT / "functions"
PYPROJECT = REPO_ROOT / "pyproject.toml"
# The team's runtime dependencies (its room, beside its tools): `make add-dependency` writes them here.
TOOLS_REQUIREMENTS = FUNCTIONS_DIR / "tools" / "requirements.txt"
LOCK_FILE = REPO_ROOT / "requirements-dev.lock"
WHEELHOUSE_ROOT = REPO_ROOT / "build" / "wheelhouse"

# What the functions import at run time. Not shipped: fixtures (conformance only) and local_stack.
SHIPPED_PACKAGES: tuple[str, ...] = ("mcp_runtime", "app", "tools", "oauth_bridge")
# In the Lambda runtime already; shipping them would only grow the asset.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six"})
# Powertools ships every utility (its event handler alone is 2 MB of Swagger UI); a function uses a
# few. Each of these subpackages stays in the asset only if some shipped module reaches it through
# its imports (computed below), so a tool that starts using one gets it without a config change.
PRUNABLE_PARENTS: tuple[str, ...] = ("aws_lambda_powertools", "aws_lambda_powertools.utilities")
PRUNABLE_UNITS: tuple[str, ...] = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.*")
# Static files no function serves: the Swagger UI bundle (1.7 MB) behind Powertools'
# `enable_swagger(offline=True)`. The Python modules beside them stay.
PRUNED_DATA_GLOBS: tuple[str, ...] = (
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/*.js",
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/*.css",
)
# Bump when the layout of a built asset changes, so cached assets are rebuilt.
BUILD_FORMAT = "3"
_IGNORED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache", TOOLS_REQUIREMENTS.name
)
# Every file of an asset gets this mtime (1980-01-01, the earliest a zip can hold): the same bytes
# and metadata for the same inputs, whenever and wherever built.
STABLE_MTIME = 315532800
# Where Lambda puts the asset: the path compiled into the bytecode (tracebacks), whatever the build dir.
LAMBDA_TASK_ROOT = "/var/task"
PYODIDE_COMPILEALL = REPO_ROOT / "infra" / "pyodide_compileall.mjs"


@dataclass(frozen=True, slots=True)
class Target:
    """Where the asset runs: a manylinux platform tag and a CPython version."""

    platform: str
    python_version: str

    @property
    def slug(self) -> str:
        return f"cp{self.python_version.replace('.', '')}-{self.platform}"


LAMBDA_TARGET = Target("manylinux2014_aarch64", "3.13")


def host_target() -> Target:
    """The interpreter running this code (x86_64 or aarch64 Linux), for import tests."""
    import platform

    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return Target(f"manylinux2014_{arch}", f"{sys.version_info.major}.{sys.version_info.minor}")


def tools_requirements(path: Path = TOOLS_REQUIREMENTS) -> list[str]:
    """The team's runtime dependencies, one requirement a line (comments and blank lines skipped)."""
    if not path.exists():
        return []
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def runtime_requirements(pyproject: Path = PYPROJECT, tools: Path | None = None) -> list[str]:
    """What the functions import at run time: the platform's (pyproject.toml's [project] dependencies) and
    the team's (`tools`, default functions/tools/requirements.txt beside `pyproject`), minus what the Lambda
    runtime provides."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    team = tools_requirements(
        tools if tools is not None else pyproject.parent / "functions" / "tools" / "requirements.txt"
    )
    return [req for req in [*project["dependencies"], *team] if _requirement_name(req) not in RUNTIME_PROVIDED]


def _requirement_name(requirement: str) -> str:
    name = requirement
    for separator in ("[", "=", "<", ">", "!", "~", ";", " "):
        name = name.split(separator, 1)[0]
    return name.strip().lower().replace("_", "-")


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def _platform_args(target: Target) -> list[str]:
    return [
        "--platform",
        target.platform,
        "--implementation",
        "cp",
        "--python-version",
        target.python_version,
        "--only-binary=:all:",
    ]


def _constraints(lock: Path) -> list[str]:
    # The dev lock pins the transitive dependencies (pydantic_core, typing_extensions, ...).
    return ["--constraint", str(lock)] if lock.exists() else []


def install_dependencies(
    target_dir: Path, target: Target, requirements: Sequence[str], wheelhouse: Path, *, lock: Path = LOCK_FILE
) -> None:
    """pip install for `target` into `target_dir`, from the wheelhouse; fill the wheelhouse on a miss.

    One process at a time per wheelhouse (a lock file beside it): two `pip download`s into one folder delete
    each other's half-written wheels, and an install may read one."""
    wheelhouse.mkdir(parents=True, exist_ok=True)
    with open(wheelhouse.parent / f"{wheelhouse.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        _install_from_wheelhouse(target_dir, target, requirements, wheelhouse, lock)


def _install_from_wheelhouse(
    target_dir: Path, target: Target, requirements: Sequence[str], wheelhouse: Path, lock: Path
) -> None:
    install = [
        "install",
        "--quiet",
        "--no-compile",  # host .pyc files are for the wrong interpreter: dead weight
        "--no-index",
        "--find-links",
        str(wheelhouse),
        "--target",
        str(target_dir),
        *_platform_args(target),
        *_constraints(lock),
        *requirements,
    ]
    if _pip(*install).returncode == 0:
        return
    download = _pip(
        "download", "--quiet", "--dest", str(wheelhouse), *_platform_args(target), *_constraints(lock), *requirements
    )
    if download.returncode != 0:
        raise RuntimeError(
            f"pip could not fetch wheels for {target.slug} into {wheelhouse} (offline with an empty wheelhouse?)\n"
            + download.stderr[-4000:]
        )
    shutil.rmtree(target_dir, ignore_errors=True)
    target_dir.mkdir(parents=True, exist_ok=True)
    result = _pip(*install)
    if result.returncode != 0:
        raise RuntimeError(f"pip install for {target.slug} failed\n{result.stderr[-4000:]}")


def copy_sources(
    output_dir: Path, packages: Iterable[str] = SHIPPED_PACKAGES, source_root: Path = FUNCTIONS_DIR
) -> None:
    for package in packages:
        shutil.copytree(source_root / package, output_dir / package, ignore=_IGNORED, dirs_exist_ok=True)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_names(path: Path, root: Path) -> set[str]:
    """Every module a file may import: import statements anywhere in it (lazy ones included), with
    relative imports resolved, `from m import x` counted as both `m` and `m.x`, plus string
    constants that look like dotted module names (for importlib-style imports)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError:
        return set()
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)] if node.level > 1 else base_parts
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PRUNABLE_PARENTS):
            names.add(node.value)
    return names


def prune_unreached(output_dir: Path) -> list[str]:
    """Remove prunable subpackages that no kept module imports; returns the removed module names."""
    units: dict[str, Path] = {}
    for pattern in PRUNABLE_UNITS:
        parent, _, leaf = pattern.rpartition(".")
        parent_dir = output_dir.joinpath(*parent.split("."))
        candidates = sorted(parent_dir.iterdir()) if leaf == "*" and parent_dir.is_dir() else [parent_dir / leaf]
        for candidate in candidates:
            if candidate.is_dir() and (candidate / "__init__.py").exists():
                units[f"{parent}.{candidate.name}"] = candidate

    def unit_of(path: Path) -> str | None:
        return next((name for name, unit_dir in units.items() if unit_dir in path.parents), None)

    files_by_unit: dict[str | None, list[Path]] = {}
    for path in output_dir.rglob("*.py"):
        files_by_unit.setdefault(unit_of(path), []).append(path)
    reached: set[str] = set()
    frontier = list(files_by_unit.get(None, []))
    while frontier:
        imported: set[str] = set()
        for path in frontier:
            imported |= imported_names(path, output_dir)
        frontier = []
        for name in units:
            if name not in reached and any(item == name or item.startswith(name + ".") for item in imported):
                reached.add(name)
                frontier.extend(files_by_unit.get(name, []))
    removed = sorted(set(units) - reached)
    for name in removed:
        shutil.rmtree(units[name])
    return removed


# The libraries a ported tool module imports, which the runtime stands in for (docs/fastmcp.md): the
# advice is the import line, never adding the library (it would not serve the module on Lambda).
_PORT_ADVICE = (
    "the runtime stands in for it: import the same names from mcp_runtime.fastmcp instead "
    "(`from mcp_runtime.fastmcp import Context, FastMCP, ToolError, TasksExtension, ...`); "
    "docs/fastmcp.md says what maps"
)
PORTED_LIBRARIES: dict[str, str] = {
    "fastmcp": f"fastmcp is not shipped: {_PORT_ADVICE}",
    "fastmcp_tasks": f"fastmcp_tasks is not needed here (tasks are the runtime's own, task=True): {_PORT_ADVICE}",
    "mcp": f"the mcp SDK is not shipped: {_PORT_ADVICE}",
}
_NO_MODULE = re.compile(r"^ModuleNotFoundError: No module named '(?P<module>[^']+)'", re.MULTILINE)


def missing_dependency_hint(stderr: str) -> str | None:
    """For an import that failed against the asset's packages (a traceback's text): which package the
    asset lacks, and the command that adds it. None when the missing module is not a package's (one of
    the project's own, misspelt) or the failure is something else."""
    found = _NO_MODULE.findall(stderr)
    if not found:
        return None
    module = found[-1].split(".")[0]
    if module in SHIPPED_PACKAGES or module == "fixtures":
        return None
    if module in PORTED_LIBRARIES:
        return PORTED_LIBRARIES[module]
    from importlib.metadata import packages_distributions

    distributions = packages_distributions().get(module)
    package = distributions[0] if distributions else module
    where = (
        f"{package} is installed in the dev environment only (a dev dependency, or one of theirs)"
        if distributions
        else f"{module} is installed nowhere (if its package on PyPI has another name, add that one)"
    )
    return (
        f"{where}: the functions' asset does not ship it, so this import would fail in Lambda too. "
        f"If a tool needs it at run time, add it as a runtime dependency: `make add-dependency PKG={package}` "
        "(docs/dependencies.md)"
    )


# Standard-library modules CPython removed (PEP 594 and before), by the version that removed them, and
# what to use instead where there is an obvious choice. The import check's list when no interpreter of
# the runtime's version is at hand (with one, its `sys.stdlib_module_names` decides); the hints always.
REMOVED_FROM_STDLIB: dict[str, tuple[str, str | None]] = {
    "asynchat": ("3.12", "asyncio"),
    "asyncore": ("3.12", "asyncio"),
    "distutils": ("3.12", "setuptools, or sysconfig and shutil"),
    "imp": ("3.12", "importlib"),
    "smtpd": ("3.12", "the aiosmtpd package"),
    "aifc": ("3.13", None),
    "audioop": ("3.13", "the audioop-lts package"),
    "cgi": ("3.13", "urllib.parse.parse_qs for a query string, email.message for a multipart body"),
    "cgitb": ("3.13", "traceback"),
    "chunk": ("3.13", None),
    "crypt": ("3.13", "hashlib, or the bcrypt or argon2-cffi package for passwords"),
    "imghdr": ("3.13", "the filetype or puremagic package"),
    "lib2to3": ("3.13", "ast, or the libcst package"),
    "mailcap": ("3.13", "mimetypes"),
    "msilib": ("3.13", None),
    "nis": ("3.13", None),
    "nntplib": ("3.13", None),
    "ossaudiodev": ("3.13", None),
    "pipes": ("3.13", "shlex.quote and subprocess"),
    "sndhdr": ("3.13", "the filetype or puremagic package"),
    "spwd": ("3.13", None),
    "sunau": ("3.13", None),
    "telnetlib": ("3.13", "the telnetlib3 package"),
    "uu": ("3.13", "base64"),
    "xdrlib": ("3.13", None),
}
# The "dead batteries" republished on PyPI as standard-<name> (the module under its old name).
REPUBLISHED_ON_PYPI = frozenset(
    {"aifc", "asynchat", "asyncore", "cgi", "cgitb", "chunk", "crypt", "distutils", "imghdr", "mailcap", "nntplib"}
    | {"pipes", "smtpd", "sndhdr", "sunau", "telnetlib", "uu", "xdrlib"}
)
_STDLIB_PROBE = "import json, sys; print(json.dumps(sorted(sys.stdlib_module_names)))"


@functools.cache
def runtime_stdlib(version: str = LAMBDA_TARGET.python_version) -> tuple[frozenset[str], str]:
    """The top-level standard-library modules of CPython `version`, and where that came from: its
    `sys.stdlib_module_names` (this interpreter's, or one `find_interpreter` finds), else this
    interpreter's less what REMOVED_FROM_STDLIB says `version` no longer has."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return frozenset(sys.stdlib_module_names), f"CPython {sys.version.split()[0]}"
    interpreter = find_interpreter(version)
    if interpreter is not None:
        done = subprocess.run(
            [interpreter.executable, "-I", "-c", _STDLIB_PROBE], capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            return frozenset(json.loads(done.stdout)), f"CPython {interpreter.full_version}"
    removed = {name for name, (since, _) in REMOVED_FROM_STDLIB.items() if _version_key(since) <= _version_key(version)}
    return frozenset(sys.stdlib_module_names) - removed, "REMOVED_FROM_STDLIB (infra/packaging.py)"


@dataclass(frozen=True, slots=True)
class MissingStdlibImport:
    """An import of a standard-library module the runtime's Python does not have."""

    module: str
    path: Path
    line: int

    def describe(self, source_root: Path, version: str) -> str:
        removed, instead = REMOVED_FROM_STDLIB.get(self.module, (None, None))
        why = f"removed from the standard library in {removed}" if removed else "not in its standard library"
        choices = [instead] if instead else []
        if self.module in REPUBLISHED_ON_PYPI:
            choices.append(f"its copy on PyPI (`make add-dependency PKG=standard-{self.module}`)")
        place = self.path.relative_to(source_root.parent).as_posix()
        return (
            f"{place}, line {self.line}: imports {self.module}, which the Lambda runtime's Python ({version}) "
            f"does not have ({why})" + (f"; use {', or '.join(choices)}" if choices else "")
        )


class RuntimeStdlibMissing(ValueError):
    """The functions import standard-library modules the Lambda runtime's Python does not have."""


def _guarded_by_import_error(handlers: Sequence[ast.ExceptHandler]) -> bool:
    names = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for handler in handlers:
        caught = handler.type
        listed = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if caught is None or any(isinstance(item, ast.Name) and item.id in names for item in listed):
            return True
    return False


def _unguarded_imports(tree: ast.AST) -> Iterable[tuple[str, int]]:
    """(top-level module, line) of every absolute import, except under a `try` that catches ImportError
    (an optional import with a fallback)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _guarded_by_import_error(node.handlers):
            guarded.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name.split(".")[0], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno


def missing_stdlib_imports(
    source_root: Path,
    packages: Iterable[str],
    provided: Iterable[str] = (),
    version: str = LAMBDA_TARGET.python_version,
) -> list[MissingStdlibImport]:
    """Every import, in the packages under `source_root`, of a standard-library module (this interpreter's,
    or one CPython removed) that CPython `version` does not have and nothing in `provided` (the top-level
    modules the asset's dependencies bring, e.g. standard-cgi's `cgi`) stands in for."""
    has, _ = runtime_stdlib(version)
    missing = (set(sys.stdlib_module_names) | set(REMOVED_FROM_STDLIB)) - has - set(provided)
    # Only a file that names one of them is parsed (the synth runs this every time).
    mentions = re.compile(rb"\b(?:%s)\b" % b"|".join(re.escape(name.encode()) for name in sorted(missing)))
    found: list[MissingStdlibImport] = []
    for package in packages:
        for path in sorted((source_root / package).rglob("*.py")):
            source = path.read_bytes()
            if not mentions.search(source):
                continue
            try:
                tree = ast.parse(source, filename=str(path))
            except SyntaxError:
                continue  # the import check's interpreter names it
            found += [
                MissingStdlibImport(name, path, line) for name, line in _unguarded_imports(tree) if name in missing
            ]
    return sorted(found, key=lambda item: (item.path, item.line))


def runtime_dependency_modules(pyproject: Path = PYPROJECT) -> frozenset[str]:
    """The top-level modules the asset's runtime dependencies bring (as installed in this environment,
    where the lock put them)."""
    from importlib.metadata import packages_distributions

    wanted = {_requirement_name(requirement) for requirement in runtime_requirements(pyproject)}
    return frozenset(
        module
        for module, distributions in packages_distributions().items()
        if any(_requirement_name(distribution) in wanted for distribution in distributions)
    )


def check_runtime_stdlib(
    source_root: Path = FUNCTIONS_DIR,
    packages: Iterable[str] = SHIPPED_PACKAGES,
    provided: Iterable[str] | None = None,
    version: str = LAMBDA_TARGET.python_version,
) -> None:
    """RuntimeStdlibMissing, one line per import (file and line, what to use instead), when the functions
    import a standard-library module the Lambda runtime's Python does not have: it passes on a venv of an
    older Python and fails in Lambda. `provided`: the asset's top-level modules (default: the runtime
    dependencies', `runtime_dependency_modules`)."""
    found = missing_stdlib_imports(source_root, packages, provided or (), version)
    if found and provided is None:
        stand_ins = runtime_dependency_modules()
        found = [item for item in found if item.module not in stand_ins]
    if found:
        raise RuntimeStdlibMissing("\n".join(item.describe(source_root, version) for item in found))


# Imports the tools and describes every tool, prompt and resource (`mcp_runtime.catalog.main`).
_CATALOG_CHECK = "import sys; sys.path[:0] = {path!r}; from mcp_runtime.catalog import main; sys.exit(main())"
UNDESCRIBABLE_STATUS = 3  # mcp_runtime.catalog.UNDESCRIBABLE_STATUS (infra never imports the runtime)
# A traceback's frame: `  File "<path>", line <n>, in <name>` (a SyntaxError's has no `in`).
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def tools_refusal(path: list[str], source: Path = FUNCTIONS_DIR) -> str | None:
    """Import the tools from `source` (the first entry of `path`, the import path the functions will
    have) and describe every tool, prompt and resource: None when all of them can be, otherwise why not,
    naming the file, line and tool, as `make run`, a reload and the asset build refuse it."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _CATALOG_CHECK.format(path=path)],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return None
    if done.returncode == UNDESCRIBABLE_STATUS:
        lines = []
        for row in done.stdout.strip().splitlines():
            file, line, kind, name, module, reason = row.split("\t", 5)
            where = Path(file).resolve()
            shown = where.relative_to(source.parent) if where.is_relative_to(source.parent) else where
            lines.append(f"  {shown}, line {line}: {kind} {name!r} (module {module}): {reason}")
        return "a tool cannot be described (fix it, or remove it):\n" + "\n".join(lines)
    frames = [m for m in FRAME.finditer(done.stderr) if Path(m["path"]).resolve().is_relative_to(source / "tools")]
    where_found = frames[-1] if frames else None
    place = (
        f"{Path(where_found['path']).resolve().relative_to(source.parent)}, line {where_found['line']}"
        if where_found
        else "tools"
    )
    error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
    hint = missing_dependency_hint(done.stderr)
    return f"a tool does not import: {place}: {error}\n" + (f"{hint}\n" if hint else "") + f"\n{done.stderr.rstrip()}"


class ToolsRefused(Exception):
    """The asset is not built: a tool does not import, or cannot be described."""


@dataclass(frozen=True, slots=True)
class BytecodeCompiler:
    """An interpreter that writes bytecode for one CPython version, and how to run its compileall."""

    python_version: str
    description: str  # which interpreter, exactly: it is part of the asset's fingerprint
    command: tuple[str, ...]  # runs `compile_tree`'s arguments: DIRECTORY DESTDIR

    def compile_tree(self, directory: Path) -> None:
        done = subprocess.run([*self.command, str(directory), LAMBDA_TASK_ROOT], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"compiling {directory} with {self.description} failed\n{done.stderr[-4000:]}")


# Run by a native interpreter: compile every .py under DIRECTORY, in sorted order, as DESTDIR/... paths.
_COMPILEALL = (
    "import compileall, py_compile, sys; "
    "ok = compileall.compile_dir(sys.argv[1], ddir=sys.argv[2], quiet=2, workers=1, "
    "invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH); sys.exit(0 if ok else 1)"
)
# What a native interpreter is: "3.13 3.13.0 cpython <free-threaded> <its real path>".
_INTERPRETER_PROBE = (
    "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sys.version.split()[0], sys.implementation.name, "
    "bool(sysconfig.get_config_var('Py_GIL_DISABLED')), sys.executable)"
)


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A native CPython of the runtime's build (the GIL one, as Lambda's): what it is and where."""

    python_version: str  # 3.13
    full_version: str  # 3.13.0
    executable: str  # its real path (never a pyenv shim)


def _probe_interpreter(executable: str, version: str) -> Interpreter | None:
    try:
        probe = subprocess.run(
            [executable, "-I", "-c", _INTERPRETER_PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = probe.stdout.strip().split(" ", 4)
    if probe.returncode != 0 or len(fields) != 5 or fields[0] != version or fields[2:4] != ["cpython", "False"]:
        return None
    return Interpreter(fields[0], fields[1], fields[4])


def _native_compiler(executable: str, version: str) -> BytecodeCompiler | None:
    interpreter = _probe_interpreter(executable, version)
    if interpreter is None:
        return None
    command = (interpreter.executable, "-I", "-c", _COMPILEALL)
    return BytecodeCompiler(version, f"CPython {interpreter.full_version}", command)


def _pyodide_compiler(version: str) -> BytecodeCompiler | None:
    """Pyodide (npm `pyodide`, a CPython build for WebAssembly) on Node.js: CPython's own compiler,
    for its Python version, from a registry package, on any machine that runs the CDK CLI."""
    node = shutil.which("node")
    roots = [REPO_ROOT / "node_modules", *(Path(p) for p in os.environ.get("NODE_PATH", "").split(os.pathsep) if p)]
    package = next((root / "pyodide" for root in roots if (root / "pyodide" / "package.json").is_file()), None)
    if node is None or package is None:
        return None
    command = (node, str(PYODIDE_COMPILEALL), str(package))
    try:
        probe = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = probe.stdout.split()
    if probe.returncode != 0 or len(fields) != 2 or fields[0] != version:
        return None
    pyodide = json.loads((package / "package.json").read_text(encoding="utf-8"))["version"]
    return BytecodeCompiler(version, f"CPython {fields[1]} (Pyodide {pyodide} on Node.js)", command)


def _uv_installed(version: str) -> list[str]:
    """uv's managed interpreters already installed: its directory (UV_PYTHON_INSTALL_DIR, else under
    XDG_DATA_HOME), newest first."""
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    root = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(data / "uv" / "python")
    pattern = os.path.join(root, f"cpython-{version}.*", "bin", f"python{version}")
    return sorted(glob.glob(pattern), key=lambda path: _version_key(Path(path).parents[1].name), reverse=True)


def _version_key(name: str) -> tuple[int, ...]:
    """pyenv's `3.13.10` after `3.13.9`; uv's `cpython-3.13.1-linux-aarch64-gnu` too."""
    return tuple(int(part) for part in re.findall(r"\d+", name)[:3])


def _uv_find(uv: str, version: str) -> str | None:
    """What `uv python find` finds, never downloading one."""
    try:
        done = subprocess.run(
            [uv, "python", "find", "--no-python-downloads", "--no-project", version],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and found else None


def _native_candidates(version: str) -> list[str]:
    found = [os.environ.get("MCP_BYTECODE_PYTHON", "")]
    found.append(shutil.which(f"python{version}") or "")
    import pwd

    homes = [Path.home(), Path(pwd.getpwuid(os.getuid()).pw_dir)]  # HOME may be a scratch one (tests)
    pyenv_roots = [os.environ.get("PYENV_ROOT", ""), *(str(home / ".pyenv") for home in homes)]
    for root in dict.fromkeys(filter(None, pyenv_roots)):
        pattern = os.path.join(root, "versions", f"{version}*", "bin", f"python{version}")
        found += sorted(glob.glob(pattern), key=lambda path: _version_key(Path(path).parents[1].name), reverse=True)
    found += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    found += _uv_installed(version)
    return [path for path in dict.fromkeys(found) if path and os.access(path, os.X_OK)]


@functools.cache
def find_interpreter(version: str, uv: str | None = None) -> Interpreter | None:
    """A native CPython `version` on this machine, or None. In order: this interpreter,
    MCP_BYTECODE_PYTHON, `python<version>` on PATH, pyenv's (newest first), the system's, uv's managed
    ones; then whatever `uv python find` (`uv`, else a uv on PATH) finds. Never a download."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        running = _probe_interpreter(sys.executable, version)
        if running is not None:
            return running
    for executable in _native_candidates(version):
        interpreter = _probe_interpreter(executable, version)
        if interpreter is not None:
            return interpreter
    uv = uv or shutil.which("uv")
    found = _uv_find(uv, version) if uv else None
    return _probe_interpreter(found, version) if found else None


@functools.cache
def find_compiler(version: str) -> BytecodeCompiler | None:
    """An interpreter of CPython `version` that can compile the asset, or None (the asset then ships
    without bytecode: `infra/bundling.py` warns): `find_interpreter`'s, then Pyodide from node_modules."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version and sys.implementation.name == "cpython":
        return BytecodeCompiler(version, f"CPython {sys.version.split()[0]}", (sys.executable, "-I", "-c", _COMPILEALL))
    interpreter = find_interpreter(version)
    if interpreter is not None:
        command = (interpreter.executable, "-I", "-c", _COMPILEALL)
        return BytecodeCompiler(version, f"CPython {interpreter.full_version}", command)
    return _pyodide_compiler(version)


def runtime_mismatch(used: str, runtime: str = LAMBDA_TARGET.python_version) -> str:
    """What a venv on CPython `used` instead of the Lambda runtime's `runtime` cannot catch, and the way out."""
    return (
        f"not the Lambda runtime's {runtime}: no CPython {runtime} on this machine (python{runtime} on PATH, "
        f"pyenv's, uv's). Tests and `make run` on {used} cannot catch a dependency without a {runtime} wheel "
        f"(the synth's asset build for Lambda still fetches them), {runtime}'s behaviour changes (deprecations "
        f"turned errors, changed defaults), or a module {runtime} removed that a dependency imports (the import "
        f"check refuses the functions' own imports of one). Install CPython {runtime} (`pyenv install {runtime}`, "
        f"`uv python install {runtime}`, or your system's package), then `make install`."
    )


def describe_interpreter() -> str:
    """This interpreter, its path, and whether it is the Lambda runtime's version (`make run` says it first)."""
    used = f"{sys.version_info.major}.{sys.version_info.minor}"
    runtime = LAMBDA_TARGET.python_version
    what = f"python: CPython {sys.version.split()[0]} ({sys.executable})"
    if used == runtime:
        return f"{what}, the Lambda runtime's version"
    at_hand = find_interpreter(runtime)
    if at_hand is not None:  # a venv made before it was installed
        return (
            f"{what}, not the Lambda runtime's {runtime}, which this machine has (CPython {at_hand.full_version}, "
            f"{at_hand.executable}): `make install` builds the venv on it"
        )
    return f"{what}, {runtime_mismatch(used, runtime)}"


def bytecode_tag(target: Target) -> str:
    """What the asset's bytecode is, for its fingerprint: the compiler, or that there is none."""
    compiler = find_compiler(target.python_version)
    return f"bytecode {compiler.description}" if compiler else "no bytecode"


def compile_bytecode(output_dir: Path, target: Target) -> BytecodeCompiler | None:
    """Hash-based bytecode for the target's interpreter beside every .py of the asset; then every file
    gets the same mtime. Returns the compiler used, or None when no interpreter of that version is at hand."""
    compiler = find_compiler(target.python_version)
    if compiler is not None:
        compiler.compile_tree(output_dir)
    stabilize_mtimes(output_dir)
    return compiler


def stabilize_mtimes(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        os.utime(path, (STABLE_MTIME, STABLE_MTIME), follow_symlinks=False)


def build_package(
    output_dir: Path | str,
    target: Target = LAMBDA_TARGET,
    *,
    wheelhouse_root: Path = WHEELHOUSE_ROOT,
    installed: Path | None = None,
    bytecode: bool = True,
    pyproject: Path = PYPROJECT,
    lock: Path = LOCK_FILE,
    check_tools: bool = False,
) -> Path:
    """Dependencies for `target` plus our packages, laid out as Lambda expects (handler `app.handlers.*`),
    with bytecode for the target's interpreter where one is at hand (`compile_bytecode`).

    `installed`: a directory `installed_dependencies` filled before, linked instead of installing again.
    `pyproject`, `lock`: the project's pins (another copy's, in tests).
    `check_tools`: first import the tools from the source with this interpreter's packages (the dev
    environment's: a package only it has is the local stack's check to name) and refuse
    (`ToolsRefused`) one that does not import or cannot be described (the synth's check; the local stack
    checks them against the asset's packages itself).
    """
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    if check_tools:
        site = [entry for entry in sys.path if entry.endswith(("site-packages", "dist-packages"))]
        refusal = tools_refusal([str(FUNCTIONS_DIR), *site])
        if refusal is not None:
            raise ToolsRefused(refusal)
    if installed is None:
        install_dependencies(output, target, runtime_requirements(pyproject), wheelhouse_root / target.slug, lock=lock)
    else:
        shutil.copytree(
            installed, output, copy_function=os.link, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete")
        )
    shutil.rmtree(output / "bin", ignore_errors=True)  # console scripts are useless in Lambda
    copy_sources(output)
    prune_unreached(output)
    for pattern in PRUNED_DATA_GLOBS:
        for path in output.glob(pattern):
            path.unlink()
    if bytecode:
        compile_bytecode(output, target)
    return output


MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class AssetSize:
    """A built asset's size as Lambda counts it: every file unzipped, bytecode included."""

    total_bytes: int
    # Top-level packages and modules (with their .dist-info), biggest first.
    packages: tuple[tuple[str, int], ...]

    def biggest(self, count: int = 5) -> str:
        return ", ".join(f"{name} {size / MIB:.1f} MB" for name, size in self.packages[:count])


def _counted_under(relative: Path) -> str:
    """The package a file counts for: `httpx-0.28.1.dist-info/...` and `__pycache__/six.cpython-313.pyc`
    (a top-level module's bytecode) with the package or module they describe."""
    top = relative.parts[0]
    if top == "__pycache__":
        top = relative.name.split(".", 1)[0]
    elif top.endswith((".dist-info", ".data")):
        top = top.split("-", 1)[0]
    return top.removesuffix(".py").lower().replace("-", "_")


def measure_asset(root: Path) -> AssetSize:
    sizes: dict[str, int] = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            key = _counted_under(path.relative_to(root))
            sizes[key] = sizes.get(key, 0) + path.stat().st_size
    ranked = tuple(sorted(sizes.items(), key=lambda item: (-item[1], item[0])))
    return AssetSize(sum(sizes.values()), ranked)


class AssetTooLarge(ValueError):
    """The asset is over the ceiling the project set (`assetSizeLimitMb` in cdk.json)."""


def check_asset_size(root: Path, limit_mb: int) -> AssetSize:
    """The asset's size, or AssetTooLarge naming the cdk.json key and the biggest packages."""
    size = measure_asset(root)
    if size.total_bytes > limit_mb * MIB:
        raise AssetTooLarge(
            f"the functions' asset is {size.total_bytes / MIB:.1f} MB unzipped (bytecode included), over the "
            f"{limit_mb} MB set by 'assetSizeLimitMb' (cdk.json context). Biggest packages: {size.biggest()}. "
            "Raise 'assetSizeLimitMb' if that is what the tools need (Lambda's own limit is 250 MB), or drop a "
            "dependency: `make remove-dependency PKG=<name>` (docs/dependencies.md)"
        )
    return size


def dependencies_fingerprint(target: Target) -> str:
    """Changes whenever a runtime pin, the lock or the target changes."""
    digest = hashlib.sha256()
    for part in (BUILD_FORMAT, target.slug, *runtime_requirements()):
        digest.update(part.encode() + b"\0")
    if LOCK_FILE.exists():
        digest.update(LOCK_FILE.read_bytes())
    return digest.hexdigest()[:20]


def installed_dependencies(target: Target, cache_root: Path, *, wheelhouse_root: Path = WHEELHOUSE_ROOT) -> Path:
    """The runtime dependencies for `target`, installed once into `cache_root` and reused."""
    directory = cache_root / f"deps-{target.slug}-{dependencies_fingerprint(target)}"
    if (directory / ".complete").exists():
        return directory
    cache_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="deps-", dir=cache_root))
    install_dependencies(scratch, target, runtime_requirements(), wheelhouse_root / target.slug)
    (scratch / ".complete").touch()
    try:
        scratch.rename(directory)
    except OSError:  # installed by another process meanwhile
        shutil.rmtree(scratch, ignore_errors=True)
    return directory


def source_fingerprint(target: Target = LAMBDA_TARGET, bytecode: str | None = None) -> str:
    """Changes whenever a shipped file, a pin, the target or the bytecode compiler (`bytecode`; by
    default `bytecode_tag`) changes: the asset's custom hash."""
    digest = hashlib.sha256()
    for part in (BUILD_FORMAT, target.slug, bytecode or bytecode_tag(target), *runtime_requirements()):
        digest.update(part.encode() + b"\0")
    if LOCK_FILE.exists():
        digest.update(LOCK_FILE.read_bytes())
    for package in SHIPPED_PACKAGES:
        for path in sorted((FUNCTIONS_DIR / package).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                digest.update(path.relative_to(FUNCTIONS_DIR).as_posix().encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> int:
    """`python -m infra.packaging`: fill the wheelhouse for the Lambda target, so later synths run offline."""
    with tempfile.TemporaryDirectory() as scratch:
        build_package(Path(scratch), LAMBDA_TARGET)
    print(f"wheelhouse ready: {WHEELHOUSE_ROOT / LAMBDA_TARGET.slug}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
