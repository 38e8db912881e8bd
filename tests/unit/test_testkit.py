"""The test kit's in-process client (`testkit.ToolClient`), on the platform's pattern fixtures."""

from __future__ import annotations

from typing import Any

import pytest
from testkit import ToolCallFailed, ToolClient

PATTERNS = "fixtures.patterns"
CONFIRM = {"action": "accept", "content": {"confirm": True}}


def test_it_lists_the_named_packages_tools_and_no_others() -> None:
    names = [tool["name"] for tool in ToolClient(PATTERNS).list_tools()]
    assert names == ["archive_project", "count_words", "deploy_release"]


def test_a_plain_call_returns_the_complete_result() -> None:
    result = ToolClient(PATTERNS).call("count_words", {"text": "one two"})
    assert (result["resultType"], result["structuredContent"]) == ("complete", {"words": 2, "characters": 7})


def test_it_answers_each_question_by_its_key_until_the_tool_completes() -> None:
    questions: list[str] = []

    def reason(question: dict[str, Any]) -> dict[str, Any]:
        questions.append(question["params"]["message"])
        return {"action": "accept", "content": {"reason": "done"}}

    text = ToolClient(PATTERNS).call_text(
        "archive_project", {"project": "apollo"}, answers={"confirm": CONFIRM, "reason": reason}
    )
    assert text == "Archived project 'apollo' (reason: done)."
    assert questions == ["Why is 'apollo' being archived?"]


def test_a_question_without_an_answer_fails_the_call_naming_it() -> None:
    with pytest.raises(ToolCallFailed, match=r"^archive_project asked \['reason'\] and the test gave no answer"):
        ToolClient(PATTERNS).call("archive_project", {"project": "apollo"}, answers={"confirm": CONFIRM})


def test_a_json_rpc_error_fails_the_call_with_its_code() -> None:
    with pytest.raises(ToolCallFailed, match="-32602"):
        ToolClient(PATTERNS).call("no_such_tool")
