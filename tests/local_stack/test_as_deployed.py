"""What differs between the local stack and AWS is removed, or pinned here.

Each function runs with its handler string, environment, timeout, memory and role from the
synthesized template; a grant removed from the template is a call refused locally; a variable
removed is a clear error at the first invocation; the front answers what API Gateway answers.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from local_stack.runtime import MAX_PAYLOAD_BYTES
from testkit import RunningStack, rpc, standard_headers

from mcp_runtime import wire
from mcp_runtime.tasks.models import (
    COMPLETED,
    EXECUTION_FAILED_ERROR,
    WORKING,
    ClientSnapshot,
    TaskRecord,
    iso_timestamp,
)
from mcp_runtime.tasks.store import to_items
from mcp_runtime.tasks.supervisor import RESUME_REFUSED_ERROR
from tests.local_stack.conftest import StackClient, edited_assembly, resource_of
from tests.support import PATTERN_TOOLS, local_stack_process

pytestmark = pytest.mark.e2e

API = "FunctionsApiFunction"
WORKER = "FunctionsWorkerFunction"
LAMBDA_FUNCTION = "AWS::Lambda::Function"
# What the Lambda runtime sets in every function's environment (besides the template's variables).
LAMBDA_RUNTIME_VARIABLES = {
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_FUNCTION_NAME",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
    "AWS_LAMBDA_FUNCTION_VERSION",
    "AWS_LAMBDA_INITIALIZATION_TYPE",
    "AWS_LAMBDA_LOG_GROUP_NAME",
    "AWS_LAMBDA_LOG_STREAM_NAME",
    "AWS_XRAY_CONTEXT_MISSING",
    "AWS_XRAY_DAEMON_ADDRESS",
    "_AWS_XRAY_DAEMON_ADDRESS",
    "_AWS_XRAY_DAEMON_PORT",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "LAMBDA_TASK_ROOT",
    "LAMBDA_RUNTIME_DIR",
    "_HANDLER",
    "_X_AMZN_TRACE_ID",
    "LANG",
    "TZ",
    "PATH",
}
# The only local additions: where AWS is, and no AWS config files of this machine's user.
# ... and MCP_TOOL_PACKAGES and MCP_REGISTER_TOOLS_AT_START: every test stack serves the platform's fixtures,
# registered at start (tests.support.local_stack_process).
LOCAL_ADDITIONS = {
    "AWS_ENDPOINT_URL",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "MCP_TOOL_PACKAGES",
    "MCP_REGISTER_TOOLS_AT_START",
}
# Set by CPython itself at start where LANG names a locale this machine lacks (PEP 538 coercion).
INTERPRETER_SET = {"LC_CTYPE"}
ENVIRONMENT_PROBE = """
import json, os, pathlib
name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
(pathlib.Path(__file__).parent / f"{name}.json").write_text(json.dumps(dict(os.environ)))
print(f"probe layer loaded in {name}")
"""


@pytest.fixture(scope="module")
def probe_layer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A layer whose `sitecustomize` records the environment each function starts with."""
    layer = tmp_path_factory.mktemp("probe-layer")
    (layer / "sitecustomize.py").write_text(ENVIRONMENT_PROBE)
    return layer


@pytest.fixture(scope="module")
def stack(probe_layer: Path) -> Iterator[RunningStack]:
    with local_stack_process(extra_env={"LOCAL_LAYERS": str(probe_layer)}) as running:
        yield running


def template_of(running: RunningStack) -> dict[str, Any]:
    (path,) = Path(running.state["assembly"]).glob("*.template.json")
    template: dict[str, Any] = json.loads(path.read_text())
    return template


def invoke(running: RunningStack, prefix: str, event: dict[str, Any]) -> dict[str, Any]:
    """Lambda's Invoke API on the stack's moto, as the administrator: FunctionError and the payload."""
    response = running.aws_client("lambda").invoke(
        FunctionName=running.physical_id(prefix, LAMBDA_FUNCTION), Payload=json.dumps(event).encode()
    )
    return {"error": response.get("FunctionError"), "payload": json.loads(response["Payload"].read())}


def api_event(message: dict[str, Any], user: str = "alice") -> dict[str, Any]:
    claims = {"sub": user, "client_id": "tests"}
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {**standard_headers(message), "host": "abc123.execute-api.us-east-1.amazonaws.com"},
        "requestContext": {
            "http": {"method": "POST", "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "198.51.100.7"},
            "authorizer": {"jwt": {"claims": claims, "scopes": ["mcp/invoke"]}},
        },
        "body": json.dumps(message),
        "isBase64Encoded": False,
    }


# ---- each function as the template declares it ---------------------------------------------------------------
def test_the_log_names_each_functions_handler_timeout_and_role(stack: RunningStack) -> None:
    template = template_of(stack)
    for prefix, handler, timeout in (
        (API, "app.handlers.api_handler", 29),
        (WORKER, "app.handlers.worker_handler", 300),
    ):
        props = resource_of(template, prefix)["Properties"]
        assert (props["Handler"], props["Timeout"]) == (handler, timeout)
        role = f"arn:aws:iam::123456789012:role/{stack.physical_id(props['Role']['Fn::GetAtt'][0])}"
        line = next(line for line in stack.output if line.startswith(f"function {prefix}"))
        assert f"handler {handler}, timeout {timeout} s, memory {props['MemorySize']} MB, role {role}" in line


def test_each_function_starts_with_exactly_its_template_environment_and_the_runtimes(
    stack: RunningStack, probe_layer: Path
) -> None:
    invoke(stack, API, api_event(rpc("server/discover")))
    invoke(stack, WORKER, {"action": "run", "taskId": "no-such-task-0000000000"})
    template = template_of(stack)
    for prefix in (API, WORKER):
        name = stack.physical_id(prefix, LAMBDA_FUNCTION)
        seen = json.loads((probe_layer / f"{name}.json").read_text())
        declared = set(resource_of(template, prefix)["Properties"]["Environment"]["Variables"])
        # AUTH=dev (the default) also lets the API function take development tokens.
        dev_auth = {"DEV_AUTH"} if prefix == API else set()
        assert set(seen) - declared - LAMBDA_RUNTIME_VARIABLES - INTERPRETER_SET == LOCAL_ADDITIONS | dev_auth
        assert declared <= set(seen)
        assert seen["AWS_LAMBDA_FUNCTION_NAME"] == name
        assert seen["TASK_TABLE_NAME"] == stack.physical_id("TaskTable", "AWS::DynamoDB::Table")
        assert (
            seen["AWS_SESSION_TOKEN"] and seen["AWS_ACCESS_KEY_ID"] != stack.state["administrator"]["AWS_ACCESS_KEY_ID"]
        )
    worker = json.loads((probe_layer / f"{stack.physical_id(WORKER, LAMBDA_FUNCTION)}.json").read_text())
    assert not {"MCP_STATE_SECRET_ARN", "MCP_STATE_KEY", "DEV_AUTH"} & set(worker)  # no sealing key, and none needed
    assert stack.printed(f"probe layer loaded in {stack.physical_id(WORKER, LAMBDA_FUNCTION)}")


def test_the_api_function_in_its_own_interpreter_answers_discover_and_tools_list(stack: RunningStack) -> None:
    discover = invoke(stack, API, api_event(rpc("server/discover")))
    assert discover["error"] is None
    assert json.loads(discover["payload"]["body"])["result"]["capabilities"] == {
        "tools": {},
        "extensions": {wire.TASKS_EXTENSION: {}},
    }
    listed = invoke(stack, API, api_event(rpc("tools/list")))
    names = {tool["name"] for tool in json.loads(listed["payload"]["body"])["result"]["tools"]}
    assert names == set(PATTERN_TOOLS)


def test_the_worker_function_with_only_its_template_environment_runs_a_task_step(stack: RunningStack) -> None:
    """The step that failed in every deployment: the worker built the API server and wanted its sealing key."""
    now = time.time()
    task_id = f"step-{int(now * 1000)}-0000000000"
    record = TaskRecord(
        task_id=task_id,
        owner="jwt:alice|tests",
        status=WORKING,
        created_at=iso_timestamp(now),
        last_updated_at=iso_timestamp(now),
        ttl_ms=60_000,
        version=1,
        tool_name="count_words",
        arguments={"text": "one two three"},
        client=ClientSnapshot(wire.PROTOCOL_VERSION, {"extensions": {wire.TASKS_EXTENSION: {}}}),
        expires_at=int(now) + 60,
    )
    table = stack.physical_id("TaskTable", "AWS::DynamoDB::Table")
    for item in to_items(record):  # the task's hot item and its two parts
        stack.aws_client("dynamodb").put_item(TableName=table, Item=item)

    answer = invoke(stack, WORKER, {"action": "run", "taskId": task_id})

    assert answer == {
        "error": None,
        "payload": {"outcome": "completed", "tokenWait": None, "settle": None, "wait": None},
    }
    item = stack.aws_client("dynamodb").get_item(TableName=table, Key={"pk": {"S": f"task#{task_id}"}})["Item"]
    assert item["status"]["S"] == COMPLETED
    assert json.loads(item["result"]["S"])["structuredContent"] == {"words": 3, "characters": 13}


# ---- the front answers as API Gateway does ------------------------------------------------------------------
def test_a_path_the_template_does_not_route_gets_api_gateways_404(stack: RunningStack) -> None:
    base = stack.url.removesuffix("/mcp")
    for method, path in (("PUT", "/mcp"), ("POST", "/other"), ("GET", "/"), ("PATCH", "/mcp")):
        reply = httpx.request(method, base + path, headers={"authorization": "Bearer dev:alice"})
        assert (reply.status_code, reply.json()) == (404, {"message": "Not Found"}), (method, path)


def test_a_host_the_front_does_not_serve_is_forbidden(stack: RunningStack) -> None:
    message = rpc("server/discover")
    headers = {**standard_headers(message), "authorization": "Bearer dev:alice", "host": "evil.example.com"}
    reply = httpx.post(stack.url, json=message, headers=headers)
    assert (reply.status_code, reply.json()) == (403, {"message": "Forbidden"})


def test_a_body_over_api_gateways_limit_is_read_then_answered_413(stack: RunningStack) -> None:
    host, port = stack.url.split("//")[1].split("/")[0].split(":")
    body = b"x" * (10 * 1024 * 1024 + 1)
    head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(head.encode() + body)  # all of it first, as most clients write
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    reply = b"".join(chunks).decode()
    assert reply.startswith("HTTP/1.1 413")
    assert reply.endswith('{"message":"Request Entity Too Large"}')


def test_an_event_over_lambdas_payload_limit_is_refused_before_the_function_runs(stack: RunningStack) -> None:
    message = rpc("tools/call", {"name": "count_words", "arguments": {"text": "x" * (MAX_PAYLOAD_BYTES // 2)}})
    message["params"]["arguments"]["more"] = "y" * (MAX_PAYLOAD_BYTES // 2)
    headers = {**standard_headers(message), "authorization": "Bearer dev:alice"}
    reply = httpx.post(stack.url, content=json.dumps(message).encode(), headers=headers, timeout=60)
    assert (reply.status_code, reply.json()) == (413, {"message": "Request Entity Too Large"})


# ---- the template's grants, and its variables, are what the functions have --------------------------------
def _remove_action(template: dict[str, Any], policy_prefix: str, action: str) -> None:
    statements = resource_of(template, policy_prefix)["Properties"]["PolicyDocument"]["Statement"]
    for statement in statements:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        if action in actions:
            actions.remove(action)
            statement["Action"] = actions
            return
    raise AssertionError(f"{action} is not granted by {policy_prefix}")


def _without_send_task_success(*policy_prefixes: str) -> Callable[[dict[str, Any]], None]:
    def edit(template: dict[str, Any]) -> None:
        for prefix in policy_prefixes:
            _remove_action(template, prefix, "states:SendTaskSuccess")

    return edit


def test_without_its_send_task_success_grant_the_api_leaves_the_resume_to_the_supervisor_and_the_task_completes(
    tmp_path: Path,
) -> None:
    assembly = edited_assembly(tmp_path, _without_send_task_success("FunctionsApiRoleDefaultPolicy"))
    with local_stack_process(fixtures="conformance", extra_env={"LOCAL_CDK_OUT": str(assembly)}) as running:
        client = StackClient(running)
        task_id = client.start("confirm_delete", {"filename": "backstop.txt"})
        awaiting = client.wait_for(task_id, lambda task: task["status"] == "input_required")
        (key,) = awaiting["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}

        updated = client.result("tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert {key: value for key, value in updated.items() if key != "_meta"} == {"resultType": "complete"}

        done = client.settled(task_id)
        assert (done["status"], done["result"]["content"][0]["text"]) == ("completed", "Deleted backstop.txt")
        assert client.wait_for_output("direct resume not done")


def test_without_the_send_task_success_grant_neither_the_api_nor_the_supervisor_can_resume_and_the_task_fails_saying_so(
    tmp_path: Path,
) -> None:
    assembly = edited_assembly(
        tmp_path, _without_send_task_success("FunctionsApiRoleDefaultPolicy", "SupervisorRoleDefaultPolicy")
    )
    with local_stack_process(fixtures="conformance", extra_env={"LOCAL_CDK_OUT": str(assembly)}) as running:
        client = StackClient(running)
        task_id = client.start("confirm_delete", {"filename": "c.txt"})
        awaiting = client.wait_for(task_id, lambda task: task["status"] == "input_required")
        (key,) = awaiting["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}

        updated = client.result("tasks/update", {"taskId": task_id, "inputResponses": answer})
        assert {key: value for key, value in updated.items() if key != "_meta"} == {"resultType": "complete"}

        failed = client.settled(task_id)
        assert (failed["status"], failed["error"]) == ("failed", RESUME_REFUSED_ERROR)
        assert client.wait_for_output("is not authorized to perform: states:SendTaskSuccess")


def test_a_function_missing_a_variable_it_needs_fails_its_first_invocation_naming_it(tmp_path: Path) -> None:
    def drop_table_name(template: dict[str, Any]) -> None:
        del resource_of(template, WORKER)["Properties"]["Environment"]["Variables"]["TASK_TABLE_NAME"]

    assembly = edited_assembly(tmp_path, drop_table_name)
    with local_stack_process(extra_env={"LOCAL_CDK_OUT": str(assembly)}) as running:
        answer = invoke(running, WORKER, {"action": "run", "taskId": "any-task-000000000000"})
    assert answer["error"] == "Unhandled"
    assert answer["payload"]["errorType"] == "MissingSetting"
    assert answer["payload"]["errorMessage"] == (
        "TASK_TABLE_NAME is not set: the task table's name (the template sets it from the table)"
    )


def test_a_worker_over_its_memory_size_fails_the_task_out_of_memory() -> None:
    env = {"LOCAL_CDK_CONTEXT": json.dumps({"workerMemoryMb": 128})}
    with local_stack_process(fixtures="lifecycle", extra_env=env) as running:
        client = StackClient(running)
        task = client.settled(client.start("allocate_memory", {"megabytes": 256}))
        assert (task["status"], task["error"]) == ("failed", EXECUTION_FAILED_ERROR)
        assert client.wait_for_output(f"task {task['taskId']}: execution failed with Runtime.OutOfMemory: ")


# ---- what the stack creates and serves beyond functions, and what it does not emulate ----------------------
def test_the_payload_bucket_has_the_templates_encryption_lifecycle_and_public_access_block(stack: RunningStack) -> None:
    (props,) = [r["Properties"] for r in template_of(stack)["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    s3 = stack.aws_client("s3")
    bucket = stack.physical_id("PayloadsBucket", "AWS::S3::Bucket")

    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    encryption = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    public = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]

    (rule,) = props["LifecycleConfiguration"]["Rules"]
    assert [(r["ID"], r["Filter"]["Prefix"], r["Expiration"]["Days"]) for r in rules] == [
        (rule["Id"], rule["Prefix"], rule["ExpirationInDays"])
    ]
    assert encryption[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert public == props["PublicAccessBlockConfiguration"]


def test_the_log_names_the_event_sources_it_delivers_and_what_it_does_not_emulate(stack: RunningStack) -> None:
    """moto neither encrypts nor expires objects and evaluates no bucket policy (TLS-only has nothing to
    refuse on loopback); the stack says so, and delivers the stream mapping and the rule itself."""
    assert stack.printed("event source SupervisorFunctionDynamoDBEventSource")
    assert stack.printed('"detail-type": ["Step Functions Execution Status Change"]')
    (line,) = [line for line in stack.output if line.startswith("not emulated: AWS::")]
    assert "AWS::S3::BucketPolicy" in line and "AWS::Lambda::EventSourceMapping" not in line
    assert "AWS::Events::Rule" not in line
