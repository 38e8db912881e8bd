"""Prompts and resources: registered like tools, served by the same dispatch."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from .mrtr import Asker
from .tools import ToolRegistry, Undescribable

PromptFunction = Callable[[dict[str, str], Asker], list[dict[str, Any]]]
ResourceFunction = Callable[[dict[str, str], Asker], "str | bytes"]
Completer = Callable[[str, dict[str, str]], list[str]]


def _nothing() -> None:
    return None


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


class PromptRegistry:
    def __init__(self) -> None:
        self._prompts: dict[str, PromptSpec] = {}
        # Runs before every lookup: the catalog's deferred tool modules may hold ported prompts.
        self.before: Callable[[], None] = _nothing

    def prompt(
        self,
        *,
        description: str,
        name: str | None = None,
        arguments: list[dict[str, Any]] | None = None,
        completers: dict[str, Completer] | None = None,
    ) -> Callable[[PromptFunction], PromptFunction]:
        def register(fn: PromptFunction) -> PromptFunction:
            self.add(PromptSpec(name or fn.__name__, description, fn, arguments or [], completers or {}))
            return fn

        return register

    def add(self, spec: PromptSpec) -> None:
        if spec.name in self._prompts:
            raise ValueError(f"prompt {spec.name!r} is registered twice")
        self._prompts[spec.name] = spec

    def get(self, name: str) -> PromptSpec | None:
        self.before()
        return self._prompts.get(name)

    def __iter__(self) -> Iterator[PromptSpec]:
        self.before()
        return iter(sorted(self._prompts.values(), key=lambda spec: spec.name))

    def __len__(self) -> int:
        self.before()
        return len(self._prompts)

    def known(self) -> int:
        """How many are registered so far, without loading deferred modules (server/discover)."""
        return len(self._prompts)


class ResourceRegistry:
    def __init__(self) -> None:
        self._resources: list[ResourceSpec] = []
        # Runs before every lookup: the catalog's deferred tool modules may hold ported resources.
        self.before: Callable[[], None] = _nothing

    def resource(
        self, uri: str, *, name: str, mime_type: str = "text/plain", description: str | None = None
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        return self._register(uri, name, mime_type, description, template=False)

    def template(
        self, uri_template: str, *, name: str, mime_type: str = "text/plain", description: str | None = None
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        return self._register(uri_template, name, mime_type, description, template=True)

    def _register(
        self, uri: str, name: str, mime_type: str, description: str | None, *, template: bool
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        def register(fn: ResourceFunction) -> ResourceFunction:
            self.add(ResourceSpec(uri, name, mime_type, fn, description, template))
            return fn

        return register

    def add(self, spec: ResourceSpec) -> None:
        if any(existing.uri == spec.uri for existing in self._resources):
            raise ValueError(f"resource {spec.uri!r} is registered twice")
        self._resources.append(spec)

    def static(self) -> list[ResourceSpec]:
        self.before()
        return sorted((r for r in self._resources if not r.template), key=lambda r: r.uri)

    def templates(self) -> list[ResourceSpec]:
        self.before()
        return sorted((r for r in self._resources if r.template), key=lambda r: r.uri)

    def resolve(self, uri: str) -> tuple[ResourceSpec, dict[str, str]] | None:
        for spec in self.static() + self.templates():
            found = spec.match(uri)
            if found is not None:
                return spec, found
        return None

    def __len__(self) -> int:
        self.before()
        return len(self._resources)

    def known(self) -> int:
        """How many are registered so far, without loading deferred modules (server/discover)."""
        return len(self._resources)


class Catalog:
    """What a server offers: its tools, prompts and resources. The API serves all three; the worker
    runs the same tools (one `build_catalog` in the composition root builds it for both)."""

    __slots__ = ("prompts", "resources", "tools")
    tools: ToolRegistry
    prompts: PromptRegistry
    resources: ResourceRegistry

    def __init__(
        self,
        tools: ToolRegistry | None = None,
        prompts: PromptRegistry | None = None,
        resources: ResourceRegistry | None = None,
    ) -> None:
        self.tools = ToolRegistry() if tools is None else tools
        self.prompts = PromptRegistry() if prompts is None else prompts
        self.resources = ResourceRegistry() if resources is None else resources
        # Ported server objects (mcp_runtime.fastmcp) found among the tools put their prompts and
        # resources here; asking for a prompt or a resource loads the tools' deferred modules first.
        self.tools.companions = self
        self.prompts.before = self.tools.load
        self.resources.before = self.tools.load

    def include(self, module: ModuleType) -> None:
        """`tools.include(module)`: a tool package's `register` written for a tool registry (a project's
        `functions/tools/__init__.py` from before MCP_TOOL_PACKAGES) is given the catalog and still works."""
        self.tools.include(module)

    def add(self, component: PromptSpec | ResourceSpec) -> None:
        """A prompt or a resource of a tool module (ToolRegistry.include admits tools itself)."""
        if isinstance(component, PromptSpec):
            self.prompts.add(component)
        else:
            self.resources.add(component)


def undescribable(package: str = "tools") -> list[Undescribable]:
    """Import the tool package and describe every tool, prompt and resource its modules define: those
    that cannot be described (the start-up check, the catalog's test and the asset build refuse them;
    a running server leaves them out). An import error propagates as it is."""
    import importlib
    import sys

    importlib.import_module(package)
    catalog = Catalog()
    for name, module in sorted(sys.modules.items()):
        if module is not None and (name == package or name.startswith(f"{package}.")):
            catalog.tools.include(module)
    return list(catalog.tools.left_out)


# The exit status of `python -m mcp_runtime.catalog` (CATALOG_CHECK) when something cannot be described,
# one tab-separated line per component on stdout: file, line, kind, name, module, reason.
UNDESCRIBABLE_STATUS = 3


def main() -> int:
    import logging

    logging.disable(logging.CRITICAL)  # the lines below say it, once each
    problems = undescribable()
    for problem in problems:
        fields = (problem.file, str(problem.line), problem.kind, problem.name, problem.module, problem.reason)
        print("\t".join(field.replace("\t", " ").replace("\n", " ") for field in fields))
    return UNDESCRIBABLE_STATUS if problems else 0
