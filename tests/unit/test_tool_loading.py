"""Deferred tool registration: loaded once, on first need, and never seen half-loaded."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pydantic import BaseModel

from mcp_runtime.tools import ToolContext, ToolRegistry, tool


class EchoArgs(BaseModel):
    text: str


@tool(description="Echo the text.")
def echo(args: EchoArgs, ctx: ToolContext) -> str:
    return args.text


def slow_loader(registry: ToolRegistry, started: threading.Event, release: threading.Event) -> Callable[[], None]:
    def load() -> None:
        started.set()
        release.wait(timeout=5)
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]

    return load


def test_a_registry_with_a_pending_loader_declares_tools_without_loading_them() -> None:
    registry = ToolRegistry()
    calls: list[str] = []
    registry.add_loader(lambda: calls.append("loaded"))
    assert registry.declares_tools() is True
    assert calls == []


def test_concurrent_first_lookups_wait_for_the_loader_and_all_find_the_tool() -> None:
    registry = ToolRegistry()
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
    registry = ToolRegistry()
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
    registry = ToolRegistry()

    def reentrant() -> None:
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
        assert registry.get("echo") is not None

    registry.add_loader(reentrant)
    assert [spec.name for spec in registry] == ["echo"]


def test_a_loader_that_fails_part_way_is_retried_from_scratch_at_the_next_lookup() -> None:
    """It used to leave its first tools registered, so every retry died on "registered twice"."""
    registry = ToolRegistry()
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


def test_two_project_tools_of_one_name_are_still_refused() -> None:
    registry = ToolRegistry()
    registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="tool 'echo' is registered twice"):
        registry.add(echo.__mcp_tool__)  # type: ignore[attr-defined]
