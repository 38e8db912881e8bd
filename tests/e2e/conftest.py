"""The template-driven local stack as a process, every answer of its front recorded, to validate the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from testkit import RunningStack

from tests.support import local_stack_process

# The user a request without a token is taken as (LOCAL_DEFAULT_USER): the clients here send none.
TEST_USER = "e2e"


@dataclass
class Exchange:
    method: str
    status: int
    content_type: str
    messages: list[dict[str, Any]]


def _messages(body: str, content_type: str) -> list[dict[str, Any]]:
    if content_type.startswith("text/event-stream"):
        return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]
    return [json.loads(body)] if body else []


@dataclass
class RecordingStack:
    running: RunningStack
    record: Path

    @property
    def url(self) -> str:
        return self.running.url

    def recorded(self) -> list[dict[str, Any]]:
        """Every request the front answered and its answer, in order (the stack's LOCAL_RECORD file)."""
        return [json.loads(line) for line in self.record.read_text(encoding="utf-8").splitlines()]

    @property
    def exchanges(self) -> list[Exchange]:
        """Every POST the front answered with JSON-RPC, in order."""
        found = []
        for exchange in self.recorded():
            content_type = exchange["headers"].get("content-type", "")
            if exchange["method"] != "POST" or not content_type.startswith(("application/json", "text/event-stream")):
                continue
            try:
                method = json.loads(exchange["requestBody"] or "{}").get("method", "?")
            except ValueError:
                method = "?"
            found.append(Exchange(method, exchange["status"], content_type, _messages(exchange["body"], content_type)))
        return found


@contextmanager
def recording_stack_process(
    folder: Path, extra_env: dict[str, str] | None = None, **options: Any
) -> Iterator[tuple[RunningStack, Path]]:
    """`local_stack_process` whose front records every exchange (LOCAL_RECORD) to a file in `folder`."""
    record = folder / "exchanges.jsonl"
    record.touch()
    with local_stack_process(extra_env={**(extra_env or {}), "LOCAL_RECORD": str(record)}, **options) as running:
        yield running, record


@pytest.fixture(scope="module")
def recording_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingStack]:
    folder = tmp_path_factory.mktemp("exchanges")
    with recording_stack_process(folder, fixtures="conformance", default_user=TEST_USER) as (running, record):
        yield RecordingStack(running, record)
