"""The client snippets of the README and docs/tasks.md, run as written against the local stack (URL swapped)."""

from __future__ import annotations

import ast
import re

import pytest
from testkit import RunningStack

from tests.support import REPO, run_python, template_readme

pytestmark = [pytest.mark.e2e, template_readme]
README_URL = "http://127.0.0.1:3000/mcp"


@pytest.fixture(scope="module")
def stack(developer_stack: RunningStack) -> RunningStack:
    return developer_stack  # as `make run` starts it


def client_snippets() -> list[str]:
    text = "".join((REPO / page).read_text() for page in ("README.md", "docs/tasks.md"))
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return [block for block in blocks if README_URL in block and "anyio.run(main)" in block]


def run_snippet(code: str, stack: RunningStack) -> list[str]:
    return run_python(code.replace(README_URL, stack.url))


def test_the_readme_has_the_two_client_snippets() -> None:
    assert len(client_snippets()) == 2


def test_the_mrtr_snippet_prints_the_tools_both_questions_and_the_archived_text(stack: RunningStack) -> None:
    lines = run_snippet(client_snippets()[0], stack)
    assert lines[1:] == [
        "Archive project 'apollo'? It becomes read-only.",
        "Why is 'apollo' being archived?",
        "Archived project 'apollo' (reason: done).",
    ]
    assert {"count_words", "archive_project", "deploy_release", "cart_open", "list_my_tasks"} <= set(
        ast.literal_eval(lines[0])
    )


def test_the_task_snippet_answers_the_approval_and_prints_the_release_text(stack: RunningStack) -> None:
    lines = run_snippet(client_snippets()[1], stack)
    assert lines == ["billing 1.4.2 passed staging. Promote to production?", "billing 1.4.2 is live in production."]
