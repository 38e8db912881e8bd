"""Pattern 1, a plain call: cheap, deterministic, answered well inside one request.

Use it whenever the tool needs nothing from the client and finishes in milliseconds to seconds.
Written as FastMCP writes tools: the runtime validates the keyword parameters (bad values become a
tool error the model can read and correct), publishes them as `inputSchema`, the docstring as the
description and the return annotation as `outputSchema`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from mcp_runtime.fastmcp import FastMCP

mcp = FastMCP("count-words")


class WordCount(BaseModel):
    words: int
    characters: int


@mcp.tool(annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False})
def count_words(text: Annotated[str, Field(description="The text to count words in.", max_length=100_000)]) -> WordCount:
    """Count the words and characters of a text."""
    return WordCount(words=len(text.split()), characters=len(text))
