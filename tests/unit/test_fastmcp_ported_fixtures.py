"""The platform's ported modules (fixtures/support_desk.py, FastMCP style; fixtures/weather_station.py, the
SDK's MCPServer style) publish what the libraries they were written for publish."""

from __future__ import annotations

import asyncio

from tests.support import REPO
from tests.unit.test_fastmcp_facade import (
    MCPSERVER_IMPORTS,
    assert_fastmcp_parity,
    inlined,
    listed,
    load,
    ported_back,
    served,
    without_titles,
)

WEATHER_STATION = REPO / "fixtures" / "weather_station.py"


def test_the_mcpserver_module_publishes_what_mcp_2_3_0_publishes_with_refs_inlined_and_the_object_closed() -> None:
    ours = listed(served(load(WEATHER_STATION.read_text(), "ours_weather")))
    real = load(ported_back(WEATHER_STATION, MCPSERVER_IMPORTS), "theirs_weather")
    theirs = {
        tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        for tool in asyncio.run(real.mcp.list_tools())
    }

    assert sorted(ours) == sorted(theirs)
    for name, tool in ours.items():
        expected = without_titles(inlined(theirs[name]["inputSchema"]))
        assert without_titles(tool["inputSchema"]) == {**expected, "additionalProperties": False}, name
        assert without_titles(tool.get("outputSchema")) == without_titles(inlined(theirs[name].get("outputSchema"))), (
            name
        )


def test_the_fastmcp_module_publishes_what_fastmcp_4_1_4_publishes_modulo_titles() -> None:
    assert_fastmcp_parity(REPO / "fixtures" / "support_desk.py")
