"""The deploy_release example (functions/tools/deploy_release.py): a team's tests of a task tool, written
with the test kit (docs/testing.md, "Testing your tools")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit import StackClient, ToolClient, local_stack_process

APPROVE = {"action": "accept", "content": {"approve": True}}
RELEASE = {"service": "billing", "version": "1.4.2", "seconds_per_stage": 0}


def test_an_approved_release_goes_live_in_production() -> None:
    text = ToolClient().call_text("deploy_release", RELEASE, answers={"elicit-1": APPROVE})
    assert text == "billing 1.4.2 is live in production."


def test_the_approval_question_names_the_release_and_a_decline_stays_on_staging() -> None:
    asked: list[str] = []

    def decline(question: dict[str, object]) -> dict[str, object]:
        params = question["params"]
        assert isinstance(params, dict)
        asked.append(params["message"])
        return {"action": "decline"}

    text = ToolClient().call_text("deploy_release", RELEASE, answers={"elicit-1": decline})
    assert asked == ["billing 1.4.2 passed staging. Promote to production?"]
    assert text == "billing 1.4.2 stays on staging; production was not changed."


@pytest.fixture(scope="module")
def stack() -> Iterator[StackClient]:
    with local_stack_process() as running:  # the project's tools, as `make run` serves them
        yield StackClient(running, user="alice")


def test_as_a_task_on_the_state_machine_it_waits_for_approval_then_completes(stack: StackClient) -> None:
    task = stack.run_task("deploy_release", RELEASE, answers={"elicit-1": APPROVE})
    assert (task["status"], task["result"]["content"]) == (
        "completed",
        [{"type": "text", "text": "billing 1.4.2 is live in production."}],
    )
