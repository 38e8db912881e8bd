"""The tool authoring API: one decorated function per tool.

    @tool(description="Say hello.")
    async def greet(name: str, ctx: Context) -> str:  # keyword parameters: the model is made from them
        return f"Hello, {name}!"

    @tool(description="Say hello.")
    def greet(args: GreetArgs, ctx: ToolContext) -> str:  # one pydantic model of the arguments
        return f"Hello, {args.name}!"

The decorator reads the pydantic input model from the first parameter's annotation (`args: Model`),
or makes one from the keyword parameters, and publishes its JSON schema as `inputSchema`. `task=`
(FastMCP's switch) is the one thing that changes how a tool answers; the runtime does the protocol
for it. An `async def` tool runs on the process's one event loop (`mcp_runtime._loop`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import sys
import threading
import time
import typing
from collections.abc import Callable, Mapping
from types import ModuleType
from types import UnionType as _UnionType
from typing import TYPE_CHECKING, Any, Final, Literal

from pydantic import BaseModel, ValidationError

from . import _json, wire
from ._value import ValueObject
from .context import Principal, RequestMeta
from .errors import HandleConflict, HandleNotFound, McpError
from .limits import SYNC_WAIT_LIMIT_SECONDS
from .mrtr import Asker, Elicited, InputNeeded, ModelT
from .tool_secrets import NO_SECRETS, ToolSecrets

if TYPE_CHECKING:  # the handle store, task history and durable runs load only where they are used
    from .components import PromptSpec, ResourceSpec
    from .fastmcp import Context
    from .handles import CallerHandles, HandleStore
    from .observability import Telemetry
    from .tasks.durable import Callback, DurableRun
    from .tasks.history import CallerTaskHistory, TaskHistory

log = logging.getLogger(__name__)
TOOL_NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
# What a tool may ask of the client mid-call (`asks=`), in the words its refusal uses.
ASKABLE: Final[dict[str, str]] = {
    "elicitation": "ask the user",
    "sampling": "ask the client's model",
    "roots": "ask for the client's roots",
}
EMPTY_INPUT_SCHEMA: Final[dict[str, Any]] = {"type": "object", "additionalProperties": False}


TaskSupport = Literal["forbidden", "optional", "required"]
# FastMCP's `task=`, the one switch for task behaviour, the one place it is said: True or "optional" is
# an optional task tool (a task for a client that declared the tasks extension; otherwise it runs
# inline, under the request's deadline); "required" refuses any other client with -32021; False (or
# None, or "forbidden") is not a task tool.
TASK_SUPPORT: Final[dict[bool | str | None, TaskSupport]] = {
    None: "forbidden",
    False: "forbidden",
    True: "optional",
    "forbidden": "forbidden",
    "optional": "optional",
    "required": "required",
}


def task_support(task: Any) -> TaskSupport:
    """What FastMCP's `task=True | "optional" | "required" | False` (or a TaskConfig's `mode`) means here."""
    support = TASK_SUPPORT.get(getattr(task, "mode", task))
    if support is None:
        raise ValueError(f"task= takes True, False, 'optional' or 'required', not {task!r}")
    return support


# What this module defined until 1.1 and no longer has, and what to write instead.
REMOVED: Final[dict[str, str]] = {
    "task_flags": "was removed: mcp_runtime.tools.task_support(task) says what task= means",
}
# Releases 1.0.0's and 2.0.0's names this module still gives, deprecated: `mcp_runtime.components.DEPRECATED_NAMES`.
DEPRECATED: Final = ("ToolMode", "ToolRegistry", "tool")


def __getattr__(name: str) -> Any:
    if name in DEPRECATED:
        from .components import deprecated_name

        return deprecated_name(__name__, name)
    if name in REMOVED:
        raise ImportError(f"mcp_runtime.tools.{name} {REMOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ToolError(Exception):
    """Raise from a tool to answer with `isError: true` and this text, visible to the model."""


class ToolResult(ValueObject):
    """What a tool answers: its content blocks, the structured result, and whether it is an error."""

    __slots__ = ("content", "is_error", "meta", "structured")
    content: list[dict[str, Any]]
    structured: Any
    is_error: bool
    meta: dict[str, Any] | None

    def __init__(
        self,
        content: list[dict[str, Any]],
        structured: Any = None,
        is_error: bool = False,
        meta: dict[str, Any] | None = None,
    ) -> None:
        self.content = content
        self.structured = structured
        self.is_error = is_error
        self.meta = meta

    def to_wire(self) -> dict[str, Any]:
        result: dict[str, Any] = {"resultType": "complete", "content": self.content}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        if self.is_error:
            result["isError"] = True
        if self.meta:
            result["_meta"] = self.meta
        return result


class Unportable(NotImplementedError):
    """What a module's code uses that cannot work here (or an authoring form that was removed), with what
    to write instead: raised where the module is imported, never left for a call to find."""


class Undescribable(ValueObject):
    """A tool, prompt or resource whose description could not be built (a parameter no JSON schema
    describes, a bad option, a name taken twice): left out of the catalog, named where it was written."""

    __slots__ = ("file", "kind", "line", "module", "name", "reason")
    kind: str
    name: str
    module: str
    file: str
    line: int
    reason: str

    def __init__(self, kind: str, name: str, module: str, file: str, line: int, reason: str) -> None:
        self.kind = kind
        self.name = name
        self.module = module
        self.file = file
        self.line = line
        self.reason = reason

    @classmethod
    def of(cls, kind: str, name: str, fn: Any, error: BaseException) -> Undescribable:
        """The failure `error` to describe `fn` (a function, or the object holding one)."""
        code = getattr(getattr(fn, "fn", fn), "__code__", None)
        lines = str(error).strip().splitlines()
        reason = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
        module = getattr(getattr(fn, "fn", fn), "__module__", None) or "?"
        file = code.co_filename if code is not None else module
        return cls(kind, name, module, file, code.co_firstlineno if code is not None else 0, reason)

    @property
    def component(self) -> str:
        """How logs and metrics name it: `tool:lookup`, `prompt:triage`, `resource:data://config`."""
        return f"{self.kind}:{self.name}"

    def describe(self, file: str | None = None) -> str:
        return f"{file or self.file}, line {self.line}: {self.kind} {self.name!r} cannot be described: {self.reason}"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(data_base64: str, mime_type: str) -> dict[str, Any]:
    return {"type": "image", "data": data_base64, "mimeType": mime_type}


def audio(data_base64: str, mime_type: str) -> dict[str, Any]:
    return {"type": "audio", "data": data_base64, "mimeType": mime_type}


def embedded_text(uri: str, body: str, mime_type: str = "text/plain") -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": body}}


class _Injectable:
    """Marks the classes a tool's parameter may be annotated with to receive its context."""


class ToolContext(Asker, _Injectable):
    """What a tool sees besides its arguments: the caller, the client's answers, progress, its scratch data."""

    def __init__(
        self,
        meta: RequestMeta,
        principal: Principal,
        answers: dict[str, Any] | None = None,
        scratch: dict[str, Any] | None = None,
        progress: Callable[[float, float | None, str | None], None] | None = None,
        log: Callable[[str, Any], None] | None = None,
        task_id: str | None = None,
        prepared: Any = None,
        handle_store: HandleStore | None = None,
        history: TaskHistory | None = None,
        durable: DurableRun | None = None,
        secrets: ToolSecrets = NO_SECRETS,
        request_id: wire.RequestId | None = None,
    ) -> None:
        super().__init__(meta, dict(answers or {}))
        self.principal = principal
        self.request_id = request_id
        # Data the tool wants back on its next run: sealed into requestState between MRTR rounds, kept
        # on the task item between a task's runs.
        self.scratch: dict[str, Any] = dict(scratch or {})
        self.task_id = task_id
        # What a task tool's `prepare` step gathered before the task was created.
        self.prepared = prepared
        self._progress = progress
        self._log = log
        self._handle_store = handle_store
        self._history = history
        self._durable = durable
        self._secrets = secrets

    def secret(self, name: str) -> str:
        """The value of the secret cdk.json's `toolSecrets` gives the tools as `name`: read from Secrets
        Manager the first time this container asks, then kept. A name it does not give raises
        `UnknownSecret`, naming those it does."""
        return self._secrets.get(name)

    @property
    def handles(self) -> CallerHandles:
        """The caller's server-minted handles (pattern 4)."""
        if self._handle_store is None:
            raise RuntimeError("no handle store is configured for this server")
        from .handles import CallerHandles  # made when a tool asks: most calls never do

        return CallerHandles(self._handle_store, self.principal.id)

    @property
    def task_history(self) -> CallerTaskHistory:
        """The caller's own tasks, newest first (what the protocol offers instead of tasks/list)."""
        if self._history is None:
            raise RuntimeError("no task history is configured for this server")
        from .tasks.history import CallerTaskHistory

        return CallerTaskHistory(self._history, self.principal.id)

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._progress is not None:
            self._progress(progress, total, message)

    # ---- durable operations (named after AWS Lambda durable functions' SDK) ---------------------
    @property
    def durable_run(self) -> DurableRun | None:
        """The task's durable run (None outside a task): what `Context`'s awaitable operations use."""
        return self._durable

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run `fn()` once for the task and return its JSON value; on every later run of the tool the
        recorded value comes back without calling `fn`. Outside a task, `fn()` simply runs."""
        if self._durable is None:
            return json.loads(json.dumps(_dumpable(fn()), ensure_ascii=False))
        return self._durable.step(name, fn)

    def wait(self, seconds: float) -> None:
        """Wait durably: inside a task no Lambda runs meanwhile (a Step Functions Wait state); outside
        one (a synchronous call) it sleeps, for at most a few seconds."""
        if self._durable is not None:
            self._durable.wait(seconds)
            return
        if seconds > SYNC_WAIT_LIMIT_SECONDS:
            from .errors import MissingRequiredClientCapability

            raise MissingRequiredClientCapability(
                "This tool waits longer than a request lasts and can only run as a task",
                {"extensions": {wire.TASKS_EXTENSION: {}}},
            )
        time.sleep(max(0.0, seconds))

    def wait_for_callback(
        self, name: str, submit: Callable[[Callback], Any], timeout_seconds: float | None = None
    ) -> Any:
        """Hand an external system a single-use token (and the URL to complete it at) through `submit`,
        hold the task until it completes, and return what it sent. Only inside a task."""
        if self._durable is None:
            from .errors import MissingRequiredClientCapability

            raise MissingRequiredClientCapability(
                "This tool waits for an external system and can only run as a task",
                {"extensions": {wire.TASKS_EXTENSION: {}}},
            )
        return self._durable.wait_for_callback(name, submit, timeout_seconds)

    def idempotency_key(self, name: str) -> str:
        """A key stable across every run of this task's tool, for external systems that deduplicate."""
        if self._durable is None:
            return hashlib.sha256(f"{id(self)}/{name}".encode()).hexdigest()[:32]
        return self._durable.idempotency_key(name)

    def log(self, level: str, data: Any) -> None:
        """A log line for the client: on its stream when its request asked for logs at this level."""
        if self._log is not None:
            self._log(level, data)

    @classmethod
    def injected(cls, ctx: ToolContext) -> ToolContext:
        """What a parameter annotated with this class receives (keyword-signature tools)."""
        return ctx

    # ---- the awaitable twins of releases 1.0.0 and 2.0.0, deprecated: each warns what to write instead
    async def report_progress_async(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        _twin_deprecated("report_progress_async")
        self.report_progress(progress, total, message)

    async def log_async(self, level: str, data: Any) -> None:
        _twin_deprecated("log_async")
        self.log(level, data)

    async def elicit_async(self, key: str, message: str, schema: type[ModelT]) -> Elicited[ModelT]:
        _twin_deprecated("elicit_async")
        return self.elicit(key, message, schema)

    async def step_async(self, name: str, fn: Callable[[], Any]) -> Any:
        _twin_deprecated("step_async")
        return await self._awaitable().step(name, fn)

    async def wait_async(self, seconds: float) -> None:
        _twin_deprecated("wait_async")
        await self._awaitable().wait(seconds)

    async def wait_for_callback_async(
        self, name: str, submit: Callable[[Callback], Any], timeout_seconds: float | None = None
    ) -> Any:
        _twin_deprecated("wait_for_callback_async")
        return self.wait_for_callback(name, submit, timeout_seconds)

    def _awaitable(self) -> Context:
        """This context as a `ctx: Context` parameter receives it: the twins' awaitable operations are its."""
        from .fastmcp import Context

        return Context(self)


def _twin_deprecated(twin: str) -> None:
    """Warn, at the tool's line that awaits it, that a `ToolContext.*_async` twin goes and what to write."""
    from .components import TWIN_ADVICE, deprecated

    deprecated(f"ToolContext.{twin}", TWIN_ADVICE[twin], stacklevel=3)


def _dumpable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


ToolFunction = Callable[[Any, ToolContext], Any]


class ToolSpec:
    """A registered tool: its wire description, how it answers, and the function that does the work.
    Made by one builder, `mcp_runtime.components.tool_from_function`, whichever decorator was used."""

    __slots__ = (
        "annotations",
        "asks",
        "description",
        "fn",
        "header_params",
        "input_model",
        "input_schema",
        "meta",
        "name",
        "output_schema",
        "prepare",
        "rerun_interrupted",
        "shape",
        "show_error_details",
        "task_support",
        "title",
        "wraps",
    )
    name: str
    description: str
    fn: ToolFunction
    input_model: type[BaseModel] | None
    input_schema: dict[str, Any]
    task_support: TaskSupport
    output_schema: dict[str, Any] | None
    title: str | None
    annotations: dict[str, Any] | None
    prepare: ToolFunction | None
    header_params: dict[str, str]
    asks: tuple[str, ...]
    rerun_interrupted: bool
    show_error_details: bool
    meta: dict[str, Any] | None
    wraps: bool
    shape: Callable[[Any, dict[str, Any] | None, bool], ToolResult] | None

    def __init__(
        self,
        name: str,
        description: str,
        fn: ToolFunction,
        input_model: type[BaseModel] | None,
        input_schema: dict[str, Any],
        task_support: TaskSupport = "forbidden",
        output_schema: dict[str, Any] | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        prepare: ToolFunction | None = None,
        header_params: dict[str, str] | None = None,
        asks: tuple[str, ...] = (),
        rerun_interrupted: bool = False,
        show_error_details: bool = False,
        meta: dict[str, Any] | None = None,
        wraps: bool = False,
        shape: Callable[[Any, dict[str, Any] | None, bool], ToolResult] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.fn = fn
        self.input_model = input_model
        self.input_schema = input_schema
        # How this tool runs for a client without the tasks extension (see TASK_SUPPORT).
        self.task_support = task_support
        self.output_schema = output_schema
        self.title = title
        self.annotations = annotations
        # Task tools only: an MRTR step run synchronously before the task is created.
        self.prepare = prepare
        self.header_params = {} if header_params is None else header_params
        # Client capabilities the tool may ask for: a call from a client without them is refused up front.
        self.asks = asks
        # Task tools: whether a run cut short (timed out, crashed) may run the code outside steps again
        # (False: the task fails naming the limit and the fix). Runs the tool asks for are always made.
        self.rerun_interrupted = rerun_interrupted
        # Whether an exception's text reaches the client (FastMCP's `mask_error_details=False`); the log
        # and the operator's view of a task get it either way.
        self.show_error_details = show_error_details
        self.meta = meta
        # The output schema wraps a non-object result in `result` (FastMCP's rule).
        self.wraps = wraps
        # How a returned value becomes the result: FastMCP's shaping (`content.shape_result`, compact JSON
        # text, given by the builder); None: as the `(args: Model)` form always has (readable JSON text,
        # a list taken as content blocks).
        self.shape = shape

    @property
    def is_task(self) -> bool:
        return self.task_support != "forbidden"

    def to_wire(self) -> dict[str, Any]:
        tool: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.title:
            tool["title"] = self.title
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.annotations:
            tool["annotations"] = self.annotations
        if self.meta:
            tool["_meta"] = self.meta
        return tool

    def parse_arguments(self, arguments: Mapping[str, Any]) -> Any:
        """Validated arguments; raises ToolError with a short, pydantic-free explanation."""
        if self.input_model is None:
            return dict(arguments)
        try:
            return self.input_model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ToolError(describe_validation_error(exc)) from None

    def run(self, args: Any, ctx: ToolContext) -> ToolResult:
        try:
            produced = self.fn(args, ctx)
            if inspect.iscoroutine(produced):  # an `async def` tool: on the process's one loop
                from . import _loop  # asyncio loads with the first async tool, never on a cold discover

                produced = _loop.run(produced, f"tool {self.name}")
        except Exception as exc:
            return self.answer_for(exc)
        return self.to_result(produced)

    def answer_for(self, error: Exception) -> ToolResult:
        """What the client is answered when this tool's arguments, its prepare step or its run raised
        `error`: the one place a tool's exceptions become answers. `ToolError` and handle errors are an
        `isError` result; what asks the client (MRTR) or is a protocol error goes on, re-raised; anything
        else is the generic -32603 (re-raised), or its text when the server says `mask_error_details=False`."""
        if isinstance(error, ToolError):
            return ToolResult([text(str(error))], is_error=True)
        if isinstance(error, HandleNotFound):
            return ToolResult([text("Unknown or expired handle.")], is_error=True)
        if isinstance(error, HandleConflict):
            return ToolResult(
                [text("The handle was changed by another call at the same time; try again.")], is_error=True
            )
        if isinstance(error, InputNeeded | McpError) or not self.show_error_details:
            raise error  # a generic -32603 for the client; the server logs everything
        log.error("tool %s raised: %s", self.name, error, exc_info=error)
        return ToolResult([text(f"Error calling tool {self.name!r}: {error}")], is_error=True)

    def to_result(self, produced: Any) -> ToolResult:
        if self.shape is not None:
            return self.shape(produced, self.output_schema, self.wraps)
        if isinstance(produced, ToolResult):
            return produced
        if isinstance(produced, str):
            return ToolResult([text(produced)])
        if isinstance(produced, BaseModel):
            structured = produced.model_dump(mode="json")
            return ToolResult([text(_json.readable(structured))], structured=structured)
        if isinstance(produced, dict):
            structured = json.loads(json.dumps(produced, ensure_ascii=False, default=str))
            return ToolResult([text(_json.readable(structured))], structured=structured)
        if isinstance(produced, list):
            return ToolResult(produced)
        raise TypeError(
            f"tool {self.name} returned {type(produced).__name__}; return str, a dict, a model, content or a ToolResult"
        )


_ERROR_PHRASES: Final[dict[str, str]] = {
    "missing": "is required",
    "extra_forbidden": "is not allowed",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be a boolean",
    "bool_parsing": "must be a boolean",
    "greater_than": "is too small",
    "greater_than_equal": "is too small",
    "less_than": "is too large",
    "less_than_equal": "is too large",
    "string_too_short": "is too short",
    "string_too_long": "is too long",
    "too_short": "has too few items",
    "too_long": "has too many items",
    "literal_error": "is not one of the allowed values",
    "enum": "is not one of the allowed values",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
}


# The constraint each kind of error broke, in words, from the schema's side of it (pydantic's `ctx`):
# what the model needs to fix the call; the value it sent is never repeated.
_CONSTRAINTS: Final[dict[str, tuple[str, str]]] = {
    "string_pattern_mismatch": ("pattern", "must match the pattern {!r}"),
    "greater_than": ("gt", "is too small (must be more than {})"),
    "greater_than_equal": ("ge", "is too small (at least {})"),
    "less_than": ("lt", "is too large (must be less than {})"),
    "less_than_equal": ("le", "is too large (at most {})"),
    "string_too_short": ("min_length", "is too short (at least {} character{s})"),
    "string_too_long": ("max_length", "is too long (at most {} character{s})"),
    "too_short": ("min_length", "has too few items (at least {})"),
    "too_long": ("max_length", "has too many items (at most {})"),
    "literal_error": ("expected", "is not one of the allowed values: {}"),
    "enum": ("expected", "is not one of the allowed values: {}"),
    "multiple_of": ("multiple_of", "must be a multiple of {}"),
}


def describe_validation_error(exc: ValidationError) -> str:
    """Our own words for argument problems, naming the constraint broken (the pattern, the bound, the
    allowed values); pydantic's text and the values sent stay off the wire."""
    problems = []
    for error in exc.errors(include_url=False, include_input=False)[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        constraint = _CONSTRAINTS.get(error["type"])
        bound = (error.get("ctx") or {}).get(constraint[0]) if constraint else None
        if constraint is not None and bound is not None:
            problems.append(f"'{where}' {constraint[1].format(bound, s='' if bound == 1 else 's')}")
        else:
            problems.append(f"'{where}' {_ERROR_PHRASES.get(error['type'], 'is invalid')}")
    return "Invalid arguments: " + "; ".join(problems)


def _input_model_of(fn: ToolFunction) -> type[BaseModel] | None:
    hints = typing.get_type_hints(fn)
    params = [name for name in fn.__code__.co_varnames[: fn.__code__.co_argcount]]
    if not params:
        return None
    first = hints.get(params[0])
    if isinstance(first, type) and issubclass(first, BaseModel):
        return first
    return None


def takes_model(fn: Callable[..., Any]) -> bool:
    """Whether `fn` is written `(args, ctx: ToolContext)`, its arguments one model (or None, or a dict
    with an explicit schema); otherwise its keyword parameters are the arguments."""
    parameters = list(inspect.signature(fn).parameters.values())
    if len(parameters) != 2:
        return False
    hints = typing.get_type_hints(fn)
    if injected_context(hints.get(parameters[1].name)) is None:
        return False
    first = hints.get(parameters[0].name)
    return (
        parameters[0].name == "args"
        or first is type(None)
        or (isinstance(first, type) and issubclass(first, BaseModel))
    )


def injected_context(hint: Any) -> Callable[[ToolContext], Any] | None:
    """How a parameter annotated `hint` gets its context (`ToolContext`, the facade's `Context`, or
    either `| None`): a class with an `injected(ctx)` classmethod; None for an ordinary argument."""
    candidates = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)
    for candidate in candidates:
        factory = getattr(candidate, "injected", None) if isinstance(candidate, type) else None
        if callable(factory) and issubclass(candidate, _Injectable):
            return typing.cast("Callable[[ToolContext], Any]", factory)
    return None


class KeywordCall:
    """A keyword-signature function as a `ToolFunction`: the validated model's fields become its keyword
    arguments, and each context parameter gets its context."""

    __slots__ = ("__name__", "fields", "fn", "injected")
    fn: Callable[..., Any]
    fields: tuple[str, ...]
    injected: dict[str, Callable[[ToolContext], Any]]

    def __init__(
        self, fn: Callable[..., Any], fields: tuple[str, ...], injected: dict[str, Callable[[ToolContext], Any]]
    ) -> None:
        self.fn = fn
        self.fields = fields
        self.injected = injected
        self.__name__ = getattr(fn, "__name__", "tool")

    def __call__(self, args: BaseModel, ctx: ToolContext) -> Any:
        values = args.__dict__
        keywords = {name: values[name] for name in self.fields}
        for name, factory in self.injected.items():
            keywords[name] = factory(ctx)
        return self.fn(**keywords)


def signature_model(fn: Callable[..., Any], tool_name: str) -> tuple[type[BaseModel], KeywordCall, dict[str, Any]]:
    """A pydantic model of `fn`'s keyword parameters (type hints, defaults, `Annotated[..., Field()]`),
    closed to other keys, without the context parameters; the call that spreads it over `fn`; and the
    published schema of those parameters (as FastMCP publishes it)."""
    from pydantic import ConfigDict, create_model

    hints = typing.get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    injected: dict[str, Callable[[ToolContext], Any]] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise ValueError(
                f"tool {tool_name!r}: *args, **kwargs and positional-only parameters cannot be tool arguments "
                "(MCP passes arguments by name); use ordinary keyword parameters"
            )
        hint = hints.get(parameter.name, Any)
        factory = injected_context(hint)
        if factory is not None:
            injected[parameter.name] = factory
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (portable(hint), default)
    config = ConfigDict(extra="forbid", protected_namespaces=())
    try:
        model: type[BaseModel] = create_model(f"{tool_name}_arguments", __config__=config, **fields)
    except Exception as error:
        raise _unschemable_parameter(tool_name, fields) or error from None
    # The schema from a model without `extra="forbid"`, which pydantic would pass on to nested
    # dataclasses and TypedDicts (FastMCP closes the top level only).
    open_model: type[BaseModel] = create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(protected_namespaces=()), **fields
    )
    schema = published_schema(open_model.model_json_schema())
    schema["additionalProperties"] = False
    return model, KeywordCall(fn, tuple(fields), injected), schema


def portable(hint: Any) -> Any:
    """`hint` with every `typing.TypedDict` in it rebuilt as a `typing_extensions.TypedDict` on Python
    < 3.12, where pydantic refuses the standard library's (as mcp's MCPServer does for results; here
    for arguments too, and nested ones). The same hint on 3.12 and later, where pydantic takes both."""
    if sys.version_info < (3, 12):  # mypy checks against the runtime's 3.13 and skips this block
        return _rebuilt(hint, {})
    return hint


def _rebuilt(hint: Any, done: dict[type, Any]) -> Any:
    if isinstance(hint, type) and typing.is_typeddict(hint) and type(hint).__module__ == "typing":
        if hint in done:
            return done[hint]
        import typing_extensions

        done[hint] = hint  # a TypedDict that contains itself stays as written (pydantic names it)
        fields = {}
        for key, value in typing.get_type_hints(hint, include_extras=True).items():
            # A key's own Required/NotRequired wins over the class's totality (which a 3.11 TypedDict
            # of postponed annotations computes without seeing them).
            required: frozenset[str] = getattr(hint, "__required_keys__", frozenset())
            marker: Any = typing_extensions.Required if key in required else typing_extensions.NotRequired
            while typing.get_origin(value) in (typing.Required, typing.NotRequired):
                marker = typing_extensions.Required if typing.get_origin(value) is typing.Required else marker
                marker = typing_extensions.NotRequired if typing.get_origin(value) is typing.NotRequired else marker
                (value,) = typing.get_args(value)
            fields[key] = marker[_rebuilt(value, done)]
        make_typeddict: Any = typing_extensions.TypedDict
        rebuilt: Any = make_typeddict(hint.__name__, fields)
        rebuilt.__doc__, rebuilt.__module__, rebuilt.__qualname__ = hint.__doc__, hint.__module__, hint.__qualname__
        done[hint] = rebuilt
        return rebuilt
    arguments = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if not arguments or origin is Literal:
        return hint
    changed = tuple(_rebuilt(argument, done) for argument in arguments)
    if all(new is old for new, old in zip(changed, arguments, strict=True)):
        return hint
    if origin is typing.Annotated:
        return typing.Annotated[(changed[0], *hint.__metadata__)]
    if origin in (typing.Union, _UnionType):
        return typing.Union[changed]  # noqa: UP007 (a runtime union of computed arms)
    copy_with = getattr(hint, "copy_with", None)
    return copy_with(changed) if callable(copy_with) else origin[changed]


def _unschemable_parameter(tool_name: str, fields: dict[str, Any]) -> TypeError | None:
    """Which parameter no JSON schema describes (pydantic's error names the type, not the parameter)."""
    from pydantic import create_model

    for name, (hint, default) in fields.items():
        try:
            single: dict[str, Any] = {name: (hint, default)}
            create_model(f"{tool_name}_{name}", **single)
        except Exception as error:
            first = (str(error).strip().splitlines() or [""])[0]
            return TypeError(f"parameter {name!r} ({hint!r}) has no JSON schema: {first}")
    return None


def published_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A generated schema as FastMCP publishes it: `$ref`s to `$defs` inlined (kept where recursive),
    and pydantic's generated titles dropped (a property's own `Field(title=)` stays)."""
    definitions = schema.get("$defs") or {}

    def inline(node: Any, expanding: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [inline(item, expanding) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/") :]
            if name in expanding or name not in definitions:
                raise _Recursive
            target = inline(definitions[name], expanding | {name})
            siblings = {key: inline(value, expanding) for key, value in node.items() if key != "$ref"}
            return {**target, **siblings}
        return {key: inline(value, expanding) for key, value in node.items() if key != "$defs"}

    try:
        result = inline(schema, frozenset())
    except _Recursive:
        result = dict(schema)
    published: dict[str, Any] = _without_titles(result, top=True)
    return published


class _Recursive(Exception):
    """A schema that refers to itself: published with its `$defs`."""


def _without_titles(node: Any, top: bool = False) -> Any:
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            kept[key] = {
                name: _property_without_titles(name, prop, keep_own_title=top and key == "properties")
                for name, prop in value.items()
            }
        else:
            kept[key] = _without_titles(value)
    return kept


def _property_without_titles(name: str, prop: Any, *, keep_own_title: bool) -> Any:
    cleaned = _without_titles(prop)
    own = prop.get("title") if isinstance(prop, dict) else None
    if keep_own_title and isinstance(own, str) and own != _generated_title(name):
        cleaned["title"] = own
    return cleaned


def _generated_title(name: str) -> str:
    """The title pydantic makes of a field name (`max_items` -> `Max Items`)."""
    return name.title().replace("_", " ").strip()


def _header_params(schema: dict[str, Any]) -> dict[str, str]:
    """Map of `Mcp-Param-*` header name (lower case) to the root property it mirrors."""
    found: dict[str, str] = {}
    for prop_name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and isinstance(prop.get("x-mcp-header"), str):
            found[prop["x-mcp-header"].lower()] = prop_name
    return found


SPEC_ATTRIBUTE: Final = "__mcp_tool__"
# A server object's method that gives its components, each with its function: `[(component, fn), ...]`.
REGISTER_ATTRIBUTE: Final = "__mcp_register__"


C = typing.TypeVar("C")


def described(kind: str, name: str, fn: Any, build: Callable[[], C]) -> C | Undescribable:
    """`build()`, the description of a tool, prompt or resource, made when its module loads; what went
    wrong, named, when it cannot be made: the registry leaves it out and says so (the start-up check,
    the catalog's test and the asset build refuse it)."""
    try:
        return build()
    except Unportable:
        raise  # refused at import, as FastMCP refuses it, saying what to write instead
    except Exception as error:
        return Undescribable.of(kind, name, fn, error)


class Registry:
    """The one registry: every tool, prompt and resource a server offers, described by the one builder
    (`mcp_runtime.components`), whichever decorator was used. `Catalog` reads its prompts and resources."""

    def __init__(
        self, telemetry: Telemetry | None = None, declared: Callable[[], frozenset[str]] | None = None
    ) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._prompts: dict[str, PromptSpec] = {}
        self._resources: dict[str, ResourceSpec] = {}
        # Deferred registrations: importing tool modules (and building their pydantic models) is
        # left to the first request that needs a tool; discover and task polls never pay for it.
        self._loaders: list[Callable[[], None]] = []
        self._loading = threading.Lock()
        self._loader_thread: int | None = None
        # What could not be described, left out: the other tools keep serving (one teammate's typo is
        # never an outage of the server). Logged and counted here; refused before a deploy.
        self.left_out: list[Undescribable] = []
        self.telemetry = telemetry
        # Server objects (mcp_runtime.fastmcp) already included.
        self._servers: set[int] = set()
        # The kinds of component ("prompt", "resource") the deferred modules' sources declare, read once
        # without importing them (`mcp_runtime.catalog.declared_kinds`): what a cold server/discover says.
        self._declared = declared
        self._declared_kinds: frozenset[str] | None = None

    def add_loader(self, loader: Callable[[], None]) -> None:
        """Register tools later: `loader` runs once, before the first lookup or listing."""
        self._loaders.append(loader)

    def declares_tools(self) -> bool:
        """Whether this registry serves tools, without loading deferred ones."""
        return bool(self._tools or self._loaders)

    def load(self) -> None:
        """Run the deferred registrations now (what every lookup does first)."""
        self._load()

    def _load(self) -> None:
        # A loader leaves the list only once it has run, so concurrent first requests wait for it
        # (and never see an empty registry); a loader that raised is tried again next time.
        if not self._loaders or self._loader_thread == threading.get_ident():
            return
        with self._loading:
            self._loader_thread = threading.get_ident()
            try:
                while self._loaders:
                    kinds: tuple[dict[str, Any], ...] = (self._tools, self._prompts, self._resources)
                    before = [set(kind) for kind in kinds]
                    try:
                        self._loaders[0]()
                    except BaseException:
                        # Undo what this loader registered, so retrying it next time starts clean.
                        for kind, had in zip(kinds, before, strict=True):
                            for name in set(kind) - had:
                                del kind[name]
                        raise
                    self._loaders.pop(0)
            finally:
                self._loader_thread = None

    def include(self, module: ModuleType) -> None:
        """Serve every tool, prompt and resource a module defines, in definition order: those registered
        on a server object it holds (`mcp = FastMCP(...)`, `@mcp.tool`), and `@tool` functions. One that
        could not be described is left out, logged and counted by name; the others are served."""
        for value in vars(module).values():
            spec = getattr(value, SPEC_ATTRIBUTE, None)
            if isinstance(spec, ToolSpec | Undescribable) and getattr(value, "__module__", None) == module.__name__:
                self.admit(spec, value)
            register = getattr(type(value), REGISTER_ATTRIBUTE, None)
            if callable(register) and id(value) not in self._servers:
                self._servers.add(id(value))  # one server object imported by two modules is served once
                if getattr(value, "instructions", None):
                    log.warning(
                        "%s.%s sets instructions=, which a cold server/discover cannot read without importing "
                        "every tool module: the server's name and instructions come from server.json in the "
                        "tool package (functions/tools/server.json); put them there",
                        module.__name__,
                        type(value).__name__,
                    )
                for component, fn in register(value):
                    self.admit(component, fn)

    def admit(self, component: Any, fn: Any = None) -> None:
        """Serve one described component (a tool here, a prompt or a resource in the catalog), or leave
        out one that could not be described (or whose name is taken), saying so."""
        if isinstance(component, Undescribable):
            self._leave_out(component)
            return
        try:
            if isinstance(component, ToolSpec):
                self.add(component)
            elif hasattr(component, "uri"):
                self.add_resource(component)
            else:
                self.add_prompt(component)
        except ValueError as error:
            kind = "tool" if isinstance(component, ToolSpec) else type(component).__name__.removesuffix("Spec").lower()
            name = str(getattr(component, "name", None) or getattr(component, "uri", "?"))
            self._leave_out(Undescribable.of(kind, name, fn, error))

    def _leave_out(self, problem: Undescribable) -> None:
        self.left_out.append(problem)
        log.error(
            "%s left out of the catalog (the other tools are served): %s",
            problem.component,
            problem.describe(),
            extra={"component": problem.component, "tool_module": problem.module},
        )
        if self.telemetry is not None:
            from .observability import COMPONENTS_LEFT_OUT

            self.telemetry.count(COMPONENTS_LEFT_OUT, component=problem.component)

    def add(self, spec: ToolSpec) -> None:
        if not TOOL_NAME_PATTERN.match(spec.name):
            raise ValueError(f"tool name {spec.name!r} must match {TOOL_NAME_PATTERN.pattern}")
        if spec.name in self._tools:
            raise ValueError(f"tool {spec.name!r} is registered twice")
        if spec.prepare is not None and not spec.is_task:
            raise ValueError(f"tool {spec.name!r}: only task tools take a prepare step")
        self._tools[spec.name] = spec

    def add_prompt(self, spec: PromptSpec) -> None:
        if spec.name in self._prompts:
            raise ValueError(f"prompt {spec.name!r} is registered twice")
        self._prompts[spec.name] = spec

    def add_resource(self, spec: ResourceSpec) -> None:
        if spec.uri in self._resources:
            raise ValueError(f"resource {spec.uri!r} is registered twice")
        self._resources[spec.uri] = spec

    def get(self, name: str) -> ToolSpec | None:
        self._load()
        return self._tools.get(name)

    def prompt(self, name: str) -> PromptSpec | None:
        self._load()
        return self._prompts.get(name)

    def prompts(self) -> list[PromptSpec]:
        self._load()
        return sorted(self._prompts.values(), key=lambda spec: spec.name)

    def resources(self) -> list[ResourceSpec]:
        self._load()
        return list(self._resources.values())

    def declares(self, kind: Literal["prompt", "resource"]) -> bool:
        """Whether this registry serves prompts (or resources), without loading the deferred modules:
        those registered so far, or, while modules wait to be loaded, what their sources declare."""
        if self._prompts if kind == "prompt" else self._resources:
            return True
        if not self._loaders or self._declared is None:
            return False
        if self._declared_kinds is None:
            self._declared_kinds = self._declared()
        return kind in self._declared_kinds

    def prompts_known(self) -> int:
        """How many prompts are registered so far, without loading deferred modules (server/discover)."""
        return len(self._prompts)

    def resources_known(self) -> int:
        """How many resources are registered so far, without loading deferred modules."""
        return len(self._resources)

    def __iter__(self) -> typing.Iterator[ToolSpec]:
        self._load()
        return iter(sorted(self._tools.values(), key=lambda spec: spec.name))

    def __len__(self) -> int:
        self._load()
        return len(self._tools)
