"""Sign-in as MCP clients do it, end to end, against `AUTH=oauth` (the template synthesized against the
local authorization server, oidc-provider, as any bring-your-own issuer; the API function validates
its tokens as deployed).

The real Python `mcp` client's OAuth support does everything from the 401: protected resource
metadata, authorization server metadata, dynamic registration, the sign-in of a development user
(scripted through the provider's HTML pages), the code exchange with PKCE and `resource`, the call,
and a refresh. A second user signed in through another client sees none of the first one's tasks
or handles.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from mcp_runtime import wire
from mcp_runtime.tasks.service import TASK_NOT_FOUND_MESSAGE
from tests.e2e.browser import CALLBACK, BrowserSignIn
from tests.e2e.conftest import RecordingStack, recording_stack_process
from tests.support import rpc, standard_headers

pytestmark = pytest.mark.e2e

ACCESS_TOKEN_SECONDS = 4
TASKS: dict[str, Any] = {"extensions": {wire.TASKS_EXTENSION: {}}, "elicitation": {}}


@dataclass
class MemoryStorage:
    """The client's token storage; keeps every token set it was given."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None
    token_history: list[OAuthToken] = field(default_factory=list)

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.token_history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class SignedInClient:
    person: BrowserSignIn
    storage: MemoryStorage
    provider: OAuthClientProvider

    @property
    def token(self) -> str:
        assert self.storage.tokens is not None
        return self.storage.tokens.access_token


def oauth_client(url: str, username: str) -> SignedInClient:
    person = BrowserSignIn(username, f"{username}-password")
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name=f"e2e client of {username}",
        redirect_uris=[CALLBACK],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    provider = OAuthClientProvider(
        url, metadata, storage, redirect_handler=person.open, callback_handler=person.callback
    )
    return SignedInClient(person, storage, provider)


async def call_tool(url: str, signed_in: SignedInClient, name: str, arguments: dict[str, Any]) -> Any:
    async with (
        httpx2.AsyncClient(auth=signed_in.provider, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=wire.PROTOCOL_VERSION, cache=None) as client,
    ):
        return await client.call_tool(name, arguments)


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


class OAuthStack(RecordingStack):
    @property
    def issuer(self) -> str:
        return str(self.running.state["authorizationServer"])

    def post(self, token: str | None, method: str, params: dict[str, Any]) -> httpx.Response:
        message = rpc(method, params, 7, TASKS)
        headers = standard_headers(message)
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        return httpx.post(self.url, content=json.dumps(message), headers=headers, timeout=30)


@pytest.fixture(scope="module")
def oauth_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthStack]:
    env = {"AUTH": "oauth", "LOCAL_OAUTH_ACCESS_TOKEN_SECONDS": str(ACCESS_TOKEN_SECONDS)}
    with recording_stack_process(tmp_path_factory.mktemp("sign-in"), env) as (running, record):
        yield OAuthStack(running, record)


def test_a_real_client_goes_from_the_401_to_a_tool_result_with_nothing_pasted_by_hand(oauth_stack: OAuthStack) -> None:
    alice = oauth_client(oauth_stack.url, "alice")
    result = anyio.run(call_tool, oauth_stack.url, alice, "count_words", {"text": "one two three"})
    assert result.structured_content == {"words": 3, "characters": 13}

    # Discovery started from the server's own challenge, then its protected resource metadata.
    first, metadata = oauth_stack.recorded()[:2]
    base = oauth_stack.url.removesuffix("/mcp")
    assert (first["method"], first["status"]) == ("POST", 401)
    assert first["headers"]["www-authenticate"] == (
        f'Bearer scope="mcp/invoke", resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
    )
    assert (metadata["method"], metadata["path"], metadata["status"]) == (
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
    )
    assert json.loads(metadata["body"])["authorization_servers"] == [oauth_stack.issuer]
    # Registered dynamically at the provider, signed in once as alice, got a token for this resource.
    assert alice.storage.client_info is not None and alice.storage.client_info.client_id
    assert alice.person.sign_ins == 1 and alice.person.pages == ["Sign in", "Consent"]
    claims = claims_of(alice.token)
    assert claims["iss"] == oauth_stack.issuer
    assert claims["aud"] == oauth_stack.url
    assert claims["sub"] == "alice"
    assert claims["client_id"] == alice.storage.client_info.client_id
    assert "mcp/invoke" in claims["scope"].split()
    # The call that succeeded carried that token and was answered 200.
    calls = [e for e in oauth_stack.recorded() if e["method"] == "POST" and e["status"] == 200]
    assert calls


def test_an_expired_access_token_is_refreshed_without_signing_in_again(oauth_stack: OAuthStack) -> None:
    alice = oauth_client(oauth_stack.url, "alice")

    async def two_calls_across_the_expiry() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(auth=alice.provider, timeout=60) as http,
            Client(
                streamable_http_client(oauth_stack.url, http_client=http), mode=wire.PROTOCOL_VERSION, cache=None
            ) as client,
        ):
            first = await client.call_tool("count_words", {"text": "before"})
            issued = alice.storage.token_history[-1]
            deadline = time.time() + ACCESS_TOKEN_SECONDS + 1
            while time.time() < deadline:  # the client refreshes once it holds the token for expired
                await anyio.sleep(0.2)
            second = await client.call_tool("count_words", {"text": "after the refresh"})
            assert alice.storage.tokens is not issued
            return first, second

    first, second = anyio.run(two_calls_across_the_expiry)
    assert first.structured_content == {"words": 1, "characters": 6}
    assert second.structured_content == {"words": 3, "characters": 17}
    assert alice.person.sign_ins == 1  # the refresh token did it; nobody was asked to sign in again
    assert len(alice.storage.token_history) == 2
    initial, refreshed = alice.storage.token_history
    assert refreshed.access_token != initial.access_token
    assert claims_of(refreshed.access_token)["aud"] == oauth_stack.url


def test_a_second_user_through_another_client_sees_none_of_the_first_users_tasks_or_handles(
    oauth_stack: OAuthStack,
) -> None:
    alice = oauth_client(oauth_stack.url, "alice")
    bob = oauth_client(oauth_stack.url, "bob")
    opened = anyio.run(call_tool, oauth_stack.url, alice, "cart_open", {})
    cart = opened.content[0].text.split()[2].rstrip(".")
    anyio.run(call_tool, oauth_stack.url, bob, "count_words", {"text": "bob signs in"})
    assert bob.storage.client_info is not None and alice.storage.client_info is not None
    assert bob.storage.client_info.client_id != alice.storage.client_info.client_id
    assert claims_of(bob.token)["sub"] == "bob"

    created = oauth_stack.post(
        alice.token, "tools/call", {"name": "deploy_release", "arguments": {"service": "shop", "version": "1.0"}}
    )
    assert created.status_code == 200, created.text
    task_id = created.json()["result"]["taskId"]
    assert oauth_stack.post(alice.token, "tasks/get", {"taskId": task_id}).json()["result"]["taskId"] == task_id

    stolen = oauth_stack.post(bob.token, "tasks/get", {"taskId": task_id})
    assert stolen.json()["error"] == {"code": wire.INVALID_PARAMS, "message": TASK_NOT_FOUND_MESSAGE}
    on_cart = oauth_stack.post(
        bob.token, "tools/call", {"name": "cart_add", "arguments": {"cart": cart, "sku": "apple"}}
    )
    assert on_cart.json()["result"]["isError"] is True
    assert on_cart.json()["result"]["content"][0]["text"] == "Unknown or expired handle."
    listed = oauth_stack.post(bob.token, "tools/call", {"name": "list_my_tasks", "arguments": {"limit": 50}})
    assert task_id not in {t["taskId"] for t in listed.json()["result"]["structuredContent"]["tasks"]}


def test_a_tampered_token_from_the_provider_is_refused_401_invalid_token(oauth_stack: OAuthStack) -> None:
    alice = oauth_client(oauth_stack.url, "alice")
    anyio.run(call_tool, oauth_stack.url, alice, "count_words", {"text": "x"})
    header, _, signature = alice.token.split(".")
    claims = claims_of(alice.token) | {"sub": "bob"}
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    reply = oauth_stack.post(f"{header}.{forged}.{signature}", "tools/list", {})
    assert reply.status_code == 401
    assert reply.headers["www-authenticate"].startswith(
        'Bearer error="invalid_token", error_description="the token signature is invalid"'
    )
    # Development tokens mean nothing here: AUTH=oauth has no DEV_AUTH.
    assert oauth_stack.post("dev:alice", "tools/list", {}).status_code == 401


def test_the_provider_refuses_tokens_for_another_resource_with_invalid_target(oauth_stack: OAuthStack) -> None:
    registered = httpx.post(
        f"{oauth_stack.issuer}/reg",
        json={"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none", "client_name": "other resource"},
    )
    assert registered.status_code == 201, registered.text
    person = BrowserSignIn("alice", "alice-password")
    query = httpx.QueryParams(
        response_type="code",
        client_id=registered.json()["client_id"],
        redirect_uri=CALLBACK,
        code_challenge="E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method="S256",
        scope="mcp/invoke",
        state="s1",
        resource="https://other.example.com/mcp",
    )
    anyio.run(person.open, f"{oauth_stack.issuer}/auth?{query}")
    assert person.redirect is None
    assert person.errors[0]["error"] == ["invalid_target"]
    assert person.errors[0]["state"] == ["s1"]


@pytest.mark.parametrize(
    ("redirect_uri", "description"),
    [
        ("http://evil.example.com/cb", "the redirect URI 'http://evil.example.com/cb' uses http on a host other than loopback"),  # noqa: E501
        ("javascript:alert(1)", "the redirect URI scheme 'javascript' is not allowed"),
        ("https://claude.ai@attacker.example/cb", "the redirect URI 'https://claude.ai@attacker.example/cb' has user information (before an @ in its host)"),  # noqa: E501
        ("ms-msdt:/id", "the redirect URI 'ms-msdt:/id' has a private-use scheme that is not a reverse domain name (RFC 8252 §7.1: com.example.app:/callback)"),  # noqa: E501
    ],
    ids=["http-remote", "javascript", "user-info", "os-handler"],
)  # fmt: skip
def test_the_local_provider_refuses_redirect_uris_the_bridge_refuses(
    oauth_stack: OAuthStack, redirect_uri: str, description: str
) -> None:
    registered = httpx.post(
        f"{oauth_stack.issuer}/reg",
        json={"redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none", "client_name": "lax"},
        timeout=30,
    )
    assert (registered.status_code, registered.json()) == (
        400,
        {"error": "invalid_redirect_uri", "error_description": description},
    )


@pytest.mark.parametrize("redirect_uri", ["https://app.example.com/callback", "http://localhost:53682/callback"])
def test_a_web_or_loopback_client_still_registers_at_the_local_provider_and_gets_a_refresh_grant(
    oauth_stack: OAuthStack, redirect_uri: str
) -> None:
    registered = httpx.post(
        f"{oauth_stack.issuer}/reg",
        json={"redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none", "client_name": "web"},
        timeout=30,
    )
    assert registered.status_code == 201, registered.text
    assert registered.json()["grant_types"] == ["authorization_code", "refresh_token"]


def test_a_client_the_provider_forgot_gets_401_invalid_client_at_the_token_endpoint_so_it_registers_again(
    oauth_stack: OAuthStack,
) -> None:
    """After a restart the local provider (in memory) knows no client: the SDKs answer invalid_client by
    registering again (the TypeScript SDK drops its client information on it)."""
    forgotten = httpx.post(
        f"{oauth_stack.issuer}/token",
        data={"grant_type": "refresh_token", "refresh_token": "rt", "client_id": "registered-before-the-restart"},
        timeout=30,
    )
    assert (forgotten.status_code, forgotten.json()["error"]) == (401, "invalid_client")
    again = httpx.post(
        f"{oauth_stack.issuer}/reg",
        json={"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none", "client_name": "after restart"},
        timeout=30,
    )
    assert again.status_code == 201, again.text


class RemappingFront(httpx2.AsyncBaseTransport):
    """What a REST API or a Function URL does to a Lambda's challenge: WWW-Authenticate is renamed
    x-amzn-Remapped-WWW-Authenticate. Applied at the client's edge; everything else is the stack's."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.renamed = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if "www-authenticate" in response.headers:
            self.renamed += 1
            response.headers["x-amzn-remapped-www-authenticate"] = response.headers.pop("www-authenticate")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_without_the_challenge_a_real_client_discovers_the_metadata_at_the_well_known_path_and_signs_in(
    oauth_stack: OAuthStack,
) -> None:
    bob = oauth_client(oauth_stack.url, "bob")
    front = RemappingFront()
    seen = len(oauth_stack.recorded())

    async def call() -> Any:
        async with (
            httpx2.AsyncClient(auth=bob.provider, timeout=60, transport=front) as http,
            Client(
                streamable_http_client(oauth_stack.url, http_client=http), mode=wire.PROTOCOL_VERSION, cache=None
            ) as client,
        ):
            return await client.call_tool("count_words", {"text": "found it anyway"})

    result = anyio.run(call)
    assert result.structured_content == {"words": 3, "characters": 15}
    assert front.renamed >= 1 and bob.person.sign_ins == 1
    first, probe = oauth_stack.recorded()[seen : seen + 2]
    assert (first["method"], first["status"]) == ("POST", 401)
    # No resource_metadata reached the client: it probed the RFC 9728 path-suffixed document itself.
    assert (probe["method"], probe["path"], probe["status"]) == (
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
    )
    assert claims_of(bob.token)["aud"] == oauth_stack.url
