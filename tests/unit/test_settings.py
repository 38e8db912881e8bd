"""Settings are read once from the environment and refuse values the runtime cannot honour."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_runtime.limits import MAX_TASK_TTL_MS
from mcp_runtime.settings import BadServerDescription, Settings, with_room_description
from mcp_runtime.transport import McpHttpTransport
from tests.unit.conftest import Client, make_server, result_of


@pytest.mark.parametrize("value", ["0", "-1", "-86400000", str(MAX_TASK_TTL_MS + 1), str(2**53), "soon"])
def test_a_task_ttl_that_is_not_positive_or_is_past_step_functions_one_year_is_refused(value: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings.from_environ({"TASK_DEFAULT_TTL_MS": value})
    assert refused.value.errors()[0]["loc"] == ("TASK_DEFAULT_TTL_MS",)


@pytest.mark.parametrize("value", ["null", "NULL", "none", ""])
def test_a_task_ttl_of_null_means_unlimited_and_can_be_set_from_the_environment(value: str) -> None:
    assert Settings.from_environ({"TASK_DEFAULT_TTL_MS": value}).task_default_ttl_ms is None


@pytest.mark.parametrize("value", ["1", "86400000", str(MAX_TASK_TTL_MS)])
def test_a_task_ttl_within_one_year_is_kept(value: str) -> None:
    assert Settings.from_environ({"TASK_DEFAULT_TTL_MS": value}).task_default_ttl_ms == int(value)


def test_the_default_task_ttl_is_one_day() -> None:
    assert Settings.from_environ({}).task_default_ttl_ms == 86_400_000


# ---- the server's name and instructions, from the team's room ---------------------------------------------------
@pytest.fixture
def room(tmp_path: Path) -> Iterator[Path]:
    """A tool package of its own, `room_tools`, on the path (its modules are never imported here)."""
    package = tmp_path / "room_tools"
    package.mkdir()
    (package / "__init__.py").write_text("raise AssertionError('the room is read without importing it')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield package
    finally:
        sys.path.remove(str(tmp_path))


def test_the_rooms_server_json_names_the_server_and_gives_its_instructions_in_discover(room: Path) -> None:
    (room / "server.json").write_text(json.dumps({"name": "oncall", "instructions": "Page the on-call engineer."}))
    settings = with_room_description(Settings.from_environ({"MCP_TOOL_PACKAGES": "room_tools", "MCP_SERVER_NAME": "x"}))

    discovered = result_of(Client(McpHttpTransport(make_server(settings=settings))).request("server/discover"))

    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "oncall"
    assert discovered["instructions"] == "Page the on-call engineer."


def test_without_a_server_json_the_deployments_name_stays(room: Path) -> None:
    settings = Settings.from_environ({"MCP_TOOL_PACKAGES": "room_tools", "MCP_SERVER_NAME": "from-cdk"})
    assert with_room_description(settings) is settings


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("{", "not JSON"),
        ('{"name": "oncall", "version": "2"}', "an object of name and instructions (each optional), nothing else"),
        ('{"instructions": ""}', "'instructions' must be a non-empty string"),
    ],
)
def test_a_server_json_the_runtime_cannot_read_is_refused_naming_the_file(
    room: Path, written: str, reason: str
) -> None:
    (room / "server.json").write_text(written)
    with pytest.raises(BadServerDescription) as refused:
        with_room_description(Settings.from_environ({"MCP_TOOL_PACKAGES": "room_tools"}))
    assert str(refused.value).startswith(f"{room / 'server.json'}: {reason}")


def test_a_server_object_with_instructions_is_told_where_the_servers_instructions_come_from(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import types

    from mcp_runtime.fastmcp import FastMCP
    from mcp_runtime.tools import Registry

    module = types.ModuleType("oncall_tools")
    module.mcp = FastMCP("oncall", instructions="Page the on-call engineer.")  # type: ignore[attr-defined]
    Registry().include(module)

    assert caplog.messages == [
        "oncall_tools.FastMCP sets instructions=, which a cold server/discover cannot read without importing every "
        "tool module: the server's name and instructions come from server.json in the tool package "
        "(functions/tools/server.json); put them there"
    ]
