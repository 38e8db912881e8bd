"""The state machine branches on the worker's outcomes (`mcp_runtime.wire.OUTCOME_*`): each one goes
where the workflow means it to, and the definition names no outcome the worker does not return."""

from __future__ import annotations

from typing import Any

import pytest
from infra.capabilities.workflow import ASL_PATH, load_definition
from infra.config import ThrottleRetry

from mcp_runtime import wire

pytestmark = pytest.mark.infra

# Where the run's outcome takes the execution from NextStep. `awaiting` is store_token's: the
# WaitForToken step discards it (ResultPath null), as Settle and MarkFailed discard theirs.
AFTER_RUN: dict[str, str] = {
    wire.OUTCOME_INPUT_REQUIRED: "WaitForToken",
    wire.OUTCOME_CALLBACK: "WaitForToken",
    wire.OUTCOME_WAIT: "Sleep",
    wire.OUTCOME_CONTINUE: "NextRound",
    wire.OUTCOME_SETTLE: "Settle",
    wire.OUTCOME_RENEW: "Renewed",
    wire.OUTCOME_CRASHED: "ExecutionFailed",
    wire.OUTCOME_COMPLETED: "Done",
    wire.OUTCOME_FAILED: "Done",
    wire.OUTCOME_GONE: "Done",
    wire.OUTCOME_NOT_WORKING: "Done",
    wire.OUTCOME_NOT_CURRENT: "Done",
    wire.OUTCOME_OVERTAKEN: "Done",
}


def _states() -> dict[str, Any]:
    states: dict[str, Any] = load_definition(ASL_PATH.read_text(encoding="utf-8"), ThrottleRetry())["States"]
    return states


def _next_state(choice: dict[str, Any], step: dict[str, Any]) -> str:
    """Step Functions' Choice over `$.step.*` string equality, the only kind of rule NextStep has."""
    for rule in choice["Choices"]:
        assert set(rule) == {"Variable", "StringEquals", "Next"}, rule
        assert rule["Variable"].startswith("$.step."), rule
        if step.get(rule["Variable"].removeprefix("$.step.")) == rule["StringEquals"]:
            return str(rule["Next"])
    return str(choice["Default"])


def test_every_outcome_is_named_once_and_the_run_returns_all_but_awaiting() -> None:
    assert len(set(wire.WORKER_OUTCOMES)) == len(wire.WORKER_OUTCOMES)
    assert set(AFTER_RUN) == set(wire.WORKER_OUTCOMES) - {wire.OUTCOME_AWAITING}


@pytest.mark.parametrize("outcome", sorted(AFTER_RUN))
def test_next_step_takes_each_outcome_of_the_run_where_the_workflow_means_it_to(outcome: str) -> None:
    states = _states()
    assert states["RunTool"]["Next"] == "NextStep"
    assert states["RunTool"]["ResultSelector"]["outcome.$"] == "$.Payload.outcome"
    assert _next_state(states["NextStep"], {"outcome": outcome}) == AFTER_RUN[outcome]


def test_the_definition_branches_only_on_outcomes_the_worker_returns() -> None:
    states = _states()
    choices = [name for name, state in states.items() if state["Type"] == "Choice"]
    assert choices == ["NextStep"]
    named = {rule["StringEquals"] for rule in states["NextStep"]["Choices"]}
    assert named <= set(wire.WORKER_OUTCOMES)
    # The other worker steps' answers are discarded: nothing branches on what they return.
    assert all(states[name]["ResultPath"] is None for name in ("WaitForToken", "Settle", "MarkFailed"))
