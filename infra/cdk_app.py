"""CDK entry point: `npx cdk synth` (cdk.json runs `python -m infra.cdk_app` with functions/ on the path)."""

from __future__ import annotations

from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import DeploymentConfig
from infra.naming import stack_name
from infra.stack import McpTasksStack


def build_app(app: App | None = None, *, nag: bool = True) -> tuple[App, McpTasksStack]:
    app = app or App()
    config = DeploymentConfig.from_context(app)
    stack = McpTasksStack(
        app,
        stack_name(app.node.get_all_context()),
        config=config,
        # Environment-agnostic: `cdk deploy` targets the account and region of the caller's profile,
        # and the template is the same wherever it is synthesized.
        description=f"{config.project_name}: an MCP (2026-07-28) server on Lambda with durable tasks",
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack


if __name__ == "__main__":
    built, _ = build_app()
    built.synth()
