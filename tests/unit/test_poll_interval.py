"""`pollIntervalMs` grows with the task's age, so polling a long task costs little beside its work."""

from __future__ import annotations

import dataclasses
import time

import pytest

from mcp_runtime.tasks.models import (
    MAX_POLL_INTERVAL_MS,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    create_task_result,
    get_task_result,
    iso_timestamp,
)

CREATED = 1_785_232_800.0  # 2026-07-28T10:00:00.000Z
CONFIGURED_MS = 1_000


def task(poll_interval_ms: int | None = CONFIGURED_MS, created_epoch: float = CREATED) -> TaskRecord:
    created = iso_timestamp(created_epoch)
    return TaskRecord(
        task_id="t-1",
        owner="jwt:alice|app",
        status=WORKING,
        created_at=created,
        last_updated_at=created,
        ttl_ms=86_400_000,
        version=1,
        tool_name="deploy_release",
        arguments={},
        client=ClientSnapshot("2026-07-28", {}, None),
        poll_interval_ms=poll_interval_ms,
    )


@pytest.mark.parametrize(
    ("age_seconds", "expected_ms"),
    [
        (0, CONFIGURED_MS),  # what CreateTaskResult says
        (9.9, CONFIGURED_MS),
        (25, 2_000),  # a tenth of the age, in whole seconds
        (125, 12_000),
        (599, 59_000),
        (600, MAX_POLL_INTERVAL_MS),
        (86_400 * 30, MAX_POLL_INTERVAL_MS),  # a month-long task: once a minute
        (-5, CONFIGURED_MS),  # a clock behind createdAt never goes below the configured interval
    ],
)
def test_the_poll_interval_is_a_tenth_of_the_task_age_between_the_configured_interval_and_a_minute(
    age_seconds: float, expected_ms: int
) -> None:
    assert task().to_task(now=CREATED + age_seconds)["pollIntervalMs"] == expected_ms


def test_a_configured_interval_above_a_minute_is_kept_at_every_age() -> None:
    assert task(120_000).to_task(now=CREATED + 86_400)["pollIntervalMs"] == 120_000
    assert task(120_000).to_task(now=CREATED)["pollIntervalMs"] == 120_000


def test_a_task_without_a_configured_interval_names_none() -> None:
    assert "pollIntervalMs" not in task(None).to_task(now=CREATED + 3_600)


def test_both_renderings_carry_the_interval_as_of_now() -> None:
    assert create_task_result(task(created_epoch=time.time()))["pollIntervalMs"] == CONFIGURED_MS
    # Created in 2026-07: polled today, it is older than ten minutes.
    assert get_task_result(task())["pollIntervalMs"] == MAX_POLL_INTERVAL_MS


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_a_settled_task_names_the_interval_of_its_settling_and_never_changes_after(status: str) -> None:
    settled = dataclasses.replace(task(), status=status, last_updated_at=iso_timestamp(CREATED + 25))
    assert settled.to_task(now=CREATED + 30)["pollIntervalMs"] == 2_000
    assert settled.to_task(now=CREATED + 86_400)["pollIntervalMs"] == 2_000
