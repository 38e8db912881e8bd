"""Settings are read once from the environment and refuse values the runtime cannot honour."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mcp_runtime.limits import MAX_TASK_TTL_MS
from mcp_runtime.settings import Settings


@pytest.mark.parametrize("value", ["0", "-1", "-86400000", str(MAX_TASK_TTL_MS + 1), str(2**53), "soon"])
def test_a_task_ttl_that_is_not_positive_or_is_past_step_functions_one_year_is_refused(value: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Settings.from_environ({"TASK_DEFAULT_TTL_MS": value})
    assert refused.value.errors()[0]["loc"] == ("TASK_DEFAULT_TTL_MS",)


@pytest.mark.parametrize("value", ["null", "NULL", "none", ""])
def test_a_task_ttl_of_null_means_unlimited_and_can_be_set_from_the_environment(value: str) -> None:
    assert Settings.from_environ({"TASK_DEFAULT_TTL_MS": value}).task_default_ttl_ms is None


@pytest.mark.parametrize("value", ["1", "86400000", str(MAX_TASK_TTL_MS)])
def test_a_task_ttl_within_one_year_is_kept(value: str) -> None:
    assert Settings.from_environ({"TASK_DEFAULT_TTL_MS": value}).task_default_ttl_ms == int(value)


def test_the_default_task_ttl_is_one_day() -> None:
    assert Settings.from_environ({}).task_default_ttl_ms == 86_400_000
