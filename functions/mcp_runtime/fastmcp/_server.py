"""`FastMCP` and `MCPServer`: the decorators of FastMCP 4.1 and mcp 2.3, describing what a module defines.

Decorating builds the tool's, prompt's or resource's description (its pydantic model, its schemas) when
the module loads, as FastMCP does: what cannot be described is recorded, named with its line, and the
registry leaves it out while the module's other tools serve (the start-up check refuses it). Tool
modules load on the first request that needs a tool, never on a cold `server/discover`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from ..components import (
    NotSet,
    PromptSpec,
    ResourceSpec,
    prompt_from_function,
    resource_from_function,
    tool_from_function,
)
from ..tools import ToolSpec, Undescribable, described

F = TypeVar("F", bound=Callable[..., Any])


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
            self._components.append((described("tool", tool_name, fn, lambda: build(fn, tool_name)), fn))
            return fn

        def build(fn: Callable[..., Any], tool_name: str) -> ToolSpec:
            return tool_from_function(
                fn,
                name=tool_name,
                title=title,
                description=description,
                annotations=annotations,
                task=task,
                output_schema=output_schema,
                structured_output=structured_output,
                meta=meta,
                timeout=timeout,
                rerun_interrupted=rerun_interrupted,
                show_error_details=not self.mask_error_details,
                wrap_mark=self._wrap_mark,
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
            build = lambda: resource_from_function(fn, uri, name=name, description=description, mime_type=mime_type)  # noqa: E731
            self._components.append((described("resource", uri, fn, build), fn))
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
            build = lambda: prompt_from_function(fn, name=prompt_name, description=description)  # noqa: E731
            self._components.append((described("prompt", prompt_name, fn, build), fn))
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

    # ---- what the runtime serves ---------------------------------------------------------------------------
    def __mcp_register__(self) -> list[tuple[ToolSpec | ResourceSpec | PromptSpec | Undescribable, Any]]:
        """What the runtime serves (`Registry.include`): each component, or why it could not be
        described, with the function it was made from."""
        return list(self._components)


class MCPServer(FastMCP):
    """mcp 2.3's `MCPServer` (`from mcp.server.mcpserver import MCPServer`): the same decorators. Its
    tools are published as FastMCP 4.1 publishes them, without FastMCP's wrap mark (docs/fastmcp.md)."""

    _wrap_mark = False
