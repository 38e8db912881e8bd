"""What the payload bucket keeps: a task without a TTL keeps its payloads, a task with one loses them after it.

moto stores the bucket's lifecycle (provisioned from the synthesized template) but never runs it, so
`lifecycle_passes` deletes what the rules select once their windows pass, as S3 would, and the
task is then read as a client would read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fixtures import lifecycle
from pydantic import BaseModel

from mcp_runtime import Callback, ToolContext, tool, wire
from mcp_runtime._aws import MAX_ATTEMPTS
from mcp_runtime.errors import InternalError
from mcp_runtime.limits import MAX_INLINE_RECORD_BYTES, MAX_INLINE_RESULT_BYTES, MAX_SETTLE_RESULT_BYTES
from mcp_runtime.tasks.callbacks import CallbackService
from mcp_runtime.tasks.models import COMPLETED, FAILED, INPUT_REQUIRED
from mcp_runtime.tasks.service import TaskService
from mcp_runtime.tools import SPEC_ATTRIBUTE
from tests.integration.task_harness import TaskEnvironment, request_context, wait_until
from tests.integration.test_durable import FailingPuts, failing_puts, patient_worker, s3

__all__ = ["failing_puts", "s3"]  # fixtures of test_durable, used here too

ONE_HOUR_MS = 3_600_000


class Empty(BaseModel):
    pass


class Go(BaseModel):
    go: bool


@tool(description="A step too large for the item, then a question, then the step's size.", task=True)
def large_step_then_question(args: Empty, ctx: ToolContext) -> str:
    value = ctx.step("large", lambda: "x" * (MAX_INLINE_RECORD_BYTES + 1024))
    ctx.elicit("go", "Go on?", Go)
    return f"the step held {len(value)} characters"


class Inbox(BaseModel):
    inbox: str


@tool(description="Waits for a callback, then asks a question, then tells the callback's size.", task=True)
def callback_then_question(args: Inbox, ctx: ToolContext) -> str:
    def submit(callback: Callback) -> None:
        Path(args.inbox).write_text(json.dumps({"token": callback.token}), encoding="utf-8")

    answer = ctx.wait_for_callback("build", submit)
    ctx.elicit("go", "Go on?", Go)
    return f"the callback sent {len(answer['log'])} characters"


@pytest.fixture
def env(task_env: TaskEnvironment) -> TaskEnvironment:
    task_env.tools.include(lifecycle)
    task_env.tools.add(getattr(large_step_then_question, SPEC_ATTRIBUTE))
    task_env.tools.add(getattr(callback_then_question, SPEC_ATTRIBUTE))
    return task_env


def start(service: TaskService, env: TaskEnvironment, name: str, arguments: dict[str, Any]) -> str:
    spec = env.tools.get(name)
    assert spec is not None
    task_id: str = service.create(spec, arguments, request_context(), None)["taskId"]
    return task_id


def status_of(service: TaskService, task_id: str, statuses: set[str]) -> dict[str, Any]:
    task: dict[str, Any] = wait_until(
        lambda: service.get(task_id, request_context()), lambda t: t["status"] in statuses
    )
    assert task["status"] in statuses, task
    return task


def lifecycle_passes(env: TaskEnvironment) -> list[str]:
    """Delete every object an enabled expiration rule of the bucket selects (what S3 does once the
    rule's days have passed); the deleted keys."""
    s3 = env.aws.client("s3")
    bucket = env.resources.bucket_name
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    prefixes = [rule["Filter"]["Prefix"] for rule in rules if rule["Status"] == "Enabled" and "Expiration" in rule]
    keys = [item["Key"] for item in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    expired = [key for key in keys if any(key.startswith(prefix) for prefix in prefixes)]
    for key in expired:
        s3.delete_object(Bucket=bucket, Key=key)
    return expired


def test_a_completed_task_without_a_ttl_still_answers_its_large_result_after_the_lifecycle_window(
    env: TaskEnvironment,
) -> None:
    service = env.service(ttl_ms=None)
    result_kb = MAX_INLINE_RESULT_BYTES // 1024 + 8
    task_id = start(service, env, "counted_job", {"ledger": "/dev/null", "result_kb": result_kb})
    assert status_of(service, task_id, {COMPLETED, FAILED})["status"] == COMPLETED

    assert lifecycle_passes(env) == []

    task = service.get(task_id, request_context())
    assert task["status"] == COMPLETED
    assert task["ttlMs"] is None
    assert task["result"]["content"][0]["text"] == f"ran {task_id}" + " " * (result_kb * 1024)


def test_a_completed_task_with_a_ttl_loses_its_large_result_to_the_lifecycle_after_its_ttl(
    env: TaskEnvironment,
) -> None:
    service = env.service(ttl_ms=ONE_HOUR_MS)
    result_kb = MAX_INLINE_RESULT_BYTES // 1024 + 8
    task_id = start(service, env, "counted_job", {"ledger": "/dev/null", "result_kb": result_kb})
    assert status_of(service, task_id, {COMPLETED, FAILED})["status"] == COMPLETED

    assert len(lifecycle_passes(env)) == 1

    with pytest.raises(InternalError) as refused:
        service.get(task_id, request_context())
    assert refused.value.to_error_object() == {"code": wire.INTERNAL_ERROR, "message": "Failed to retrieve task"}


def test_a_task_without_a_ttl_parked_past_the_lifecycle_window_still_replays_its_large_step(
    env: TaskEnvironment,
) -> None:
    service = env.service(ttl_ms=None)
    task_id = start(service, env, "large_step_then_question", {})
    asked = status_of(service, task_id, {INPUT_REQUIRED})

    assert lifecycle_passes(env) == []

    (key,) = asked["inputRequests"]
    service.update(task_id, {key: {"action": "accept", "content": {"go": True}}}, request_context())
    done = status_of(service, task_id, {COMPLETED, FAILED})
    assert done["status"] == COMPLETED
    assert done["result"]["content"][0]["text"] == f"the step held {MAX_INLINE_RECORD_BYTES + 1024} characters"


def test_a_task_without_a_ttl_parked_past_the_lifecycle_window_still_replays_its_large_callback_result(
    env: TaskEnvironment, tmp_path: Path
) -> None:
    service = env.service(ttl_ms=None)
    inbox = tmp_path / "inbox.json"
    task_id = start(service, env, "callback_then_question", {"inbox": str(inbox)})
    wait_until(lambda: inbox.exists() and inbox.read_text(), bool)
    token = json.loads(inbox.read_text())["token"]
    log = "x" * (MAX_INLINE_RECORD_BYTES + 1024)
    completed = CallbackService(env.store(), env.payloads()).complete(
        json.dumps({"token": token, "result": {"log": log}}).encode()
    )
    assert (completed.status, completed.body) == (200, {"completed": True})
    asked = status_of(service, task_id, {INPUT_REQUIRED})

    assert lifecycle_passes(env) == []

    (key,) = asked["inputRequests"]
    service.update(task_id, {key: {"action": "accept", "content": {"go": True}}}, request_context())
    done = status_of(service, task_id, {COMPLETED, FAILED})
    assert done["status"] == COMPLETED
    assert done["result"]["content"][0]["text"] == f"the callback sent {len(log)} characters"


@pytest.mark.parametrize(("ttl_ms", "expired"), [(None, 0), (ONE_HOUR_MS, 1)])
def test_a_large_result_stored_by_the_settle_step_keeps_or_loses_its_object_as_its_task_has_a_ttl(
    env: TaskEnvironment,
    s3: Any,
    failing_puts: Callable[[int | None], FailingPuts],
    ttl_ms: int | None,
    expired: int,
) -> None:
    patient_worker(env, s3, [])
    failing_puts(MAX_ATTEMPTS)  # the run's put fails every attempt: the result goes to Settle, which stores it
    service = env.service(ttl_ms=ttl_ms)
    result_kb = MAX_INLINE_RESULT_BYTES // 1024 + 8
    assert result_kb * 1024 < MAX_SETTLE_RESULT_BYTES
    task_id = start(service, env, "counted_job", {"ledger": "/dev/null", "result_kb": result_kb})
    assert status_of(service, task_id, {COMPLETED, FAILED})["status"] == COMPLETED

    assert len(lifecycle_passes(env)) == expired
