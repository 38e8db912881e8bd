"""The code each local function runs: the asset `cdk deploy` would upload, built for this interpreter.

Lambda puts a function's asset in `LAMBDA_TASK_ROOT` and provides boto3 itself. Locally the same
`infra.packaging.build_package` builds the asset (shipped packages, pinned dependencies, pruning)
for the host's CPython, bytecode included (compiled by this interpreter, as the deployed asset's is by
a CPython 3.13), into a directory named by its fingerprint; the libraries the Lambda runtime
provides are linked from this environment. A function's import path holds exactly these two and
the layers given, and not this environment's site-packages: a module the asset lacks fails to import
locally as it would in AWS.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from infra.packaging import (
    RUNTIME_PROVIDED,
    build_package,
    host_target,
    installed_dependencies,
    source_fingerprint,
)

CODE_ROOT: Final = Path(__file__).resolve().parents[1] / "build" / "local-stack" / "code"
# Import names of the distributions the Lambda Python runtime provides (RUNTIME_PROVIDED).
RUNTIME_MODULES: Final[dict[str, str]] = {
    "boto3": "boto3",
    "botocore": "botocore",
    "s3transfer": "s3transfer",
    "jmespath": "jmespath",
    "urllib3": "urllib3",
    "python-dateutil": "dateutil",
    "six": "six",
}


@dataclass(frozen=True, slots=True)
class FunctionCode:
    task_root: Path  # LAMBDA_TASK_ROOT: the asset
    runtime_dir: Path  # what the Lambda runtime provides (boto3, botocore, ...)
    built: bool  # False when both came from the cache


def build_function_code(code_root: Path = CODE_ROOT) -> FunctionCode:
    target = host_target()
    code_root.mkdir(parents=True, exist_ok=True)
    built = False
    task_root = code_root / f"asset-{source_fingerprint(target)[:20]}"
    if not (task_root / ".complete").exists():
        scratch = Path(tempfile.mkdtemp(prefix="asset-", dir=code_root))
        build_package(scratch, target, installed=installed_dependencies(target, code_root))
        (scratch / ".complete").touch()
        _replace(scratch, task_root)
        built = True
    runtime_dir, linked = runtime_provided(code_root)
    _prune(code_root, keep={task_root.name, runtime_dir.name})
    return FunctionCode(task_root, runtime_dir, built or linked)


def runtime_provided(code_root: Path) -> tuple[Path, bool]:
    """The folder of links to what the Lambda runtime provides (boto3, botocore, ...), as this environment
    has them, and whether it was linked now. Linked again when a link no longer leads anywhere: the venv
    was built anew (on another Python, `make install` after a change of interpreter)."""
    runtime_dir = code_root / "runtime-provided"
    if (runtime_dir / ".complete").exists() and all(link.exists() for link in runtime_dir.iterdir()):
        return runtime_dir, False
    scratch = Path(tempfile.mkdtemp(prefix="runtime-", dir=code_root))
    for distribution in sorted(RUNTIME_PROVIDED):
        _link_module(RUNTIME_MODULES[distribution], scratch)
    (scratch / ".complete").touch()
    if runtime_dir.exists():
        stale = Path(tempfile.mkdtemp(prefix="stale-runtime-", dir=code_root))
        with contextlib.suppress(OSError):  # another process replaced it meanwhile
            runtime_dir.rename(stale / runtime_dir.name)
        shutil.rmtree(stale, ignore_errors=True)
    _replace(scratch, runtime_dir)
    return runtime_dir, True


def _link_module(module: str, into: Path) -> None:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{module} (provided by the Lambda runtime) is not installed in this environment")
    origin = Path(spec.origin)
    source = origin.parent if origin.name == "__init__.py" else origin
    os.symlink(source, into / source.name)


def _replace(scratch: Path, target: Path) -> None:
    try:
        scratch.rename(target)
    except OSError:  # built by another process meanwhile
        shutil.rmtree(scratch, ignore_errors=True)


def _prune(code_root: Path, keep: set[str], limit: int = 4) -> None:
    assets = sorted(
        (p for p in code_root.glob("asset-*") if p.name not in keep and (p / ".complete").exists()),
        key=lambda p: p.stat().st_mtime,
    )
    for stale in assets[: max(0, len(assets) - (limit - 1))]:
        shutil.rmtree(stale, ignore_errors=True)
