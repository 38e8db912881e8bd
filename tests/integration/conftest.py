"""Fixtures of the integration tier. The task fixtures (embedded moto, fresh task resources) live in task_harness."""

from tests.integration.task_harness import assembly, deployed, embedded_aws, task_env

__all__ = ["assembly", "deployed", "embedded_aws", "task_env"]
