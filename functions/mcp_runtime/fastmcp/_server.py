"""`FastMCP` and `MCPServer`: the decorators of FastMCP 4.1 and mcp 2.3, describing what a module defines.

Decorating builds the tool's, prompt's or resource's description (its pydantic model, its schemas) when
the module loads, as FastMCP does: what cannot be described is recorded, named with its line, and the
registry leaves it out while the module's other tools serve (the start-up check refuses it). Tool
modules load on the first request that needs a tool, never on a cold `server/discover`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from types import CodeType
from typing import Any, Final, TypeVar, overload

from .. import _loop
from ..catalog import PromptSpec, ResourceSpec
from ..mrtr import Asker
from ..tools import (
    KeywordCall,
    ToolContext,
    ToolError,
    ToolMode,
    ToolResult,
    ToolSpec,
    Undescribable,
    described,
    injected_context,
    portable,
    published_schema,
    signature_model,
    task_flags,
)
from ._content import WRAP_KEY, Audio, File, Image, shape_result
from ._context import UNSUPPORTED

F = TypeVar("F", bound=Callable[..., Any])


class _NotSet:
    def __repr__(self) -> str:
        return "NotSet"


NotSet: Final = _NotSet()

# Server options of the libraries that do not port, and what to do instead.
UNSUPPORTED_OPTIONS: Final[dict[str, str]] = {
    "auth": "per-server auth= does not port: the runtime authenticates every request (docs/security.md); "
    "authorize inside the tool with ctx.client_id",
    "middleware": "middleware does not port: put the cross-cutting code in a decorator of your own around the tools",
    "lifespan": "lifespan does not port: a Lambda environment has no server start or stop; create clients lazily "
    "at module level, on first use",
    "providers": "providers (mounting and proxying) do not port: copy the other server's tools into a module here",
    "transforms": "transforms do not port: decorate the tools as they should be published",
    "tools": "tools= (Tool objects) does not port: decorate the functions with @mcp.tool",
    "tasks": "tasks= (a task backend) does not port: tasks here are durable by design (task=True on a tool)",
}
UNSUPPORTED_TOOL_OPTIONS: Final[dict[str, str]] = {
    "auth": "per-component auth= does not port: the runtime authenticates every request; check ctx.client_id "
    "inside the tool",
    "tags": "tags do not port: there are no tag filters or visibility rules here; drop tags=",
    "version": "versions do not port: publish one tool per name (or a new name per version)",
    "app": "apps (UI resources) do not port",
    "exclude_args": "exclude_args does not port: give the parameter a default and keep it out of the signature",
}
UNSUPPORTED_METHODS: Final[dict[str, str]] = {
    "mount": "mounting does not port: copy the other server's tools into a module in functions/tools",
    "import_server": "importing servers does not port: copy the other server's tools into a module in functions/tools",
    "add_middleware": UNSUPPORTED_OPTIONS["middleware"],
    "add_transform": UNSUPPORTED_OPTIONS["transforms"],
    "add_provider": UNSUPPORTED_OPTIONS["providers"],
    "as_proxy": "proxying does not port: the runtime serves only the tools of functions/tools",
    "from_openapi": "OpenAPI servers do not port: write the tools that call the API",
    "from_fastapi": "FastAPI servers do not port: write the tools that call the API",
    "custom_route": "custom HTTP routes do not port: the front serves /mcp only",
}


def task_mode(task: Any) -> tuple[ToolMode, bool]:
    """The native mode (and whether a task is required) of a FastMCP `task=` option (also a TaskConfig's
    `mode`, or None): the mapping itself is `mcp_runtime.tools.task_flags`, its one place."""
    option = getattr(task, "mode", task)
    is_task, required = task_flags(False if option is None else option)
    return (ToolMode.TASK if is_task else ToolMode.PLAIN), required


@dataclasses.dataclass
class _ToolEntry:
    fn: Callable[..., Any]
    name: str
    title: str | None
    description: str | None
    annotations: dict[str, Any] | None
    output_schema: Any
    meta: dict[str, Any] | None
    mode: ToolMode
    task_required: bool
    timeout: float | None
    structured_output: bool | None
    wrap_mark: bool
    rerun_interrupted: bool
    show_error_details: bool


@dataclasses.dataclass
class _ResourceEntry:
    fn: Callable[..., Any]
    uri: str
    name: str
    description: str | None
    mime_type: str | None


@dataclasses.dataclass
class _PromptEntry:
    fn: Callable[..., Any]
    name: str
    description: str | None


class PortedToolSpec(ToolSpec):
    """A tool of a ported module: FastMCP's output schema, result shapes and `_meta`."""

    __slots__ = ("meta", "output_schema", "timeout", "wraps")
    output_schema: dict[str, Any] | None
    meta: dict[str, Any] | None
    timeout: float | None
    wraps: bool

    def to_wire(self) -> dict[str, Any]:
        tool = super().to_wire()
        if self.output_schema is not None:
            tool["outputSchema"] = self.output_schema
        if self.meta:
            tool["_meta"] = self.meta
        return tool

    def to_result(self, produced: Any) -> ToolResult:
        return shape_result(produced, self.output_schema, self.wraps)


class _TimedCall:
    """A ported tool's call: `timeout=` bounds an async tool's run (a tool error when it runs out)."""

    __slots__ = ("__name__", "call", "name", "timeout")

    def __init__(self, call: KeywordCall, name: str, timeout: float) -> None:
        self.call = call
        self.name = name
        self.timeout = timeout
        self.__name__ = call.__name__

    def __call__(self, args: Any, ctx: ToolContext) -> Any:
        produced = self.call(args, ctx)
        if inspect.iscoroutine(produced):
            return self._bounded(produced)
        return produced

    async def _bounded(self, coroutine: Any) -> Any:
        try:
            return await asyncio.wait_for(coroutine, self.timeout)
        except TimeoutError:
            raise ToolError(f"Tool '{self.name}' timed out after {self.timeout:g} seconds") from None


class TasksExtension:
    """`from fastmcp_tasks import TasksExtension` as FastMCP 4.1 needs it for `task=True` tools: here a
    stand-in that does nothing, so a module keeps its `mcp.add_extension(TasksExtension())` line. Its
    options (a Redis URL, a worker count) have no meaning here: tasks run on the task table and Step
    Functions, each in its own invocation."""

    def __init__(self, *args: Any, **options: Any) -> None:
        self.options = options


class FastMCP:
    """A FastMCP 4.1 server, as a module in functions/tools defines one: `mcp = FastMCP("name")`. The
    runtime serves the tools, resources and prompts registered on it; nothing here runs a server."""

    def __init__(
        self,
        name: str | None = None,
        instructions: str | None = None,
        *,
        mask_error_details: bool | None = None,
        **options: Any,
    ) -> None:
        for option, value in options.items():
            if option in UNSUPPORTED_OPTIONS and value not in (None, [], (), {}):
                raise NotImplementedError(f"{type(self).__name__}({option}=...): {UNSUPPORTED_OPTIONS[option]}")
        self.name = name or "FastMCP"
        self.instructions = instructions
        # FastMCP shows an exception's text unless masked; here it is masked unless the team says
        # `mask_error_details=False` (the log and `make task ID=` have it either way).
        self.mask_error_details = mask_error_details is not False
        # Every tool, resource and prompt decorated, described (or why not), with its function.
        self._components: list[tuple[ToolSpec | ResourceSpec | PromptSpec | Undescribable, Callable[..., Any]]] = []

    def __getattr__(self, name: str) -> Any:
        if name in UNSUPPORTED_METHODS:
            raise NotImplementedError(f"{type(self).__name__}.{name}: {UNSUPPORTED_METHODS[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ---- tools ----------------------------------------------------------------------------------------
    @overload
    def tool(self, name_or_fn: F, **options: Any) -> F: ...

    @overload
    def tool(self, name_or_fn: str | None = None, **options: Any) -> Callable[[F], F]: ...

    def tool(
        self,
        name_or_fn: str | Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Any = None,
        output_schema: Any = NotSet,
        meta: dict[str, Any] | None = None,
        task: Any = None,
        timeout: float | None = None,
        structured_output: bool | None = None,
        rerun_interrupted: bool = False,
        icons: Any = None,
        run_in_thread: bool = True,
        enabled: bool | None = None,
        **unsupported: Any,
    ) -> Any:
        """`@mcp.tool`, `@mcp.tool()`, `@mcp.tool("name")` or `@mcp.tool(name=..., ...)`."""
        for option, value in unsupported.items():
            if option in UNSUPPORTED_TOOL_OPTIONS:
                if value not in (None, set(), [], (), {}):
                    raise NotImplementedError(f"@{self._kind}.tool({option}=...): {UNSUPPORTED_TOOL_OPTIONS[option]}")
            else:
                raise TypeError(f"@{self._kind}.tool() got an unexpected keyword argument {option!r}")
        if enabled is False:
            raise NotImplementedError(f"@{self._kind}.tool(enabled=False): leave the tool out of the module instead")

        def register(fn: F) -> F:
            tool_name = name or (name_or_fn if isinstance(name_or_fn, str) else None) or fn.__name__
            self._refuse_unsupported_code(fn, tool_name)
            self._components.append((described("tool", tool_name, fn, lambda: build(fn, tool_name)), fn))
            return fn

        def build(fn: Callable[..., Any], tool_name: str) -> PortedToolSpec:
            mode, task_required = task_mode(task)
            return _tool_spec(
                _ToolEntry(
                    fn=fn,
                    name=tool_name,
                    title=title,
                    description=description,
                    annotations=_plain(annotations),
                    output_schema=output_schema,
                    meta=meta,
                    mode=mode,
                    task_required=task_required,
                    timeout=timeout,
                    structured_output=structured_output,
                    wrap_mark=self._wrap_mark,
                    rerun_interrupted=rerun_interrupted,
                    show_error_details=not self.mask_error_details,
                )
            )

        if callable(name_or_fn):
            return register(name_or_fn)
        return register

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> None:
        self.tool(**options)(fn)

    # ---- resources and prompts ----------------------------------------------------------------------------
    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        **options: Any,
    ) -> Callable[[F], F]:
        """`@mcp.resource("data://config")`, or a URI template (`"users://{user_id}/profile"`)."""
        self._refuse_options(options, "resource")

        def register(fn: F) -> F:
            self._refuse_unsupported_code(fn, uri)
            entry = _ResourceEntry(fn, uri, name or fn.__name__, description or _doc_description(fn), mime_type)
            self._components.append((described("resource", uri, fn, lambda: _resource_spec(entry)), fn))
            return fn

        return register

    @overload
    def prompt(self, name_or_fn: F, **options: Any) -> F: ...

    @overload
    def prompt(self, name_or_fn: str | None = None, **options: Any) -> Callable[[F], F]: ...

    def prompt(
        self,
        name_or_fn: str | Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        **options: Any,
    ) -> Any:
        """`@mcp.prompt`, `@mcp.prompt()` or `@mcp.prompt(name=..., description=...)`."""
        self._refuse_options(options, "prompt")

        def register(fn: F) -> F:
            prompt_name = name or (name_or_fn if isinstance(name_or_fn, str) else None) or fn.__name__
            entry = _PromptEntry(fn, prompt_name, description or _doc_description(fn))
            self._components.append((described("prompt", prompt_name, fn, lambda: _prompt_spec(entry)), fn))
            return fn

        if callable(name_or_fn):
            return register(name_or_fn)
        return register

    def add_extension(self, extension: Any) -> None:
        """FastMCP's `mcp.add_extension(TasksExtension())`: accepted, and nothing to do (tasks are the
        runtime's own: durable, on the task table). Any other extension does not port."""
        if not isinstance(extension, TasksExtension):
            raise NotImplementedError(
                f"{type(self).__name__}.add_extension({type(extension).__name__}(...)): only TasksExtension "
                "ports (and is not needed: task=True is enough here); drop the line"
            )

    def run(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"{type(self).__name__}.run: the runtime serves this module (make run locally, cdk deploy on AWS); "
            "keep mcp.run() under `if __name__ == '__main__':`"
        )

    @property
    def _kind(self) -> str:
        return "mcp"

    # FastMCP marks an output schema that wraps a non-object result (`x-fastmcp-wrap-result`); MCPServer does not.
    _wrap_mark: bool = True

    def _refuse_options(self, options: dict[str, Any], what: str) -> None:
        for option, value in options.items():
            if option in UNSUPPORTED_TOOL_OPTIONS:
                if value not in (None, set(), [], (), {}):
                    raise NotImplementedError(f"@mcp.{what}({option}=...): {UNSUPPORTED_TOOL_OPTIONS[option]}")
            elif option not in ("icons", "annotations", "meta", "enabled", "tags"):
                raise TypeError(f"@mcp.{what}() got an unexpected keyword argument {option!r}")

    @staticmethod
    def _refuse_unsupported_code(fn: Callable[..., Any], what: str) -> None:
        """Refuse, when the module loads, what a function's code uses that cannot work here: `ctx.sample`,
        `ctx.get_state`/`set_state` on its context parameter, and `asyncio.create_task`/`ensure_future`."""
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        contexts = _context_parameters(fn)
        for used in _uses(code, contexts, getattr(fn, "__globals__", {})):
            raise NotImplementedError(f"{what}: {UNSUPPORTED[used]}")

    # ---- what the runtime serves ---------------------------------------------------------------------------
    def __mcp_register__(self) -> list[tuple[ToolSpec | ResourceSpec | PromptSpec | Undescribable, Any]]:
        """What the runtime serves (`ToolRegistry.include`): each component, or why it could not be
        described, with the function it was made from."""
        return list(self._components)


class MCPServer(FastMCP):
    """mcp 2.3's `MCPServer` (`from mcp.server.mcpserver import MCPServer`): the same decorators. Its
    tools are published as FastMCP 4.1 publishes them, without FastMCP's wrap mark (docs/fastmcp.md)."""

    _wrap_mark = False


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True, by_alias=True)
    return dict(value) if isinstance(value, dict) else value


_CONTEXT_FEATURES: Final = {"sample": "ctx.sample", "get_state": "ctx.get_state", "set_state": "ctx.set_state"}
_BACKGROUND: Final = ("create_task", "ensure_future")


def _context_parameters(fn: Callable[..., Any]) -> set[str]:
    """The parameters annotated with a context (read as written: the module may still be loading)."""
    found = set()
    for parameter in inspect.signature(fn).parameters.values():
        written = parameter.annotation
        if (isinstance(written, str) and "Context" in written) or (
            not isinstance(written, str) and injected_context(written) is not None
        ):
            found.add(parameter.name)
    return found


def _uses(code: CodeType, contexts: set[str], module_globals: dict[str, Any]) -> list[str]:
    """The unsupported features a function's bytecode (and its nested functions') uses."""
    import asyncio
    import dis

    used: list[str] = []
    previous: dis.Instruction | None = None
    for instruction in dis.get_instructions(code):
        name = instruction.argval
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous is not None:
            loaded = previous.argval[-1] if isinstance(previous.argval, tuple) else previous.argval
            on_context = previous.opname.startswith(("LOAD_FAST", "LOAD_DEREF")) and loaded in contexts
            if on_context and name in _CONTEXT_FEATURES:
                used.append(_CONTEXT_FEATURES[name])
            if previous.opname == "LOAD_GLOBAL" and loaded == "asyncio" and name in _BACKGROUND:
                used.append("asyncio.create_task")
        imported = instruction.opname == "LOAD_GLOBAL" and name in _BACKGROUND
        if imported and module_globals.get(name) is getattr(asyncio, name):
            used.append("asyncio.create_task")
        previous = instruction
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            used.extend(_uses(constant, contexts, module_globals))
    return used


# ---- docstrings ---------------------------------------------------------------------------------------------
_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|Attributes):\s*$"
)


def _doc_sections(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """A Google-style docstring's description (the text before its first section) and its `Args:`."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None, {}
    lines = doc.splitlines()
    description: list[str] = []
    parameters: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        found = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if found:
            section = found.group(1)
            current = None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params"):
            entry = re.match(r"^\s+(\*{0,2}\w+)(?:\s*\(.*?\))?:\s*(.*)$", line)
            if entry and (current is None or _indent(line) <= _indent_of_entries(lines, section)):
                current = entry.group(1)
                parameters[current] = entry.group(2).strip()
            elif current is not None and line.strip():
                parameters[current] = f"{parameters[current]} {line.strip()}".strip()
    if section is None:
        return doc, {}
    text = "\n".join(description).strip()
    return text or None, parameters


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of_entries(lines: list[str], section: str) -> int:
    for index, line in enumerate(lines):
        if line.strip() == f"{section}:":
            for following in lines[index + 1 :]:
                if following.strip():
                    return _indent(following)
    return 0


def _doc_description(fn: Callable[..., Any]) -> str | None:
    return _doc_sections(fn)[0]


# ---- building what the runtime serves ----------------------------------------------------------------------
def _tool_spec(entry: _ToolEntry) -> PortedToolSpec:
    fn = entry.fn
    description, parameter_docs = _doc_sections(fn)
    model, call, schema = signature_model(fn, entry.name)
    properties = schema.get("properties") or {}
    for parameter, text in parameter_docs.items():
        if parameter in properties and "description" not in properties[parameter]:
            properties[parameter]["description"] = text
    spec = PortedToolSpec(
        name=entry.name,
        description=entry.description or description or "",
        fn=_TimedCall(call, entry.name, entry.timeout) if entry.timeout else call,
        input_model=model,
        input_schema=schema,
        mode=entry.mode,
        task_required=entry.task_required,
        title=entry.title,
        annotations=entry.annotations,
        rerun_interrupted=entry.rerun_interrupted,
        show_error_details=entry.show_error_details,
    )
    output_schema = _output_schema(fn, entry)
    spec.wraps = bool(output_schema and output_schema.get(WRAP_KEY))
    if spec.wraps and not entry.wrap_mark:
        output_schema = {key: value for key, value in (output_schema or {}).items() if key != WRAP_KEY}
    spec.output_schema = output_schema
    spec.meta = entry.meta
    spec.timeout = entry.timeout
    return spec


def _output_schema(fn: Callable[..., Any], entry: _ToolEntry) -> dict[str, Any] | None:
    if entry.structured_output is False:
        return None
    if entry.output_schema is not NotSet:
        explicit = entry.output_schema
        if explicit is not None and (not isinstance(explicit, dict) or explicit.get("type") != "object"):
            raise ValueError(f"tool {entry.name!r}: output_schema must be a JSON object schema (type: object)")
        return typing.cast("dict[str, Any] | None", explicit)
    written = inspect.signature(fn).return_annotation
    if written in (inspect.Signature.empty, None):  # `-> None` as written (a string `None` is NoneType)
        return None
    returned = portable(typing.get_type_hints(fn, include_extras=True).get("return", inspect.Signature.empty))
    if returned is Any or _unstructured(returned):
        return None
    from pydantic import TypeAdapter, create_model

    schema = TypeAdapter(returned).json_schema(mode="serialization")
    if _is_object_schema(schema):
        return published_schema(schema)
    wrapped = create_model("Wrapped", result=(returned, ...)).model_json_schema(mode="serialization")
    return {**published_schema(wrapped), WRAP_KEY: True}


def _unstructured(returned: Any) -> bool:
    """Return types FastMCP publishes no output schema for: content, bytes, bare sequences, ToolResult."""
    bare = typing.get_args(returned)[0] if typing.get_origin(returned) is typing.Annotated else returned
    if bare in (list, tuple, bytes) or bare is ToolResult:
        return True
    arms = typing.get_args(bare) if typing.get_origin(bare) in (typing.Union, _union_type()) else (bare,)
    if any(arm in (Image, Audio, File, bytes) or arm is ToolResult for arm in arms):
        return True
    origin = typing.get_origin(bare)
    if origin in (list, tuple) and all(arg is Any for arg in typing.get_args(bare)):
        return True
    return origin in (list, tuple) and any(arg in (Image, Audio, File) for arg in typing.get_args(bare))


def _union_type() -> Any:
    from types import UnionType

    return UnionType


def _is_object_schema(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "object" or "properties" in schema:
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = (schema.get("$defs") or {}).get(ref[len("#/$defs/") :]) or {}
        return target.get("type") == "object" or "properties" in target
    return False


def _run(produced: Any, owner: str) -> Any:
    return _loop.run(produced, owner) if inspect.iscoroutine(produced) else produced


def _resource_spec(entry: _ResourceEntry) -> ResourceSpec:
    fn = entry.fn
    template = "{" in entry.uri
    if any(injected_context(hint) for hint in typing.get_type_hints(fn).values()):
        raise NotImplementedError(f"resource {entry.uri}: a Context parameter in a resource does not port")

    def read(variables: dict[str, str], asker: Asker) -> str | bytes:
        produced = _run(fn(**variables), f"resource {entry.uri}")
        if isinstance(produced, str | bytes):
            return produced
        import json

        from ._content import jsonable

        return json.dumps(jsonable(produced), ensure_ascii=False)

    mime = entry.mime_type or "text/plain"
    return ResourceSpec(entry.uri, entry.name, mime, read, entry.description, template)


def _prompt_spec(entry: _PromptEntry) -> PromptSpec:
    fn = entry.fn
    _, parameter_docs = _doc_sections(fn)
    arguments: list[dict[str, Any]] = []
    for parameter in inspect.signature(fn).parameters.values():
        argument: dict[str, Any] = {"name": parameter.name, "required": parameter.default is parameter.empty}
        if parameter.name in parameter_docs:
            argument["description"] = parameter_docs[parameter.name]
        arguments.append(argument)

    def get(values: dict[str, str], asker: Asker) -> list[dict[str, Any]]:
        produced = _run(fn(**values), f"prompt {entry.name}")
        items = produced if isinstance(produced, list | tuple) else [produced]
        return [_message(item) for item in items]

    return PromptSpec(entry.name, entry.description or "", get, arguments)


def _message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return {"role": "user", "content": {"type": "text", "text": item}}
    if isinstance(item, dict) and "role" in item:
        content = item.get("content")
        if isinstance(content, str):
            return {"role": item["role"], "content": {"type": "text", "text": content}}
        return dict(item)
    role = getattr(item, "role", "user")
    content = getattr(item, "content", item)
    if isinstance(content, str):
        return {"role": role, "content": {"type": "text", "text": content}}
    dump = getattr(content, "model_dump", None)
    return {"role": role, "content": dump(exclude_none=True, by_alias=True) if callable(dump) else content}
