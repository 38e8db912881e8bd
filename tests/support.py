"""Helpers shared by the test tiers: building requests, running the local stack as a process."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_stack.clients import aws_client
from local_stack.processes import start_announced, stop_process

REPO = Path(__file__).resolve().parent.parent
PROTOCOL_VERSION = "2026-07-28"
# The tools the runtime's own tests call (fixtures/patterns.py, one of each pattern), by name, sorted.
# Every stack the tests start serves them (`local_stack_process`), whatever the project's tools are.
PATTERN_TOOLS = [
    "archive_project",
    "cart_add",
    "cart_checkout",
    "cart_open",
    "count_words",
    "deploy_release",
    "list_my_tasks",
]


def project_tools(*, table_backed: bool = True) -> list[str]:
    """The tools functions/tools registers (the examples and whatever the project added), sorted."""
    import tools
    from mcp_runtime.tools import ToolRegistry

    registry = ToolRegistry()
    tools.register(registry, table_backed=table_backed)
    return sorted(spec.name for spec in registry)


def served_tools() -> list[str]:
    """What a test stack lists: the project's tools and the pattern fixtures (each in place of a project
    tool of its name), sorted."""
    return sorted({*project_tools(), *PATTERN_TOOLS})


def register_tool_modules(init: Path, *names: str) -> None:
    """Add each name as the last line of `MODULES = _modules(...)` in a tools `__init__.py`, as the README
    says (an empty `_modules()`, left by deleting every example, is opened up first)."""
    text = init.read_text(encoding="utf-8").replace("MODULES = _modules()\n", "MODULES = _modules(\n)\n", 1)
    start = text.index("\nMODULES = _modules(\n")
    end = text.index("\n)\n", start) + 1
    lines = "".join(f'    "{name}",\n' for name in names)
    init.write_text(text[:end] + lines + text[end:], encoding="utf-8")


def unregister_tool_modules(init: Path, *names: str) -> None:
    """Take each name out of `MODULES` and `TABLE_BACKED_MODULES` in a tools `__init__.py` (a project
    deleting those tool files, as the README's "Make it yours" says)."""
    text = init.read_text(encoding="utf-8")
    for name in names:
        text = re.sub(rf'^ +"{name}",\n', "", text, flags=re.MULTILINE)
        text = re.sub(rf'"{name}"(, )?', "", text)
    text = text.replace("_modules(\n)", "_modules()").replace(", )", ")")
    init.write_text(text, encoding="utf-8")


def copy_working_tree(source: Path, target: Path) -> None:
    """The files of a checkout as its team has them: tracked and untracked ones, not those git ignores
    (installs, caches, build output), nor tracked files deleted and not yet committed."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (source / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, target / name)


def meta(capabilities: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1.0.0"},
        **extra,
    }


def rpc(
    method: str,
    params: dict[str, Any] | None = None,
    request_id: int | str = 1,
    capabilities: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body_params = dict(params or {})
    body_params.setdefault("_meta", meta(capabilities))
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body_params}


def standard_headers(message: dict[str, Any]) -> dict[str, str]:
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL_VERSION,
        "mcp-method": message["method"],
    }
    params = message.get("params") or {}
    for key in ("name", "uri", "taskId"):
        if isinstance(params.get(key), str):
            headers["mcp-name"] = params[key]
            break
    return headers


def api_event(
    body: str | dict[str, Any], headers: dict[str, str] | None = None, method: str = "POST", path: str = "/mcp"
) -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event as the front would send it."""
    if isinstance(body, dict):
        final_headers = standard_headers(body)
        body = json.dumps(body)
    else:
        final_headers = {"content-type": "application/json"}
    final_headers.update(headers or {})
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": path,
        "rawQueryString": "",
        "headers": final_headers,
        "requestContext": {"http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1"}},
        "body": body,
        "isBase64Encoded": False,
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RunningStack:
    url: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)  # every line the stack printed, as it arrives
    state: dict[str, Any] = field(default_factory=dict)  # build/local-stack/run/<port>.json

    def printed(self, text: str) -> bool:
        return any(text in line for line in list(self.output))

    @property
    def aws_endpoint(self) -> str:
        return str(self.state["awsEndpoint"])

    def aws_client(self, service: str) -> Any:
        """A boto3 client on the stack's moto, signed as its administrator (IAM is enforced there)."""
        return aws_client(
            service, endpoint=self.aws_endpoint, region="us-east-1", credentials=self.state["administrator"]
        )

    def physical_id(self, logical_id_prefix: str, resource_type: str | None = None) -> str:
        """The physical id of the one resource (of this type) whose logical id starts with this prefix."""
        types = self.state["resourceTypes"]
        found = [
            v
            for k, v in self.state["physicalIds"].items()
            if k.startswith(logical_id_prefix) and resource_type in (None, types[k])
        ]
        assert len(found) == 1, f"{logical_id_prefix}: {found}"
        return str(found[0])


@contextmanager
def local_stack_process(
    fixtures: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 180.0,
    default_user: str | None = None,
    patterns: bool = True,
    root: Path = REPO,
) -> Iterator[RunningStack]:
    """`make run` as a child process on a free port; yields once it prints its endpoint.

    It serves `fixtures` (FIXTURES) and, unless `patterns` is false, the pattern fixtures the runtime's
    tests call (fixtures/patterns.py): those never depend on the project's example tools.

    Its output is drained all the time (a full pipe would stop the stack) and kept in `output`.
    `default_user`: requests without a token are taken as this development user's (LOCAL_DEFAULT_USER).
    `root`: the project it runs (a `copy_project` copy; by default this checkout).
    """
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "PYTHONPATH": f"{root / 'functions'}{os.pathsep}{root}",
        **(extra_env or {}),
    }
    env.pop("FIXTURES", None)
    fixture_sets = [*(fixtures.split(",") if fixtures else []), *(["patterns"] if patterns else [])]
    if fixture_sets:
        env["FIXTURES"] = ",".join(fixture_sets)
    if default_user:
        env["LOCAL_DEFAULT_USER"] = default_user
    process, output, url = start_announced(
        [sys.executable, "-m", "local_stack"], cwd=root, env=env, announcement=_endpoint, timeout=timeout
    )
    if url is None:
        tail = "\n".join(output[-60:])
        raise RuntimeError(f"local stack did not start:\n{tail}")
    state_file = root / "build" / "local-stack" / "run" / f"{port}.json"
    running = RunningStack(url, process, output, json.loads(state_file.read_text()))
    try:
        yield running
    finally:
        stop_process(process, timeout=15)


def copy_project(target: Path) -> Path:
    """A copy of this checkout's tracked files at `target`, as a team's clone is, sharing this checkout's
    installs (.venv, node_modules, .tools) and its synthesized templates (a tool is not among their
    inputs, `local_stack.synth`), so nothing is installed or synthesized again."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.decode()
    for name in filter(None, files.split("\0")):
        if (REPO / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, target / name)
    for installed in (".venv", "node_modules", ".tools"):
        if (REPO / installed).exists():
            (target / installed).symlink_to((REPO / installed).resolve())
    synthesized = REPO / "build" / "local-stack" / "synth"
    if synthesized.is_dir():
        shutil.copytree(synthesized, target / "build" / "local-stack" / "synth", symlinks=True)
    # The installs are the repository's: make must not see the copied pins as newer and reinstall.
    for pins in ("pyproject.toml", "requirements-dev.lock", "package.json", "package-lock.json"):
        os.utime(target / pins, (0, 0))
    return target


def _endpoint(line: str) -> str | None:
    """The URL in the line the stack prints once it serves: `MCP endpoint: <url> ...`."""
    return line.split()[2] if line.startswith("MCP endpoint:") else None


def run_python(code: str, extra_env: dict[str, str] | None = None, timeout: float = 120) -> list[str]:
    """Run `code` in a child interpreter at the repository's root; it must exit 0. Its output's lines."""
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout.splitlines()


# The stack configurations that test modules share (tests/conftest.py starts each one once, when a
# test first asks for it by its fixture name, and stops it after the last test that uses it), and the
# modules that use each: they run one after another on one xdist worker. A module that needs another
# configuration starts its own with `local_stack_process`.
SHORT_TIMEOUT_CONTEXT: dict[str, Any] = {"workerTimeoutSeconds": 5, "apiTimeoutSeconds": 8}
# What cdk.json gives the tools (docs/configuration.md), for the fixtures of `fixtures/configuration.py`:
# a variable, a secret by name (created on the stack with `make secret`), and one object of a bucket.
TOOL_BUCKET = "acme-tool-reports"
TOOL_SECRET_NAME = "tool-fixtures/api-key"
TOOL_CONTEXT: dict[str, Any] = {
    "toolEnvironment": {"REPORTS_URL": "https://reports.example.com/v1"},
    "toolSecrets": {"api_key": TOOL_SECRET_NAME},
    "toolPolicyStatements": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{TOOL_BUCKET}/granted.txt"}
    ],
}


@dataclass(frozen=True)
class SharedStack:
    options: dict[str, Any]  # local_stack_process's arguments
    users: tuple[str, ...]  # the test modules that use it, by path from the repository's root


SHARED_STACKS: dict[str, SharedStack] = {
    # cdk.json as it is, no fixtures but the patterns, every request needs a token (`Bearer dev:<user>` here).
    "template_stack": SharedStack(
        {},
        (
            "tests/e2e/test_authorization_conformance.py",
            "tests/e2e/test_isolation.py",
            "tests/local_stack/test_sam_env.py",
            "tests/test_events.py",
        ),
    ),
    # As `make run` starts it: a request without a token is the development user's.
    "developer_stack": SharedStack(
        {"default_user": "developer"},
        ("tests/e2e/test_fastmcp_port.py", "tests/e2e/test_legacy_clients.py", "tests/e2e/test_readme_snippets.py"),
    ),
    # The conformance fixtures (the suite calls them by name); the suite sends no token.
    # Its API environments warmed first (LOCAL_WARM_ENVIRONMENTS): the suite reads some streams within 600 ms.
    "conformance_stack": SharedStack(
        {"fixtures": "conformance", "default_user": "conformance", "extra_env": {"LOCAL_WARM_ENVIRONMENTS": "4"}},
        (
            "tests/e2e/test_conformance.py",
            "tests/e2e/test_legacy_wire.py",
            "tests/e2e/test_tasks_client.py",
            "tests/e2e/test_tasks_conformance.py",
        ),
    ),
    # A 5 s worker and 8 s API timeout, short enough to test, long enough for the ordinary tools; the lifecycle
    # fixtures; and the tools configured from cdk.json (TOOL_CONTEXT) with the fixtures that use it.
    "short_timeout_stack": SharedStack(
        {
            "fixtures": "conformance,lifecycle,configuration",
            "extra_env": {"LOCAL_CDK_CONTEXT": json.dumps({**SHORT_TIMEOUT_CONTEXT, **TOOL_CONTEXT})},
        },
        (
            "tests/local_stack/test_inline_deadline.py",
            "tests/local_stack/test_task_lifecycle.py",
            "tests/local_stack/test_operator_view.py",
            "tests/local_stack/test_tool_configuration.py",
        ),
    ),
}
