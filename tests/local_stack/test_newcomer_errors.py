"""`make run` refuses to start with a message a newcomer can act on, and Ctrl-C stops it quietly."""

from __future__ import annotations

import fcntl
import io
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from local_stack.stack import LogSink, StartRefused, check_tools_import

from tests.support import REPO, local_stack_process

pytestmark = pytest.mark.e2e


def make_run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`python -m local_stack` as `make run` starts it, expected to stop on its own."""
    return subprocess.run(
        [sys.executable, "-m", "local_stack"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_port_in_use_is_refused_naming_the_port_and_how_to_pick_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = make_run({"PORT": str(port)})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"make run: port {port} is in use (another `make run`?): stop that one, or pick another port, "
        f"e.g. `PORT={port + 1} make run`"
    )
    assert "Traceback" not in done.stdout + done.stderr


def test_a_second_stack_on_a_state_directory_in_use_is_refused_naming_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with open(state / ".lock", "a+", encoding="utf-8") as first:  # as the first `make run` holds it
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        first.write("pid 4242, port 3000\n")
        first.flush()
        done = make_run({"LOCAL_STATE_DIR": str(state)})
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"make run: the state directory {state} is in use by another `make run` (pid 4242, port 3000): stop that "
        "one first, or give this one a directory of its own, e.g. `LOCAL_STATE_DIR=build/other make run`"
    )
    assert "Traceback" not in done.stderr


def test_a_tool_that_does_not_import_is_named_by_its_source_file_and_line(tmp_path: Path) -> None:
    tools = tmp_path / "functions" / "tools"
    tools.mkdir(parents=True)
    init = "from importlib import import_module\n\nMODULES = [import_module('tools.broken')]\n"
    (tools / "__init__.py").write_text(init)
    (tools / "broken.py").write_text('"""A tool with a typo."""\n\nfrom pydantic import BaseModle\n')
    with pytest.raises(StartRefused) as refused:
        check_tools_import(tmp_path / "functions")
    first_line = str(refused.value).splitlines()[0]
    assert first_line.startswith("a tool does not import: functions/tools/broken.py, line 3: ImportError: ")
    assert "cannot import name 'BaseModle' from 'pydantic'" in first_line


def test_the_projects_own_tools_import() -> None:
    check_tools_import()


def test_ctrl_c_stops_the_stack_quietly() -> None:
    with local_stack_process() as running:
        os.killpg(running.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        assert running.process.wait(timeout=60) == 0
        output = list(running.output)
    assert output[-2:] == ["stopping...", "stopped"]
    assert not [line for line in output if "Traceback" in line or "KeyboardInterrupt" in line]


def test_a_logged_traceback_is_printed_as_one_pointing_at_the_source_files(tmp_path: Path) -> None:
    built = tmp_path / "asset-0123"
    traceback = (
        "Traceback (most recent call last):\n"
        f'  File "{built}/tools/export_dataset.py", line 38, in export_dataset\n'
        "    rows = export_batch(args.dataset, batch)\n"
        "ZeroDivisionError: division by zero"
    )
    record = {"level": "ERROR", "message": "the tool raised", "exception": traceback}
    record["exception_name"] = "ZeroDivisionError"
    out = io.StringIO()
    sink = LogSink(
        tmp_path / "logs",
        out,
        everything=False,
        short_names={"mcp-worker": "worker"},
        sources={f"{built / 'tools'}{os.sep}": f"{REPO / 'functions' / 'tools'}{os.sep}"},
    )
    sink("mcp-worker", json.dumps(record))
    sink.close()
    assert out.getvalue().splitlines() == [
        '[worker] {"level": "ERROR", "message": "the tool raised", "exception_name": "ZeroDivisionError"}',
        "Traceback (most recent call last):",
        f'  File "{REPO}/functions/tools/export_dataset.py", line 38, in export_dataset',
        "    rows = export_batch(args.dataset, batch)",
        "ZeroDivisionError: division by zero",
    ]
    assert (tmp_path / "logs" / "mcp-worker.log").read_text() == json.dumps(record) + "\n"  # the file keeps it whole
