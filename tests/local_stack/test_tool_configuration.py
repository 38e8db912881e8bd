"""The local stack honours what cdk.json gives the tools (docs/configuration.md, "Configure your tools"),
because it runs the synthesized template: the variables are set on the API and the worker, a secret
created with the documented `make secret` is read by `ctx.secret`, and the statements are enforced, so a
tool's AWS call its role was not granted gets AccessDenied here as in AWS.

The tools are `fixtures/configuration.py`; each runs in the API when called without the tasks extension
and in the worker when called with it. The stack's context is `TOOL_CONTEXT` (tests/support.py).
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from testkit import RunningStack

from mcp_runtime import wire
from tests.local_stack.conftest import StackClient
from tests.support import REPO, TOOL_BUCKET, TOOL_CONTEXT, TOOL_SECRET_NAME

pytestmark = pytest.mark.e2e

IN_THE_API: dict[str, Any] = {}  # no tasks extension: a task tool runs in the request, in the API function
IN_THE_WORKER = None  # StackClient's default capabilities declare the tasks extension


@pytest.fixture(scope="module")
def stack(short_timeout_stack: RunningStack) -> StackClient:
    return StackClient(short_timeout_stack, user="tool-author")


def _run(stack: StackClient, tool: str, arguments: dict[str, Any], where: dict[str, Any] | None) -> dict[str, Any]:
    """The tool's result, run in the API (`IN_THE_API`) or as a task in the worker (`IN_THE_WORKER`)."""
    if where is IN_THE_WORKER:
        task = stack.settled(stack.start(tool, arguments))
        assert task["status"] == "completed", task
        result: dict[str, Any] = task["result"]
        return result
    body = stack.call("tools/call", {"name": tool, "arguments": arguments}, where)
    assert "result" in body, body
    assert body["result"]["resultType"] == "complete", body
    direct: dict[str, Any] = body["result"]
    return direct


def _text(result: dict[str, Any]) -> tuple[str, bool]:
    return result["content"][0]["text"], bool(result.get("isError"))


def make_secret(running: RunningStack, value: str, *, on_stdin: bool = False) -> str:
    """The command docs/configuration.md gives, against this stack's port: VALUE=, or the value on stdin."""
    port = running.url.split(":")[2].split("/")[0]
    value_argument = [] if on_stdin else [f"VALUE={value}"]
    completed = subprocess.run(
        ["make", "--no-print-directory", "secret", f"NAME={TOOL_SECRET_NAME}", *value_argument, f"PORT={port}"],
        input=value if on_stdin else None,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout.strip()


@pytest.mark.parametrize("where", [IN_THE_API, IN_THE_WORKER], ids=["api", "worker"])
def test_the_tool_environment_is_set_on_the_function_that_runs_the_tool(
    stack: StackClient, where: dict[str, Any] | None
) -> None:
    result = _run(stack, "environment_variable", {"name": "REPORTS_URL"}, where)
    assert _text(result) == (TOOL_CONTEXT["toolEnvironment"]["REPORTS_URL"], False)


def test_a_secret_created_with_make_secret_is_what_ctx_secret_reads_in_the_api_and_the_worker(
    stack: StackClient,
) -> None:
    printed = make_secret(stack.running, "s3cr3t-value")
    assert printed.startswith(
        f"created secret {TOOL_SECRET_NAME} (arn:aws:secretsmanager:us-east-1:123456789012:secret:{TOOL_SECRET_NAME}-"
    ), printed
    for where in (IN_THE_API, IN_THE_WORKER):
        assert _text(_run(stack, "secret_value", {"name": "api_key"}, where)) == ("s3cr3t-value", False)
    # Run again (the value on stdin this time), the command gives the secret a new value.
    printed = make_secret(stack.running, "rotated", on_stdin=True)
    assert printed.startswith(f"set a new value of secret {TOOL_SECRET_NAME} ("), printed
    value = stack.running.aws_client("secretsmanager").get_secret_value(SecretId=TOOL_SECRET_NAME)["SecretString"]
    assert value == "rotated"


def test_a_secret_name_cdk_json_does_not_give_is_a_clear_error_in_the_log_and_a_generic_one_to_the_client(
    stack: StackClient,
) -> None:
    body = stack.call("tools/call", {"name": "secret_value", "arguments": {"name": "db_password"}}, IN_THE_API)
    assert body["error"]["code"] == wire.INTERNAL_ERROR
    assert "db_password" not in str(body)
    assert stack.wait_for_output(
        "UnknownSecret: ctx.secret('db_password'): no tool secret has that name; "
        "cdk.json's toolSecrets gives the tools 'api_key'"
    )
    # As a task, in the worker: the task fails with the same generic error.
    task = stack.settled(stack.start("secret_value", {"name": "db_password"}))
    assert (task["status"], task["error"]) == (
        "failed",
        {"code": wire.INTERNAL_ERROR, "message": "Task execution failed"},
    )


@pytest.mark.parametrize("where", [IN_THE_API, IN_THE_WORKER], ids=["api", "worker"])
def test_a_tool_makes_the_aws_call_its_statement_grants_and_gets_access_denied_for_one_it_does_not(
    stack: StackClient, where: dict[str, Any] | None
) -> None:
    s3 = stack.running.aws_client("s3")
    s3.create_bucket(Bucket=TOOL_BUCKET)
    s3.put_object(Bucket=TOOL_BUCKET, Key="granted.txt", Body=b"the granted report")
    s3.put_object(Bucket=TOOL_BUCKET, Key="other.txt", Body=b"not for the tools")

    granted = _run(stack, "read_object", {"bucket": TOOL_BUCKET, "key": "granted.txt"}, where)
    assert _text(granted) == ("the granted report", False)
    refused = _run(stack, "read_object", {"bucket": TOOL_BUCKET, "key": "other.txt"}, where)
    assert _text(refused) == ("AccessDenied", True)
