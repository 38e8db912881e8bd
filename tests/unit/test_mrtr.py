"""Multi Round-Trip Requests through the transport: re-asking, answer validation, sealed state, capabilities."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_runtime import wire
from mcp_runtime.limits import MAX_INPUT_RESPONSES
from mcp_runtime.transport import HttpResponse
from tests.unit.conftest import BOB, Client, FakeClock, error_of, result_of

ELICIT: dict[str, Any] = {"elicitation": {}}
EVERYTHING: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
ELICIT_TOOL = "test_input_required_result_elicitation"


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def input_required(response: HttpResponse) -> dict[str, Any]:
    result = result_of(response)
    assert result["resultType"] == wire.RESULT_INPUT_REQUIRED, result
    assert isinstance(result["requestState"], str) and result["requestState"]
    for request in result["inputRequests"].values():
        assert set(request) == {"method", "params"}  # bare requests: no jsonrpc, no id
    return result


def completed_text(response: HttpResponse) -> str:
    result = result_of(response)
    assert result["resultType"] == wire.RESULT_COMPLETE, result
    assert result.get("isError") is not True, result
    said: str = result["content"][0]["text"]
    return said


def assert_invalid_state(response: HttpResponse) -> None:
    message = response.json()
    assert "result" not in message, message
    assert message["error"]["code"] == wire.INVALID_PARAMS
    assert response.status == 200


def retry(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    state: str | None,
    responses: Any,
    capabilities: dict[str, Any] | None = None,
    **kwargs: Any,
) -> HttpResponse:
    extra: dict[str, Any] = {"inputResponses": responses}
    if state is not None:
        extra["requestState"] = state
    return client.call_tool(
        tool, arguments, capabilities=EVERYTHING if capabilities is None else capabilities, **extra, **kwargs
    )


# ---- the basic exchange ---------------------------------------------------------------------------------------------
def test_a_tool_that_needs_input_answers_with_an_elicitation_request_and_a_sealed_state(client: Client) -> None:
    result = input_required(client.call_tool(ELICIT_TOOL, {}, capabilities=ELICIT))
    assert list(result["inputRequests"]) == ["user_name"]
    asked = result["inputRequests"]["user_name"]
    assert asked["method"] == wire.INPUT_METHOD_ELICIT
    assert asked["params"]["requestedSchema"]["type"] == "object"
    assert "ttlMs" not in result and "cacheScope" not in result


def test_the_retry_with_the_answer_and_the_state_completes_under_its_own_id(client: Client) -> None:
    first = input_required(client.call_tool(ELICIT_TOOL, {}, capabilities=ELICIT, request_id=1))
    response = retry(client, ELICIT_TOOL, {}, first["requestState"], {"user_name": accept(name="Alice")}, request_id=2)
    assert response.json()["id"] == 2
    assert completed_text(response) == "Hello, Alice!"


def test_a_declined_elicitation_completes_without_content(client: Client) -> None:
    response = retry(client, ELICIT_TOOL, {}, None, {"user_name": {"action": "decline"}})
    assert completed_text(response) == "No name given."


@pytest.mark.parametrize("responses", [{}, None, "absent"])
def test_a_missing_answer_is_asked_again_with_the_same_key(client: Client, responses: Any) -> None:
    first = input_required(client.call_tool(ELICIT_TOOL, {}, capabilities=ELICIT))
    extra: dict[str, Any] = {"requestState": first["requestState"]}
    if responses != "absent":
        extra["inputResponses"] = responses
    again = input_required(client.call_tool(ELICIT_TOOL, {}, capabilities=ELICIT, **extra))
    assert again["inputRequests"] == first["inputRequests"]


def test_extra_answer_keys_are_ignored_and_the_call_completes(client: Client) -> None:
    responses = {"user_name": accept(name="Alice"), "nobody_asked": accept(name="Mallory"), "": 1}
    assert completed_text(retry(client, ELICIT_TOOL, {}, None, responses)) == "Hello, Alice!"


@pytest.mark.parametrize(
    "responses",
    [
        {"user_name": 12345},
        {"user_name": None},
        {"user_name": "Alice"},
        {"user_name": ["accept"]},
        {"user_name": {"action": "accept"}},
        {"user_name": {"action": "accept", "content": None}},
        {"user_name": {"action": "accept", "content": "Alice"}},
        {"user_name": {"action": "accept", "content": {"name": 12345}}},
        {"user_name": {"action": "accept", "content": {"name": None}}},
        {"user_name": {"action": "accept", "content": {"name": ["Alice"]}}},
        {"user_name": {"action": "accept", "content": {}}},
        {"user_name": {"action": "maybe", "content": {"name": "Alice"}}},
        {"user_name": {"content": {"name": "Alice"}}},
        12345,
        "user_name",
        [{"action": "accept", "content": {"name": "Alice"}}],
    ],
)
def test_a_badly_typed_answer_never_completes_and_is_asked_again(client: Client, responses: Any) -> None:
    first = input_required(client.call_tool(ELICIT_TOOL, {}, capabilities=ELICIT))
    again = input_required(retry(client, ELICIT_TOOL, {}, first["requestState"], responses, ELICIT))
    assert list(again["inputRequests"]) == ["user_name"]


@pytest.mark.parametrize(
    "confirm",
    [
        accept(confirm="yes"),
        accept(confirm=1),
        accept(confirm=None),
        accept(),
        {"action": "accept"},
    ],
)
def test_archive_project_asks_again_for_a_confirmation_that_is_not_a_boolean(client: Client, confirm: Any) -> None:
    again = input_required(retry(client, "archive_project", {"project": "apollo"}, None, {"confirm": confirm}, ELICIT))
    assert list(again["inputRequests"]) == ["confirm"]


def test_archive_project_asks_again_for_an_empty_reason(client: Client) -> None:
    first = input_required(
        retry(client, "archive_project", {"project": "apollo"}, None, {"confirm": accept(confirm=True)})
    )
    assert list(first["inputRequests"]) == ["reason"]
    again = input_required(
        retry(client, "archive_project", {"project": "apollo"}, first["requestState"], {"reason": accept(reason="")})
    )
    assert list(again["inputRequests"]) == ["reason"]


def test_archive_project_runs_three_rounds_and_each_answer_is_sent_once(client: Client) -> None:
    args = {"project": "apollo"}
    round1 = input_required(client.call_tool("archive_project", args, capabilities=ELICIT))
    assert list(round1["inputRequests"]) == ["confirm"]
    round2 = input_required(
        retry(client, "archive_project", args, round1["requestState"], {"confirm": accept(confirm=True)}, ELICIT)
    )
    assert list(round2["inputRequests"]) == ["reason"]
    done = retry(client, "archive_project", args, round2["requestState"], {"reason": accept(reason="done")}, ELICIT)
    assert completed_text(done) == "Archived project 'apollo' (reason: done)."


def test_archive_project_declined_changes_nothing(client: Client) -> None:
    response = retry(client, "archive_project", {"project": "apollo"}, None, {"confirm": {"action": "decline"}}, ELICIT)
    assert "cancelled" in completed_text(response)


# ---- answers carried in the sealed state ----------------------------------------------------------------------------
def _multi_round_to_step2(client: Client) -> dict[str, Any]:
    tool = "test_input_required_result_multi_round"
    round1 = input_required(client.call_tool(tool, {}, capabilities=ELICIT))
    assert list(round1["inputRequests"]) == ["step1"]
    round2 = input_required(retry(client, tool, {}, round1["requestState"], {"step1": accept(name="Alice")}, ELICIT))
    assert list(round2["inputRequests"]) == ["step2"]
    return round2


def test_round_three_completes_with_only_step_two_answered(client: Client) -> None:
    round2 = _multi_round_to_step2(client)
    tool = "test_input_required_result_multi_round"
    done = retry(client, tool, {}, round2["requestState"], {"step2": accept(color="blue")}, ELICIT)
    assert completed_text(done) == "Alice likes blue."


def test_an_answer_sealed_in_an_earlier_round_cannot_be_replaced_by_a_later_retry(client: Client) -> None:
    round2 = _multi_round_to_step2(client)
    tool = "test_input_required_result_multi_round"
    responses = {"step1": accept(name="Mallory"), "step2": accept(color="blue")}
    done = retry(client, tool, {}, round2["requestState"], responses, ELICIT)
    assert completed_text(done) == "Alice likes blue."


def test_without_the_state_round_three_asks_for_step_one_again(client: Client) -> None:
    tool = "test_input_required_result_multi_round"
    again = input_required(retry(client, tool, {}, None, {"step2": accept(color="blue")}, ELICIT))
    assert list(again["inputRequests"]) == ["step1"]


def test_partial_answers_are_kept_and_only_the_missing_keys_are_asked_again(client: Client) -> None:
    tool = "test_input_required_result_multiple_inputs"
    first = input_required(client.call_tool(tool, {}, capabilities=EVERYTHING))
    assert set(first["inputRequests"]) == {"user_name", "greeting", "client_roots"}
    assert {r["method"] for r in first["inputRequests"].values()} == {
        wire.INPUT_METHOD_ELICIT,
        wire.INPUT_METHOD_SAMPLING,
        wire.INPUT_METHOD_ROOTS,
    }
    second = input_required(retry(client, tool, {}, first["requestState"], {"user_name": accept(name="Alice")}))
    assert set(second["inputRequests"]) == {"greeting", "client_roots"}
    rest = {
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///work"}]},
    }
    assert completed_text(retry(client, tool, {}, second["requestState"], rest)) == "Hello, Alice! Roots: 1"


def test_a_tool_keeps_its_scratch_state_across_rounds(client: Client) -> None:
    tool = "test_input_required_result_request_state"
    first = input_required(client.call_tool(tool, {}, capabilities=ELICIT))
    done = retry(client, tool, {}, first["requestState"], {"confirm": accept(ok=True)}, ELICIT)
    assert completed_text(done) == "state-ok: confirmed=True"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"}, "The model said: Paris"),
        ({"role": "assistant", "content": {"type": "text", "text": "Paris"}}, None),
        ({"role": "robot", "content": {"type": "text", "text": "Paris"}, "model": "m"}, None),
        ({"role": "assistant", "content": "Paris", "model": "m"}, None),
    ],
)
def test_sampling_answers_are_checked_for_shape(client: Client, answer: Any, expected: str | None) -> None:
    response = retry(client, "test_input_required_result_sampling", {}, None, {"capital_question": answer})
    if expected is None:
        assert list(input_required(response)["inputRequests"]) == ["capital_question"]
    else:
        assert completed_text(response) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "b"}]}, "Roots: file:///a, file:///b"),
        ({"roots": "file:///a"}, None),
        ({"roots": [{"name": "no uri"}]}, None),
        ({"roots": [{"uri": 5}]}, None),
        ({}, None),
    ],
)
def test_roots_answers_are_checked_for_shape(client: Client, answer: Any, expected: str | None) -> None:
    response = retry(client, "test_input_required_result_list_roots", {}, None, {"client_roots": answer})
    if expected is None:
        assert list(input_required(response)["inputRequests"]) == ["client_roots"]
    else:
        assert completed_text(response) == expected


def test_a_prompt_asks_for_input_and_completes_on_the_retry(client: Client) -> None:
    name = "test_input_required_result_prompt"
    first = input_required(client.request("prompts/get", {"name": name}, capabilities=ELICIT))
    assert list(first["inputRequests"]) == ["user_context"]
    params = {
        "name": name,
        "inputResponses": {"user_context": accept(context="tests")},
        "requestState": first["requestState"],
    }
    result = result_of(client.request("prompts/get", params, capabilities=ELICIT))
    assert result["resultType"] == wire.RESULT_COMPLETE
    assert result["messages"][0]["content"]["text"] == "Use this context: tests"


# ---- the state is verified and bound --------------------------------------------------------------------------------
def _first_state(client: Client, tool: str = ELICIT_TOOL, arguments: dict[str, Any] | None = None) -> str:
    state: str = input_required(client.call_tool(tool, arguments or {}, capabilities=EVERYTHING))["requestState"]
    return state


@pytest.mark.parametrize("where", [7, 20, -3])
def test_a_tampered_state_is_an_invalid_params_error_never_a_result(client: Client, where: int) -> None:
    state = _first_state(client, "test_input_required_result_tampered_state")
    tampered = state[:where] + ("A" if state[where] != "A" else "B") + state[where + 1 :]
    response = retry(client, "test_input_required_result_tampered_state", {}, tampered, {"user_name": accept(name="A")})
    assert_invalid_state(response)


@pytest.mark.parametrize("state", ["", "garbage", "v1.k1.e30.AAAA", "v1.k1.\u00e9.AAAA", 42, {"v": 1}, ["v1"]])
def test_a_forged_state_is_an_invalid_params_error_never_a_result(client: Client, state: Any) -> None:
    response = retry(client, ELICIT_TOOL, {}, state, {"user_name": accept(name="Alice")})
    assert_invalid_state(response)


def test_an_expired_state_is_an_invalid_params_error(client: Client, clock: FakeClock) -> None:
    state = _first_state(client)
    clock.advance(901)
    assert_invalid_state(retry(client, ELICIT_TOOL, {}, state, {"user_name": accept(name="Alice")}))


def test_a_state_still_opens_just_before_it_expires(client: Client, clock: FakeClock) -> None:
    state = _first_state(client)
    clock.advance(899)
    assert completed_text(retry(client, ELICIT_TOOL, {}, state, {"user_name": accept(name="Alice")})) == "Hello, Alice!"


def test_a_state_issued_to_another_principal_is_an_invalid_params_error(client: Client) -> None:
    state = _first_state(client)
    response = retry(client, ELICIT_TOOL, {}, state, {"user_name": accept(name="Alice")}, principal=BOB)
    assert_invalid_state(response)


def test_a_state_replayed_on_another_tool_is_an_invalid_params_error(client: Client) -> None:
    state = _first_state(client)
    other = "test_input_required_result_tampered_state"
    assert_invalid_state(retry(client, other, {}, state, {"user_name": accept(name="Alice")}))


def test_a_state_replayed_with_other_arguments_is_an_invalid_params_error(client: Client) -> None:
    state = _first_state(client, "archive_project", {"project": "apollo"})
    response = retry(client, "archive_project", {"project": "zeus"}, state, {"confirm": accept(confirm=True)})
    assert_invalid_state(response)


def test_a_tool_state_replayed_on_a_prompt_is_an_invalid_params_error(client: Client) -> None:
    state = _first_state(client)
    params = {"name": "test_input_required_result_prompt", "requestState": state}
    assert_invalid_state(client.request("prompts/get", params, capabilities=ELICIT))


def test_a_state_sent_to_a_tool_that_never_asks_is_still_verified(client: Client) -> None:
    assert_invalid_state(retry(client, "count_words", {"text": "a"}, "not-a-state", {}))


def test_too_many_input_responses_are_an_invalid_params_error(client: Client) -> None:
    responses = {f"k{i}": accept(name="x") for i in range(MAX_INPUT_RESPONSES + 1)}
    assert error_of(retry(client, ELICIT_TOOL, {}, None, responses))["code"] == wire.INVALID_PARAMS


# ---- only ask for what the request declared -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("declared", "keys", "method"),
    [
        ({"elicitation": {}}, {"user_name"}, wire.INPUT_METHOD_ELICIT),
        ({"sampling": {}}, {"capital_question"}, wire.INPUT_METHOD_SAMPLING),
        ({"roots": {}}, {"client_roots"}, wire.INPUT_METHOD_ROOTS),
    ],
)
def test_input_requests_ask_only_for_declared_capabilities(
    client: Client, declared: dict[str, Any], keys: set[str], method: str
) -> None:
    result = input_required(client.call_tool("test_input_required_result_capabilities", {}, capabilities=declared))
    assert set(result["inputRequests"]) == keys
    assert {r["method"] for r in result["inputRequests"].values()} == {method}


@pytest.mark.parametrize(
    ("tool", "arguments", "declared", "needed"),
    [
        ("archive_project", {"project": "apollo"}, {}, "elicitation"),
        ("archive_project", {"project": "apollo"}, {"sampling": {}, "roots": {}}, "elicitation"),
        (ELICIT_TOOL, {}, {"sampling": {}}, "elicitation"),
        ("test_input_required_result_sampling", {}, {"elicitation": {}}, "sampling"),
        ("test_input_required_result_list_roots", {}, {"elicitation": {}, "sampling": {}}, "roots"),
        ("test_input_required_result_multiple_inputs", {}, {"elicitation": {}, "roots": {}}, "sampling"),
    ],
)
def test_a_needed_capability_that_was_not_declared_is_a_missing_capability_error(
    client: Client, tool: str, arguments: dict[str, Any], declared: dict[str, Any], needed: str
) -> None:
    response = client.call_tool(tool, arguments, capabilities=declared, request_id="cap")
    assert response.status == 400
    error = error_of(response)
    assert response.json()["id"] == "cap"
    assert error["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert error["data"] == {"requiredCapabilities": {needed: {}}}


def test_capabilities_are_read_per_request_not_remembered(client: Client) -> None:
    state = _first_state(client, "archive_project", {"project": "apollo"})
    response = retry(client, "archive_project", {"project": "apollo"}, state, {"confirm": accept(confirm=True)}, {})
    assert response.status == 400
    assert error_of(response)["code"] == wire.MISSING_REQUIRED_CLIENT_CAPABILITY


def test_list_methods_never_answer_input_required(client: Client) -> None:
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "server/discover"):
        result = result_of(client.request(method, {}, capabilities=EVERYTHING))
        assert result["resultType"] == wire.RESULT_COMPLETE


# ---- a requestState too large to carry (issue 15, defect 1) -------------------------------------------------------
def test_answers_too_large_to_seal_are_refused_when_the_state_is_made_not_a_round_later(client: Client) -> None:
    from mcp_runtime.limits import MAX_REQUEST_STATE_CHARS

    tool = "test_input_required_result_multi_round"
    first = input_required(client.call_tool(tool, {}, capabilities=ELICIT))
    huge = accept(name="x" * (MAX_REQUEST_STATE_CHARS * 3 // 4))  # fits the body, not a requestState once encoded

    second = retry(client, tool, {}, first["requestState"], {"step1": huge}, capabilities=ELICIT)

    message = second.json()
    assert message["error"] == {
        "code": wire.INVALID_PARAMS,
        "message": f"Invalid params: the answers and state of this request do not fit in a requestState "
        f"(at most {MAX_REQUEST_STATE_CHARS} characters)",
    }


def test_every_request_state_a_server_issues_is_one_it_accepts_back(client: Client) -> None:
    from mcp_runtime.limits import MAX_REQUEST_STATE_CHARS

    tool = "test_input_required_result_multi_round"
    first = input_required(client.call_tool(tool, {}, capabilities=ELICIT))
    largest_accepted = accept(name="x" * (MAX_REQUEST_STATE_CHARS // 2 - 400))
    second = input_required(
        retry(client, tool, {}, first["requestState"], {"step1": largest_accepted}, capabilities=ELICIT)
    )
    assert len(second["requestState"]) <= MAX_REQUEST_STATE_CHARS
    third = retry(client, tool, {}, second["requestState"], {"step2": accept(color="blue")}, capabilities=ELICIT)
    assert completed_text(third).endswith("likes blue.")
