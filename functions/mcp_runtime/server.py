"""The MCP service: a registry of method -> params model -> handler, over the tool/prompt/resource registries.

Handlers raise `McpError`s; the transport maps every exception to the wire in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ValidationError

from . import wire
from ._aws import seconds_left
from ._deadline import DeadlinePassed, ToolDeadline
from ._value import ValueObject
from .catalog import Prompts, Resources
from .context import RequestContext
from .cursors import InvalidCursor, decode_cursor, encode_cursor
from .errors import HeaderMismatch, InvalidParams, MissingRequiredClientCapability
from .headers import decode_header_value, header_matches
from .limits import INLINE_TASK_MARGIN_SECONDS, LIST_PAGE_SIZE, MAX_INPUT_REQUEST_KEYS, MAX_INPUT_RESPONSES
from .mrtr import Asker, InputNeeded
from .observability import MRTR_ROUNDS, NO_TELEMETRY, Telemetry
from .params import (
    CallToolParams,
    CompleteParams,
    EmptyParams,
    GetPromptParams,
    MrtrParams,
    PaginatedParams,
    ReadResourceParams,
    TaskIdParams,
    UpdateTaskParams,
)
from .sealing import Binding, StateSealer
from .settings import Settings
from .tool_secrets import NO_SECRETS, ToolSecrets
from .tools import ASKABLE, Registry, ToolContext, ToolError, ToolResult, ToolSpec, text

if TYPE_CHECKING:  # loaded only where the task table is configured
    from .handles import HandleStore
    from .tasks.history import TaskHistory

Handler = Callable[[Any, RequestContext], dict[str, Any]]
log = logging.getLogger(__name__)

# The tool error of a task tool that ran inline (its client declared no tasks support) out of time.
INLINE_TASK_TIMED_OUT = (
    "This tool needs more time than one request allows: call it from a client with tasks support "
    f"(the {wire.TASKS_EXTENSION} extension), where it runs as a task."
)


class MethodSpec(ValueObject):
    """One entry of the method registry: how its params are read and who handles it."""

    __slots__ = ("capability", "handler", "params_model", "requires_extension")
    params_model: type[BaseModel]
    handler: Handler
    capability: str
    requires_extension: str | None

    def __init__(
        self, params_model: type[BaseModel], handler: Handler, capability: str, requires_extension: str | None = None
    ) -> None:
        self.params_model = params_model
        self.handler = handler
        # Server capability that must be advertised for the method to exist.
        self.capability = capability
        # Client capability (or extension) a request must declare to use the method.
        self.requires_extension = requires_extension


class TaskOperations(Protocol):
    """What the server asks of the durable-task side (the tasks extension), injected when configured:
    `mcp_runtime.tasks.service.TaskService` (in the API function, `app.composition.LazyTaskService`)."""

    def create(
        self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext, prepared: Any
    ) -> dict[str, Any]: ...

    def get(self, task_id: str, ctx: RequestContext) -> dict[str, Any]: ...

    def follow(
        self, task_id: str, ctx: RequestContext
    ) -> tuple[dict[str, Any], tuple[dict[str, Any], ...], tuple[float, float | None] | None]:
        """`get`'s answer and the tool's latest `ctx.log` lines (`{seq, level, data, logger}`), from one read."""
        ...

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: RequestContext) -> None: ...

    def cancel(self, task_id: str, ctx: RequestContext) -> None: ...


class McpServer:
    """The MCP methods of the 2026-07-28 protocol, dispatched from a registry of `MethodSpec`s."""

    __slots__ = (
        "_methods",
        "handles",
        "history",
        "prompts",
        "resources",
        "sealer",
        "secrets",
        "settings",
        "tasks",
        "telemetry",
        "tools",
    )
    settings: Settings
    sealer: StateSealer
    tools: Registry
    prompts: Prompts
    resources: Resources
    tasks: TaskOperations | None
    handles: HandleStore | None
    history: TaskHistory | None
    secrets: ToolSecrets
    telemetry: Telemetry
    _methods: dict[str, MethodSpec]

    def __init__(
        self,
        settings: Settings,
        sealer: StateSealer,
        tools: Registry | None = None,
        tasks: TaskOperations | None = None,
        handles: HandleStore | None = None,
        history: TaskHistory | None = None,
        telemetry: Telemetry = NO_TELEMETRY,
        secrets: ToolSecrets = NO_SECRETS,
    ) -> None:
        self.settings = settings
        self.sealer = sealer
        self.tools = Registry() if tools is None else tools
        self.prompts = Prompts(self.tools)  # views of the one registry
        self.resources = Resources(self.tools)
        self.tasks = tasks
        self.handles = handles
        self.history = history
        self.secrets = secrets
        self.telemetry = telemetry
        self._methods = {
            "server/discover": MethodSpec(EmptyParams, self.discover, "always"),
            "tools/list": MethodSpec(PaginatedParams, self.list_tools, "tools"),
            "tools/call": MethodSpec(CallToolParams, self.call_tool, "tools"),
            "prompts/list": MethodSpec(PaginatedParams, self.list_prompts, "prompts"),
            "prompts/get": MethodSpec(GetPromptParams, self.get_prompt, "prompts"),
            "resources/list": MethodSpec(PaginatedParams, self.list_resources, "resources"),
            "resources/templates/list": MethodSpec(PaginatedParams, self.list_resource_templates, "resources"),
            "resources/read": MethodSpec(ReadResourceParams, self.read_resource, "resources"),
            "completion/complete": MethodSpec(CompleteParams, self.complete, "completions"),
            "tasks/get": MethodSpec(TaskIdParams, self.get_task, "tasks", wire.TASKS_EXTENSION),
            "tasks/update": MethodSpec(UpdateTaskParams, self.update_task, "tasks", wire.TASKS_EXTENSION),
            "tasks/cancel": MethodSpec(TaskIdParams, self.cancel_task, "tasks", wire.TASKS_EXTENSION),
        }

    # ---- capabilities and dispatch -------------------------------------------------------
    def capabilities(self) -> dict[str, Any]:
        capabilities: dict[str, Any] = {}
        if self.tools.declares_tools():
            capabilities["tools"] = {}
        # Without loading the deferred tool modules (a cold server/discover never imports them): their
        # prompts and resources as their sources declare them (docs/fastmcp.md).
        if self.tools.declares("prompt"):
            capabilities["prompts"] = {}
            capabilities["completions"] = {}
        if self.tools.declares("resource"):
            capabilities["resources"] = {}
        if self.tasks is not None:
            capabilities["extensions"] = {wire.TASKS_EXTENSION: {}}
        return capabilities

    def _serves(self, capability: str) -> bool:
        if capability == "always":
            return True
        if capability == "tasks":
            return self.tasks is not None
        # What capabilities() would advertise, asked of each registry alone (this runs on every request).
        if capability == "tools":
            return self.tools.declares_tools()
        if capability in ("prompts", "completions"):
            return len(self.prompts) > 0
        if capability == "resources":
            return len(self.resources) > 0
        return capability in self.capabilities()

    def method(self, name: str) -> MethodSpec | None:
        """The spec of a method this server serves, or None (unknown, removed or not advertised)."""
        if name in wire.REMOVED_METHODS:
            return None
        spec = self._methods.get(name)
        if spec is None or not self._serves(spec.capability):
            return None
        return spec

    def dispatch(self, spec: MethodSpec, raw_params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        if spec.requires_extension and not ctx.meta.declares_extension(spec.requires_extension):
            raise MissingRequiredClientCapability(
                f"{ctx.method} needs the {spec.requires_extension} extension",
                {"extensions": {spec.requires_extension: {}}},
            )
        try:
            params = spec.params_model.model_validate(raw_params)
        except ValidationError as exc:
            raise InvalidParams(_describe_params_error(exc)) from None
        return spec.handler(params, ctx)

    # ---- discovery and lists --------------------------------------------------------------
    def discover(self, params: EmptyParams, ctx: RequestContext) -> dict[str, Any]:
        result: dict[str, Any] = {
            "resultType": wire.RESULT_COMPLETE,
            "supportedVersions": list(wire.SUPPORTED_PROTOCOL_VERSIONS),
            "capabilities": self.capabilities(),
            "ttlMs": self.settings.discover_ttl_ms,
            "cacheScope": "public",
            "_meta": {
                wire.META_SERVER_INFO: {"name": self.settings.server_name, "version": self.settings.server_version}
            },
        }
        if self.settings.instructions:
            result["instructions"] = self.settings.instructions
        return result

    def _page(self, key: str, items: Sequence[dict[str, Any]], cursor: str | None) -> dict[str, Any]:
        start = _decode_offset(cursor, len(items))
        page = list(items[start : start + LIST_PAGE_SIZE])
        result: dict[str, Any] = {
            "resultType": wire.RESULT_COMPLETE,
            key: page,
            "ttlMs": self.settings.list_ttl_ms,
            "cacheScope": "public",
        }
        if start + LIST_PAGE_SIZE < len(items):
            result["nextCursor"] = encode_cursor("offset", start + LIST_PAGE_SIZE)
        return result

    def list_tools(self, params: PaginatedParams, ctx: RequestContext) -> dict[str, Any]:
        return self._page("tools", [spec.to_wire() for spec in self.tools], params.cursor)

    def list_prompts(self, params: PaginatedParams, ctx: RequestContext) -> dict[str, Any]:
        return self._page("prompts", [spec.to_wire() for spec in self.prompts], params.cursor)

    def list_resources(self, params: PaginatedParams, ctx: RequestContext) -> dict[str, Any]:
        return self._page("resources", [spec.to_wire() for spec in self.resources.static()], params.cursor)

    def list_resource_templates(self, params: PaginatedParams, ctx: RequestContext) -> dict[str, Any]:
        return self._page("resourceTemplates", [spec.to_wire() for spec in self.resources.templates()], params.cursor)

    # ---- MRTR plumbing shared by tools, prompts and resources --------------------------------
    def _open_round(self, params: MrtrParams, binding: Binding) -> tuple[dict[str, Any], dict[str, Any]]:
        """(answers gathered so far, the tool's scratch) for this round; a requestState is verified first.

        Answers sealed in earlier rounds win over anything re-sent; fresh `inputResponses` fill the
        rest. Keys nobody asks for are never read, which is how extra keys are ignored.
        """
        fresh = params.input_responses if isinstance(params.input_responses, dict) else {}
        if len(fresh) > MAX_INPUT_RESPONSES:
            raise InvalidParams(f"Invalid params: at most {MAX_INPUT_RESPONSES} inputResponses are accepted")
        if params.request_state is None:
            return dict(fresh), {}
        payload = self.sealer.open(params.request_state, binding)
        answers = {**fresh, **(payload.get("answers") or {})}
        return answers, dict(payload.get("state") or {})

    def _input_required(
        self, needed: InputNeeded, asker: Asker, state: dict[str, Any], binding: Binding, asked_by: dict[str, str]
    ) -> dict[str, Any]:
        """An MRTR round; `asked_by` names what asked ({"tool": name}, {"prompt": name}, {"resource": name})."""
        if len(needed.requests) > MAX_INPUT_REQUEST_KEYS:
            raise ValueError("too many input requests in one round")
        self.telemetry.count(MRTR_ROUNDS, 1, **asked_by)
        sealed = self.sealer.seal(binding, {"answers": asker.accepted_raw, "state": state})
        return {
            "resultType": wire.RESULT_INPUT_REQUIRED,
            "inputRequests": {key: request.to_wire() for key, request in needed.requests.items()},
            "requestState": sealed,
        }

    # ---- tools ------------------------------------------------------------------------------
    def call_tool(self, params: CallToolParams, ctx: RequestContext) -> dict[str, Any]:
        spec = self.tools.get(params.name)
        if spec is None:
            raise InvalidParams(f"Unknown tool: {params.name}")
        arguments = params.arguments or {}
        if ctx.meta.protocol_version in wire.SUPPORTED_PROTOCOL_VERSIONS:
            self._check_header_params(spec, arguments, ctx)  # 2025 clients send no Mcp-Param headers
        missing = [capability for capability in spec.asks if not ctx.meta.declares(capability)]
        if missing:
            asked = ", ".join(f"{ASKABLE[capability]} ({capability})" for capability in missing)
            raise MissingRequiredClientCapability(
                f"Tool {spec.name} may {asked}", {capability: {} for capability in missing}
            )
        wants_task = (
            spec.is_task
            and (ctx.meta.declares_extension(wire.TASKS_EXTENSION) or ctx.task_stream)
            and self.tasks is not None
        )
        if spec.task_support == "required" and not wants_task:
            raise MissingRequiredClientCapability(
                f"Tool {spec.name} runs only as a task", {"extensions": {wire.TASKS_EXTENSION: {}}}
            )
        try:
            args = spec.parse_arguments(arguments)
        except ToolError as exc:
            return spec.answer_for(exc).to_wire()
        binding = Binding(ctx.principal.id, "tools/call", spec.name, arguments)
        answers, state = self._open_round(params, binding)
        tool_ctx = ToolContext(
            ctx.meta,
            ctx.principal,
            answers,
            state,
            progress=ctx.send_progress,
            log=lambda level, data: ctx.send_log(level, data, spec.name),
            handle_store=self.handles,
            history=self.history,
            secrets=self.secrets,
            request_id=ctx.request_id,
        )
        try:
            if wants_task:
                assert self.tasks is not None
                prepared = spec.prepare(args, tool_ctx) if spec.prepare is not None else None
                return self.tasks.create(spec, arguments, ctx, prepared)
            if spec.prepare is not None:
                tool_ctx.prepared = spec.prepare(args, tool_ctx)
            if spec.task_support == "optional":  # a task tool this client cannot follow as a task
                return _run_inline(spec, args, tool_ctx).to_wire()
            return spec.run(args, tool_ctx).to_wire()
        except InputNeeded as needed:
            return self._input_required(needed, tool_ctx, tool_ctx.scratch, binding, {"tool": spec.name})
        except ToolError as exc:  # raised by a prepare step (the run answers for itself)
            return spec.answer_for(exc).to_wire()

    def _check_header_params(self, spec: ToolSpec, arguments: dict[str, Any], ctx: RequestContext) -> None:
        for header, prop in spec.header_params.items():
            value = arguments.get(prop)
            raw = ctx.headers.get(wire.HEADER_PARAM_PREFIX + header)
            if value is None:
                continue
            if raw is None:
                raise HeaderMismatch(f"Missing Mcp-Param-{header} header for argument {prop}")
            decoded = decode_header_value(raw)
            if not header_matches(decoded, value):
                raise HeaderMismatch(f"Mcp-Param-{header} header does not match argument {prop}")

    # ---- prompts ----------------------------------------------------------------------------
    def get_prompt(self, params: GetPromptParams, ctx: RequestContext) -> dict[str, Any]:
        spec = self.prompts.get(params.name)
        if spec is None:
            raise InvalidParams(f"Unknown prompt: {params.name}")
        arguments = params.arguments or {}
        missing = [a["name"] for a in spec.arguments if a.get("required") and a["name"] not in arguments]
        if missing:
            raise InvalidParams(f"Missing required prompt arguments: {', '.join(missing)}")
        binding = Binding(ctx.principal.id, "prompts/get", spec.name, arguments)
        answers, state = self._open_round(params, binding)
        asker = Asker(ctx.meta, answers)
        try:
            messages = spec.fn(arguments, asker)
        except InputNeeded as needed:
            return self._input_required(needed, asker, state, binding, {"prompt": spec.name})
        return {"resultType": wire.RESULT_COMPLETE, "description": spec.description, "messages": messages}

    def complete(self, params: CompleteParams, ctx: RequestContext) -> dict[str, Any]:
        values: list[str] = []
        if params.ref.type == "ref/prompt":
            spec = self.prompts.get(params.ref.name or "")
            if spec is None:
                raise InvalidParams(f"Unknown prompt: {params.ref.name}")
            completer = spec.completers.get(params.argument.name)
            if completer is not None:
                context = params.context.arguments if params.context and params.context.arguments else {}
                values = completer(params.argument.value, context)
        elif params.ref.type == "ref/resource":
            if self.resources.resolve(params.ref.uri or "") is None and not any(
                t.uri == params.ref.uri for t in self.resources.templates()
            ):
                raise InvalidParams(f"Unknown resource: {params.ref.uri}")
        else:
            raise InvalidParams(f"Unknown completion reference type: {params.ref.type}")
        capped = values[:100]
        return {
            "resultType": wire.RESULT_COMPLETE,
            "completion": {"values": capped, "total": len(values), "hasMore": len(values) > len(capped)},
        }

    # ---- resources --------------------------------------------------------------------------
    def read_resource(self, params: ReadResourceParams, ctx: RequestContext) -> dict[str, Any]:
        found = self.resources.resolve(params.uri)
        if found is None:
            raise InvalidParams("Resource not found", data={"uri": params.uri})
        spec, variables = found
        binding = Binding(ctx.principal.id, "resources/read", params.uri, {})
        answers, state = self._open_round(params, binding)
        asker = Asker(ctx.meta, answers)
        try:
            body = spec.fn(variables, asker)
        except InputNeeded as needed:
            return self._input_required(needed, asker, state, binding, {"resource": spec.name})
        return {
            "resultType": wire.RESULT_COMPLETE,
            "contents": [spec.contents(params.uri, body)],
            "ttlMs": self.settings.list_ttl_ms,
            "cacheScope": "public",
        }

    # ---- tasks extension ----------------------------------------------------------------------
    def get_task(self, params: TaskIdParams, ctx: RequestContext) -> dict[str, Any]:
        assert self.tasks is not None
        return self.tasks.get(params.task_id, ctx)

    def update_task(self, params: UpdateTaskParams, ctx: RequestContext) -> dict[str, Any]:
        assert self.tasks is not None
        self.tasks.update(params.task_id, params.input_responses, ctx)
        return {"resultType": wire.RESULT_COMPLETE}

    def cancel_task(self, params: TaskIdParams, ctx: RequestContext) -> dict[str, Any]:
        assert self.tasks is not None
        self.tasks.cancel(params.task_id, ctx)
        return {"resultType": wire.RESULT_COMPLETE}


def _run_inline(spec: ToolSpec, args: Any, tool_ctx: ToolContext) -> ToolResult:
    """A task tool for a client that cannot follow a task: it runs in this request, until a deadline
    short of the invocation's end, then answers with a tool error that names what it needs."""
    left = seconds_left()
    seconds = None if left is None else left - INLINE_TASK_MARGIN_SECONDS
    try:
        if seconds is not None and seconds <= 0:
            raise DeadlinePassed
        with ToolDeadline(seconds):
            return spec.run(args, tool_ctx)
    except DeadlinePassed:
        log.warning("tool %s ran inline past its deadline of %.1f s: ended with a tool error", spec.name, seconds)
        return ToolResult([text(INLINE_TASK_TIMED_OUT)], is_error=True)


def _decode_offset(cursor: str | None, total: int) -> int:
    """Where a `*/list` page starts: 0, or the offset a previous page's `nextCursor` names."""
    if cursor is None:
        return 0
    position = decode_cursor(cursor)
    match position:
        case ["offset", int(offset)] if not isinstance(offset, bool) and 0 < offset <= total:
            return offset
    raise InvalidCursor


def _describe_params_error(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False, include_input=False)[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "params"
        problems.append(f"'{where}' is missing" if error["type"] == "missing" else f"'{where}' is invalid")
    return "Invalid params: " + "; ".join(problems)
