"""Trying to break in over real HTTP: the template-driven local stack (its API function takes development
tokens `Bearer dev:<user>` there, DEV_AUTH being a local addition), two principals, alice and mallory.

Mallory knows alice's task ids, cart handle and requestState (ids leak: logs, screenshots, shared
transcripts). Every use of them must answer exactly what an id that was never issued answers, and
change nothing of alice's. Guessed and malformed ids never reach a 5xx. Unauthenticated calls get
401 with the RFC 9728 challenge, and the metadata document itself needs no credentials.
"""

from __future__ import annotations

import http.client
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from testkit import RunningStack, rpc, standard_headers

from mcp_runtime import wire
from mcp_runtime.cursors import encode_cursor
from mcp_runtime.tasks.service import TASK_NOT_FOUND_MESSAGE

pytestmark = pytest.mark.e2e

TASKS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}
APPROVE: dict[str, Any] = {"promote": {"action": "accept", "content": {"approve": True}}}
NOT_FOUND = {"code": wire.INVALID_PARAMS, "message": TASK_NOT_FOUND_MESSAGE}
UNKNOWN_HANDLE = "Unknown or expired handle."


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Stack:
    """The running stack plus every task each principal started here, to check listings exactly."""

    running: RunningStack
    started: dict[str, list[str]] = field(default_factory=lambda: {"alice": [], "mallory": []})

    @property
    def url(self) -> str:
        return self.running.url

    def send(
        self,
        body: bytes,
        headers: dict[str, str],
        *,
        method: str = "POST",
        path: str | None = None,
    ) -> Reply:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            connection.request(method, path or parts.path, body=body if method == "POST" else None, headers=headers)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def call(
        self,
        who: str | None,
        method: str,
        params: dict[str, Any],
        *,
        request_id: int = 7,
        name_header: bool = True,
        authorization: str | None = None,
    ) -> Reply:
        message = rpc(method, params, request_id, TASKS)
        headers = standard_headers(message)
        if not name_header:
            headers.pop("mcp-name", None)
        if authorization is not None:
            headers["authorization"] = authorization
        elif who is not None:
            headers["authorization"] = f"Bearer dev:{who}"
        return self.send(json.dumps(message).encode(), headers)

    def result(self, who: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        reply = self.call(who, method, params)
        assert reply.status == 200, reply.body
        message = reply.json()
        assert "error" not in message, message
        result: dict[str, Any] = message["result"]
        return result

    def tool(self, who: str, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return self.result(who, "tools/call", {"name": name, "arguments": arguments, **extra})

    def start_task(self, who: str, service: str = "shop") -> str:
        created = self.tool(who, "deploy_release", {"service": service, "version": "1.0", "seconds_per_stage": 0})
        assert created["resultType"] == wire.RESULT_TASK, created
        self.started[who].append(created["taskId"])
        time.sleep(0.003)  # distinct createdAt (milliseconds) so "newest first" has one answer
        return str(created["taskId"])

    def task(self, who: str, task_id: str) -> dict[str, Any]:
        return self.result(who, "tasks/get", {"taskId": task_id})

    def wait_for(self, who: str, task_id: str, status: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        task = self.task(who, task_id)
        while task["status"] != status and time.monotonic() < deadline:
            time.sleep(0.05)
            task = self.task(who, task_id)
        assert task["status"] == status, task
        return task

    def list_all(self, who: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """Every page of list_my_tasks for `who`, and how many pages it took."""
        tasks: list[dict[str, Any]] = []
        cursor: str | None = None
        pages = 0
        while True:
            arguments: dict[str, Any] = {"limit": limit}
            if cursor is not None:
                arguments["cursor"] = cursor
            page = self.tool(who, "list_my_tasks", arguments)["structuredContent"]
            pages += 1
            assert len(page["tasks"]) <= limit
            tasks.extend(page["tasks"])
            cursor = page.get("nextCursor")
            if cursor is None:
                return tasks, pages
            assert pages < 50, "the cursor does not advance"


@pytest.fixture(scope="module")
def stack(template_stack: RunningStack) -> Stack:
    return Stack(template_stack)


@pytest.fixture(scope="module")
def alice_awaiting(stack: Stack) -> str:
    """An alice task awaiting the answer to its approval question (status input_required)."""
    task_id = stack.start_task("alice", "payments")
    stack.wait_for("alice", task_id, "input_required")
    return task_id


def same_reply(left: Reply, right: Reply) -> None:
    """Byte-for-byte: status, content type, body (and so the error object and its message)."""
    assert left.status == right.status
    assert left.headers.get("content-type") == right.headers.get("content-type")
    assert left.body == right.body


# ---- tasks: another principal's id answers like an id that was never issued --------------------------------------
@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("tasks/get", {}),
        ("tasks/update", {"inputResponses": APPROVE}),
        ("tasks/update", {"inputResponses": {}}),
        ("tasks/update", {"inputResponses": {"other": {"action": "accept", "content": {}}}}),
        ("tasks/cancel", {}),
    ],
    ids=["get", "update-answering", "update-empty", "update-unknown-key", "cancel"],
)
def test_mallory_on_alices_task_gets_exactly_the_unknown_id_answer_and_changes_nothing(
    stack: Stack, alice_awaiting: str, method: str, extra: dict[str, Any]
) -> None:
    before = stack.task("alice", alice_awaiting)
    never_issued = secrets.token_urlsafe(24)

    on_alices = stack.call("mallory", method, {"taskId": alice_awaiting, **extra})
    on_unknown = stack.call("mallory", method, {"taskId": never_issued, **extra})
    alice_on_unknown = stack.call("alice", method, {"taskId": never_issued, **extra})

    same_reply(on_alices, on_unknown)
    same_reply(on_alices, alice_on_unknown)
    assert on_alices.status == 200
    assert on_alices.json() == {"jsonrpc": "2.0", "id": 7, "error": NOT_FOUND}
    after = stack.task("alice", alice_awaiting)
    assert after == before  # same status, same inputRequests, same lastUpdatedAt: nothing was written
    assert after["status"] == "input_required" and set(after["inputRequests"]) == {"promote"}


def test_alices_task_still_finishes_for_alice_after_every_attempt(stack: Stack, alice_awaiting: str) -> None:
    for method, extra in (("tasks/update", {"inputResponses": APPROVE}), ("tasks/cancel", {})):
        stack.call("mallory", method, {"taskId": alice_awaiting, **extra})
    assert stack.task("alice", alice_awaiting)["status"] == "input_required"
    acknowledged = stack.result("alice", "tasks/update", {"taskId": alice_awaiting, "inputResponses": APPROVE})
    assert acknowledged["resultType"] == wire.RESULT_COMPLETE
    assert set(acknowledged) == {"resultType", "_meta"}
    done = stack.wait_for("alice", alice_awaiting, "completed")
    assert done["result"]["content"][0]["text"] == "payments 1.0 is live in production."
    # Settled tasks are guarded the same way: mallory still sees nothing.
    same_reply(
        stack.call("mallory", "tasks/get", {"taskId": alice_awaiting}),
        stack.call("mallory", "tasks/get", {"taskId": secrets.token_urlsafe(24)}),
    )


# ---- guessed and malformed task ids ------------------------------------------------------------------------------
WELL_FORMED_BUT_UNKNOWN = [
    "guess",
    "A" * 32,
    "\u30bf\u30b9\u30af-\u00fc-\U0001f600",
    "../../../etc/passwd",
    "/tasks/../handle#x",
    "' OR '1'='1' --",
    '"; DROP TABLE tasks; --',
    "task#",
    "handle#cart_x",
    "%00",
    "\u0000",
    " ",
    "x" * 256,
]
MALFORMED = ["", "x" * 257, "x" * 10_000, 123, 0, None, True, 1.5, [], ["id"], {"id": "x"}]


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
@pytest.mark.parametrize("who", ["alice", "mallory"])
def test_guessed_and_malformed_task_ids_are_invalid_params_never_a_5xx(stack: Stack, method: str, who: str) -> None:
    extra: dict[str, Any] = {"inputResponses": APPROVE} if method == "tasks/update" else {}
    for task_id in WELL_FORMED_BUT_UNKNOWN:
        reply = stack.call(who, method, {"taskId": task_id, **extra}, name_header=False)
        assert reply.status == 200, (task_id, reply.body)
        assert reply.json()["error"] == NOT_FOUND, task_id
    for task_id in MALFORMED:
        reply = stack.call(who, method, {"taskId": task_id, **extra}, name_header=False)
        assert reply.status == 200, (task_id, reply.body)
        error = reply.json()["error"]
        assert error["code"] == wire.INVALID_PARAMS, (task_id, error)
        assert error["message"] in (TASK_NOT_FOUND_MESSAGE, "Invalid params: 'taskId' is invalid"), error
    missing = stack.call(who, method, extra, name_header=False)
    assert (missing.status, missing.json()["error"]["code"]) == (200, wire.INVALID_PARAMS)


def test_prefixed_and_respelled_versions_of_a_real_id_are_not_found(stack: Stack, alice_awaiting: str) -> None:
    for variant in (
        f"task#{alice_awaiting}",
        f" {alice_awaiting}",
        f"{alice_awaiting} ",
        alice_awaiting.upper() if alice_awaiting.upper() != alice_awaiting else alice_awaiting.lower(),
        alice_awaiting[:-1],
        alice_awaiting + "=",
    ):
        reply = stack.call("alice", "tasks/get", {"taskId": variant}, name_header=False)
        assert (reply.status, reply.json()["error"]) == (200, NOT_FOUND), variant


def test_task_ids_are_long_random_and_url_safe(stack: Stack) -> None:
    ids = {stack.start_task("mallory", "ids") for _ in range(3)}
    assert len(ids) == 3
    for task_id in ids:
        assert len(task_id) == 32 and all(c.isalnum() or c in "-_" for c in task_id)  # 192 bits of token_urlsafe


# ---- handles --------------------------------------------------------------------------------------------------
def _text(result: dict[str, Any]) -> str:
    text: str = result["content"][0]["text"]
    return text


def test_mallory_with_alices_cart_handle_gets_the_unknown_handle_answer_and_the_cart_is_untouched(stack: Stack) -> None:
    opened = _text(stack.tool("alice", "cart_open", {}))
    cart = opened.split()[2].rstrip(".")
    assert cart.startswith("cart_") and len(cart) == len("cart_") + 32
    assert (
        _text(stack.tool("alice", "cart_add", {"cart": cart, "sku": "apple"}))
        == "Cart now holds 1 x apple; total $0.50."
    )
    never_issued = "cart_" + secrets.token_urlsafe(24)

    for name, arguments in (("cart_add", {"sku": "coffee", "quantity": 99}), ("cart_checkout", {})):
        on_alices = stack.call("mallory", "tools/call", {"name": name, "arguments": {"cart": cart, **arguments}})
        on_unknown = stack.call(
            "mallory", "tools/call", {"name": name, "arguments": {"cart": never_issued, **arguments}}
        )
        same_reply(on_alices, on_unknown)
        result = on_alices.json()["result"]
        assert result["isError"] is True and _text(result) == UNKNOWN_HANDLE

    # The cart holds exactly what alice put there, and is still hers to use and close.
    assert _text(stack.tool("alice", "cart_add", {"cart": cart, "sku": "milk"})) == (
        "Cart now holds 1 x apple, 1 x milk; total $1.99."
    )
    assert _text(stack.tool("alice", "cart_checkout", {"cart": cart})) == "Ordered 1 x apple, 1 x milk; total $1.99."
    closed = stack.tool("alice", "cart_checkout", {"cart": cart})
    assert closed["isError"] is True and _text(closed) == UNKNOWN_HANDLE


def test_a_task_id_is_not_a_handle_and_a_handle_is_not_a_task_id(stack: Stack, alice_awaiting: str) -> None:
    as_handle = stack.tool("alice", "cart_add", {"cart": alice_awaiting, "sku": "apple"})
    assert as_handle["isError"] is True and _text(as_handle) == UNKNOWN_HANDLE
    cart = _text(stack.tool("alice", "cart_open", {})).split()[2].rstrip(".")
    reply = stack.call("alice", "tasks/get", {"taskId": cart}, name_header=False)
    assert reply.json()["error"] == NOT_FOUND


# ---- task history ------------------------------------------------------------------------------------------------
def test_list_my_tasks_shows_each_caller_only_their_own_tasks_newest_first_in_pages(stack: Stack) -> None:
    for _ in range(3):
        stack.start_task("alice", "history")
        stack.start_task("mallory", "history")

    for who in ("alice", "mallory"):
        listed, pages = stack.list_all(who, limit=2)
        ids = [task["taskId"] for task in listed]
        assert len(ids) == len(set(ids)), "a task appeared on two pages"
        assert set(ids) == set(stack.started[who])
        assert pages >= 2
        created = [task["createdAt"] for task in listed]
        assert created == sorted(created, reverse=True)
        assert ids == list(reversed(stack.started[who]))  # started one by one, so newest first is reverse order


def test_a_cursor_crafted_from_alices_task_still_lists_only_mallorys_tasks(stack: Stack) -> None:
    stack.start_task("alice", "cursor")
    stack.start_task("mallory", "cursor")
    alices = stack.tool("alice", "list_my_tasks", {"limit": 50})["structuredContent"]["tasks"]
    for task in alices:
        crafted = encode_cursor(task["createdAt"], task["taskId"])
        page = stack.tool("mallory", "list_my_tasks", {"limit": 50, "cursor": crafted})
        assert not page.get("isError"), page  # a cursor is only a position; the owner is the caller
        listed = {entry["taskId"] for entry in page["structuredContent"]["tasks"]}
        assert listed <= set(stack.started["mallory"])
        assert not listed & set(stack.started["alice"])


@pytest.mark.parametrize("cursor", ["", "garbage", "W10", encode_cursor("not-a-date", "x" * 20), "\u00e9"])
def test_a_cursor_that_was_never_issued_is_a_tool_error(stack: Stack, cursor: str) -> None:
    result = stack.tool("mallory", "list_my_tasks", {"cursor": cursor})
    assert result["isError"] is True
    assert _text(result) == "Invalid cursor: pass nextCursor from the previous page unchanged."


# ---- requestState ------------------------------------------------------------------------------------------------
def test_a_request_state_minted_for_alice_is_refused_for_mallory(stack: Stack) -> None:
    arguments = {"project": "apollo"}
    first = stack.tool("alice", "archive_project", arguments)
    assert first["resultType"] == wire.RESULT_INPUT_REQUIRED
    retry = {
        "name": "archive_project",
        "arguments": arguments,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
        "requestState": first["requestState"],
    }
    stolen = stack.call("mallory", "tools/call", retry)
    assert stolen.status == 200
    error = stolen.json()["error"]
    assert error == {"code": wire.INVALID_PARAMS, "message": "Invalid requestState: issued for another request"}
    # Alice's own retry with the same state goes on to the next question.
    assert stack.result("alice", "tools/call", retry)["inputRequests"].keys() == {"reason"}


# ---- authentication ----------------------------------------------------------------------------------------------
# The API function validates credentials itself (the route has no API Gateway authorizer), so every refusal
# carries the challenge an MCP client needs: the protected resource metadata and the scope to ask for.
UNAUTHENTICATED = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Authentication required"}}
INVALID_TOKEN = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid access token"}}


def challenge_of(stack: Stack, error: str | None = None) -> str:
    parts = urlsplit(stack.url)
    metadata = f'resource_metadata="http://{parts.netloc}/.well-known/oauth-protected-resource/mcp"'
    described = f'error="invalid_token", error_description="{error}", ' if error else ""
    return f'Bearer {described}scope="mcp/invoke", {metadata}'


def test_a_call_without_authorization_gets_401_naming_the_resource_metadata(stack: Stack) -> None:
    reply = stack.call(None, "tools/list", {})
    assert (reply.status, reply.json(), reply.headers["www-authenticate"]) == (
        401,
        UNAUTHENTICATED,
        challenge_of(stack),
    )


@pytest.mark.parametrize(
    ("authorization", "error"),
    [
        ("Bearer ", "the token is malformed"),
        ("Bearer dev:", "the token is malformed"),
        ("Bearer dev:   ", "the token is malformed"),
        ("Bearer alice", "the token is malformed"),
        ("Bearer dev:" + "a" * 129, "the token is malformed"),
        ("Bearer dev:al\x7fice", "the token is malformed"),
        ("Bearer", None),
        ("Basic dev:alice", None),
        ("Token dev:alice", None),
        ("Bearerdev:alice", None),
    ],
)
def test_a_malformed_dev_bearer_is_401_invalid_token_and_another_scheme_is_401_unauthenticated(
    stack: Stack, authorization: str, error: str | None
) -> None:
    reply = stack.call(None, "tools/list", {}, authorization=authorization)
    expected = (401, INVALID_TOKEN if error else UNAUTHENTICATED, challenge_of(stack, error))
    assert (reply.status, reply.json(), reply.headers["www-authenticate"]) == expected, authorization


def test_an_empty_authorization_header_is_401_like_a_missing_one(stack: Stack) -> None:
    reply = stack.call(None, "tools/list", {}, authorization="")
    assert (reply.status, reply.json(), reply.headers["www-authenticate"]) == (
        401,
        UNAUTHENTICATED,
        challenge_of(stack),
    )


@pytest.mark.parametrize("suffix", ["/mcp", ""])
def test_the_protected_resource_metadata_is_served_without_credentials(stack: Stack, suffix: str) -> None:
    parts = urlsplit(stack.url)
    reply = stack.send(
        b"", {"accept": "application/json"}, method="GET", path="/.well-known/oauth-protected-resource" + suffix
    )
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("application/json")
    document = reply.json()
    assert document["resource"] == f"http://{parts.netloc}/mcp"
    assert document["bearer_methods_supported"] == ["header"]


def test_a_principal_in_the_body_or_meta_is_ignored(stack: Stack, alice_awaiting: str) -> None:
    message = rpc("tasks/get", {"taskId": alice_awaiting}, 7, TASKS)
    message["params"]["_meta"]["principal"] = "dev:alice"
    message["params"]["principal"] = "dev:alice"
    headers = {**standard_headers(message), "authorization": "Bearer dev:mallory", "x-principal": "dev:alice"}
    reply = stack.send(json.dumps(message).encode(), headers)
    assert reply.json()["error"] == NOT_FOUND
