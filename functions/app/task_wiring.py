"""Task-side composition: the task service for the API function and the worker for the worker function.

Both read the same settings and the worker serves the same tool registry as the API
(`build_server(settings).tools`), so a task runs exactly the tool the client called.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from mcp_runtime.observability import NO_TELEMETRY, Telemetry
from mcp_runtime.settings import Settings, get_settings
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.worker import TaskWorker


def build_task_store(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> DynamoTaskStore:
    return DynamoTaskStore(settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


def build_task_executor(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> StepFunctionsExecutor:
    return StepFunctionsExecutor(
        settings.state_machine_arn or "",
        endpoint_url=settings.aws_endpoint_url,
        release_parked_on_stop=settings.task_release_parked_on_stop,
        telemetry=telemetry,
    )


def build_task_service(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskService:
    return TaskService(
        build_task_store(settings, telemetry),
        build_task_executor(settings, telemetry),
        ttl_ms=settings.task_default_ttl_ms,
        poll_interval_ms=settings.task_poll_interval_ms,
        reconcile_after_seconds=settings.task_reconcile_after_seconds,
        telemetry=telemetry,
    )


def build_task_worker(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskWorker:
    from app.composition import build_server

    return TaskWorker(
        build_task_store(settings, telemetry),
        build_task_executor(settings, telemetry),
        build_server(settings).tools,
        progress_interval_seconds=settings.task_progress_interval_ms / 1000,
        telemetry=telemetry,
    )


@lru_cache(maxsize=1)
def task_worker() -> TaskWorker:
    from app.composition import telemetry

    return build_task_worker(get_settings(), telemetry())


def handle_worker_event(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    from app.composition import telemetry

    with telemetry().invocation(context):
        return task_worker().handle(event)
