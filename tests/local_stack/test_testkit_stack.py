"""The test kit's stack client (`testkit.StackClient.run_task`): a tool as a durable task on the real state
machine, its question answered, on the platform's pattern fixtures."""

from __future__ import annotations

import pytest
from testkit import RunningStack, StackClient

RELEASE = {"service": "billing", "version": "2.0.0", "seconds_per_stage": 0}


@pytest.fixture(scope="module")
def stack(template_stack: RunningStack) -> StackClient:
    return StackClient(template_stack, user="testkit")


def test_run_task_answers_the_approval_and_returns_the_completed_task(stack: StackClient) -> None:
    approve = {"action": "accept", "content": {"approve": True}}
    task = stack.run_task("deploy_release", RELEASE, answers={"promote": approve})
    assert (task["status"], task["result"]["content"]) == (
        "completed",
        [{"type": "text", "text": "billing 2.0.0 is live in production."}],
    )


def test_run_task_refuses_a_question_the_test_did_not_answer(stack: StackClient) -> None:
    with pytest.raises(AssertionError, match=r"^deploy_release asked \['promote'\] and the test gave no answer"):
        stack.run_task("deploy_release", RELEASE, answers={})
