"""The worker's progress reports, without AWS: what is written to `statusMessage`, and when.

A report that does not increase the progress recorded with the task is never written; while a run
replays, and while the throttle holds, the latest report waits, and it is written when the first new
durable operation begins or when the worker flushes before the invocation ends."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_runtime.tasks.durable import ContinueLater, DurableRun
from mcp_runtime.tasks.worker import ProgressReporter
from tests.unit.conftest import FakeClock


class RecordingStore:
    """The two calls a reporter and a replaying run make of the store."""

    def __init__(self) -> None:
        self.written: list[tuple[str, float | None]] = []
        self.totals: list[float | None] = []

    def set_status_message(
        self, task_id: str, message: str, progress: float | None = None, total: float | None = None
    ) -> None:
        self.written.append((message, progress))
        self.totals.append(total)

    def begin_run(self, task_id: str, run_id: str) -> None:
        pass

    def keep_working(self, task_id: str) -> None:
        pass

    def mark_step(self, task_id: str, key: str, mark: dict[str, Any], now: float, **_: Any) -> dict[str, Any]:
        return mark

    def record_operation(
        self,
        task_id: str,
        key: str,
        record: dict[str, Any],
        scratch: Any,
        **_: Any,
    ) -> dict[str, Any]:
        return record

    def unmark_step(self, task_id: str, key: str, run_id: str, *, slot: int | None = None) -> None:
        pass


def durable(store: RecordingStore, records: dict[str, dict[str, Any]], left: float | None = None) -> DurableRun:
    return DurableRun(
        "t1",
        records,
        store,
        None,
        payloads_expire=True,
        scratch=dict,
        callback_url="",
        time_left=lambda: left,  # type: ignore[arg-type]
    )


def test_a_report_is_written_with_its_total_as_the_tool_gave_it() -> None:
    store = RecordingStore()
    report = ProgressReporter(store, "t1", 0.0, FakeClock())  # type: ignore[arg-type]
    report(0, 3, "batch 1 of 3")
    report(1, None, "one more")
    assert (store.written, store.totals) == ([("batch 1 of 3", 0.0), ("one more", 1.0)], [3.0, None])


def test_reports_at_or_below_the_recorded_progress_are_never_written() -> None:
    store = RecordingStore()
    report = ProgressReporter(store, "t1", 0.0, FakeClock(), recorded=2.0)  # type: ignore[arg-type]
    report(1, 4, "shard 1/4")
    report(2, 4, "shard 2/4")
    report(3, 4, "shard 3/4")
    report(2.5, 4, "late")
    report(float("nan"), None, None)
    assert store.written == [("shard 3/4", 3.0)]


def test_a_throttled_report_waits_and_flush_writes_the_latest_once() -> None:
    store, clock = RecordingStore(), FakeClock()
    report = ProgressReporter(store, "t1", 1.0, clock)  # type: ignore[arg-type]
    report(1, None, "one")
    report(2, None, "two")
    report(3, None, None)
    report.flush()
    report.flush()
    clock.advance(1.0)
    report(4, 4, None)
    assert store.written == [("one", 1.0), ("3", 3.0), ("4/4", 4.0)]


def test_while_a_run_replays_nothing_is_written_and_the_first_new_operation_writes_the_latest() -> None:
    store = RecordingStore()
    run = durable(store, {"step:a": {"v": 1, "ms": 5}, "step:b": {"v": 2, "ms": 5}})
    report = ProgressReporter(store, "t1", 60.0, FakeClock(), durable=run, recorded=1.0)  # type: ignore[arg-type]
    assert run.step("a", lambda: pytest.fail("recorded: never runs")) == 1
    report(1, 3, "1 of 3")  # replayed, and not above what is recorded
    assert run.step("b", lambda: pytest.fail("recorded: never runs")) == 2
    report(2, 3, "2 of 3")  # replayed, above what is recorded: it waits
    assert store.written == []
    assert run.step("c", lambda: store.written.copy()) == [["2 of 3", 2.0]]  # written before the new step ran
    assert run.replaying is False


def test_a_report_when_time_runs_short_ends_the_invocation_and_is_kept_for_the_flush() -> None:
    store = RecordingStore()
    run = durable(store, {}, left=0.5)
    report = ProgressReporter(store, "t1", 60.0, FakeClock(), durable=run)  # type: ignore[arg-type]
    run.step("a", lambda: 1)  # a step recorded in this invocation: from now on it may end early
    with pytest.raises(ContinueLater):
        report(1, 2, "half")
    report.flush()
    assert store.written == [("half", 1.0)]
