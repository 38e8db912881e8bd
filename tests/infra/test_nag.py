"""cdk-nag AwsSolutionsChecks: no finding left unacknowledged, and no acknowledgement left unused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import (
    CLIENT_CREDENTIALS,
    FULL_OPTIONS,
    OWN_ISSUER,
    TOOL_CONFIGURATION,
    cfn_lint,
    synthesize,
)

pytestmark = pytest.mark.infra

CONFIGURATIONS = {
    "cognito with the bridge": {},
    "function url and alarm email": FULL_OPTIONS,
    "own issuer": OWN_ISSUER,
    "client credentials only": CLIENT_CREDENTIALS,
}
# Every key of "Configure your tools" set: its acknowledgements are checked, and its template linted
# (that synth runs cdk-nag with the acknowledgements, so an unacknowledged finding fails it too).
CHECKED = {**CONFIGURATIONS, "tools configured (environment, secrets, statements, vpc)": TOOL_CONFIGURATION}


def _findings(outdir: Path) -> set[tuple[str, str]]:
    report = json.loads((outdir / "validation-report.json").read_text())
    found = set()
    for plugin in report["pluginReports"]:
        for violation in plugin["violations"]:
            for construct in violation["violatingConstructs"]:
                found.add((construct["constructPath"], violation["ruleName"]))
    return found


@pytest.mark.parametrize("context", CONFIGURATIONS.values(), ids=CONFIGURATIONS.keys())
def test_no_unacknowledged_findings(context: dict[str, Any], tmp_path: Path) -> None:
    stack = synthesize(context, tmp_path, template=False)
    stack.app.synth()  # the nag plugin fails the synth on any unacknowledged finding
    for acknowledged in stack.acknowledged:
        assert acknowledged.reason.strip()


@pytest.mark.parametrize("context", CHECKED.values(), ids=CHECKED.keys())
def test_each_acknowledgement_answers_a_real_finding(context: dict[str, Any], tmp_path: Path) -> None:
    """Synthesize with acknowledgements switched off: the findings must be exactly the acknowledged ones."""
    stack = synthesize({**context, "nagAcknowledge": "false"}, tmp_path, template=False)
    with pytest.raises(Exception, match="ValidationFailed"):
        stack.app.synth()
    findings = _findings(tmp_path)
    assert findings, "cdk-nag reported nothing: is the plugin still registered?"

    def covers(ack_path: str, ack_rule: str, finding: tuple[str, str]) -> bool:
        path, rule = finding
        return rule == ack_rule and (path == ack_path or path.startswith(ack_path + "/"))

    unacknowledged = {f for f in findings if not any(covers(a.path, a.rule_id, f) for a in stack.acknowledged)}
    unused = [a for a in stack.acknowledged if not any(covers(a.path, a.rule_id, f) for f in findings)]
    assert not unacknowledged
    assert not unused, f"acknowledgements with no finding behind them: {unused}"


@pytest.mark.parametrize("context", CHECKED.values(), ids=CHECKED.keys())
def test_cfn_lint_is_clean_in_every_auth_mode(context: dict[str, Any], tmp_path: Path) -> None:
    stack = synthesize(context, tmp_path, template=False)
    stack.app.synth()
    lint = cfn_lint(tmp_path / f"{stack.stack.stack_name}.template.json")
    assert lint.returncode == 0, lint.stdout + lint.stderr
