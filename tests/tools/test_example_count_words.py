"""The count_words example (functions/tools/count_words.py), in-process with the test kit, and its
sample event (events/examples/count-words.json)."""

from __future__ import annotations

import json
from pathlib import Path

from testkit import ToolClient

EVENT = Path(__file__).resolve().parents[2] / "events" / "examples" / "count-words.json"


def test_it_counts_words_and_characters() -> None:
    result = ToolClient().call("count_words", {"text": "the quick brown fox"})
    assert result["structuredContent"] == {"words": 4, "characters": 19}


def test_its_sample_event_calls_it_with_arguments_it_accepts() -> None:
    params = json.loads(json.loads(EVENT.read_text(encoding="utf-8"))["body"])["params"]
    result = ToolClient().call(params["name"], params["arguments"])
    assert (params["name"], result["structuredContent"]) == ("count_words", {"words": 4, "characters": 19})
