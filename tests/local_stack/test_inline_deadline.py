"""A task tool that runs inline (its client declared no tasks support) past the API function's timeout,
through the template-driven stack: the API function here times out after 8 s (`apiTimeoutSeconds`),
and the call ends before that with a tool error that names the tasks extension, never the front's
HTTP 500 for a timed-out invocation. Both eras."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcp_runtime import wire
from mcp_runtime.server import INLINE_TASK_TIMED_OUT
from tests.local_stack.conftest import StackClient
from tests.support import SHORT_TIMEOUT_CONTEXT

pytestmark = pytest.mark.e2e

LONGER_THAN_THE_API_TIMEOUT = SHORT_TIMEOUT_CONTEXT["apiTimeoutSeconds"] + 10


def test_an_optional_task_tool_past_the_api_timeout_answers_a_tool_error_not_a_5xx(
    lifecycle_stack: StackClient,
) -> None:
    body = lifecycle_stack.call(
        "tools/call",
        {"name": "slow_compute", "arguments": {"seconds": LONGER_THAN_THE_API_TIMEOUT, "label": "inline"}},
        capabilities={},
    )
    result = body["result"]
    assert (result["resultType"], result["isError"]) == (wire.RESULT_COMPLETE, True)
    assert result["content"] == [{"type": "text", "text": INLINE_TASK_TIMED_OUT}]


def test_a_2025_client_without_event_streams_gets_the_same_tool_error(lifecycle_stack: StackClient) -> None:
    url = lifecycle_stack.running.url
    headers = {"authorization": "Bearer dev:alice", "content-type": "application/json", "accept": "application/json"}

    def post(message: dict[str, Any], extra: dict[str, str] | None = None) -> httpx.Response:
        body = json.dumps({"jsonrpc": "2.0", **message})
        return httpx.post(url, content=body, headers={**headers, **(extra or {})}, timeout=60)

    initialized = post(
        {
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
        }
    )
    session = {wire.HEADER_SESSION_ID: initialized.headers[wire.HEADER_SESSION_ID]}
    call = {"name": "slow_compute", "arguments": {"seconds": LONGER_THAN_THE_API_TIMEOUT}}
    reply = post({"id": 2, "method": "tools/call", "params": call}, session)
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"] == {"content": [{"type": "text", "text": INLINE_TASK_TIMED_OUT}], "isError": True}
