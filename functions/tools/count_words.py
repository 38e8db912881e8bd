"""Pattern 1, a plain call: cheap, deterministic, answered well inside one request.

Use it whenever the tool needs nothing from the client and finishes in milliseconds to seconds.
The runtime validates the arguments against `CountWordsArgs` (bad values become a tool error the
model can read and correct) and publishes the model's JSON schema as `inputSchema`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_runtime import ToolContext, tool


class CountWordsArgs(BaseModel):
    text: str = Field(description="The text to count words in.", max_length=100_000)


class WordCount(BaseModel):
    words: int
    characters: int


@tool(
    description="Count the words and characters of a text.",
    output=WordCount,
    annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
)
def count_words(args: CountWordsArgs, ctx: ToolContext) -> WordCount:
    return WordCount(words=len(args.text.split()), characters=len(args.text))
