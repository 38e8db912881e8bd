"""`make run` refuses to start with a message a newcomer can act on, and Ctrl-C stops it quietly."""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import platform
import shutil
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from infra.packaging import LAMBDA_TARGET, host_target, installed_dependencies
from local_stack.code import CODE_ROOT, FunctionCode, build_function_code, runtime_provided
from local_stack.stack import LogSink, StartRefused, check_tools_import

from local_stack import stack as stack_module
from tests.local_stack.conftest import descendants, still_running
from tests.local_stack.embedded_moto import eventually
from tests.support import REPO, local_stack_process, serve_only

pytestmark = pytest.mark.e2e

MCP1_REQUIREMENTS = "tests/clients/mcp1-requirements.txt"  # an input of `make install`


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
    # The interpreter it runs comes first, and whether it is the Lambda runtime's version.
    said = done.stdout.splitlines()[0]
    assert said.startswith(f"python: CPython {platform.python_version()} ({sys.executable}), ")
    if sys.version_info[:2] == tuple(map(int, LAMBDA_TARGET.python_version.split("."))):
        assert said.endswith("), the Lambda runtime's version")
    else:
        assert f"), not the Lambda runtime's {LAMBDA_TARGET.python_version}" in said
    assert "Traceback" not in done.stdout + done.stderr


def test_the_stack_holds_its_port_from_its_first_step_so_nothing_takes_it_during_synthesis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A port looked at, let go and bound only after the seconds of synthesis was taken meanwhile by a
    # parallel test's server: "local stack did not start: OSError: [Errno 98] Address already in use".
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    attempts: list[str] = []

    class SynthesisReached(Exception):
        pass

    def another_server_binds_the_port() -> FunctionCode:
        with socket.socket() as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                other.bind(("127.0.0.1", port))
                attempts.append("bound")
            except OSError as error:
                attempts.append(errno.errorcode[error.errno])
        raise SynthesisReached

    monkeypatch.setattr(stack_module, "build_function_code", another_server_binds_the_port)
    with pytest.raises(SynthesisReached):
        stack_module.start(stack_module.Options(port=port), out=io.StringIO())
    assert attempts == ["EADDRINUSE"]
    with socket.socket() as after:  # given back once the start failed
        after.bind(("127.0.0.1", port))


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


@pytest.fixture(scope="module")
def function_code() -> FunctionCode:
    """The functions' code as `make run` builds it (cached by its fingerprint; built once for the suite)."""
    return build_function_code()


def test_a_tool_that_does_not_import_is_named_by_its_source_file_and_line(
    tmp_path: Path, function_code: FunctionCode
) -> None:
    tools = tmp_path / "functions" / "tools"
    tools.mkdir(parents=True)
    init = "from importlib import import_module\n\nMODULES = [import_module('tools.broken')]\n"
    (tools / "__init__.py").write_text(init)
    (tools / "broken.py").write_text('"""A tool with a typo."""\n\nfrom pydantic import BaseModle\n')
    with pytest.raises(StartRefused) as refused:
        check_tools_import(function_code, tmp_path / "functions")
    first_line, second_line = str(refused.value).splitlines()[:2]
    assert first_line.startswith("a tool does not import: functions/tools/broken.py, line 3: ImportError: ")
    assert "cannot import name 'BaseModle' from 'pydantic'" in first_line
    assert second_line == ""  # no dependency to add: the traceback follows


def tools_importing(root: Path, module: str) -> Path:
    """A functions/ tree whose one tool imports `module` (and pydantic, which the asset ships)."""
    tools = root / "functions" / "tools"
    tools.mkdir(parents=True)
    init = "from importlib import import_module\n\nMODULES = [import_module('tools.uses')]\n"
    (tools / "__init__.py").write_text(init)
    (tools / "uses.py").write_text(f'"""A tool with a dependency."""\n\nimport {module}\nimport pydantic\n')
    return root / "functions"


def test_a_tool_importing_a_dev_only_package_is_refused_naming_it_and_the_command_that_adds_it(
    tmp_path: Path, function_code: FunctionCode
) -> None:
    """pytest is in the dev venv, so the tool imports there; the asset (what deploys) lacks it."""
    with pytest.raises(StartRefused) as refused:
        check_tools_import(function_code, tools_importing(tmp_path, "pytest"))
    assert str(refused.value).splitlines()[:2] == [
        "a tool does not import: functions/tools/uses.py, line 3: ModuleNotFoundError: No module named 'pytest'",
        "pytest is installed in the dev environment only (a dev dependency, or one of theirs): the functions' "
        "asset does not ship it, so this import would fail in Lambda too. If a tool needs it at run time, add it "
        "as a runtime dependency: `make add-dependency PKG=pytest` (docs/dependencies.md)",
    ]


def test_a_tool_importing_a_package_under_another_distribution_name_is_told_that_name(
    tmp_path: Path, function_code: FunctionCode
) -> None:
    with pytest.raises(StartRefused) as refused:
        check_tools_import(function_code, tools_importing(tmp_path, "yaml"))  # PyYAML's, dev-only (moto's)
    assert "`make add-dependency PKG=PyYAML`" in str(refused.value).splitlines()[1]


def test_a_tool_importing_a_package_installed_nowhere_is_refused_naming_it(
    tmp_path: Path, function_code: FunctionCode
) -> None:
    with pytest.raises(StartRefused) as refused:
        check_tools_import(function_code, tools_importing(tmp_path, "not_installed_anywhere"))
    assert str(refused.value).splitlines()[1] == (
        "not_installed_anywhere is installed nowhere (if its package on PyPI has another name, add that one): "
        "the functions' asset does not ship it, so this import would fail in Lambda too. If a tool needs it at "
        "run time, add it as a runtime dependency: `make add-dependency PKG=not_installed_anywhere` "
        "(docs/dependencies.md)"
    )


def test_a_tool_importing_cgi_is_refused_naming_the_file_the_line_and_what_to_use_instead(
    tmp_path: Path, function_code: FunctionCode
) -> None:
    """cgi left the standard library in 3.13: a venv of an older Python imports it, Lambda's would not."""
    with pytest.raises(StartRefused) as refused:
        check_tools_import(function_code, tools_importing(tmp_path, "cgi"))
    assert str(refused.value) == (
        f"a tool does not import in Lambda: functions/tools/uses.py, line 3: imports cgi, which the Lambda "
        f"runtime's Python ({LAMBDA_TARGET.python_version}) does not have (removed from the standard library in "
        "3.13); use urllib.parse.parse_qs for a query string, email.message for a multipart body, or its copy on "
        "PyPI (`make add-dependency PKG=standard-cgi`)"
    )


def test_the_projects_own_tools_import_against_the_assets_packages(function_code: FunctionCode) -> None:
    check_tools_import(function_code)


def test_make_run_refuses_a_tool_importing_pytest_naming_the_package_and_the_command_that_adds_it(
    tmp_path: Path,
) -> None:
    """As a team meets it: a copy of the project, a tool that imports pytest, `make run`."""
    project = tmp_path / "project"
    project.mkdir()
    pins = ("pyproject.toml", "requirements-dev.lock", "package.json", "package-lock.json", MCP1_REQUIREMENTS)
    for name in ("Makefile", "cdk.json", *pins):
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, project / name)
        os.utime(project / name, (0, 0))  # the installs are this checkout's: make must not redo them
    for directory in ("functions", "infra", "local_stack", "scripts"):
        shutil.copytree(REPO / directory, project / directory, ignore=shutil.ignore_patterns("__pycache__"))
    for installed in (".venv", "node_modules", ".tools"):
        (project / installed).symlink_to((REPO / installed).resolve())
    # Same pins, same installed dependencies: linked from this checkout's cache, not installed again.
    dependencies = installed_dependencies(host_target(), CODE_ROOT)
    code_root = project / "build" / "local-stack" / "code"
    shutil.copytree(dependencies, code_root / dependencies.name, copy_function=os.link)
    tools = project / "functions" / "tools"
    (tools / "uses_pytest.py").write_text('"""Reads a test helper."""\n\nimport pytest\n')
    serve_only(tools, "uses_pytest")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MAKE")) and k != "PYTHONPATH"}
    done = subprocess.run(["make", "run", "PORT=0"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    refusal = done.stderr[done.stderr.index("make run: ") :].splitlines()
    assert refusal[:2] == [
        "make run: a tool does not import: functions/tools/uses_pytest.py, line 3: ModuleNotFoundError: "
        "No module named 'pytest'",
        "pytest is installed in the dev environment only (a dev dependency, or one of theirs): the functions' "
        "asset does not ship it, so this import would fail in Lambda too. If a tool needs it at run time, add it "
        "as a runtime dependency: `make add-dependency PKG=pytest` (docs/dependencies.md)",
    ]
    assert not (project / "build" / "local-stack" / "synth").exists()  # refused before the CDK app is synthesized


def test_ctrl_c_stops_the_stack_quietly_and_leaves_no_process_and_no_run_file_behind() -> None:
    with local_stack_process() as running:
        run_file = REPO / "build" / "local-stack" / "run" / f"{running.url.split(':')[2].split('/')[0]}.json"
        assert stat.S_IMODE(run_file.stat().st_mode) == 0o600  # the administrator's keys, moto's admin secret
        assert stat.S_IMODE(run_file.parent.stat().st_mode) == 0o700
        refused = httpx.post(f"{running.aws_endpoint}/moto-api/reset", timeout=10)
        assert refused.status_code == 403
        processes = descendants(running.process.pid)
        assert any("_bootstrap.py" in command for command in processes.values()), processes
        os.killpg(running.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
        assert running.process.wait(timeout=60) == 0
        # The process has ended; the thread draining its output may not have read the last line yet.
        eventually(lambda: running.printed("stopped"), timeout=10)
        output = list(running.output)
    assert output[-2:] == ["stopping...", "stopped"]
    assert not [line for line in output if "Traceback" in line or "KeyboardInterrupt" in line]
    assert not run_file.exists()
    assert still_running(processes) == {}


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


def test_the_runtimes_modules_are_linked_again_when_the_venv_they_led_to_was_built_anew(tmp_path: Path) -> None:
    """A venv rebuilt on another Python (3.11, then `make install` on 3.13) leaves links to nowhere: the
    functions would meet `No module named 'boto3'`."""
    runtime_dir, linked = runtime_provided(tmp_path)
    assert linked and (runtime_dir / "boto3" / "__init__.py").exists()
    assert runtime_provided(tmp_path) == (runtime_dir, False)
    (runtime_dir / "boto3").unlink()
    (runtime_dir / "boto3").symlink_to(tmp_path / "gone" / "python3.11" / "site-packages" / "boto3")

    assert runtime_provided(tmp_path) == (runtime_dir, True)
    assert (runtime_dir / "boto3" / "__init__.py").exists()
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["runtime-provided"]
