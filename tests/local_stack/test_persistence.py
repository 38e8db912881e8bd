"""`make run` keeps tasks and handles across a restart (LOCAL_STATE_DIR); without it, each start is clean."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripts.secret import put_secret

from mcp_runtime.tasks.models import EXECUTION_LOST_ERROR
from tests.local_stack.conftest import StackClient, descendants, still_running
from tests.support import RunningStack, local_stack_process

pytestmark = pytest.mark.e2e
SKU = "coffee"


def test_a_restarted_stack_still_has_the_tasks_handles_bridge_keys_secrets_and_objects_of_the_last_run(
    tmp_path: Path,
) -> None:
    """What the last run stored is served again: its tasks and handles, the OAuth bridge's items (its signing
    keys are binary), a secret made as `make secret` makes it, an object. A task whose execution did not
    survive (it was awaiting input when the stack stopped) is settled failed as a lost execution. The stop
    is a SIGTERM while the worker runs a task: no interpreter of the stack outlives it."""
    env = {"LOCAL_STATE_DIR": str(tmp_path / "state")}
    with local_stack_process(fixtures="conformance", extra_env=env) as first:
        client = StackClient(first)
        task_id = client.start("slow_compute", {"seconds": 0.1, "label": "kept"})
        finished = client.settled(task_id)
        opened = client.result("tools/call", {"name": "cart_open", "arguments": {}})
        cart = opened["content"][0]["text"].split()[2].rstrip(".")
        assert cart.startswith("cart_")
        parked_id = client.start("confirm_delete", {"filename": "kept.txt"})
        client.wait_for(parked_id, lambda task: task["status"] == "input_required")
        use_the_bridge(first)
        kept_items = bridge_items(first)
        assert any("B" in value for item in kept_items for value in item.values()), kept_items
        print(put_secret(first.aws_client("secretsmanager"), "acme/weather-api-key", "kept-across-restarts"))
        bucket = first.physical_id("Payloads", "AWS::S3::Bucket")
        first.aws_client("s3").put_object(Bucket=bucket, Key="kept/one.bin", Body=b"\x00\xff", ContentType="x/y")
        busy_id = client.start("slow_compute", {"seconds": 120, "label": "busy at the stop"})
        client.wait_for(busy_id, lambda task: task["status"] == "working" and "statusMessage" in task)
        interpreters = descendants(first.process.pid)
    assert first.printed("state: 0 items restored")
    assert still_running(interpreters) == {}  # the busy worker's too (started in sessions of their own)
    snapshot = tmp_path / "state"
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o700
    saved = [path for path in snapshot.rglob("*") if path.is_file() and path.name != ".lock"]
    assert saved and {oct(stat.S_IMODE(path.stat().st_mode)) for path in saved} == {"0o600"}

    with local_stack_process(fixtures="conformance", extra_env=env) as second:
        client = StackClient(second)
        # pollIntervalMs grows with the task's age (a tenth of it, past 10 s): a slow restart changes it.
        assert without_poll_interval(client.task(task_id)) == without_poll_interval(finished)
        added = client.result(
            "tools/call", {"name": "cart_add", "arguments": {"cart": cart, "sku": SKU, "quantity": 2}}
        )
        assert added.get("isError") is not True, added
        settled = client.settled(parked_id)
        assert (settled["status"], settled["error"]) == ("failed", EXECUTION_LOST_ERROR)
        assert bridge_items(second) == kept_items
        secret = second.aws_client("secretsmanager").get_secret_value(SecretId="acme/weather-api-key")
        assert secret["SecretString"] == "kept-across-restarts"
        kept = second.aws_client("s3").get_object(
            Bucket=second.physical_id("Payloads", "AWS::S3::Bucket"), Key="kept/one.bin"
        )
        assert (kept["Body"].read(), kept["ContentType"]) == (b"\x00\xff", "x/y")
        busy = client.settled(busy_id)
        assert busy["status"] == "failed", busy
    assert second.printed("items restored from")
    assert not second.printed("state: 0 items restored")
    assert second.printed(f"state: the execution of task {parked_id} did not survive the restart: reported ABORTED")


def use_the_bridge(running: RunningStack) -> None:
    """Register a client with the OAuth bridge and open its consent page (signed with the bridge's keys,
    made on first use)."""
    base = running.url.removesuffix("/mcp")
    callback = "http://127.0.0.1:53682/callback"
    document = {"redirect_uris": [callback], "client_name": "kept", "token_endpoint_auth_method": "none"}
    registered = httpx.post(f"{base}/oauth2/register", json=document, timeout=60)
    assert registered.status_code == 201, registered.text
    query = {
        "response_type": "code",
        "client_id": registered.json()["client_id"],
        "redirect_uri": callback,
        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        "code_challenge_method": "S256",
        "state": "st-1",
        "resource": running.url,
    }
    consent = httpx.get(f"{base}/oauth2/authorize", params=query, timeout=60)
    assert consent.status_code == 200, consent.text


def bridge_items(running: RunningStack) -> list[dict[str, Any]]:
    table = running.physical_id("OAuthBridgeRegistrations", "AWS::DynamoDB::Table")
    items: list[dict[str, Any]] = running.aws_client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    return sorted(items, key=lambda item: json.dumps(item, default=repr, sort_keys=True))


def without_poll_interval(task: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.items() if key != "pollIntervalMs"}


def test_without_a_state_directory_a_restarted_stack_starts_empty() -> None:
    with local_stack_process(fixtures="conformance") as first:
        task_id = StackClient(first).start("slow_compute", {"seconds": 0, "label": "gone"})
    with local_stack_process(fixtures="conformance") as second:
        gone = StackClient(second).call("tasks/get", {"taskId": task_id})
    assert gone["error"]["message"] == "Failed to retrieve task: Task not found"
