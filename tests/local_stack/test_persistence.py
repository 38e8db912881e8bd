"""`make run` keeps tasks and handles across a restart (LOCAL_STATE_DIR); without it, each start is clean."""

from __future__ import annotations

import html
import json
import re
import signal
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from scripts.secret import put_secret
from testkit import rpc, standard_headers

from mcp_runtime.tasks.models import EXECUTION_LOST_ERROR
from tests.e2e.cognito_login import CognitoLogin, cognito_login
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
    is a Ctrl-C (SIGINT) while the worker runs a task: no interpreter of the stack outlives it.

    A person signed in through the bridge before the stop (Cognito's managed login: the stand-in): the KMS
    keys (the one that signs access tokens, the one that seals the bridge's form keys) and the user pool's
    people are kept, so the access token minted before still verifies, the refresh token issued before
    still refreshes, and a consent form served before is still answered."""
    (tmp_path / "tls").mkdir()
    with cognito_login(tmp_path / "tls") as cognito:
        env = {"LOCAL_STATE_DIR": str(tmp_path / "state"), **cognito.environment()}
        browser = httpx.Client(verify=ssl.create_default_context(cafile=str(cognito.certificate)), timeout=60)
        with browser:
            run_twice_with_a_sign_in(tmp_path, env, cognito, browser)


def run_twice_with_a_sign_in(tmp_path: Path, env: dict[str, str], cognito: CognitoLogin, browser: httpx.Client) -> None:
    with local_stack_process(fixtures="conformance", extra_env=env) as first:
        (pool,) = first.state["userPools"].values()
        cognito.attach(first.aws_client("cognito-idp"), str(pool))
        signed_in = sign_in_through_the_bridge(first, browser)
        assert call_with(first, signed_in.tokens["access_token"]).status_code == 200
        # Another client's consent page, left open in the browser across the restart.
        other = register(first)
        open_form = other.consent_page(browser)
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
        first.process.send_signal(signal.SIGINT)  # Ctrl-C in `make run`'s terminal
        first.process.wait(timeout=60)
    assert first.printed("state: 0 items restored")
    assert still_running(interpreters) == {}  # the busy worker's too (started in sessions of their own)
    snapshot = tmp_path / "state"
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o700
    saved = [path for path in snapshot.rglob("*") if path.is_file() and path.name != ".lock"]
    assert saved and {oct(stat.S_IMODE(path.stat().st_mode)) for path in saved} == {"0o600"}

    # The first run's port again, as `make run`'s 3000: the bridge's issuer is its origin.
    again = {**env, "PORT": str(urlsplit(first.url).port)}
    with local_stack_process(fixtures="conformance", extra_env=again) as second:
        (pool,) = second.state["userPools"].values()
        cognito.attach(second.aws_client("cognito-idp"), str(pool), person=cognito.person)  # kept, not made again
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
        # The access token minted before the stop verifies (the same key, its public half read anew).
        kept_token = call_with(second, signed_in.tokens["access_token"])
        assert kept_token.status_code == 200, kept_token.headers.get("www-authenticate")
        # The refresh token issued before the stop refreshes (its person still in the pool), once.
        refreshed = signed_in.refresh(signed_in.tokens["refresh_token"])
        assert refreshed.status_code == 200, refreshed.text
        assert call_with(second, refreshed.json()["access_token"]).status_code == 200
        assert (signed_in.refresh(signed_in.tokens["refresh_token"]).json()["error"]) == "invalid_grant"
        # The consent form served before the stop is answered: its key, sealed in the table, opens.
        back = other.approve(browser, open_form)
        assert parse_qs(urlsplit(back).query)["state"] == ["after-restart"]
        secret = second.aws_client("secretsmanager").get_secret_value(SecretId="acme/weather-api-key")
        assert secret["SecretString"] == "kept-across-restarts"
        kept = second.aws_client("s3").get_object(
            Bucket=second.physical_id("Payloads", "AWS::S3::Bucket"), Key="kept/one.bin"
        )
        assert (kept["Body"].read(), kept["ContentType"]) == (b"\x00\xff", "x/y")
        busy = client.settled(busy_id)
        assert busy["status"] == "failed", busy
        # This run is stopped with SIGTERM (the test kit's stop) while the worker is busy again.
        busy_again = client.start("slow_compute", {"seconds": 120, "label": "busy at the SIGTERM"})
        client.wait_for(busy_again, lambda task: task["status"] == "working" and "statusMessage" in task)
        interpreters = descendants(second.process.pid)
    assert still_running(interpreters) == {}
    assert second.printed("items restored from")
    assert not second.printed("state: 0 items restored")
    assert second.printed(f"state: the execution of task {parked_id} did not survive the restart: reported ABORTED")


VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
CALLBACK = "http://127.0.0.1:53682/callback"


@dataclass
class SignedIn:
    base: str
    resource: str
    client_id: str
    tokens: dict[str, Any]

    def authorize_url(self, state: str) -> str:
        query = {
            "response_type": "code", "client_id": self.client_id, "redirect_uri": CALLBACK,
            "code_challenge": CHALLENGE, "code_challenge_method": "S256", "state": state, "resource": self.resource,
        }  # fmt: skip
        return f"{self.base}/oauth2/authorize?{urlencode(query)}"

    def consent_page(self, browser: httpx.Client, state: str = "after-restart") -> dict[str, str]:
        page = browser.get(self.authorize_url(state))
        assert "<title>Allow access?</title>" in page.text, page.text
        return {k: html.unescape(v) for k, v in re.findall(r'name="(request|token)" value="([^"]*)"', page.text)}

    def approve(self, browser: httpx.Client, form: dict[str, str]) -> str:
        """The person approves; Cognito (the stand-in) signs them in; where the browser is sent back to."""
        response = browser.post(f"{self.base}/oauth2/consent", data={**form, "decision": "approve"})
        for _ in range(5):
            assert response.status_code == 302, response.text
            location = str(response.headers["location"])
            if location.startswith(CALLBACK):
                return location
            response = browser.get(location)
        raise AssertionError("never sent back to the client")

    def refresh(self, refresh_token: str) -> httpx.Response:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": self.client_id}
        return httpx.post(f"{self.base}/oauth2/token", data=form, timeout=60)


def register(running: RunningStack) -> SignedIn:
    base = running.url.removesuffix("/mcp")
    document = {"redirect_uris": [CALLBACK], "client_name": "signed in", "token_endpoint_auth_method": "none"}
    registered = httpx.post(f"{base}/oauth2/register", json=document, timeout=60)
    assert registered.status_code == 201, registered.text
    return SignedIn(base, running.url, str(registered.json()["client_id"]), {})


def sign_in_through_the_bridge(running: RunningStack, browser: httpx.Client) -> SignedIn:
    signed_in = register(running)
    base = signed_in.base
    back = signed_in.approve(browser, signed_in.consent_page(browser, "before-restart"))
    exchange = {
        "grant_type": "authorization_code", "code": parse_qs(urlsplit(back).query)["code"][0],
        "code_verifier": VERIFIER, "redirect_uri": CALLBACK, "client_id": signed_in.client_id,
        "resource": running.url,
    }  # fmt: skip
    tokens = httpx.post(f"{base}/oauth2/token", data=exchange, timeout=60)
    assert tokens.status_code == 200, tokens.text
    signed_in.tokens = tokens.json()
    return signed_in


def call_with(running: RunningStack, access_token: str) -> httpx.Response:
    message = rpc("tools/list")
    headers = {**standard_headers(message), "authorization": f"Bearer {access_token}"}
    return httpx.post(running.url, content=json.dumps(message), headers=headers, timeout=60)


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
