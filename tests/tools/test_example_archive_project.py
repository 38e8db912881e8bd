"""The archive_project example (functions/tools/archive_project.py): it asks before it acts (MRTR)."""

from __future__ import annotations

import pytest

from testkit import ToolCallFailed, ToolClient


def test_it_asks_for_confirmation_before_archiving() -> None:
    with pytest.raises(ToolCallFailed, match=r"archive_project asked \['elicit-1'\]"):
        ToolClient().call("archive_project", {"project": "apollo"}, answers={})


def test_confirmed_with_a_reason_it_archives() -> None:
    answers = {
        "elicit-1": {"action": "accept", "content": {"confirm": True}},
        "elicit-2": {"action": "accept", "content": {"reason": "shipped"}},
    }
    text = ToolClient().call_text("archive_project", {"project": "apollo"}, answers=answers)
    assert text == "Archived project 'apollo' (reason: shipped)."


def test_declined_it_changes_nothing() -> None:
    text = ToolClient().call_text("archive_project", {"project": "apollo"}, answers={"elicit-1": {"action": "decline"}})
    assert text == "Archive of 'apollo' cancelled; nothing changed."
