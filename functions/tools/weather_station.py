"""Tools written for the MCP Python SDK's `MCPServer` (mcp 2.3), ported by changing one import line.

Before the port the first line below read `from mcp.server.mcpserver import Context, MCPServer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from mcp_runtime.fastmcp import Context, MCPServer

mcp = MCPServer("weather-station")


@dataclass
class Reading:
    station: str
    celsius: float
    humidity: int


class Units(BaseModel):
    fahrenheit: bool = Field(description="Show Fahrenheit instead of Celsius?")


@mcp.tool()
def station_reading(station: str) -> Reading:
    """The latest reading of a weather station."""
    return Reading(station=station, celsius=21.5, humidity=40)


@mcp.tool()
async def average_temperature(stations: list[str], ctx: Context) -> float:
    """The average temperature over several stations."""
    total = 0.0
    for index, station in enumerate(stations):
        await ctx.report_progress(index + 1, len(stations), f"read {station}")
        total += station_reading(station).celsius
    await ctx.info(f"averaged {len(stations)} stations")
    return total / max(1, len(stations))


@mcp.tool()
async def forecast(station: str, ctx: Context) -> str:
    """Tomorrow's forecast, in the units the user picks."""
    answer = await ctx.elicit(f"Units for {station}?", schema=Units)
    if answer.action == "accept" and answer.data is not None and answer.data.fahrenheit:
        return f"{station}: sunny, 73.4 F"
    return f"{station}: sunny, 23.0 C"
