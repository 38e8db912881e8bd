"""docs/deploy.md's machine client ("Get a token and call the endpoint"), run as written against
`AUTH=oauth` (the local authorization server, oidc-provider, granting client credentials to a client
registered at its registration endpoint), and once more after its token expired."""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from testkit import RunningStack

from tests.support import REPO, local_stack_process, run_python, template_readme

pytestmark = [pytest.mark.e2e, template_readme]

ACCESS_TOKEN_SECONDS = 3
EXPECTED_LAST_LINE = "{'words': 3, 'characters': 22}"


def token_snippet() -> str:
    page = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = page[page.index("## Get a token and call the endpoint") :]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block, "docs/deploy.md lost its token snippet"
    return block.group(1)


@dataclass(frozen=True)
class MachineClient:
    stack: RunningStack
    client_id: str
    client_secret: str

    @property
    def env(self) -> dict[str, str]:
        issuer = str(self.stack.state["authorizationServer"])
        return {"ENDPOINT": self.stack.url, "CLIENT": self.client_id, "SECRET": self.client_secret, "ISSUER": issuer}


@pytest.fixture(scope="module")
def machine() -> Iterator[MachineClient]:
    env = {"AUTH": "oauth", "LOCAL_OAUTH_ACCESS_TOKEN_SECONDS": str(ACCESS_TOKEN_SECONDS)}
    with local_stack_process(extra_env=env) as stack:
        issuer = str(stack.state["authorizationServer"])
        registration = httpx.get(f"{issuer}/.well-known/openid-configuration").json()["registration_endpoint"]
        client = {
            "client_name": "readme machine client",
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_basic",
            "scope": "mcp/invoke",
        }
        registered = httpx.post(registration, json=client)
        assert registered.status_code == 201, registered.text
        yield MachineClient(stack, registered.json()["client_id"], registered.json()["client_secret"])


def test_the_snippet_uses_the_sdks_public_client_credentials_provider() -> None:
    imported = {
        node.module
        for node in ast.walk(ast.parse(token_snippet()))
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert "mcp.client.auth.extensions.client_credentials" in imported
    assert not [name for name in imported if any(part.startswith("_") for part in name.split("."))]


def test_the_snippet_as_written_lists_the_tools_and_counts_words(machine: MachineClient) -> None:
    tools, words = run_python(token_snippet(), machine.env)
    assert "count_words" in ast.literal_eval(tools)
    assert words == EXPECTED_LAST_LINE


def test_the_snippets_provider_fetches_a_new_token_once_its_token_expired(
    machine: MachineClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in machine.env.items():
        monkeypatch.setenv(name, value)
    code = token_snippet()
    assert code.endswith("anyio.run(main)\n")
    snippet: dict[str, Any] = {"__name__": "call_mcp"}
    exec(compile(code.removesuffix("anyio.run(main)\n"), "call_mcp.py", "exec"), snippet)  # its main, not run yet
    auth, storage = snippet["auth"], snippet["auth"].context.storage

    async def twice() -> tuple[str, str]:
        await snippet["main"]()
        first = storage.tokens.access_token
        deadline = time.monotonic() + ACCESS_TOKEN_SECONDS + 10
        while time.time() <= auth.context.token_expiry_time and time.monotonic() < deadline:
            await anyio.sleep(0.1)  # until the token the provider holds has expired
        await snippet["main"]()
        return first, storage.tokens.access_token

    first, second = anyio.run(twice)
    assert first != second
    assert capsys.readouterr().out.splitlines()[1::2] == [EXPECTED_LAST_LINE, EXPECTED_LAST_LINE]
