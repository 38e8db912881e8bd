"""The README's "Adding a task tool" walkthrough, run exactly as written through the real workflow."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcp_runtime.settings import Settings
from mcp_runtime.tasks.models import COMPLETED, INPUT_REQUIRED, WORKING
from mcp_runtime.tasks.service import TaskService
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until
from tests.support import REPO

TERMINAL = {"completed", "failed", "cancelled"}


def walkthrough_code() -> str:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- walkthrough:start -->\n```python\n(.*?)```\n<!-- walkthrough:end -->", readme, re.DOTALL)
    assert block, "the README lost its walkthrough code block"
    return block.group(1)


def question_key() -> str:
    """The key the walkthrough's question is answered by: FastMCP's first question (`elicit-1`), or the key a
    walkthrough in the native form names (`ctx.elicit("big_export", ...)`, as a README of 1.0.0 has it)."""
    native = re.search(r'ctx\.elicit\(\s*"([^"]+)"', walkthrough_code())
    return native.group(1) if native else "elicit-1"


def walkthrough_module(tmp_path: Path) -> ModuleType:
    path = tmp_path / "export_dataset.py"
    path.write_text(walkthrough_code())
    spec = importlib.util.spec_from_file_location("export_dataset", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["export_dataset"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def service(task_env: TaskEnvironment, tmp_path: Path) -> TaskService:
    task_env.tools.include(walkthrough_module(tmp_path))
    return task_env.service()


def start(service: TaskService, env: TaskEnvironment, arguments: dict[str, Any]) -> str:
    spec = env.tools.get("export_dataset")
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


def test_a_small_export_runs_as_a_task_to_its_exact_text(service: TaskService, task_env: TaskEnvironment) -> None:
    task_id = start(service, task_env, {"dataset": "orders", "rows": 500})
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL)
    assert (done["status"], done["result"]["content"]) == (
        COMPLETED,
        [{"type": "text", "text": "Exported 500 rows of orders to orders.csv."}],
    )


def readme_promises_mid_run() -> str:
    """The statusMessage the README says `tasks/get` shows while the task runs."""
    text = (REPO / "README.md").read_text()
    promise = re.search(r"`tasks/get` shows `([^`]+)` as its\s+`statusMessage`", text)
    assert promise, "the README lost what tasks/get shows mid-run"
    return promise.group(1)


def test_tasks_get_shows_what_the_readme_promises_mid_run_with_the_deployed_progress_interval(
    service: TaskService, task_env: TaskEnvironment
) -> None:
    # As deployed: the worker writes statusMessage at most once per TASK_PROGRESS_INTERVAL_MS.
    task_env.progress_interval_seconds = Settings.model_fields["task_progress_interval_ms"].default / 1000
    promised = readme_promises_mid_run()
    task_id = start(service, task_env, {"dataset": "orders", "rows": 500})
    seen = wait_until(
        lambda: service.get(task_id, request_context()),
        lambda t: t.get("statusMessage") == promised or t["status"] in TERMINAL,
        timeout=30,
    )
    assert (seen["status"], seen.get("statusMessage")) == (WORKING, promised)
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL, timeout=30)
    assert done["status"] == COMPLETED


def test_a_big_export_asks_first_and_finishes_once_the_user_agrees(
    service: TaskService, task_env: TaskEnvironment
) -> None:
    task_id = start(service, task_env, {"dataset": "events", "rows": 2_000_000})
    waiting = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] != "working")
    service.update(task_id, {question_key(): {"action": "accept", "content": {"proceed": True}}}, request_context())
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL)

    assert waiting["status"] == INPUT_REQUIRED
    assert waiting["inputRequests"][question_key()]["params"]["message"] == "events has 2000000 rows. Export anyway?"
    assert (done["status"], done["result"]["content"]) == (
        COMPLETED,
        [{"type": "text", "text": "Exported 2000000 rows of events to events.csv."}],
    )


def test_a_declined_big_export_completes_as_a_tool_error(service: TaskService, task_env: TaskEnvironment) -> None:
    task_id = start(service, task_env, {"dataset": "events", "rows": 2_000_000})
    wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] != "working")
    service.update(task_id, {question_key(): {"action": "decline"}}, request_context())
    done = wait_until(lambda: service.get(task_id, request_context()), lambda t: t["status"] in TERMINAL)
    assert (done["status"], done["result"]["isError"], done["result"]["content"][0]["text"]) == (
        COMPLETED,
        True,
        "Export of events cancelled.",
    )
