"""The support_desk example (functions/tools/support_desk.py, written for FastMCP), in-process with the
test kit."""

from __future__ import annotations

from testkit import ToolClient


def test_it_finds_a_customer_by_email() -> None:
    result = ToolClient().call("find_customer", {"email": "ada.lovelace@example.com"})
    assert result["structuredContent"] == {
        "email": "ada.lovelace@example.com",
        "name": "Ada Lovelace",
        "open_tickets": 2,
    }


def test_closing_a_ticket_asks_first() -> None:
    text = ToolClient().call_text(
        "close_ticket", {"ticket_id": 103}, answers={"elicit-1": {"action": "accept", "content": {"value": True}}}
    )
    assert text == "Closed ticket #103."
