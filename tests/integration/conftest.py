"""Fixtures of the integration tier. The task fixtures (embedded moto, fresh task resources) live in
task_harness; a bare table in in-process moto, for the handle and legacy stores, in table_harness."""

from tests.integration.table_harness import clock, dynamodb
from tests.integration.task_harness import assembly, deployed, embedded_aws, task_env

__all__ = ["assembly", "clock", "deployed", "dynamodb", "embedded_aws", "task_env"]
