"""Why not run FastMCP or the MCP SDK on Lambda directly: what this project measures itself.

    python -m bench.direct [--no-instructions]   (PYTHONPATH=functions:.; needs mangum, which `make bench` installs)

1. mcp 2.3.0's `MCPServer` streamable HTTP app (stateless, JSON) behind Mangum: two invocations in one
   interpreter, as a warm Lambda environment would make them.
2. A FastMCP 4.1.4 task on its default `memory://` store: created in one process, asked for with
   `tasks/get` in another (two Lambda environments).
3. Import cost against `import boto3`: instructions counted by callgrind (the same count whatever else
   the machine does) and the minimum wall time of 7 fresh interpreters, warm bytecode.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "child.py"
IMPORTS: dict[str, str] = {
    "boto3": "import boto3",
    "mcp MCPServer": "from mcp.server.mcpserver import MCPServer",
    "fastmcp FastMCP": "from fastmcp import FastMCP",
    "fastmcp FastMCP + fastmcp_tasks": "from fastmcp import FastMCP; import fastmcp_tasks",
    "mcp_runtime.fastmcp (the facade)": "import app.cold_start; from mcp_runtime.fastmcp import FastMCP",
    "tools.support_desk (the ported example)": "import app.cold_start; import tools.support_desk",
}


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}",
        "PYDANTIC_DISABLE_PLUGINS": "__all__",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "",  # the warm-up writes bytecode: no count includes compiling a module
    }


def _child(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(CHILD), *args], env=_env(), capture_output=True, text=True, timeout=300, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _instructions(code: str, tmp: Path) -> int | None:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    out = tmp / "callgrind.out"
    done = subprocess.run(
        [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", code],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"callgrind failed for {code}: {done.stderr[-2000:]}")
    return int(match.group(1))


def _min_wall_ms(code: str, runs: int = 7) -> float:
    subprocess.run([sys.executable, "-c", code], env=_env(), check=True)  # bytecode written, page cache warm
    walls = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=_env(), check=True)
        walls.append((time.perf_counter() - start) * 1000)
    return min(walls)


def run(instructions: bool = True) -> dict[str, Any]:
    mangum = _child("mangum")
    created = _child("task-create")
    elsewhere = _child("task-get", created["task_id"])
    imports: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-direct-") as tmp:
        for name, code in IMPORTS.items():
            counted = _instructions(code, Path(tmp)) if instructions else None
            imports[name] = {"instructions": counted, "min_wall_ms": _min_wall_ms(code)}
    base = imports["boto3"]
    for entry in imports.values():
        if entry["instructions"] and base["instructions"]:
            entry["instructions_ratio"] = entry["instructions"] / base["instructions"]
        entry["wall_ratio"] = entry["min_wall_ms"] / base["min_wall_ms"]
    return {
        "mangum_invocations": mangum["invocations"],
        "task_same_process": created["same_process"],
        "task_other_process": elsewhere["other_process"],
        "imports": imports,
    }


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        "mcp 2.3.0 MCPServer app behind Mangum, two invocations in one interpreter: "
        + " then ".join(result["mangum_invocations"]),
        f"FastMCP 4.1.4 task on memory://: tasks/get in its own process: {result['task_same_process']};"
        f" in another process: {result['task_other_process']}",
        f"  {'import':<42} {'M instr.':>9} {'x boto3':>8} {'min ms':>8} {'x boto3':>8}",
    ]
    for name, entry in result["imports"].items():
        instructions = entry["instructions"]
        lines.append(
            f"  {name:<42} {(instructions or 0) / 1e6:9,.0f} {entry.get('instructions_ratio', 0):8.2f}"
            f" {entry['min_wall_ms']:8.1f} {entry['wall_ratio']:8.2f}"
        )
    return lines


if __name__ == "__main__":
    outcome = run(instructions="--no-instructions" not in sys.argv)
    print(json.dumps(outcome))
    print("\n".join(report(outcome)))
