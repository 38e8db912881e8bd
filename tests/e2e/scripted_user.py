"""A scripted user for the real clients' elicitation callbacks."""

from __future__ import annotations

from typing import Any

import mcp_types
from mcp.client.session import ClientRequestContext


class ScriptedUser:
    """Answers elicitations from a script and records what it was asked."""

    def __init__(self, *answers: dict[str, Any] | str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            return mcp_types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return mcp_types.ElicitResult(action="accept", content=answer)
