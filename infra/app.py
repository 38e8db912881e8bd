"""CDK entry point: `npx cdk synth` (cdk.json runs this file) or `python -m infra.app`."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Run as a script, Python puts infra/ itself on sys.path, where `app.py` would shadow the Lambda
# package `app`. Import through the repository root instead, with functions/ for the schema.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != REPO_ROOT / "infra"]
for entry in (str(REPO_ROOT), str(REPO_ROOT / "functions")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from aws_cdk import App, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from infra.config import DeploymentConfig  # noqa: E402
from infra.stack import McpTasksStack  # noqa: E402

DEFAULT_STACK_NAME = "ServerlessMcpTasks"


def build_app(app: App | None = None, *, nag: bool = True) -> tuple[App, McpTasksStack]:
    app = app or App()
    stack_name = str(app.node.try_get_context("stackName") or DEFAULT_STACK_NAME)
    stack = McpTasksStack(
        app,
        stack_name,
        config=DeploymentConfig.from_context(app),
        # Environment-agnostic: `cdk deploy` targets the account and region of the caller's profile,
        # and the template is the same wherever it is synthesized.
        description="serverless-mcp-tasks: an MCP (2026-07-28) server on Lambda with durable tasks",
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


if __name__ == "__main__":
    built, _ = build_app()
    built.synth()
