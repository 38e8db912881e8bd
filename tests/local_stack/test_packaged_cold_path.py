"""The API function's first requests, as it deploys: the packaged asset with its template environment.

The sealing secret is a real secret on moto (its ARN as the template sets it, never a key in its
place), the issuer is local; nothing else is replaced (`tests/packaged_api.py`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from local_stack.stack import fixture_layer
from testkit import (
    SecretOnMoto,
    api_environment,
    asset_modules,
    bearer_event,
    packaged_asset,
    rpc,
    secret_on_moto,
    serve_issuer,
)

from mcp_runtime import wire
from tests.support import deployed_server_name

# A fresh interpreter answers the events given, in order, and says after each which of the modules
# that matter here are loaded.
PROBE = """
import json, sys

class Context:
    function_name = "mcp-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:mcp-api"
    aws_request_id = "packaged"
    def get_remaining_time_in_millis(self):
        return 29_000

from app.handlers import api_handler
for event in json.loads(sys.argv[1]):
    response = api_handler(event, Context())
    print(json.dumps({
        "status": response["statusCode"],
        "body": json.loads(response["body"]),
        "boto3": "boto3" in sys.modules,
        "botocore": "botocore" in sys.modules,
        "parameters": "aws_lambda_powertools.utilities.parameters" in sys.modules,
        "origin": sys.modules["app.handlers"].__file__,
    }))
"""

ARCHIVE = {"name": "archive_project", "arguments": {"project": "apollo"}}
ELICITATION = {"elicitation": {}}


@pytest.fixture(scope="module")
def deployed() -> Iterator[tuple[SecretOnMoto, Any]]:
    with secret_on_moto() as secret, serve_issuer() as issuer:
        yield secret, issuer


def first_requests(deployed: tuple[SecretOnMoto, Any], *messages: dict[str, Any]) -> list[dict[str, Any]]:
    secret, issuer = deployed
    code = packaged_asset()
    events = [bearer_event(message, issuer) for message in messages]
    done = subprocess.run(
        [sys.executable, "-S", "-c", PROBE, json.dumps(events)],
        # The pattern fixtures (the tools called below) as the local stack adds them: a layer after the asset.
        env=api_environment(
            code,
            secret,
            issuer,
            {
                "MCP_TOOL_PACKAGES": "fixtures.patterns",
                "PYTHONPATH": f"{code.task_root}:{code.runtime_dir}:{fixture_layer()}",
            },
        ),
        cwd=str(code.task_root),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"status"')]
    assert len(answers) == len(messages), done.stdout[-3000:]
    assert all(answer["origin"].startswith(str(code.task_root)) for answer in answers)
    return answers


def test_a_first_server_discover_of_the_packaged_api_neither_imports_boto3_nor_reads_the_secret(
    deployed: tuple[SecretOnMoto, Any],
) -> None:
    (answer,) = first_requests(deployed, rpc("server/discover", {}, 1))
    assert answer["status"] == 200
    assert answer["body"]["result"]["_meta"][wire.META_SERVER_INFO]["name"] == deployed_server_name()
    assert (answer["boto3"], answer["botocore"], answer["parameters"]) == (False, False, False)


def test_a_first_tools_list_and_plain_tools_call_import_no_boto3(deployed: tuple[SecretOnMoto, Any]) -> None:
    count = {"name": "count_words", "arguments": {"text": "the quick brown fox"}}
    listed, called = first_requests(deployed, rpc("tools/list", {}, 1), rpc("tools/call", count, 2))
    assert listed["status"] == called["status"] == 200
    assert "archive_project" in [tool["name"] for tool in listed["body"]["result"]["tools"]]
    assert called["body"]["result"]["structuredContent"]["words"] == 4
    assert [answer["boto3"] for answer in (listed, called)] == [False, False]


def test_the_first_call_that_seals_state_reads_the_key_from_the_secret_and_its_state_opens_again(
    deployed: tuple[SecretOnMoto, Any],
) -> None:
    discovered, asked = first_requests(
        deployed, rpc("server/discover", {}, 1), rpc("tools/call", ARCHIVE, 2, ELICITATION)
    )
    assert discovered["boto3"] is False
    result = asked["body"]["result"]
    assert result["resultType"] == wire.RESULT_INPUT_REQUIRED
    assert asked["boto3"] is True and asked["parameters"] is True
    answered = {**ARCHIVE, "requestState": result["requestState"], "inputResponses": {"confirm": {"action": "decline"}}}
    (reopened,) = first_requests(deployed, rpc("tools/call", answered, 3, ELICITATION))
    assert reopened["body"]["result"]["resultType"] == wire.RESULT_COMPLETE, reopened["body"]
    assert reopened["boto3"] is True


def test_the_local_stack_asset_ships_hash_based_bytecode_for_this_interpreter_beside_every_module() -> None:
    """As the deployed asset does for CPython 3.13 (tests/infra/test_cdk_cli.py): the same build_package."""
    modules = asset_modules(packaged_asset().task_root)
    assert len(modules) > 100
    unchecked_hash = (1).to_bytes(4, "little")
    headers = {path: Path(importlib.util.cache_from_source(str(path))) for path in modules}
    missing = [str(path) for path, cached in headers.items() if not cached.is_file()]
    wrong = [
        str(path)
        for path, cached in headers.items()
        if cached.is_file() and cached.read_bytes()[:8] != importlib.util.MAGIC_NUMBER + unchecked_hash
    ]
    assert (missing, wrong) == ([], [])
