"""Child processes of the local stack, its tests and its benchmarks: started, and stopped.

A process started with `start_announced` (the local authorization server; the local stack itself,
as its tests run it) tells on its output when it is ready. That output, stdout and stderr in one
pipe, is drained all the time, since a full pipe would stop the process, and kept line by line.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def start_announced(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    announcement: Callable[[str], T | None],
    timeout: float,
    thread_name: str | None = None,
) -> tuple[subprocess.Popen[str], list[str], T | None]:
    """Start `command`; wait up to `timeout` for the first line `announcement` reads a value from.

    Returns the process, its output so far (kept growing: a line each, without the newline) and the
    value. When no line announced one before the time ran out or the output ended, the process is
    killed and the value is None.
    """
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C reaches the parent only, which stops this one
    )
    output: list[str] = []
    announced = threading.Event()
    found: list[T] = []

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if not found:
                value = announcement(output[-1])
                if value is not None:
                    found.append(value)
                    announced.set()
        announced.set()

    threading.Thread(target=drain, name=thread_name, daemon=True).start()
    announced.wait(timeout)
    if not found:
        process.kill()
        process.wait()
        return process, output, None
    return process, output, found[0]


def stop_process(process: subprocess.Popen[Any], timeout: float) -> None:
    """Ask the process to end; kill it if it has not within `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
