"""cdk-nag AwsSolutionsChecks: no finding left unacknowledged, and no acknowledgement left unused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import (
    CLIENT_CREDENTIALS,
    FULL_OPTIONS,
    OWN_ISSUER,
    TOOL_CONFIGURATION,
    Synthesized,
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


@dataclass(frozen=True)
class Checked:
    """A configuration synthesized as `cdk synth` does (cdk-nag with the acknowledgements), and cfn-lint's
    findings on its template."""

    stack: Synthesized
    failure: Exception | None
    lint_findings: list[str]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Checked]:
    """Every CHECKED configuration synthesized once, and its templates linted by one cfn-lint process."""
    synthesized: dict[str, tuple[Synthesized, Exception | None]] = {}
    for name, context in CHECKED.items():
        stack = synthesize(context, tmp_path_factory.mktemp("checked"), template=False)
        try:
            stack.app.synth()  # the nag plugin fails the synth on any unacknowledged finding
            synthesized[name] = (stack, None)
        except Exception as failure:
            synthesized[name] = (stack, failure)
    templates = {
        name: stack.outdir / f"{stack.stack.stack_name}.template.json"
        for name, (stack, failure) in synthesized.items()
        if failure is None
    }
    lint = cfn_lint(*templates.values(), parseable=True)
    assert lint.returncode != 1, f"cfn-lint failed to run:\n{lint.stdout}{lint.stderr}"  # 1: its own error
    return {
        name: Checked(
            stack,
            failure,
            [line for line in lint.stdout.splitlines() if name in templates and line.startswith(f"{templates[name]}:")],
        )
        for name, (stack, failure) in synthesized.items()
    }


@pytest.mark.parametrize("name", CONFIGURATIONS.keys())
def test_no_unacknowledged_findings(checked: dict[str, Checked], name: str) -> None:
    assert checked[name].failure is None, checked[name].failure
    for acknowledged in checked[name].stack.acknowledged:
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


@pytest.mark.parametrize("name", CHECKED.keys())
def test_cfn_lint_is_clean_in_every_auth_mode(checked: dict[str, Checked], name: str) -> None:
    assert checked[name].failure is None, checked[name].failure
    assert checked[name].lint_findings == []
