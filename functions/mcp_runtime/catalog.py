"""What a server offers: its tools, prompts and resources, in one registry (`mcp_runtime.tools.Registry`).

`Catalog` is what a tool package's `register(catalog, *, table_backed)` is given: `catalog.tools.include`
serves a module's tools, prompts and resources; `catalog.prompts.prompt(...)` and
`catalog.resources.resource(...)` describe one more with the one builder (`mcp_runtime.components`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from .components import (
    Completer,
    PromptFunction,
    PromptSpec,
    ResourceFunction,
    ResourceSpec,
    prompt_from_function,
    resource_from_function,
)
from .settings import on_import_path
from .tools import Registry, Undescribable


class Prompts:
    """The registry's prompts, as the server reads them and a package registers one more."""

    __slots__ = ("_registry",)

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def prompt(
        self,
        *,
        description: str,
        name: str | None = None,
        arguments: list[dict[str, Any]] | None = None,
        completers: dict[str, Completer] | None = None,
    ) -> Callable[[PromptFunction], PromptFunction]:
        """`fn(values, asker)`, its arguments declared: described by `prompt_from_function`."""

        def register(fn: PromptFunction) -> PromptFunction:
            self._registry.add_prompt(
                prompt_from_function(
                    fn, name=name, description=description, arguments=arguments or [], completers=completers
                )
            )
            return fn

        return register

    def add(self, spec: PromptSpec) -> None:
        self._registry.add_prompt(spec)

    def get(self, name: str) -> PromptSpec | None:
        return self._registry.prompt(name)

    def __iter__(self) -> Iterator[PromptSpec]:
        return iter(self._registry.prompts())

    def __len__(self) -> int:
        return len(self._registry.prompts())

    def known(self) -> int:
        """How many are registered so far, without loading deferred modules (server/discover)."""
        return self._registry.prompts_known()


class Resources:
    """The registry's resources and resource templates, as the server reads them and a package
    registers one more."""

    __slots__ = ("_registry",)

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def resource(
        self, uri: str, *, name: str, mime_type: str = "text/plain", description: str | None = None
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        return self._register(uri, name, mime_type, description)

    def template(
        self, uri_template: str, *, name: str, mime_type: str = "text/plain", description: str | None = None
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        return self._register(uri_template, name, mime_type, description)

    def _register(
        self, uri: str, name: str, mime_type: str, description: str | None
    ) -> Callable[[ResourceFunction], ResourceFunction]:
        """`fn(variables, asker)`: described by `resource_from_function`."""

        def register(fn: ResourceFunction) -> ResourceFunction:
            spec = resource_from_function(
                fn, uri, name=name, description=description, mime_type=mime_type, reads_variables=True
            )
            self._registry.add_resource(spec)
            return fn

        return register

    def add(self, spec: ResourceSpec) -> None:
        self._registry.add_resource(spec)

    def static(self) -> list[ResourceSpec]:
        return sorted((r for r in self._registry.resources() if not r.template), key=lambda r: r.uri)

    def templates(self) -> list[ResourceSpec]:
        return sorted((r for r in self._registry.resources() if r.template), key=lambda r: r.uri)

    def resolve(self, uri: str) -> tuple[ResourceSpec, dict[str, str]] | None:
        for spec in self.static() + self.templates():
            found = spec.match(uri)
            if found is not None:
                return spec, found
        return None

    def __len__(self) -> int:
        return len(self._registry.resources())

    def known(self) -> int:
        """How many are registered so far, without loading deferred modules (server/discover)."""
        return self._registry.resources_known()


class Catalog:
    """What a server offers: one registry of its tools, prompts and resources. The API serves all three;
    the worker runs the same tools (one `build_catalog` in the composition root builds it for both)."""

    __slots__ = ("prompts", "resources", "tools")
    tools: Registry
    prompts: Prompts
    resources: Resources

    def __init__(self, tools: Registry | None = None) -> None:
        self.tools = Registry() if tools is None else tools
        self.prompts = Prompts(self.tools)
        self.resources = Resources(self.tools)

    def include(self, module: ModuleType) -> None:
        """`tools.include(module)`: a tool package's `register` written for a tool registry (a project's
        `functions/tools/__init__.py` from before MCP_TOOL_PACKAGES) is given the catalog and still works."""
        self.tools.include(module)


# The kind of component each declaration declares, by its attribute's name: FastMCP's `@mcp.prompt` and
# `@mcp.resource(...)`, the catalog's `@catalog.prompts.prompt(...)`, `@catalog.resources.resource(...)` and
# `.template(...)`.
DECLARING: Final[dict[bytes, str]] = {b"prompt": "prompt", b"resource": "resource", b"template": "resource"}
# A line that declares one: a decorator (`@<any>.prompt`, called or not), or a call of one at the module's
# top level (`mcp.prompt(fn)`). Read as text: a cold start parses no module.
_DECLARATION: Final = re.compile(rb"^(?:[ \t]*@[ \t]*)?[A-Za-z_][\w.]*\.(prompt|resource|template)\b", re.MULTILINE)


def declared_kinds(packages: Iterable[str]) -> frozenset[str]:
    """The kinds of component ("prompt", "resource") the tool packages' sources declare (`_DECLARATION`),
    read without importing them, so that a cold server/discover advertises them."""
    found: set[str] = set()
    for path in _package_sources(packages):
        found.update(DECLARING[match[1]] for match in _DECLARATION.finditer(path.read_bytes()))
    return frozenset(found)


def _package_sources(packages: Iterable[str]) -> Iterator[Path]:
    """The source files of each named package (its folder's, at any depth) or module, where the import
    would find them."""
    for package in packages:
        *parents, last = package.split(".")
        folder = on_import_path(*parents, last)
        if folder is not None and folder.is_dir():
            yield from sorted(path for path in folder.rglob("*.py") if "__pycache__" not in path.parts)
        elif (module := on_import_path(*parents, f"{last}.py")) is not None:
            yield module


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
