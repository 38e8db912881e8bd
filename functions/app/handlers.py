"""The Lambda entry points (`app.handlers.api_handler`, `app.handlers.worker_handler`,
`app.handlers.supervisor_handler`, `app.handlers.sweeper_handler`, `app.handlers.callback_handler`).

Each is one line over a service the composition root builds once per container, on first use.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from app import cold_start  # noqa: F401  (before anything imports pydantic)
from app.composition import (
    build_api_endpoint,
    build_callback_endpoint,
    build_supervisor_endpoint,
    build_sweeper_endpoint,
    build_worker_endpoint,
)
from app.endpoints import ApiEndpoint, CallbackEndpoint, SupervisorEndpoint, SweeperEndpoint, WorkerEndpoint
from app.telemetry import PowertoolsTelemetry
from mcp_runtime.settings import get_settings


def api_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return api_endpoint().handle(event, context)


def worker_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return worker_endpoint().handle(event, context)


def supervisor_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return supervisor_endpoint().handle(event, context)


def sweeper_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return sweeper_endpoint().handle(event, context)


def callback_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return callback_endpoint().handle(event, context)


@lru_cache(maxsize=1)
def telemetry() -> PowertoolsTelemetry:
    """Metrics (EMF), JSON logs and spans for this container; Powertools is imported on first record."""
    settings = get_settings()
    built = PowertoolsTelemetry(settings.server_name)
    built.install_log_handler(settings.tool_package_names)
    return built


@lru_cache(maxsize=1)
def api_endpoint() -> ApiEndpoint:
    return build_api_endpoint(get_settings(), telemetry())


@lru_cache(maxsize=1)
def worker_endpoint() -> WorkerEndpoint:
    return build_worker_endpoint(get_settings(), telemetry())


@lru_cache(maxsize=1)
def supervisor_endpoint() -> SupervisorEndpoint:
    return build_supervisor_endpoint(get_settings(), telemetry())


@lru_cache(maxsize=1)
def sweeper_endpoint() -> SweeperEndpoint:
    return build_sweeper_endpoint(get_settings(), telemetry())


@lru_cache(maxsize=1)
def callback_endpoint() -> CallbackEndpoint:
    return build_callback_endpoint(get_settings(), telemetry())


def reset() -> None:
    """Forget the per-container singletons (tests that change settings between containers)."""
    get_settings.cache_clear()
    api_endpoint.cache_clear()
    worker_endpoint.cache_clear()
    supervisor_endpoint.cache_clear()
    sweeper_endpoint.cache_clear()
    callback_endpoint.cache_clear()
    telemetry.cache_clear()
