"""Tool packages served in this process, as the API function serves them: no network, no AWS."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from app.composition import build_server
from mcp_runtime import wire
from mcp_runtime.context import Principal
from mcp_runtime.settings import Settings
from mcp_runtime.transport import HttpRequest, McpHttpTransport

from ._wire import rpc, standard_headers

# What the client declares when a test answers the tools' questions (MRTR): every kind of question.
ANSWERING: Mapping[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
# A tool that asks more often than this in one call is taken to be asking forever.
MAX_ROUNDS = 20
LOCAL_STATE_KEY = "testkit-only-requestState-key-0123456789abcdef"

Answer = Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]


class ToolCallFailed(AssertionError):
    """The call ended in a JSON-RPC error, or in a question the test gave no answer to."""


class ToolClient:
    """Calls the tools of `tool_packages` (MCP_TOOL_PACKAGES, default the project's `tools`) through the
    API function's own server and transport, as the development user `user`.

    Tools that keep state in the task table, and task-mode calls (the tasks extension), need the task
    table and the state machine: run those on the local stack (`local_stack_process`). A task tool
    called here runs inline, as a client without the tasks extension gets it.
    `environment`: more settings by variable name (what cdk.json's toolEnvironment gives, e.g.).
    """

    def __init__(
        self, tool_packages: str = "tools", *, user: str = "developer", environment: Mapping[str, str] | None = None
    ) -> None:
        settings = Settings.model_validate(
            {"MCP_STATE_KEY": LOCAL_STATE_KEY, **(environment or {}), "MCP_TOOL_PACKAGES": tool_packages}
        )
        self.server = build_server(settings)
        self._transport = McpHttpTransport(self.server)
        self._principal = Principal(f"dev:{user}", "dev")
        self._next_id = 0

    def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, capabilities: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """One JSON-RPC request; its answer as sent (`{"result": ...}` or `{"error": ...}`)."""
        self._next_id += 1
        message = rpc(method, dict(params or {}), self._next_id, dict(capabilities or {}))
        body = json.dumps(message).encode()
        response = self._transport.handle(HttpRequest("POST", "/mcp", standard_headers(message), body, self._principal))
        answer: dict[str, Any] = response.json()
        return answer

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool served, as tools/list describes it (every page), sorted by name."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = self._result(self.request("tools/list", {"cursor": cursor} if cursor else None))
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return sorted(tools, key=lambda tool: str(tool["name"]))

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        answers: Mapping[str, Answer] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Call a tool; its complete result (`content`, `structuredContent`, `isError`).

        `answers`: what the client answers when the tool asks (MRTR), by the key of the question, each a
        response (`{"action": "accept", "content": {...}}`) or a function of the question that returns
        one. The call is retried with the answers until the tool completes, as a client does.
        """
        declared = dict(ANSWERING if answers is not None and capabilities is None else capabilities or {})
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        for _ in range(MAX_ROUNDS):
            result = self._result(self.request("tools/call", params, capabilities=declared))
            if result.get("resultType") != wire.RESULT_INPUT_REQUIRED:
                return result
            asked: dict[str, Any] = result["inputRequests"]
            missing = sorted(set(asked) - set(answers or {}))
            if missing:
                raise ToolCallFailed(f"{name} asked {missing} and the test gave no answer: {asked}")
            given = answers or {}
            params = {
                **params,
                "inputResponses": {key: _answer(given[key], asked[key]) for key in asked},
                "requestState": result.get("requestState"),
            }
            if params["requestState"] is None:
                del params["requestState"]
        raise ToolCallFailed(f"{name} was still asking after {MAX_ROUNDS} rounds")

    def call_text(self, name: str, arguments: Mapping[str, Any] | None = None, **options: Any) -> str:
        """Call a tool; the text of its result's content, joined (one text block: that text)."""
        result = self.call(name, arguments, **options)
        return "".join(block.get("text", "") for block in result.get("content", []))

    @staticmethod
    def _result(answer: Mapping[str, Any]) -> dict[str, Any]:
        if "error" in answer:
            raise ToolCallFailed(f"JSON-RPC error {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result


def _answer(given: Answer, question: Mapping[str, Any]) -> dict[str, Any]:
    return dict(given(question) if callable(given) else given)
