"""What `make run` serves: MCP_TOOL_PACKAGES passed to the functions as given, FIXTURES adding the
platform's fixture packages to it (to the project's `tools` when it is unset)."""

from __future__ import annotations

import pytest
from local_stack.stack import Options


def test_registering_at_start_is_passed_to_the_functions_only_when_set() -> None:
    assert Options.from_environ({"MCP_REGISTER_TOOLS_AT_START": "1"}).register_tools_at_start is True
    assert Options.from_environ({}).register_tools_at_start is False


@pytest.mark.parametrize(
    ("environ", "served"),
    [
        ({}, None),
        ({"FIXTURES": "conformance"}, "tools,fixtures.conformance"),
        ({"FIXTURES": "patterns,lifecycle", "MCP_TOOL_PACKAGES": ""}, "fixtures.patterns,fixtures.lifecycle"),
        ({"MCP_TOOL_PACKAGES": "fixtures.patterns"}, "fixtures.patterns"),
        ({"MCP_TOOL_PACKAGES": "tools,ops.tools", "FIXTURES": "lifecycle"}, "tools,ops.tools,fixtures.lifecycle"),
        ({"MCP_TOOL_PACKAGES": "fixtures.lifecycle", "FIXTURES": "lifecycle"}, "fixtures.lifecycle"),
    ],
)
def test_the_functions_serve_the_packages_named_and_the_fixtures_added(
    environ: dict[str, str], served: str | None
) -> None:
    assert Options.from_environ(environ).tool_packages == served
