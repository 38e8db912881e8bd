"""Composition root: settings, sealing keys, registries and AWS-backed services, built once per container."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from app.telemetry import PowertoolsTelemetry
from mcp_runtime.context import RequestContext
from mcp_runtime.lambda_http import request_from_event, response_to_proxy
from mcp_runtime.observability import NO_TELEMETRY, Telemetry
from mcp_runtime.sealing import SealingKey, StateSealer
from mcp_runtime.server import McpServer
from mcp_runtime.settings import DEV_STATE_KEY, Settings, get_settings
from mcp_runtime.transport import McpHttpTransport


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


def build_server(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> McpServer:
    server = McpServer(
        settings,
        StateSealer(sealing_keys(settings), lifetime_seconds=settings.state_lifetime_seconds),
        telemetry=telemetry,
    )
    if settings.state_machine_arn:
        # Tasks, handles and the task history share the task table.
        from app.task_wiring import build_task_service
        from mcp_runtime.handles import DynamoHandleStore
        from mcp_runtime.tasks.history import DynamoTaskHistory

        server.tasks = build_task_service(settings, telemetry)
        server.handles = DynamoHandleStore(
            settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry
        )
        server.history = DynamoTaskHistory(
            settings.task_table_name, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry
        )
    import tools

    tools.register(server)
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
    return McpHttpTransport(build_server(get_settings(), telemetry()), on_request=_correlate)


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
