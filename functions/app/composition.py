"""Composition root: builds every object the two functions use, each in one way, and nothing else.

`build_catalog` is the one place tools, prompts and resources are registered: the API serves the
catalog, the worker runs the same tools with the same context (handles, task history). The worker
needs no requestState key and gets none: only the API seals and opens MRTR state.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from app.endpoints import ApiEndpoint, CallbackEndpoint, SupervisorEndpoint, SweeperEndpoint, WorkerEndpoint
from mcp_runtime.catalog import Catalog, declared_kinds
from mcp_runtime.observability import NO_TELEMETRY, Telemetry
from mcp_runtime.sealing import SealingKey, StateSealer
from mcp_runtime.server import McpServer, TaskOperations
from mcp_runtime.settings import DEV_STATE_KEY, Settings
from mcp_runtime.tool_secrets import ToolSecrets
from mcp_runtime.tools import Registry

if TYPE_CHECKING:
    from app.telemetry import PowertoolsTelemetry
    from mcp_runtime.bearer import BearerAuthenticator
    from mcp_runtime.context import RequestContext
    from mcp_runtime.handles import DynamoHandleStore, Handle, HandleStore
    from mcp_runtime.tasks.callbacks import CallbackService
    from mcp_runtime.tasks.executor import StepFunctionsExecutor
    from mcp_runtime.tasks.history import DynamoTaskHistory, TaskHistory, TaskPage
    from mcp_runtime.tasks.payloads import S3PayloadStore
    from mcp_runtime.tasks.service import TaskService
    from mcp_runtime.tasks.store import DynamoTaskStore
    from mcp_runtime.tasks.supervisor import TaskSupervisor
    from mcp_runtime.tasks.sweeper import TaskSweeper
    from mcp_runtime.tasks.worker import TaskWorker
    from mcp_runtime.tools import ToolSpec

TABLE_PURPOSE = "the task table's name (the template sets it from the table)"
MACHINE_PURPOSE = "the state machine that runs tasks (the template sets it from the workflow)"


# ---- the catalog: one way, for both functions ------------------------------------------------------
def build_catalog(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> Catalog:
    """The tool packages MCP_TOOL_PACKAGES names (default: the project's `tools`), each registered
    through its `register(catalog, *, table_backed)` on the first lookup (a cold discover imports none),
    or at once with MCP_REGISTER_TOOLS_AT_START.

    Tools that keep state in the task table are served wherever the table is configured.
    """
    # Its telemetry names what it leaves out (ComponentsLeftOut); a cold server/discover advertises the
    # prompts and resources the packages' sources declare, importing none of them.
    catalog = Catalog(Registry(telemetry, declared=lambda: declared_kinds(settings.tool_package_names)))
    table_backed = bool(settings.task_table_name)

    def register_tool_packages() -> None:
        for name in settings.tool_package_names:
            import_module(name).register(catalog, table_backed=table_backed)

    if settings.register_tools_at_start:
        register_tool_packages()
    else:
        catalog.tools.add_loader(register_tool_packages)
    return catalog


def build_tool_secrets(settings: Settings) -> ToolSecrets:
    """What `ctx.secret(name)` reads (cdk.json's toolSecrets), each on its first use in the container."""
    return ToolSecrets(settings.tool_secrets, endpoint_url=settings.aws_endpoint_url)


# ---- the task table and the workflow ------------------------------------------------------------
def build_task_store(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> DynamoTaskStore:
    from mcp_runtime.tasks.store import DynamoTaskStore

    table = settings.require("task_table_name", TABLE_PURPOSE)
    return DynamoTaskStore(
        table, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry, lease_seconds=settings.task_lease_seconds
    )


def build_task_executor(
    settings: Settings,
    telemetry: Telemetry = NO_TELEMETRY,
    *,
    max_attempts: int | None = None,
    retry_for_seconds: float | None = None,
) -> StepFunctionsExecutor:
    """The workflow's executor; `max_attempts` caps each call's attempts (default: the AWS caller's), or
    `retry_for_seconds` bounds its retries in time instead."""
    from mcp_runtime._aws import MAX_ATTEMPTS
    from mcp_runtime.tasks.executor import StepFunctionsExecutor

    return StepFunctionsExecutor(
        settings.require("state_machine_arn", MACHINE_PURPOSE),
        endpoint_url=settings.aws_endpoint_url,
        telemetry=telemetry,
        max_attempts=MAX_ATTEMPTS if max_attempts is None else max_attempts,
        retry_for_seconds=retry_for_seconds,
    )


def build_payload_store(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> S3PayloadStore | None:
    """The bucket for results and records too large for the item (none: they must fit in it)."""
    if not settings.task_payload_bucket:
        return None
    from mcp_runtime.tasks.payloads import S3PayloadStore

    return S3PayloadStore(settings.task_payload_bucket, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


def build_task_service(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskService:
    """The API side: reads and conditional writes on the table, each write's Step Functions call made
    directly (briefly retried: the supervisor carries on from the stream)."""
    from mcp_runtime.tasks.service import DIRECT_CALL_ATTEMPTS, TaskService

    return TaskService(
        build_task_store(settings, telemetry),
        executor=build_task_executor(settings, telemetry, max_attempts=DIRECT_CALL_ATTEMPTS),
        ttl_ms=settings.task_default_ttl_ms,
        poll_interval_ms=settings.task_poll_interval_ms,
        payloads=build_payload_store(settings, telemetry),
        telemetry=telemetry,
    )


def build_handle_store(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> DynamoHandleStore:
    from mcp_runtime.handles import DynamoHandleStore

    table = settings.require("task_table_name", TABLE_PURPOSE)
    return DynamoHandleStore(table, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


def build_task_history(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> DynamoTaskHistory:
    from mcp_runtime.tasks.history import DynamoTaskHistory

    table = settings.require("task_table_name", TABLE_PURPOSE)
    return DynamoTaskHistory(table, endpoint_url=settings.aws_endpoint_url, telemetry=telemetry)


T = TypeVar("T")


class LazyService(Generic[T]):
    """A service built on first use (thread-safe): `service()` builds it once and returns it."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._service: T | None = None
        self._lock = threading.Lock()

    def service(self) -> T:
        service = self._service
        if service is None:
            with self._lock:
                if self._service is None:
                    self._service = self._factory()
                service = self._service
        return service


# The services the API builds on first use. Each lazy class names the type it builds and has the
# methods of the Protocol the server takes it as, each forwarding to the built service: mypy checks
# each forward against the built type, and the class against that Protocol where `build_server`
# passes it on (no cast, nothing typed Any).
class LazyTaskService(LazyService["TaskService"]):
    """The server's `TaskOperations` (mcp_runtime.server), by a `TaskService` built on first use."""

    def create(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any) -> dict[str, Any]:
        return self.service().create(spec, arguments, ctx, prepared)

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]:
        return self.service().get(task_id, ctx)

    def follow(
        self, task_id: str, ctx: RequestContext
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], ...], tuple[float, float | None] | None]:
        return self.service().follow(task_id, ctx)

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: RequestContext) -> None:
        self.service().update(task_id, input_responses, ctx)

    def cancel(self, task_id: str, ctx: RequestContext) -> None:
        self.service().cancel(task_id, ctx)


class LazyHandleStore(LazyService["DynamoHandleStore"]):
    """A `HandleStore` (mcp_runtime.handles), by a `DynamoHandleStore` built on first use."""

    def mint(self, owner: str, kind: str, data: dict[str, Any], ttl_seconds: int) -> Handle:
        return self.service().mint(owner, kind, data, ttl_seconds)

    def resolve(self, owner: str, kind: str, handle_id: str) -> Handle:
        return self.service().resolve(owner, kind, handle_id)

    def update(self, handle: Handle, data: dict[str, Any]) -> Handle:
        return self.service().update(handle, data)

    def delete(self, handle: Handle) -> None:
        self.service().delete(handle)


class LazyTaskHistory(LazyService["DynamoTaskHistory"]):
    """A `TaskHistory` (mcp_runtime.tasks.history), by a `DynamoTaskHistory` built on first use."""

    def page(self, owner: str, limit: int = 20, cursor: str | None = None) -> TaskPage:
        return self.service().page(owner, limit, cursor)


# ---- the API function ---------------------------------------------------------------------------
def sealing_keys(settings: Settings) -> Callable[[], list[SealingKey]]:
    """Where requestState keys come from, checked now and read by the first seal or open. AWS: a
    Secrets Manager secret (JSON `{"keys":[{"id","secret"}]}` or a plain string), read through
    Powertools parameters (so boto3 loads then, not with the function). Otherwise MCP_STATE_KEY, or,
    with DEV_AUTH only, a fixed development key."""
    if settings.state_secret_arn:
        arn = settings.state_secret_arn
        return lambda: _keys_of_secret(arn)
    if settings.state_key:
        keys = [SealingKey("k1", settings.state_key.encode())]
    elif settings.dev_auth:
        keys = [SealingKey("dev", DEV_STATE_KEY.encode())]
    else:
        # The development key is public: serving with it would let anyone forge requestState.
        raise RuntimeError("no requestState key: set MCP_STATE_SECRET_ARN (AWS) or MCP_STATE_KEY")
    return lambda: keys


def _keys_of_secret(arn: str) -> list[SealingKey]:
    from aws_lambda_powertools.utilities import parameters

    raw: Any = parameters.get_secret(arn, max_age=300)
    text_value = raw.decode() if isinstance(raw, bytes) else str(raw)
    try:
        document = json.loads(text_value)
    except ValueError:
        document = None
    if isinstance(document, dict) and isinstance(document.get("keys"), list):
        return [SealingKey(str(k["id"]), str(k["secret"]).encode()) for k in document["keys"]]
    return [SealingKey("k1", text_value.encode())]


def build_server(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> McpServer:
    catalog = build_catalog(settings, telemetry)
    handles: HandleStore | None = None
    history: TaskHistory | None = None
    tasks: TaskOperations | None = None
    if settings.task_table_name:
        # Handles and the task history share the task table. Each is built on first use, so a
        # container that only answers server/discover or plain calls never imports them
        # (bench/README.md, "Decisions the benchmarks back").
        handles = LazyHandleStore(lambda: build_handle_store(settings, telemetry))
        history = LazyTaskHistory(lambda: build_task_history(settings, telemetry))
    if settings.state_machine_arn:
        settings.require("task_table_name", TABLE_PURPOSE + "; durable tasks live in it")
        tasks = LazyTaskService(lambda: build_task_service(settings, telemetry))
    return McpServer(
        settings,
        StateSealer(sealing_keys(settings), lifetime_seconds=settings.state_lifetime_seconds),
        tools=catalog.tools,
        tasks=tasks,
        handles=handles,
        history=history,
        telemetry=telemetry,
        secrets=build_tool_secrets(settings),
    )


def build_authenticator(settings: Settings) -> BearerAuthenticator | None:
    """Bearer-token validation when an issuer is configured (PyJWT and rsa load with the first token)."""
    if not settings.jwt_issuer:
        return None
    from mcp_runtime.bearer import BearerAuthenticator
    from mcp_runtime.tokens import IssuerValidators, KeySet, KmsKeySet, TokenValidator

    keys = KeySet(settings.jwt_issuer, settings.jwt_jwks_url, aws_endpoint_url=settings.aws_endpoint_url)
    validator = TokenValidator(
        settings.jwt_issuer,
        keys,
        audiences=settings.jwt_audiences,
        required_scopes=settings.jwt_scopes,
        audience_optional=settings.jwt_audience_optional,
    )
    if not (settings.bridge_issuer and settings.bridge_signing_key_id):
        return BearerAuthenticator(validator)
    bridge = TokenValidator(
        settings.bridge_issuer,
        KmsKeySet(settings.bridge_signing_key_id, aws_endpoint_url=settings.aws_endpoint_url),
        audiences=settings.jwt_audiences,
        required_scopes=settings.jwt_scopes,
    )
    return BearerAuthenticator(IssuerValidators(validator, bridge))


def build_api_endpoint(settings: Settings, telemetry: PowertoolsTelemetry) -> ApiEndpoint:
    from mcp_runtime.transport import McpHttpTransport

    def correlate(ctx: RequestContext) -> None:
        telemetry.correlate_request(ctx.request_id, ctx.method)

    from mcp_runtime.legacy import legacy_leg

    authenticator = build_authenticator(settings)
    server = build_server(settings, telemetry)
    legacy = legacy_leg(server, settings, telemetry, correlate)
    transport = McpHttpTransport(server, on_request=correlate, legacy=legacy, authenticator=authenticator)
    # With an issuer, a request the front did not authenticate must bring a valid token.
    require_principal = settings.require_principal or authenticator is not None
    return ApiEndpoint(
        transport,
        telemetry,
        dev_auth=settings.dev_auth,
        require_principal=require_principal,
        iam_binding=settings.iam_principal,
    )


# ---- the worker function ------------------------------------------------------------------------
def build_worker(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskWorker:
    from mcp_runtime.tasks.executor import StepFunctionsExecutor
    from mcp_runtime.tasks.worker import TaskWorker

    return TaskWorker(
        build_task_store(settings, telemetry),
        # It only answers the task tokens it holds: no state machine ARN needed (nor set).
        StepFunctionsExecutor("", endpoint_url=settings.aws_endpoint_url, telemetry=telemetry),
        build_catalog(settings, telemetry).tools,
        handles=build_handle_store(settings, telemetry),
        history=build_task_history(settings, telemetry),
        payloads=build_payload_store(settings, telemetry),
        callback_url=settings.task_callback_url,
        rounds_per_execution=settings.task_rounds_per_execution,
        max_operations=settings.task_max_steps,
        progress_interval_seconds=settings.task_progress_interval_ms / 1000,
        telemetry=telemetry,
        secrets=build_tool_secrets(settings),
    )


def build_worker_endpoint(settings: Settings, telemetry: PowertoolsTelemetry) -> WorkerEndpoint:
    return WorkerEndpoint(build_worker(settings, telemetry), telemetry)


# ---- the supervisor function --------------------------------------------------------------------
def build_supervisor(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskSupervisor:
    from mcp_runtime.tasks.supervisor import TaskSupervisor

    # A throttled or failing Step Functions is retried inside the invocation for a time, not a count of
    # attempts: each of the stream mapping's retries then rides out that much of an outage.
    executor = build_task_executor(settings, telemetry, retry_for_seconds=settings.task_supervisor_retry_seconds)
    return TaskSupervisor(build_task_store(settings, telemetry), executor, telemetry=telemetry)


def build_supervisor_endpoint(settings: Settings, telemetry: PowertoolsTelemetry) -> SupervisorEndpoint:
    return SupervisorEndpoint(build_supervisor(settings, telemetry), telemetry)


# ---- the sweeper function ----------------------------------------------------------------------
def build_sweeper(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> TaskSweeper:
    from mcp_runtime.tasks.sweeper import TaskSweeper

    return TaskSweeper(
        build_task_store(settings, telemetry),
        build_task_executor(settings, telemetry),
        max_checks=settings.task_sweep_max_checks,
        telemetry=telemetry,
    )


def build_sweeper_endpoint(settings: Settings, telemetry: PowertoolsTelemetry) -> SweeperEndpoint:
    return SweeperEndpoint(build_sweeper(settings, telemetry), telemetry)


# ---- the callback function ----------------------------------------------------------------------
def build_callback_service(settings: Settings, telemetry: Telemetry = NO_TELEMETRY) -> CallbackService:
    from mcp_runtime.tasks.callbacks import CallbackService

    return CallbackService(
        build_task_store(settings, telemetry), build_payload_store(settings, telemetry), telemetry=telemetry
    )


def build_callback_endpoint(settings: Settings, telemetry: PowertoolsTelemetry) -> CallbackEndpoint:
    return CallbackEndpoint(build_callback_service(settings, telemetry), telemetry)
