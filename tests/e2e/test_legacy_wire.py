"""The 2025-11-25 leg over real HTTP (the template-driven local stack; development tokens): sessions, resumable streams,
and what another principal, a tampered id, a terminated session or bad input get.

Alice and mallory each initialize; mallory also learns alice's session id, event ids and the ids
of the server's requests to alice (ids leak). None of them reach alice's streams or answers.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from testkit import RunningStack

from mcp_runtime import wire
from mcp_runtime.legacy._leg import (
    CLIENT_ANSWER_FAILED,
    NEEDS_STREAM_TEXT,
    NO_OUTSTANDING_REQUEST,
    NO_STANDALONE_STREAM,
    SESSION_NOT_FOUND,
    SESSION_REQUIRED,
    STREAM_NOT_FOUND,
    TASK_NEEDS_STREAM,
)

pytestmark = pytest.mark.e2e

VERSION = wire.LEGACY_PROTOCOL_VERSION
ELICITING = {"elicitation": {}}
CONFIRM_QUESTION = "Archive project 'apollo'? It becomes read-only."
REASON_QUESTION = "Why is 'apollo' being archived?"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: str

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        """The SSE events: `{"id", "retry", "data"}` with `data` parsed (None for an empty one)."""
        assert self.headers["content-type"].startswith("text/event-stream"), self.headers
        events = []
        for block in self.body.split("\n\n"):
            if not block.strip():
                continue
            event: dict[str, Any] = {"id": None, "retry": None, "data": None}
            for line in block.split("\n"):
                name, _, value = line.partition(": ")
                if name == "id":
                    event["id"] = value
                elif name == "retry":
                    event["retry"] = int(value)
                elif name == "data":
                    event["data"] = json.loads(value) if value.strip() else None
            events.append(event)
        return events


@dataclass
class Client:
    url: str
    who: str
    session: str | None = None

    def send(
        self,
        method: str,
        message: Any = None,
        headers: dict[str, str] | None = None,
        session: str | None = None,
    ) -> Reply:
        parts = urlsplit(self.url)
        final = {
            "authorization": f"Bearer dev:{self.who}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if session or self.session:
            final[wire.HEADER_SESSION_ID] = session or self.session or ""
        final.update(headers or {})
        body = None if message is None else (message if isinstance(message, str) else json.dumps(message))
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            connection.request(method, parts.path, body=body, headers=final)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode())
        finally:
            connection.close()

    def initialize(self, capabilities: dict[str, Any] | None = None, version: str = VERSION) -> Reply:
        params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {"name": self.who}}
        reply = self.send("POST", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert reply.status == 200, reply.body
        self.session = reply.headers[wire.HEADER_SESSION_ID]
        return reply

    def request(self, method: str, params: dict[str, Any] | None = None, request_id: int = 1, **kw: Any) -> Reply:
        return self.send("POST", {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}, **kw)

    def answer(self, request_id: str, result: dict[str, Any], **kw: Any) -> Reply:
        return self.send("POST", {"jsonrpc": "2.0", "id": request_id, "result": result}, **kw)

    def resume(self, last_event_id: str, **kw: Any) -> Reply:
        return self.send("GET", headers={wire.HEADER_LAST_EVENT_ID: last_event_id, "accept": "text/event-stream"}, **kw)


@pytest.fixture(scope="module")
def stack(conformance_stack: RunningStack) -> RunningStack:
    return conformance_stack


@pytest.fixture
def alice(stack: RunningStack) -> Client:
    client = Client(stack.url, "alice")
    client.initialize(ELICITING)
    return client


@pytest.fixture
def mallory(stack: RunningStack) -> Client:
    client = Client(stack.url, "mallory")
    client.initialize(ELICITING)
    return client


def asked(reply: Reply) -> tuple[str, dict[str, Any]]:
    """The server-to-client request a stream ends with, and that event's id."""
    events = reply.events()
    request = events[-1]["data"]
    assert request["method"] == wire.INPUT_METHOD_ELICIT and isinstance(request["id"], str), events
    return events[-1]["id"], request


def resume_until_message(client: Client, last_event_id: str, timeout: float = 30.0) -> tuple[str, dict[str, Any]]:
    """Reconnect as a 2025 client does until the stream carries a message; its event id and message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = client.resume(last_event_id)
        assert reply.status == 200, reply.body
        events = reply.events()
        with_data = [event for event in events if event["data"] is not None]
        if with_data:
            return with_data[-1]["id"], with_data[-1]["data"]
        last_event_id = events[-1]["id"]
    raise AssertionError("the stream never carried a message")


# ---- the handshake and the session ---------------------------------------------------------------------
def test_initialize_negotiates_the_requested_2025_revision_and_seals_a_visible_ascii_session_id(
    stack: RunningStack,
) -> None:
    client = Client(stack.url, "alice")
    for requested, negotiated in (("2025-06-18", "2025-06-18"), ("2024-11-05", VERSION), (VERSION, VERSION)):
        result = client.initialize(version=requested).json()["result"]
        assert result["protocolVersion"] == negotiated
        assert set(result["capabilities"]) == {"tools", "prompts", "completions", "resources", "logging"}
        assert all(0x21 <= ord(char) <= 0x7E for char in client.session or "")


def test_ping_and_the_initialized_notification_are_answered_as_2025_says(alice: Client) -> None:
    assert alice.request("ping").json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    notified = alice.send("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (notified.status, notified.body) == (202, "")


def test_a_session_id_used_by_another_principal_is_not_found(alice: Client, mallory: Client) -> None:
    reply = mallory.request("tools/list", session=alice.session)
    assert reply.status == 404
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": wire.INVALID_REQUEST, "message": SESSION_NOT_FOUND},
    }


def test_a_tampered_session_id_is_not_found(alice: Client) -> None:
    assert alice.session is not None
    token = alice.session
    flipped = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert alice.request("tools/list", session=flipped).status == 404
    assert alice.request("tools/list", session="v1.dev.e30.AAAA").status == 404


def test_delete_ends_the_session_for_good(alice: Client) -> None:
    assert alice.request("tools/list").status == 200
    assert alice.send("DELETE").status == 204
    assert alice.request("tools/list").status == 404
    assert alice.send("DELETE").status == 404
    assert alice.resume("0" * 32 + ".1").status == 404


def test_another_principal_cannot_end_a_session(alice: Client, mallory: Client) -> None:
    assert mallory.send("DELETE", session=alice.session).status == 404
    assert alice.request("ping").status == 200


def test_requests_without_a_session_are_bad_requests(stack: RunningStack) -> None:
    reply = Client(stack.url, "alice").request("tools/list", headers={wire.HEADER_PROTOCOL_VERSION: VERSION})
    assert reply.status == 400
    assert reply.json()["error"] == {"code": wire.INVALID_REQUEST, "message": SESSION_REQUIRED}


def test_bad_legacy_input_gets_the_json_rpc_error_the_spec_names(alice: Client, stack: RunningStack) -> None:
    unknown = alice.request("no/such/method").json()
    assert unknown["error"] == {"code": wire.METHOD_NOT_FOUND, "message": "Method not found: no/such/method"}
    assert alice.request("tasks/get", {"taskId": "x"}).json()["error"]["code"] == wire.METHOD_NOT_FOUND
    level = alice.request("logging/setLevel", {"level": "loud"}).json()
    assert level["error"] == {"code": wire.INVALID_PARAMS, "message": "Invalid params: unknown log level"}
    unknown_tool = alice.request("tools/call", {"name": "nope"}).json()
    assert unknown_tool["error"] == {"code": wire.INVALID_PARAMS, "message": "Unknown tool: nope"}
    broken = alice.send("POST", '{"jsonrpc": "2.0", "id": 1, "method": ')
    assert (broken.status, broken.json()["error"]["code"]) == (400, wire.PARSE_ERROR)
    fresh = Client(stack.url, "alice")
    no_info = fresh.send("POST", {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"capabilities": {}}})
    assert no_info.status == 200
    assert no_info.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": wire.INVALID_PARAMS, "message": "Invalid params: 'protocolVersion' is missing"},
    }
    assert alice.send("GET", headers={"accept": "text/event-stream"}).status == 405


def test_a_get_without_last_event_id_is_405_so_clients_skip_the_standalone_stream(alice: Client) -> None:
    reply = alice.send("GET", headers={"accept": "text/event-stream"})
    assert reply.status == 405
    assert reply.json()["error"]["message"] == NO_STANDALONE_STREAM


def test_the_2026_path_is_unchanged_for_a_2026_initialize(stack: RunningStack) -> None:
    client = Client(stack.url, "alice")
    meta = {
        wire.META_PROTOCOL_VERSION: wire.PROTOCOL_VERSION,
        wire.META_CLIENT_CAPABILITIES: {},
    }
    headers = {wire.HEADER_PROTOCOL_VERSION: wire.PROTOCOL_VERSION, wire.HEADER_METHOD: "initialize"}
    reply = client.request("initialize", {"_meta": meta}, headers=headers)
    assert (reply.status, reply.json()["error"]["code"]) == (404, wire.METHOD_NOT_FOUND)


# ---- elicitation over a resumable stream ---------------------------------------------------------------
def test_an_elicitation_tool_runs_over_a_primed_stream_and_resumes_with_last_event_id(alice: Client) -> None:
    call = alice.request("tools/call", {"name": "archive_project", "arguments": {"project": "apollo"}}, request_id=7)
    events = call.events()
    assert events[0]["data"] is None and events[0]["retry"] == 500 and events[0]["id"]
    first_id, first = asked(call)
    assert first["params"]["message"] == CONFIRM_QUESTION
    assert first["params"]["mode"] == "form"
    assert alice.answer(first["id"], {"action": "accept", "content": {"confirm": True}}).status == 202

    second_id, second = resume_until_message(alice, first_id)
    assert second["method"] == wire.INPUT_METHOD_ELICIT and second["params"]["message"] == REASON_QUESTION
    assert alice.answer(second["id"], {"action": "accept", "content": {"reason": "superseded"}}).status == 202
    assert alice.answer(second["id"], {"action": "accept", "content": {"reason": "again"}}).status == 400

    final_id, final = resume_until_message(alice, second_id)
    assert final == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"content": [{"type": "text", "text": "Archived project 'apollo' (reason: superseded)."}]},
    }
    # A reconnect from an earlier event replays what came after it, never re-running the tool.
    replayed = alice.resume(first_id).events()
    assert [event["data"] for event in replayed[1:]] == [second, final]
    assert resume_until_message(alice, final_id)[1] == final


def test_another_principal_cannot_resume_or_answer_a_stream(alice: Client, mallory: Client) -> None:
    call = alice.request("tools/call", {"name": "archive_project", "arguments": {"project": "apollo"}}, request_id=8)
    event_id, request = asked(call)
    # Mallory holds alice's event id and request id, with her own session or with alice's.
    assert mallory.resume(event_id).status == 404
    assert mallory.resume(event_id, session=alice.session).status == 404
    stolen = mallory.answer(request["id"], {"action": "accept", "content": {"confirm": False}})
    assert stolen.status == 400
    assert stolen.json()["error"]["message"] == NO_OUTSTANDING_REQUEST
    # Tampered event ids lead nowhere either.
    stream_key, seq = event_id.split(".")
    assert alice.resume(f"{stream_key[:-1]}{'0' if stream_key[-1] != '0' else '1'}.{seq}").status == 404
    assert alice.resume(f"{stream_key}.999").status == 404
    assert alice.resume("not-an-event-id").json()["error"]["message"] == STREAM_NOT_FOUND
    # Alice's own second session is another caller for this stream.
    other = Client(alice.url, "alice")
    other.initialize(ELICITING)
    assert other.resume(event_id).status == 404
    # Alice's answer still counts: mallory's did not.
    assert alice.answer(request["id"], {"action": "decline"}).status == 202
    assert resume_until_message(alice, event_id)[1]["result"]["content"][0]["text"] == (
        "Archive of 'apollo' cancelled; nothing changed."
    )


def test_a_client_that_takes_no_event_stream_gets_a_clear_tool_error(alice: Client) -> None:
    reply = alice.request(
        "tools/call",
        {"name": "archive_project", "arguments": {"project": "apollo"}},
        headers={"accept": "application/json"},
    )
    assert reply.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": NEEDS_STREAM_TEXT}], "isError": True},
    }


def test_a_client_without_elicitation_is_told_by_a_tool_error(stack: RunningStack) -> None:
    client = Client(stack.url, "alice")
    client.initialize({})
    result = client.request("tools/call", {"name": "archive_project", "arguments": {"project": "apollo"}}).json()
    assert result["result"]["isError"] is True
    assert result["result"]["content"][0]["text"] == (
        "Tool archive_project may ask the user (elicitation), which this client did not declare."
    )


# ---- a durable task behind a resumable stream ------------------------------------------------------------
def test_a_task_tool_streams_progress_its_approval_and_its_result(alice: Client) -> None:
    arguments = {"service": "billing", "version": "2.0", "seconds_per_stage": 0.2}
    params = {"name": "deploy_release", "arguments": arguments, "_meta": {"progressToken": "p1"}}
    call = alice.request("tools/call", params, request_id=11)
    events = call.events()
    assert len(events) == 1 and events[0]["data"] is None and events[0]["retry"] == 500
    last_id, messages = events[0]["id"], []
    while not messages or "method" not in messages[-1] or messages[-1]["method"] == wire.NOTIFICATION_PROGRESS:
        last_id, message = resume_until_message(alice, last_id)
        messages.append(message)
    progress = [m["params"] for m in messages if m.get("method") == wire.NOTIFICATION_PROGRESS]
    assert progress and all(p["progressToken"] == "p1" for p in progress)
    values = [p["progress"] for p in progress]
    assert values == sorted(set(values)) and {p["total"] for p in progress} == {4}  # as reported, increasing
    question = messages[-1]
    assert question["params"]["message"] == "billing 2.0 passed staging. Promote to production?"
    assert alice.answer(question["id"], {"action": "accept", "content": {"approve": True}}).status == 202
    final: dict[str, Any] = {}
    while "result" not in final:
        last_id, final = resume_until_message(alice, last_id)
    assert final == {
        "jsonrpc": "2.0",
        "id": 11,
        "result": {"content": [{"type": "text", "text": "billing 2.0 is live in production."}]},
    }


def test_cancelling_the_request_cancels_the_task_and_closes_its_stream(alice: Client) -> None:
    arguments = {"service": "billing", "version": "3.0", "seconds_per_stage": 30}
    call = alice.request("tools/call", {"name": "deploy_release", "arguments": arguments}, request_id=12)
    primed = call.events()[0]["id"]
    cancel = {"jsonrpc": "2.0", "method": wire.NOTIFICATION_CANCELLED, "params": {"requestId": 12, "reason": "no"}}
    assert alice.send("POST", cancel).status == 202
    assert alice.resume(primed).status == 404
    newest = alice.request("tools/call", {"name": "list_my_tasks", "arguments": {"limit": 1}}).json()
    (task,) = newest["result"]["structuredContent"]["tasks"]
    assert (task["tool"], task["status"]) == ("deploy_release", "cancelled")


# ---- shapes of the older revisions, logs, and answers that are errors --------------------------------------
def test_a_2025_06_18_session_gets_elicitation_requests_without_a_mode(stack: RunningStack) -> None:
    client = Client(stack.url, "alice")
    client.initialize(ELICITING, version="2025-06-18")
    _, request = asked(client.request("tools/call", {"name": "archive_project", "arguments": {"project": "apollo"}}))
    assert request["params"] == {
        "message": CONFIRM_QUESTION,
        "requestedSchema": {
            "type": "object",
            "properties": {"confirm": {"type": "boolean", "description": "Archive the project?"}},
            "required": ["confirm"],
        },
    }


def test_a_2025_03_26_session_gets_no_structured_content_or_output_schemas(stack: RunningStack) -> None:
    client = Client(stack.url, "alice")
    client.initialize({}, version="2025-03-26")
    called = client.request("tools/call", {"name": "count_words", "arguments": {"text": "a b"}}).json()["result"]
    assert called == {"content": [{"type": "text", "text": '{"words": 2, "characters": 3}'}]}
    listed = client.request("tools/list").json()["result"]["tools"]
    assert not [tool["name"] for tool in listed if "outputSchema" in tool or "title" in tool]
    modern = Client(stack.url, "alice")
    modern.initialize({}, version=VERSION)
    structured = modern.request("tools/call", {"name": "count_words", "arguments": {"text": "a b"}}).json()
    assert structured["result"]["structuredContent"] == {"words": 2, "characters": 3}


def test_logs_reach_a_session_only_after_it_sets_a_level(alice: Client) -> None:
    logging_call = {"name": "test_tool_with_logging", "arguments": {}}
    assert alice.request("tools/call", logging_call).headers["content-type"] == "application/json"
    assert alice.request("logging/setLevel", {"level": "info"}).json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    logged = alice.request("tools/call", logging_call, request_id=2).events()
    assert [event["data"].get("params", {}).get("data") for event in logged] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
        None,
    ]
    assert logged[-1]["data"]["result"]["content"][0]["text"] == "Logging test completed."
    assert alice.request("logging/setLevel", {"level": "error"}).status == 200
    assert alice.request("tools/call", logging_call).headers["content-type"] == "application/json"


def test_an_error_in_place_of_a_sampling_answer_fails_the_request(stack: RunningStack) -> None:
    client = Client(stack.url, "alice")
    client.initialize({"sampling": {}})
    call = client.request("tools/call", {"name": "test_sampling", "arguments": {"prompt": "Hi"}}, request_id=21)
    events = call.events()
    event_id, request = events[-1]["id"], events[-1]["data"]
    assert request["method"] == wire.INPUT_METHOD_SAMPLING
    assert request["params"]["maxTokens"] == 100
    error = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "User rejected sampling"}}
    assert client.send("POST", error).status == 202
    failed = CLIENT_ANSWER_FAILED.format(method=wire.INPUT_METHOD_SAMPLING)
    assert resume_until_message(client, event_id)[1] == {
        "jsonrpc": "2.0",
        "id": 21,
        "error": {"code": wire.INTERNAL_ERROR, "message": failed},
    }


def test_an_error_in_place_of_an_elicitation_answer_counts_as_a_cancel(alice: Client) -> None:
    call = alice.request("tools/call", {"name": "test_elicitation", "arguments": {"message": "Who?"}}, request_id=22)
    event_id, request = asked(call)
    error = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "no UI"}}
    assert alice.send("POST", error).status == 202
    final = resume_until_message(alice, event_id)[1]
    assert final["result"]["content"][0]["text"] == "User response: action=cancel, content={}"


def test_a_client_that_takes_no_event_stream_gets_task_tools_synchronously_or_a_clear_tool_error(
    alice: Client,
) -> None:
    json_only = {"accept": "application/json"}
    quick = {"name": "slow_compute", "arguments": {"seconds": 0, "label": "sync"}}
    ran = alice.request("tools/call", quick, headers=json_only).json()["result"]
    assert ran == {"content": [{"type": "text", "text": "slow_compute 'sync' finished after 0s"}]}
    only_task = alice.request("tools/call", {"name": "failing_job", "arguments": {}}, headers=json_only).json()
    assert only_task["result"] == {
        "content": [{"type": "text", "text": f"Tool failing_job runs only as a task, {TASK_NEEDS_STREAM}"}],
        "isError": True,
    }
    asks = {"name": "deploy_release", "arguments": {"service": "s", "version": "1", "seconds_per_stage": 0}}
    needs_input = alice.request("tools/call", asks, headers=json_only).json()["result"]
    assert needs_input == {"content": [{"type": "text", "text": NEEDS_STREAM_TEXT}], "isError": True}
