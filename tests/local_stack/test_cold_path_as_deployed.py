"""A cold start as deployed: the API function, with the environment the synthesized template gives it,
answers a first request with a bearer token, makes no dataclass of ours (`mcp_runtime/_value.py`) and
imports no asyncio (only an `async def` tool's call needs it: a cold discover with it is about 20 ms slower).

It synthesizes the CDK app (`local_stack.synth`, cached), so it lives here and not in the unit tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from local_stack.sam_env import function_environments
from local_stack.synth import synthesize
from local_stack.template import DeployedTemplate
from testkit import serve_issuer

from tests.support import REPO

# A fresh interpreter as Lambda starts one: every class made a dataclass is recorded, then the API
# handler is imported and answers its first event.
PROBE = """
import dataclasses, json, sys
made = []
original = dataclasses._process_class
def recording(cls, *args, **kwargs):
    made.append(f"{cls.__module__}.{cls.__qualname__}")
    return original(cls, *args, **kwargs)
dataclasses._process_class = recording

class Context:
    function_name = "mcp-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:mcp-api"
    aws_request_id = "cold-path"
    def get_remaining_time_in_millis(self):
        return 29_000

from app.handlers import api_handler
response = api_handler(json.loads(sys.argv[1]), Context())
ours = [name for name in made if name.split(".")[0] in ("app", "mcp_runtime", "fixtures", "tools")]
seen = {"status": response["statusCode"], "ours": ours, "made": len(made), "asyncio": "asyncio" in sys.modules}
print(json.dumps(seen))
"""


def first_request_with_a_bearer_token(issuer: Any) -> dict[str, Any]:
    """The sample event (no authorizer context: the function validates the token) with a real token."""
    event: dict[str, Any] = json.loads((REPO / "events" / "http-api" / "server-discover.json").read_text())
    token = issuer.token(aud=f"https://{event['headers']['host']}/mcp")
    event["headers"]["authorization"] = f"Bearer {token}"
    return event


def deployed_api_environment(issuer: Any) -> dict[str, str]:
    """The API function's environment as the synthesized template resolves it, with the two things only
    AWS has replaced: the sealing secret (a key instead of its ARN) and the issuer (a local one)."""
    assembly = synthesize()
    environments = function_environments(DeployedTemplate.load(assembly.directory, assembly.stack_name))
    (environment,) = [env for logical_id, env in environments.items() if logical_id.startswith("FunctionsApi")]
    environment = {key: value for key, value in environment.items() if key != "MCP_STATE_SECRET_ARN"}
    return {
        **environment,
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}",
        "AWS_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": "mcp-api",
        "MCP_STATE_KEY": "cold-path-test-requestState-key-0123456789",
        "MCP_JWT_ISSUER": issuer.url,
        "MCP_JWT_JWKS_URL": f"{issuer.url}/jwks",
    }


@pytest.fixture(scope="module")
def first_request() -> dict[str, Any]:
    with serve_issuer() as issuer:
        environment = deployed_api_environment(issuer)
        done = subprocess.run(
            [sys.executable, "-c", PROBE, json.dumps(first_request_with_a_bearer_token(issuer))],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200
    return seen


def test_a_first_request_with_a_bearer_token_makes_no_dataclass_of_ours(first_request: dict[str, Any]) -> None:
    assert first_request["ours"] == []
    assert first_request["made"] > 0  # the probe does see the dataclasses of the libraries


def test_a_first_server_discover_imports_no_asyncio(first_request: dict[str, Any]) -> None:
    assert first_request["asyncio"] is False
