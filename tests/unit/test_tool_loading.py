"""Deferred tool registration: loaded once, on first need, and never seen half-loaded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from mcp_runtime import tool
from mcp_runtime.tools import Registry, ToolContext


class EchoArgs(BaseModel):
    text: str


@tool(description="Echo the text.")
def echo(args: EchoArgs, ctx: ToolContext) -> str:
    return args.text


def slow_loader(registry: Registry, started: threading.Event, release: threading.Event) -> Callable[[], None]:
    def load() -> None:
        started.set()
        release.wait(timeout=5)
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]

    return load


def test_a_registry_with_a_pending_loader_declares_tools_without_loading_them() -> None:
    registry = Registry()
    calls: list[str] = []
    registry.add_loader(lambda: calls.append("loaded"))
    assert registry.declares_tools() is True
    assert calls == []


def test_concurrent_first_lookups_wait_for_the_loader_and_all_find_the_tool() -> None:
    registry = Registry()
    started, release = threading.Event(), threading.Event()
    registry.add_loader(slow_loader(registry, started, release))
    found: list[object] = []

    def look_up() -> None:
        found.append(registry.get("echo"))

    first = threading.Thread(target=look_up)
    first.start()
    assert started.wait(timeout=5)
    # While the loader runs, the registry still declares tools and other lookups wait for it.
    assert registry.declares_tools() is True
    others = [threading.Thread(target=look_up) for _ in range(8)]
    for thread in others:
        thread.start()
    release.set()
    for thread in [first, *others]:
        thread.join(timeout=5)
    assert len(found) == 9
    assert all(spec is not None and spec.name == "echo" for spec in found)  # type: ignore[attr-defined]


def test_a_loader_that_fails_is_tried_again_on_the_next_lookup() -> None:
    registry = Registry()
    attempts: list[int] = []

    def flaky() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("first import failed")
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]

    registry.add_loader(flaky)
    with pytest.raises(RuntimeError, match="first import failed"):
        registry.get("echo")
    assert registry.get("echo") is not None
    assert len(attempts) == 2


def test_a_loader_may_look_up_tools_while_it_registers_them() -> None:
    registry = Registry()

    def reentrant() -> None:
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
        assert registry.get("echo") is not None

    registry.add_loader(reentrant)
    assert [spec.name for spec in registry] == ["echo"]


def test_a_loader_that_fails_part_way_is_retried_from_scratch_at_the_next_lookup() -> None:
    """It used to leave its first tools registered, so every retry died on "registered twice"."""
    registry = Registry()
    attempts: list[int] = []

    def flaky_loader() -> None:
        attempts.append(1)
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
        if len(attempts) == 1:
            raise ImportError("a tool module failed to import")

    registry.add_loader(flaky_loader)
    with pytest.raises(ImportError):
        registry.get("echo")
    assert registry.get("echo") is echo.__mcp_tool__  # type: ignore[attr-defined]
    assert [spec.name for spec in registry] == ["echo"]
    assert len(attempts) == 2


def test_the_catalog_serves_exactly_the_tool_packages_mcp_tool_packages_names_in_order() -> None:
    from app.composition import build_catalog
    from mcp_runtime.settings import Settings

    catalog = build_catalog(Settings(MCP_TOOL_PACKAGES="fixtures.lifecycle,fixtures.configuration"))
    import fixtures.configuration as configuration
    import fixtures.lifecycle as lifecycle

    expected = {
        spec.name
        for module in (lifecycle, configuration)
        for value in vars(module).values()
        if (spec := getattr(value, "__mcp_tool__", None)) is not None and value.__module__ == module.__name__
    }
    assert expected and {spec.name for spec in catalog.tools} == expected


def test_the_packages_are_registered_at_the_first_lookup_or_at_once_when_settings_say_so() -> None:
    from app.composition import build_catalog
    from mcp_runtime.settings import Settings

    deferred = build_catalog(Settings(MCP_TOOL_PACKAGES="fixtures.conformance"))
    at_start = build_catalog(Settings(MCP_TOOL_PACKAGES="fixtures.conformance", MCP_REGISTER_TOOLS_AT_START="1"))
    assert (deferred.prompts.known(), deferred.resources.known()) == (0, 0)
    assert at_start.prompts.known() > 0 and at_start.resources.known() > 0
    assert len(deferred.prompts) == at_start.prompts.known()  # a lookup loads them


def test_a_tool_served_by_two_packages_is_left_out_the_second_time_by_name() -> None:
    from app.composition import build_catalog
    from mcp_runtime.settings import Settings

    catalog = build_catalog(Settings(MCP_TOOL_PACKAGES="fixtures.lifecycle,fixtures.lifecycle"))
    catalog.tools.load()
    served = {spec.name for spec in catalog.tools}
    assert served and {problem.name for problem in catalog.tools.left_out} == served
    assert all("registered twice" in problem.reason for problem in catalog.tools.left_out)


def test_mcp_tool_packages_refuses_what_is_not_a_module_name() -> None:
    from pydantic import ValidationError

    from mcp_runtime.settings import Settings

    with pytest.raises(ValidationError, match="MCP_TOOL_PACKAGES"):
        Settings(MCP_TOOL_PACKAGES="tools;rm -rf")
    assert Settings().tool_package_names == ("tools",)
    assert Settings(MCP_TOOL_PACKAGES="").tool_package_names == ()


def test_two_project_tools_of_one_name_are_still_refused() -> None:
    registry = Registry()
    registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="tool 'echo' is registered twice"):
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]


def test_a_tool_package_whose_register_was_written_for_a_tool_registry_still_serves_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's functions/tools/__init__.py of release 1.0.0 (the team's, never updated) calls
    `tools.include(module)` on what it is given: now the catalog."""
    from app.composition import build_catalog
    from mcp_runtime.settings import Settings

    package = tmp_path / "old_style_tools"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import fixtures.lifecycle as lifecycle\n\n\n"
        "def register(tools, *, table_backed):\n"
        "    tools.include(lifecycle)\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    catalog = build_catalog(Settings(MCP_TOOL_PACKAGES="old_style_tools"))
    fresh = build_catalog(Settings(MCP_TOOL_PACKAGES="fixtures.lifecycle"))
    assert [spec.name for spec in catalog.tools] == [spec.name for spec in fresh.tools] != []


# ---- a cold server/discover advertises what the deferred packages declare, importing none of them ---------------
PORTED_INIT = '''"""A ported team's tools."""

from importlib import import_module

from mcp_runtime import Catalog


def register(catalog: Catalog, *, table_backed: bool) -> None:
    catalog.tools.include(import_module(f"{__name__}.oncall"))
'''
PORTED_MODULE = '''"""Ported from FastMCP by its import line."""

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("oncall")


@mcp.tool
def page(service: str) -> str:
    """Page the engineer on call."""
    return f"paged {service}"


@mcp.prompt
def incident_summary(service: str) -> str:
    """Ask for an incident summary."""
    return f"Summarize the incidents of {service}."


@mcp.resource("oncall://rota")
def rota() -> str:
    """Who is on call."""
    return "alice"
'''
TOOLS_ONLY_MODULE = '''"""Tools only: a prompt in a tool's text is not a prompt of the server."""

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("oncall")


@mcp.tool
def page(service: str) -> str:
    """Page the engineer on call (the prompt and resource words in a docstring are not components)."""
    return "prompt resource"
'''


@pytest.fixture
def deferred_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Any]:
    """A server whose catalog defers the tool package `name` (its module `oncall` written as given)."""
    from app.composition import build_server
    from mcp_runtime.settings import Settings
    from mcp_runtime.transport import McpHttpTransport
    from tests.unit.conftest import Client

    monkeypatch.syspath_prepend(str(tmp_path))

    def serve(name: str, module: str) -> Any:
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text(PORTED_INIT, encoding="utf-8")
        (package / "oncall.py").write_text(module, encoding="utf-8")
        settings = Settings(MCP_TOOL_PACKAGES=name, MCP_STATE_KEY="test-only-requestState-key-0123456789abcdef")
        return Client(McpHttpTransport(build_server(settings)))

    return serve


def test_a_cold_discover_advertises_a_ported_modules_prompts_and_resources_without_importing_it(
    deferred_package: Callable[[str, str], Any],
) -> None:
    import sys

    from tests.unit.conftest import result_of

    client = deferred_package("cold_ported", PORTED_MODULE)
    discovered = result_of(client.request("server/discover", request_id=1))

    assert discovered["capabilities"] == {"tools": {}, "prompts": {}, "completions": {}, "resources": {}}
    assert "cold_ported" not in sys.modules and "cold_ported.oncall" not in sys.modules
    prompts = result_of(client.request("prompts/list", request_id=2))["prompts"]
    assert [prompt["name"] for prompt in prompts] == ["incident_summary"]
    resources = result_of(client.request("resources/list", request_id=3))["resources"]
    assert [resource["uri"] for resource in resources] == ["oncall://rota"]
    assert result_of(client.request("server/discover", request_id=4))["capabilities"] == discovered["capabilities"]


def test_a_cold_discover_of_tools_only_advertises_tools_only_before_and_after_they_load(
    deferred_package: Callable[[str, str], Any],
) -> None:
    import sys

    from tests.unit.conftest import result_of

    client = deferred_package("cold_tools_only", TOOLS_ONLY_MODULE)
    cold = result_of(client.request("server/discover", request_id=1))["capabilities"]
    assert "cold_tools_only" not in sys.modules
    result_of(client.request("tools/list", request_id=2))
    warm = result_of(client.request("server/discover", request_id=3))["capabilities"]
    assert cold == warm == {"tools": {}}


@pytest.mark.parametrize(
    ("source", "kinds"),
    [
        ("@mcp.prompt\ndef p() -> str:\n    return ''\n", {"prompt"}),
        ("@mcp.prompt(name='p')\ndef p() -> str:\n    return ''\n", {"prompt"}),
        ("@mcp.resource('data://x')\ndef r() -> str:\n    return ''\n", {"resource"}),
        (
            "def register(catalog):\n    @catalog.prompts.prompt(description='P.')\n    def p(values, asker):\n",
            {"prompt"},
        ),
        (
            "def register(catalog):\n    @catalog.resources.template('x://{a}', name='t')\n    def t(v, asker):\n",
            {"resource"},
        ),
        ("def p() -> str:\n    return ''\n\n\nmcp.prompt(p)\n", {"prompt"}),
        ("def answer(ctx):\n    return ctx.prompt('not a component')\n", set()),
        ("HELP = 'use mcp.prompt to add a prompt'\n", set()),
    ],
)
def test_the_sources_declarations_are_read_as_text_without_importing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, kinds: set[str]
) -> None:
    from mcp_runtime.catalog import declared_kinds

    (tmp_path / "declaring.py").write_text("raise AssertionError('never imported')\n" + source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert declared_kinds(["declaring"]) == kinds
