"""Task-side composition: the task service for the API function and the worker for the worker function.

Both read the same settings and the worker serves the same tool registry as the API
(`build_server(settings).tools`), so a task runs exactly the tool the client called.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from mcp_runtime.settings import Settings, get_settings
from mcp_runtime.tasks.executor import StepFunctionsExecutor
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tasks.store import DynamoTaskStore
from mcp_runtime.tasks.worker import TaskWorker


def build_task_store(settings: Settings) -> DynamoTaskStore:
    return DynamoTaskStore(settings.task_table_name, endpoint_url=settings.aws_endpoint_url)


def build_task_executor(settings: Settings) -> StepFunctionsExecutor:
    return StepFunctionsExecutor(
        settings.state_machine_arn or "",
        endpoint_url=settings.aws_endpoint_url,
        release_parked_on_stop=settings.task_release_parked_on_stop,
    )


def build_task_service(settings: Settings) -> TaskService:
    return TaskService(
        build_task_store(settings),
        build_task_executor(settings),
        ttl_ms=settings.task_default_ttl_ms,
        poll_interval_ms=settings.task_poll_interval_ms,
        reconcile_after_seconds=settings.task_reconcile_after_seconds,
    )


def build_task_worker(settings: Settings) -> TaskWorker:
    from app.composition import build_server

    return TaskWorker(
        build_task_store(settings),
        build_task_executor(settings),
        build_server(settings).tools,
        progress_interval_seconds=settings.task_progress_interval_ms / 1000,
    )


@lru_cache(maxsize=1)
def task_worker() -> TaskWorker:
    return build_task_worker(get_settings())


def handle_worker_event(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return task_worker().handle(event)
