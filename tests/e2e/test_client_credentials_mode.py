"""auth=client-credentials on the template-driven local stack: the Cognito pool with its machine client
only. No bridge (its routes do not exist), the protected resource metadata names Cognito itself, and
the API function accepts the pool's access tokens with the endpoint's scope."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from testkit import RunningStack

from tests.e2e.test_bridge import call, cognito_token
from tests.support import local_stack_process

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack() -> Iterator[RunningStack]:
    with local_stack_process(extra_env={"LOCAL_CDK_CONTEXT": json.dumps({"auth": "client-credentials"})}) as running:
        yield running


def test_there_is_no_bridge_and_the_metadata_names_cognito(stack: RunningStack) -> None:
    base = stack.url.removesuffix("/mcp")
    for method, path in (("GET", "/.well-known/oauth-authorization-server"), ("POST", "/oauth2/register")):
        reply = httpx.request(method, base + path, timeout=60)
        assert (reply.status_code, reply.json()) == (404, {"message": "Not Found"})  # API Gateway's own 404
    (pool,) = stack.state["userPools"].values()
    document = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=60).json()
    assert document["authorization_servers"] == [f"https://cognito-idp.us-east-1.amazonaws.com/{pool}"]
    assert document["scopes_supported"] == ["mcp/invoke"]
    assert not any("OAuthBridge" in line for line in stack.output if line.startswith("function "))


def test_the_machine_client_exists_for_client_credentials_and_its_tokens_are_accepted(stack: RunningStack) -> None:
    (pool,) = stack.state["userPools"].values()
    cognito = stack.aws_client("cognito-idp")
    (machine,) = cognito.list_user_pool_clients(UserPoolId=pool, MaxResults=10)["UserPoolClients"]
    described = cognito.describe_user_pool_client(UserPoolId=pool, ClientId=machine["ClientId"])["UserPoolClient"]
    assert described["AllowedOAuthFlows"] == ["client_credentials"]
    assert described["AllowedOAuthScopes"] == ["mcp/invoke"]
    # A client-credentials token has the client as its subject.
    token = cognito_token(stack, sub=machine["ClientId"], client_id=machine["ClientId"])
    reply = call(stack, token)
    assert reply.status_code == 200, reply.text
    unauthenticated = httpx.post(stack.url, content=b"{}", headers={"content-type": "application/json"}, timeout=60)
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith('Bearer scope="mcp/invoke", resource_metadata=')
