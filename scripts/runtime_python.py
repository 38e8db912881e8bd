"""`make install`'s choice of interpreter for the venv: the Lambda runtime's Python version
(infra/packaging.py's LAMBDA_TARGET) when this machine has one (`python3.13` on PATH, pyenv's, uv's managed
ones, never a download), so the tests and the local stack run what Lambda runs; otherwise FALLBACK, with
what that cannot catch.

    python3 scripts/runtime_python.py .tools/venv-python --fallback python3 [--uv .tools/uv-X/bin/uv]

Writes STAMP (the interpreter's path, then its version) only when the choice changed, and says so then,
once: the Makefile rebuilds the venv when STAMP changes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # infra, which knows the runtime's version

from infra.packaging import LAMBDA_TARGET, Interpreter, find_interpreter, runtime_mismatch

_PROBE = "import sys; print(sys.version.split()[0], sys.executable)"


def fallback_interpreter(command: str) -> Interpreter:
    done = subprocess.run([command, "-I", "-c", _PROBE], capture_output=True, text=True, check=True)
    full_version, executable = done.stdout.strip().split(" ", 1)
    return Interpreter(".".join(full_version.split(".")[:2]), full_version, executable)


def choose(fallback: str, uv: str | None) -> tuple[Interpreter, bool]:
    """The interpreter, and whether it is the runtime's version."""
    found = find_interpreter(LAMBDA_TARGET.python_version, uv)
    return (found, True) if found is not None else (fallback_interpreter(fallback), False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stamp", type=Path)
    parser.add_argument("--fallback", default="python3", help="the interpreter without one of the runtime's version")
    parser.add_argument("--uv", help="a uv whose `uv python find` is asked too (if it exists)")
    args = parser.parse_args(argv)
    uv = args.uv if args.uv and Path(args.uv).is_file() else None
    interpreter, is_runtime = choose(args.fallback, uv)
    chosen = f"{interpreter.executable}\n{interpreter.full_version}\n"
    if args.stamp.is_file() and args.stamp.read_text(encoding="utf-8") == chosen:
        return 0
    args.stamp.parent.mkdir(parents=True, exist_ok=True)
    args.stamp.write_text(chosen, encoding="utf-8")
    said = f"make install: the venv runs CPython {interpreter.full_version} ({interpreter.executable})"
    if is_runtime:
        print(f"{said}, the Lambda runtime's version", flush=True)
    else:
        print(f"\n*** {said}, {runtime_mismatch(interpreter.python_version)}\n", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
