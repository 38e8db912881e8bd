"""Composition root: settings, sealing keys, registries and AWS-backed services, built once per container."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from app.telemetry import PowertoolsTelemetry
from mcp_runtime.context import RequestContext
from mcp_runtime.lambda_http import request_from_event, response_to_proxy
from mcp_runtime.observability import NO_TELEMETRY, Telemetry
from mcp_runtime.sealing import SealingKey, StateSealer
from mcp_runtime.server import McpServer, TaskGateway
from mcp_runtime.settings import DEV_STATE_KEY, Settings, get_settings
from mcp_runtime.transport import McpHttpTransport

if TYPE_CHECKING:
    from mcp_runtime.handles import HandleStore
    from mcp_runtime.tasks.history import DynamoTaskHistory


def sealing_keys(settings: Settings) -> list[SealingKey]:
    """Keys for requestState. AWS: a Secrets Manager secret (JSON `{"keys":[{"id","secret"}]}` or a
    plain string), cached by Powertools parameters. Locally: MCP_STATE_KEY, or a fixed dev key."""
    if settings.state_secret_arn:
        from aws_lambda_powertools.utilities import parameters

        raw: Any = parameters.get_secret(settings.state_secret_arn, max_age=300)
        text_value = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            document = json.loads(text_value)
        except ValueError:
            document = None
        if isinstance(document, dict) and isinstance(document.get("keys"), list):
            return [SealingKey(str(k["id"]), str(k["secret"]).encode()) for k in document["keys"]]
        return [SealingKey("k1", text_value.encode())]
    if settings.state_key:
        return [SealingKey("k1", settings.state_key.encode())]
    if settings.local_mode or settings.dev_auth:
        return [SealingKey("dev", DEV_STATE_KEY.encode())]
    # The development key is public: serving with it would let anyone forge requestState.
    raise RuntimeError("no requestState key: set MCP_STATE_SECRET_ARN (AWS) or MCP_STATE_KEY")


T = TypeVar("T")


class LazyService(Generic[T]):
    """Stands in for a service and builds it on first use (thread-safe), then delegates to it."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._service: T | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        service = self._service
        if service is None:
            with self._lock:
                if self._service is None:
                    self._service = self._factory()
                service = self._service
        return getattr(service, name)


def _task_service(settings: Settings, telemetry: Telemetry) -> TaskGateway:
    from app.task_wiring import build_task_service

    return build_task_service(settings, telemetry)


def _handle_store(settings: Settings, telemetry: Telemetry) -> HandleStore:
    from mcp_runtime.handles import DynamoHandleStore

    return DynamoHandleStore(settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


def _task_history(settings: Settings, telemetry: Telemetry) -> DynamoTaskHistory:
    from mcp_runtime.tasks.history import DynamoTaskHistory

    return DynamoTaskHistory(settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


def _register_project_tools(server: McpServer) -> None:
    import tools

    tools.register(server)


def build_server(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> McpServer:
    server = McpServer(
        settings,
        StateSealer(sealing_keys(settings), lifetime_seconds=settings.state_lifetime_seconds),
        telemetry=telemetry,
    )
    if settings.state_machine_arn:
        # Tasks, handles and the task history share the task table. Each is built on first use, so
        # a container that only answers server/discover or plain calls never imports them.
        server.tasks = cast(TaskGateway, LazyService(lambda: _task_service(settings, telemetry)))
        server.handles = cast("HandleStore", LazyService(lambda: _handle_store(settings, telemetry)))
        server.history = cast("DynamoTaskHistory", LazyService(lambda: _task_history(settings, telemetry)))
    server.tools.add_loader(lambda: _register_project_tools(server))
    if settings.fixtures == "conformance":
        from fixtures import conformance

        conformance.register(server)
    return server


@lru_cache(maxsize=1)
def telemetry() -> PowertoolsTelemetry:
    """Metrics (EMF), JSON logs and spans for this container. Powertools itself is imported only when
    something is recorded: importing it costs ~35 M instructions (about 10 ms) of cold start, which a
    request that logs nothing should not pay (bench/)."""
    built = PowertoolsTelemetry(get_settings().server_name)
    built.install_log_handler()
    return built


def logger() -> Any:
    """The Powertools Logger (structured JSON with the correlation keys), built on first use."""
    return telemetry().logger


def _correlate(ctx: RequestContext) -> None:
    telemetry().correlate_request(ctx.request_id, ctx.method)


@lru_cache(maxsize=1)
def transport() -> McpHttpTransport:
    from mcp_runtime.legacy import legacy_leg

    server = build_server(get_settings(), telemetry())
    return McpHttpTransport(
        server, on_request=_correlate, legacy=legacy_leg(server, get_settings(), telemetry(), _correlate)
    )


def handle_api_event(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    settings = get_settings()
    with telemetry().invocation(context):
        request = request_from_event(event, dev_auth=settings.dev_auth, require_principal=settings.require_principal)
        response = transport().handle(request)
    return response_to_proxy(response)


def reset() -> None:
    """Forget the per-container singletons (tests that change settings between servers)."""
    get_settings.cache_clear()
    transport.cache_clear()
    telemetry.cache_clear()
