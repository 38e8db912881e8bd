"""The local stack (`make run`) as a child process: tools run as Lambda runs them, tasks on the real
state machine (the synthesized template's, on an embedded moto with IAM enforced)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from local_stack.clients import aws_client
from local_stack.processes import start_announced, stop_process

# The project's root (the checkout testkit/ is in).
REPO = Path(__file__).resolve().parent.parent


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
    tool_packages: str = "tools",
    *,
    extra_env: dict[str, str] | None = None,
    timeout: float = 180.0,
    default_user: str | None = None,
    root: Path = REPO,
) -> Iterator[RunningStack]:
    """`make run` as a child process on a free port; yields once it prints its endpoint.

    It serves the tool packages `tool_packages` names (MCP_TOOL_PACKAGES, comma-separated; by default
    the project's `tools`). Its output is drained all the time (a full pipe would stop the stack) and
    kept in `output`. `default_user`: requests without a token are taken as this development user's
    (LOCAL_DEFAULT_USER); otherwise each request needs `Authorization: Bearer dev:<user>`.
    `root`: the project it runs (by default the checkout testkit/ is in).
    """
    env = {
        **os.environ,
        "PORT": "0",  # the stack's choice, held from its first step (a port chosen here could be taken meanwhile)
        "PYTHONPATH": f"{root / 'functions'}{os.pathsep}{root}",
        **(extra_env or {}),
        "MCP_TOOL_PACKAGES": tool_packages,
    }
    env.pop("FIXTURES", None)
    if default_user:
        env["LOCAL_DEFAULT_USER"] = default_user
    process, output, url = start_announced(
        [sys.executable, "-m", "local_stack"], cwd=root, env=env, announcement=_endpoint, timeout=timeout
    )
    if url is None:
        tail = "\n".join(output[-60:])
        raise RuntimeError(f"local stack did not start:\n{tail}")
    port = urlsplit(url).port
    state_file = root / "build" / "local-stack" / "run" / f"{port}.json"
    running = RunningStack(url, process, output, json.loads(state_file.read_text()))
    try:
        yield running
    finally:
        stop_process(process, timeout=15)


def _endpoint(line: str) -> str | None:
    """The URL in the line the stack prints once it serves: `MCP endpoint: <url> ...`."""
    return line.split()[2] if line.startswith("MCP endpoint:") else None
