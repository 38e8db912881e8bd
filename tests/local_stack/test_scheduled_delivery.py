"""The local bus as AWS runs it: the template's rate schedules read and delivered to their functions,
asynchronous invocations retried after Lambda's own waits (about 1 and 2 minutes, divided by the
stated LOCAL_TIME_SCALE), and status events lost on purpose (LOCAL_DROP_STATUS_EVENTS)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from local_stack.event_delivery import (
    ASYNC_RETRY_SECONDS,
    ExecutionEvents,
    ScheduledRules,
    StatusEventDrops,
)
from local_stack.provision import EventRule, RuleTarget, ScheduledRule, rate_seconds
from local_stack.stack import Options

from local_stack import event_delivery


class Recorder:
    """A function target: records each invocation's event, fails the first `failures` of them."""

    def __init__(self, failures: int = 0) -> None:
        self.events: list[tuple[str, Any]] = []
        self.failures = failures
        self.lock = threading.Lock()

    def __call__(self, function: str, payload: bytes) -> tuple[bytes, str | None]:
        with self.lock:
            self.events.append((function, json.loads(payload)))
            if self.failures > 0:
                self.failures -= 1
                return b'{"errorType": "RuntimeError"}', "Unhandled"
        return b"{}", None


def await_count(recorder: Recorder, count: int, timeout: float = 10.0) -> list[tuple[str, Any]]:
    deadline = time.monotonic() + timeout
    while len(recorder.events) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return list(recorder.events)


def status_event(name: str) -> dict[str, Any]:
    return {"detail-type": event_delivery.EXECUTION_STATUS_CHANGE, "source": "aws.states", "detail": {"name": name}}


RULE = EventRule("Ended", json.dumps({"source": ["aws.states"]}), (RuleTarget("Supervisor"),))


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [("rate(1 minute)", 60), ("rate(5 minutes)", 300), ("rate(1 hour)", 3600), ("rate(2 days)", 172_800)],
)
def test_rate_expressions_are_read_as_their_period(expression: str, seconds: int) -> None:
    assert rate_seconds(expression) == seconds


def test_a_cron_expression_is_not_a_rate() -> None:
    assert rate_seconds("cron(0 12 * * ? *)") is None


def test_a_rate_schedule_sends_eventbridges_scheduled_event_every_scaled_period() -> None:
    recorder = Recorder()
    events = ExecutionEvents([], recorder, {"Sweeper": 0})
    rule = ScheduledRule("SweepSchedule", 60, (RuleTarget("Sweeper", 0),), (None,))
    schedules = ScheduledRules([rule], events, time_scale=600)  # every 0.1 s
    events.start()
    schedules.start()
    try:
        seen = await_count(recorder, 3)
    finally:
        schedules.stop()
        events.stop()

    assert len(seen) >= 3
    function, event = seen[0]
    assert function == "Sweeper"
    assert (event["detail-type"], event["source"], event["detail"]) == ("Scheduled Event", "aws.events", {})
    assert event["resources"] == ["arn:aws:events:us-east-1:123456789012:rule/SweepSchedule"]


def test_a_schedule_with_a_constant_input_sends_that_input() -> None:
    recorder = Recorder()
    events = ExecutionEvents([], recorder, {})
    rule = ScheduledRule("Cleanup", 60, (RuleTarget("Bridge", 0),), ('{"action": "cleanup"}',))
    schedules = ScheduledRules([rule], events, time_scale=600)
    events.start()
    schedules.start()
    try:
        seen = await_count(recorder, 1)
    finally:
        schedules.stop()
        events.stop()
    assert seen[0] == ("Bridge", {"action": "cleanup"})


def test_a_failed_async_invocation_is_retried_after_lambdas_waits_divided_by_the_time_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    monkeypatch.setattr(event_delivery.time, "sleep", waits.append)
    recorder = Recorder(failures=5)
    events = ExecutionEvents([RULE], recorder, {"Supervisor": 2}, time_scale=60)
    events.start()
    try:
        events.publish(status_event("a"))
        assert events.wait_idle(10)
    finally:
        events.stop()

    assert ASYNC_RETRY_SECONDS == (60.0, 120.0)
    assert len(recorder.events) == 3  # the first attempt and Lambda's 2 retries
    assert waits == [1.0, 2.0]


@pytest.mark.parametrize(("setting", "dropped"), [("", 0), ("0", 0), ("all", 20), ("1", 20)])
def test_the_drop_knob_drops_none_or_every_status_event(setting: str, dropped: int) -> None:
    recorder = Recorder()
    events = ExecutionEvents([RULE], recorder, {}, drops=StatusEventDrops(setting))
    events.start()
    try:
        for number in range(20):
            events.publish(status_event(f"e{number}"))
        assert events.wait_idle(10)
    finally:
        events.stop()
    assert (events.dropped, len(recorder.events)) == (dropped, 20 - dropped)


def test_a_seeded_drop_probability_drops_the_same_events_each_run() -> None:
    runs = []
    for _ in range(2):
        drops = StatusEventDrops("0.5@7")
        runs.append([drops.drops() for _ in range(200)])
    assert runs[0] == runs[1]
    assert 60 < sum(runs[0]) < 140


def test_the_drop_knob_leaves_scheduled_events_alone() -> None:
    recorder = Recorder()
    events = ExecutionEvents([], recorder, {}, drops=StatusEventDrops("all"))
    events.start()
    try:
        events.send("Sweeper", b'{"detail-type": "Scheduled Event"}')
        assert events.wait_idle(10)
    finally:
        events.stop()
    assert recorder.events == [("Sweeper", {"detail-type": "Scheduled Event"})]


@pytest.mark.parametrize("setting", ["sometimes", "1.5", "0.5@x"])
def test_a_drop_setting_that_means_nothing_is_refused_with_its_name(setting: str) -> None:
    with pytest.raises(ValueError, match="LOCAL_DROP_STATUS_EVENTS"):
        StatusEventDrops(setting)


def test_the_stack_reads_its_delivery_knobs_once_from_its_environment() -> None:
    options = Options.from_environ({"LOCAL_TIME_SCALE": "60", "LOCAL_DROP_STATUS_EVENTS": "all"})
    assert (options.time_scale, options.drop_status_events) == (60.0, "all")
    assert (Options.from_environ({}).time_scale, Options.from_environ({}).drop_status_events) == (1.0, "")
    assert Options.from_environ({}).give_up_stream_batches == 0
    assert Options.from_environ({"LOCAL_GIVE_UP_STREAM_BATCHES": "2"}).give_up_stream_batches == 2
    with pytest.raises(ValueError, match="LOCAL_TIME_SCALE"):
        Options.from_environ({"LOCAL_TIME_SCALE": "0.5"})
