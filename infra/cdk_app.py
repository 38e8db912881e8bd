"""CDK entry point: `npx cdk synth` (cdk.json runs `python -m infra.cdk_app` with functions/ on the path)."""

from __future__ import annotations

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import DeploymentConfig
from infra.stack import McpTasksStack

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
