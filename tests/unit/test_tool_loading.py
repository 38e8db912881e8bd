"""Deferred tool registration: loaded once, on first need, and never seen half-loaded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

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
