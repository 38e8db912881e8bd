"""The one builder: every tool, prompt and resource is described here, from its function, whichever
decorator the team used (as FastMCP's and the SDK's `from_function` do).

- `tool_from_function`, `prompt_from_function`, `resource_from_function`: the description of one
  component (its pydantic model, its schemas, how it answers), built when its module loads.
- `@mcp.tool`, `@mcp.prompt`, `@mcp.resource` (`mcp_runtime.fastmcp`, the way this template teaches)
  call them with FastMCP's options.
- `@tool(description=...)` (`mcp_runtime.tool`) is `tool_from_function` under another name, kept for
  modules written before the facade: it also reads `(args: Model, ctx)` as the model of the arguments
  and answers a model or a dict with readable JSON text.

What a function's code uses that cannot work here (`ctx.sample`, session state, background work, the
`ToolContext.*_async` twins on a `Context`) is refused at decoration, naming what to write instead.

The forms of releases 1.0.0 and 2.0.0 (`ToolMode`, `@tool(mode=..., task_required=...)`, `ToolRegistry`, the
`*_async` twins of `ToolContext`) are these under their old names, each warning (`DeprecationWarning`) what to
write instead until they go in `GOES_AWAY_IN`.
"""

from __future__ import annotations

import base64
import inspect
import re
import sys
import typing
import warnings
from collections.abc import Callable
from enum import StrEnum
from functools import lru_cache
from types import CodeType
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from . import _loop
from .content import WRAP_KEY, Audio, File, Image, shape_result
from .mrtr import Asker
from .tools import (
    ASKABLE,
    EMPTY_INPUT_SCHEMA,
    SPEC_ATTRIBUTE,
    KeywordCall,
    Registry,
    ToolContext,
    ToolError,
    ToolFunction,
    ToolResult,
    ToolSpec,
    Unportable,
    _header_params,
    _input_model_of,
    described,
    injected_context,
    portable,
    published_schema,
    signature_model,
    takes_model,
    task_support,
)

F = TypeVar("F", bound=Callable[..., Any])


class _NotSet:
    def __repr__(self) -> str:
        return "NotSet"


NotSet: Final = _NotSet()


# What a tool may not use, and what to write instead: refused when the tool is described.
_SESSION_STATE: Final = (
    "ctx.get_state/set_state (session state) does not port: calls are stateless; keep state in a handle "
    "(ctx.handles) or, inside a task, in ctx.step"
)
UNSUPPORTED: Final[dict[str, str]] = {
    "ctx.sample": (
        "ctx.sample (asking the client's model) does not port: the runtime asks with MRTR; use the native "
        "ToolContext.sample(key, prompt) through ctx.tool_context"
    ),
    "ctx.get_state": _SESSION_STATE,
    "ctx.set_state": _SESSION_STATE,
    "asyncio.create_task": (
        "background work (asyncio.create_task, ensure_future) does not port: nothing a tool starts survives "
        "the invocation that started it; await the work before returning, or make the tool a task "
        "(task=True) and put the work in `await ctx.step(...)`"
    ),
}
# The awaitable twins `ToolContext` has had since 1.0.0 (deprecated): a `Context` never had them, so a tool
# that calls one on a `ctx: Context` parameter is refused when it is described, naming the method to await.
ASYNC_TWINS: Final[dict[str, str]] = {
    f"{name}_async": name for name in ("report_progress", "log", "elicit", "step", "wait", "wait_for_callback")
}
for _twin, _method in ASYNC_TWINS.items():
    UNSUPPORTED[f"ctx.{_twin}"] = (
        f"ctx.{_twin} is ToolContext's deprecated twin, never Context's: write `await ctx.{_method}(...)`"
    )


def refuse_unsupported_code(fn: Callable[..., Any], what: str) -> None:
    """Refuse, when the module loads, what a function's code uses that cannot work here: `ctx.sample`,
    `ctx.get_state`/`set_state`, a `ToolContext.*_async` twin on a `Context` parameter, and
    `asyncio.create_task`/`ensure_future`."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    contexts = _context_parameters(fn)
    for used in _uses(code, contexts, getattr(fn, "__globals__", {})):
        raise Unportable(f"{what}: {UNSUPPORTED[used]}")


def plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True, by_alias=True)
    return dict(value) if isinstance(value, dict) else value


_CONTEXT_FEATURES: Final = {
    "sample": "ctx.sample",
    "get_state": "ctx.get_state",
    "set_state": "ctx.set_state",
    **{twin: f"ctx.{twin}" for twin in ASYNC_TWINS},
}
_BACKGROUND: Final = ("create_task", "ensure_future")


def _context_parameters(fn: Callable[..., Any]) -> dict[str, bool]:
    """The parameters annotated with a context, each with whether it is the native `ToolContext` (which
    has `sample`), read as written: the module may still be loading."""
    found: dict[str, bool] = {}
    for parameter in inspect.signature(fn).parameters.values():
        written = parameter.annotation
        if isinstance(written, str) and "Context" in written:
            found[parameter.name] = "ToolContext" in written
        elif not isinstance(written, str) and injected_context(written) is not None:
            found[parameter.name] = ToolContext in (typing.get_args(written) or (written,))
    return found


def _uses(code: CodeType, contexts: dict[str, bool], module_globals: dict[str, Any]) -> list[str]:
    """The unsupported features a function's bytecode (and its nested functions') uses."""
    import dis

    asyncio = sys.modules.get("asyncio")  # not imported by anyone: no module holds its create_task

    used: list[str] = []
    previous: dis.Instruction | None = None
    for instruction in dis.get_instructions(code):
        name = instruction.argval
        if instruction.opname in ("LOAD_ATTR", "LOAD_METHOD") and previous is not None:
            loaded = previous.argval[-1] if isinstance(previous.argval, tuple) else previous.argval
            on_context = previous.opname.startswith(("LOAD_FAST", "LOAD_DEREF")) and loaded in contexts
            if on_context and name in _CONTEXT_FEATURES and not contexts[loaded]:
                used.append(_CONTEXT_FEATURES[name])
            if previous.opname == "LOAD_GLOBAL" and loaded == "asyncio" and name in _BACKGROUND:
                used.append("asyncio.create_task")
        imported = instruction.opname == "LOAD_GLOBAL" and name in _BACKGROUND
        if imported and asyncio is not None and module_globals.get(name) is getattr(asyncio, name):
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


# ---- tools ---------------------------------------------------------------------------------------------------
def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: Any = None,
    task: Any = False,
    output: type[BaseModel] | None = None,
    output_schema: Any = NotSet,
    structured_output: bool | None = None,
    meta: dict[str, Any] | None = None,
    timeout: float | None = None,
    input_schema: dict[str, Any] | None = None,
    prepare: ToolFunction | None = None,
    asks: tuple[str, ...] = (),
    rerun_interrupted: bool = False,
    show_error_details: bool = False,
    model_argument: bool = False,
    wrap_mark: bool = True,
) -> ToolSpec:
    """The description of the tool `fn`: FastMCP's (keyword parameters, a Google docstring's text and
    `Args:`, an output schema from the return annotation), with the runtime's options (`task=`, the one
    switch for task behaviour; `prepare`, `asks`, `rerun_interrupted`). `model_argument`: read
    `(args: Model, ctx)` as one model of the arguments (the native `@tool`); `wrap_mark`: FastMCP's
    `x-fastmcp-wrap-result` mark on a wrapping output schema (MCPServer has none)."""
    tool_name = name or fn.__name__
    refuse_unsupported_code(fn, tool_name)
    unknown = [capability for capability in asks if capability not in ASKABLE]
    if unknown:
        raise ValueError(f"tool {tool_name!r} asks for {unknown}; a client can be asked for {sorted(ASKABLE)}")
    support = task_support(task)
    if prepare is not None and support == "forbidden":
        raise ValueError(f"tool {tool_name!r}: only task tools take a prepare step")
    documented, parameter_docs = _doc_sections(fn)
    call: ToolFunction
    if model_argument and takes_model(fn):
        model = _input_model_of(fn)
        call = fn
        schema = input_schema if input_schema is not None else _schema_of(model)
    else:
        model, keywords, schema = signature_model(fn, tool_name)
        call = _TimedCall(keywords, tool_name, timeout) if timeout else keywords
        schema = input_schema if input_schema is not None else schema
        properties = schema.get("properties") or {}
        for parameter, said in parameter_docs.items():
            if parameter in properties and "description" not in properties[parameter]:
                properties[parameter]["description"] = said
    published: dict[str, Any] | None = None
    wraps = False
    if output is not None:
        published = _model_output_schema(output)
    elif not model_argument:  # the native decorator publishes an output schema only for `output=`
        published = _returned_schema(fn, tool_name, output_schema, structured_output)
        wraps = bool(published and published.get(WRAP_KEY))
        if wraps and not wrap_mark:
            published = {key: value for key, value in (published or {}).items() if key != WRAP_KEY}
    return ToolSpec(
        name=tool_name,
        description=description or documented or "",
        fn=call,
        input_model=model,
        input_schema=schema,
        task_support=support,
        output_schema=published,
        title=title,
        annotations=plain(annotations),
        prepare=prepare,
        header_params=_header_params(schema),
        asks=tuple(asks),
        rerun_interrupted=rerun_interrupted,
        show_error_details=show_error_details,
        meta=meta,
        wraps=wraps,
        shape=None if model_argument else shape_result,
    )


# ---- the forms of releases 1.0.0 and 2.0.0: the builder and the registry under old names, until GOES_AWAY_IN
GOES_AWAY_IN: Final = "3.0.0"


class ToolMode(StrEnum):
    """Releases 1.0.0's and 2.0.0's "how a tool answers" (deprecated): only TASK changed anything, and `task=`
    says it now."""

    PLAIN = "plain"
    INPUT_REQUIRED = "input_required"
    TASK = "task"
    HANDLE = "handle"


_TOOL_MODE_ADVICE: Final = (
    'task= is the one switch for task behaviour (write @tool(task=True) for mode=ToolMode.TASK, @tool(task="required") '
    "for task_required=True, and drop the other modes)"
)
# Each deprecated name a module may import, by the module it imports it from: what it is, what to write instead.
DEPRECATED_NAMES: Final[dict[str, tuple[Callable[[], Any], str]]] = {
    "ToolMode": (lambda: ToolMode, _TOOL_MODE_ADVICE),
    "ToolRegistry": (
        lambda: Registry,
        "write Registry (from mcp_runtime import Registry), the one registry under its new name",
    ),
    "tool": (lambda: tool, "write from mcp_runtime import tool"),
}
TWIN_ADVICE: Final[dict[str, str]] = {
    twin: (
        "write `ctx.elicit(key, message, Model)` (not awaited: the same answer), or annotate the parameter "
        "`ctx: Context` (from mcp_runtime.fastmcp import Context) and write `await ctx.elicit(message, Model)` "
        "(its answer's `.data`)"
        if method == "elicit"
        else "annotate the parameter `ctx: Context` (from mcp_runtime.fastmcp import Context) and write "
        f"`await ctx.{method}(...)`"
    )
    for twin, method in ASYNC_TWINS.items()
}


def deprecated(old: str, instead: str, *, stacklevel: int) -> None:
    """Warn that `old` goes away in GOES_AWAY_IN and what to write instead, at the line `stacklevel` frames
    above the caller (1: the caller's own line), which is the team's code."""
    warnings.warn(
        f"{old} is deprecated and goes away in {GOES_AWAY_IN}: {instead}", DeprecationWarning, stacklevel=stacklevel + 1
    )


def deprecated_name(module: str, name: str) -> Any:
    """What a deprecated name `module.name` is, warned at the line that reads it: a module's `__getattr__`
    returns it. `from package import name` asks twice (the import system's look first): only the second,
    the statement's own, warns."""
    value, advice = DEPRECATED_NAMES[name]
    asking = sys._getframe(2)  # above this function and the module's __getattr__
    if not asking.f_code.co_filename.startswith("<frozen importlib"):
        deprecated(f"{module}.{name}", advice, stacklevel=3)
    return value()


def _task_of_deprecated(mode: ToolMode | str | None, task_required: bool | None, task: bool | str) -> bool | str:
    """`task=` for 1.0.0's `mode=` and `task_required=`, warned at the decorator's line."""
    given = [f"task={task!r}"] if task is not False else []
    given += [f"mode=ToolMode.{ToolMode(mode).name}"] if mode is not None else []
    given += [f"task_required={task_required!r}"] if task_required is not None else []
    if task is not False:
        raise TypeError(f"@tool({', '.join(given)}): keep task= alone (mode= is deprecated)")
    is_task = mode is not None and ToolMode(mode) is ToolMode.TASK
    answer: bool | str = "required" if task_required else is_task
    instead = {True: "write @tool(task=True)", "required": 'write @tool(task="required")'}.get(answer)
    if instead is None:
        instead = "drop mode= (task= is the one switch for task behaviour; the other modes changed nothing)"
    deprecated(f"@tool({', '.join(given)})", instead, stacklevel=3)
    return answer


def tool(
    *,
    description: str,
    name: str | None = None,
    task: bool | str = False,
    output: type[BaseModel] | None = None,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
    input_schema: dict[str, Any] | None = None,
    prepare: ToolFunction | None = None,
    asks: tuple[str, ...] = (),
    rerun_interrupted: bool = False,
    mode: ToolMode | str | None = None,
    task_required: bool | None = None,
) -> Callable[[F], F]:
    """Mark a function as a tool: `tool_from_function` under another name (the native decorator), for
    modules written before `mcp = FastMCP(...)`; a `Registry.include(module)` call serves it.
    `(args: Model, ctx: ToolContext)` reads one model of the arguments; keyword parameters work as in
    `@mcp.tool`. `output`: the model of the structured result. `asks`: what the tool may ask of the
    client mid-call ("elicitation", "sampling", "roots"); a call whose client did not declare one of
    them is refused with -32021 before the tool runs or a task starts. `mode` and `task_required`:
    releases 1.0.0's and 2.0.0's, deprecated (`task=` says it), each warning what to write instead."""
    if mode is not None or task_required is not None:
        task = _task_of_deprecated(mode, task_required, task)

    def mark(fn: F) -> F:
        def build() -> ToolSpec:
            return tool_from_function(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                task=task,
                output=output,
                input_schema=input_schema,
                prepare=prepare,
                asks=asks,
                rerun_interrupted=rerun_interrupted,
                model_argument=True,
            )

        setattr(fn, SPEC_ATTRIBUTE, described("tool", name or fn.__name__, fn, build))
        return fn

    return mark


@lru_cache(maxsize=256)
def _model_output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Generated once per model and shared, like `inputSchema` (bench/README.md: the warm path)."""
    return model.model_json_schema()


def _schema_of(model: type[BaseModel] | None) -> dict[str, Any]:
    if model is None:
        return dict(EMPTY_INPUT_SCHEMA)
    schema = model.model_json_schema()
    schema.setdefault("type", "object")
    return schema


def _returned_schema(
    fn: Callable[..., Any], tool_name: str, output_schema: Any, structured_output: bool | None
) -> dict[str, Any] | None:
    if structured_output is False:
        return None
    if output_schema is not NotSet:
        if output_schema is not None and (not isinstance(output_schema, dict) or output_schema.get("type") != "object"):
            raise ValueError(f"tool {tool_name!r}: output_schema must be a JSON object schema (type: object)")
        return typing.cast("dict[str, Any] | None", output_schema)
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
        import asyncio  # only an async tool's call needs it: a cold discover imports none of it

        try:
            return await asyncio.wait_for(coroutine, self.timeout)
        except TimeoutError:
            raise ToolError(f"Tool '{self.name}' timed out after {self.timeout:g} seconds") from None


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


# ---- resources and prompts -------------------------------------------------------------------------------------
PromptFunction = Callable[[dict[str, str], Asker], list[dict[str, Any]]]
ResourceFunction = Callable[[dict[str, str], Asker], "str | bytes"]
Completer = Callable[[str, dict[str, str]], list[str]]


class PromptSpec:
    """A registered prompt: its wire description, its function and the completers of its arguments."""

    __slots__ = ("arguments", "completers", "description", "fn", "name")
    name: str
    description: str
    fn: PromptFunction
    arguments: list[dict[str, Any]]
    completers: dict[str, Completer]

    def __init__(
        self,
        name: str,
        description: str,
        fn: PromptFunction,
        arguments: list[dict[str, Any]] | None = None,
        completers: dict[str, Completer] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.fn = fn
        self.arguments = [] if arguments is None else arguments
        self.completers = {} if completers is None else completers

    def to_wire(self) -> dict[str, Any]:
        prompt: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.arguments:
            prompt["arguments"] = self.arguments
        return prompt


class ResourceSpec:
    """A registered resource, or a resource template (`template`) matched against a URI."""

    __slots__ = ("_pattern", "description", "fn", "mime_type", "name", "template", "uri")
    uri: str
    name: str
    mime_type: str
    fn: ResourceFunction
    description: str | None
    template: bool
    _pattern: re.Pattern[str] | None

    def __init__(
        self,
        uri: str,
        name: str,
        mime_type: str,
        fn: ResourceFunction,
        description: str | None = None,
        template: bool = False,
    ) -> None:
        self.uri = uri
        self.name = name
        self.mime_type = mime_type
        self.fn = fn
        self.description = description
        self.template = template
        self._pattern = None
        if template:
            parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", uri)
            regex = "".join(
                re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)" for index, part in enumerate(parts)
            )
            self._pattern = re.compile(f"^{regex}$")

    def match(self, uri: str) -> dict[str, str] | None:
        if not self.template:
            return {} if uri == self.uri else None
        assert self._pattern is not None
        found = self._pattern.match(uri)
        return found.groupdict() if found else None

    def to_wire(self) -> dict[str, Any]:
        key = "uriTemplate" if self.template else "uri"
        entry: dict[str, Any] = {key: self.uri, "name": self.name, "mimeType": self.mime_type}
        if self.description:
            entry["description"] = self.description
        return entry

    def contents(self, uri: str, body: str | bytes) -> dict[str, Any]:
        if isinstance(body, bytes):
            return {"uri": uri, "mimeType": self.mime_type, "blob": base64.b64encode(body).decode("ascii")}
        return {"uri": uri, "mimeType": self.mime_type, "text": body}


def resource_from_function(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    reads_variables: bool = False,
) -> ResourceSpec:
    """The description of the resource (or, with `{variables}` in its URI, the resource template) `fn`.
    `reads_variables`: `fn(variables, asker)`, the form `catalog.resources.resource` takes, which may
    ask the client (MRTR); otherwise the URI's variables are its keyword parameters (FastMCP's form)."""
    refuse_unsupported_code(fn, uri)
    template = "{" in uri
    if reads_variables:
        return ResourceSpec(uri, name or fn.__name__, mime_type or "text/plain", fn, description, template)
    if any(injected_context(hint) for hint in typing.get_type_hints(fn).values()):
        raise NotImplementedError(f"resource {uri}: a Context parameter in a resource does not port")

    def read(variables: dict[str, str], asker: Asker) -> str | bytes:
        produced = _run(fn(**variables), f"resource {uri}")
        if isinstance(produced, str | bytes):
            return produced
        import json

        from .content import jsonable

        return json.dumps(jsonable(produced), ensure_ascii=False)

    return ResourceSpec(
        uri, name or fn.__name__, mime_type or "text/plain", read, description or _doc_description(fn), template
    )


def prompt_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    arguments: list[dict[str, Any]] | None = None,
    completers: dict[str, Completer] | None = None,
) -> PromptSpec:
    """The description of the prompt `fn`: its parameters are the prompt's arguments (described by a
    Google docstring's `Args:`), what it returns its messages. Given `arguments`, `fn(values, asker)`
    is the form `catalog.prompts.prompt` takes, which may ask the client (MRTR)."""
    prompt_name = name or fn.__name__
    refuse_unsupported_code(fn, prompt_name)
    documented, parameter_docs = _doc_sections(fn)
    if arguments is not None:
        return PromptSpec(prompt_name, description or documented or "", fn, arguments, completers)
    declared: list[dict[str, Any]] = []
    for parameter in inspect.signature(fn).parameters.values():
        argument: dict[str, Any] = {"name": parameter.name, "required": parameter.default is parameter.empty}
        if parameter.name in parameter_docs:
            argument["description"] = parameter_docs[parameter.name]
        declared.append(argument)

    def get(values: dict[str, str], asker: Asker) -> list[dict[str, Any]]:
        produced = _run(fn(**values), f"prompt {prompt_name}")
        items = produced if isinstance(produced, list | tuple) else [produced]
        return [_message(item) for item in items]

    return PromptSpec(prompt_name, description or documented or "", get, declared, completers)


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
