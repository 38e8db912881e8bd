"""A 2025-11-25 client on the Python SDK 1.x (`mcp==1.30.0`, in its own venv: tests/clients/).

Usage: python legacy_py_client.py URL SCRIPT_JSON, with the script of legacy_ts_client.mjs; prints
the same JSON report. Runs outside the project's venv, so it imports nothing from the project.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client


async def main(url: str, script: dict[str, Any]) -> dict[str, Any]:
    answers = list(script.get("answers") or [])
    report: dict[str, Any] = {
        "tools": [],
        "calls": [],
        "asked": [],
        "progress": [],
        "figures": [],
        "protocolVersion": None,
    }

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        report["asked"].append(params.message)
        answer = answers.pop(0)
        if isinstance(answer, str):
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content=answer)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        report["progress"].append(message if message is not None else str(value))
        report["figures"].append([value, total])

    async with (
        streamablehttp_client(url) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        initialized = await session.initialize()
        report["protocolVersion"] = initialized.protocolVersion
        if script.get("list"):
            report["tools"] = [tool.name for tool in (await session.list_tools()).tools]
        handle = None
        for call in script.get("calls") or []:
            arguments = json.loads(json.dumps(call.get("arguments") or {}).replace("$HANDLE", handle or ""))
            callback = progress if call.get("progress") else None
            with anyio.fail_after(60):
                result = await session.call_tool(call["tool"], arguments, progress_callback=callback)
            texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
            report["calls"].append({"texts": texts, "isError": bool(result.isError)})
            found = re.search(r"cart_[A-Za-z0-9_-]+", " ".join(texts))
            if found and handle is None:
                handle = found.group(0)
    return report


if __name__ == "__main__":
    print(json.dumps(anyio.run(main, sys.argv[1], json.loads(sys.argv[2]))))
