"""What a cold start builds: no dataclass of ours on the path of a first request (`mcp_runtime/_record.py`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from local_stack.sam_env import function_environments
from local_stack.synth import synthesize
from local_stack.template import DeployedTemplate
from mcp_runtime._record import Record
from mcp_runtime.context import Principal
from mcp_runtime.sealing import Binding, SealingKey
from tests.support import REPO
from tests.token_issuer import serve_issuer

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
print(json.dumps({"status": response["statusCode"], "ours": ours, "made": len(made)}))
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


def test_a_first_request_with_a_bearer_token_makes_no_dataclass_of_ours() -> None:
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
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["status"] == 200
    assert seen["ours"] == []
    assert seen["made"] > 0  # the probe does see the dataclasses of the libraries


class Point(Record):
    __slots__ = ("_cache", "x", "y")
    x: int
    y: int
    _cache: str | None

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y, self._cache = x, y, None


class OtherPoint(Point):
    __slots__ = ()


def test_records_are_equal_by_their_declared_public_attributes_and_hash_alike() -> None:
    one, same = Point(1, 2), Point(1, 2)
    same._cache = "computed"
    assert one == same
    assert hash(one) == hash(same)
    assert one != Point(2, 1)
    assert repr(one) == "Point(x=1, y=2)"


def test_a_record_is_never_equal_to_one_of_another_class_with_the_same_values() -> None:
    assert Point(1, 2) != OtherPoint(1, 2)
    assert Point(1, 2) != (1, 2)


def test_a_binding_is_compared_by_caller_method_and_target_and_never_shows_its_arguments() -> None:
    binding = Binding("jwt:alice|app", "tools/call", "archive_project", {"secret": "hunter2"})
    assert binding == Binding("jwt:alice|app", "tools/call", "archive_project", {"other": 1})
    assert binding != Binding("jwt:bob|app", "tools/call", "archive_project", {"secret": "hunter2"})
    assert "hunter2" not in repr(binding)


def test_a_sealing_key_never_shows_its_secret() -> None:
    key = SealingKey("k1", b"do-not-print-this-secret-0123456789")
    assert repr(key) == "SealingKey(key_id='k1')"
    assert key == SealingKey("k1", b"do-not-print-this-secret-0123456789")
    assert key != SealingKey("k1", b"another-secret-of-at-least-32-bytes")


def test_principals_are_values() -> None:
    assert Principal("jwt:alice|app", "jwt") == Principal("jwt:alice|app", "jwt")
    assert {Principal("jwt:alice|app", "jwt"), Principal("jwt:alice|app", "jwt")} == {Principal("jwt:alice|app", "jwt")}
    assert Principal("anonymous") == Principal("anonymous", "anonymous")
