"""The functions' IAM actions are the AWS calls their code makes: no fewer (AccessDenied in
production) and no more (a grant nobody uses). The code is scanned for boto3 operation names."""

from __future__ import annotations

import re
from typing import Any

import pytest

from infra import packaging as bundling
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

# boto3 operation -> IAM action, for the services the functions talk to.
OPERATIONS = {
    "get_item": "dynamodb:GetItem",
    "put_item": "dynamodb:PutItem",
    "update_item": "dynamodb:UpdateItem",
    "delete_item": "dynamodb:DeleteItem",
    "query": "dynamodb:Query",
    "scan": "dynamodb:Scan",
    "batch_get_item": "dynamodb:BatchGetItem",
    "batch_write_item": "dynamodb:BatchWriteItem",
    "transact_get_items": "dynamodb:GetItem",
    "transact_write_items": "dynamodb:UpdateItem",
    "start_execution": "states:StartExecution",
    "stop_execution": "states:StopExecution",
    "describe_execution": "states:DescribeExecution",
    "send_task_success": "states:SendTaskSuccess",
    "send_task_failure": "states:SendTaskFailure",
    "send_task_heartbeat": "states:SendTaskHeartbeat",
    "get_secret_value": "secretsmanager:GetSecretValue",
    "put_object": "s3:PutObject",
    "get_object": "s3:GetObject",
    "get_secret": "secretsmanager:GetSecretValue",  # Powertools parameters
    "create_user_pool_client": "cognito-idp:CreateUserPoolClient",
    "describe_user_pool_client": "cognito-idp:DescribeUserPoolClient",
    "update_user_pool_client": "cognito-idp:UpdateUserPoolClient",
    "delete_user_pool_client": "cognito-idp:DeleteUserPoolClient",
    "admin_get_user": "cognito-idp:AdminGetUser",
    "sign": "kms:Sign",
    "get_public_key": "kms:GetPublicKey",
    "encrypt": "kms:Encrypt",
    "decrypt": "kms:Decrypt",
}
# A call, or an operation name handed to a dispatcher as a string (`self._call("put_item", ...)`).
_CALL = re.compile(r"""(?:\.(\w+)\(|["'](\w+)["'])""")
# Granted to every function by the runtime itself, not by our code's calls.
PLATFORM_ACTIONS = {"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords"}
# Used by Lambda's event source mapping, which reads the table's stream with the supervisor's role,
# and by Lambda itself sending what it gave up (stream pointers, status events) to the failure queues.
EVENT_SOURCE_ACTIONS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
    "sqs:SendMessage",
}


def actions_called_by_shipped_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in bundling.SHIPPED_PACKAGES:
        for path in (bundling.FUNCTIONS_DIR / package).rglob("*.py"):
            for match in _CALL.finditer(path.read_text(encoding="utf-8")):
                operation = match.group(1) or match.group(2)
                if operation in OPERATIONS:
                    found.setdefault(OPERATIONS[operation], set()).add(str(path.relative_to(bundling.FUNCTIONS_DIR)))
    return found


def _granted(stack: Synthesized, role: Any) -> set[str]:
    role_id = stack.stack.get_logical_id(role.node.default_child)
    actions: set[str] = set()
    for policy in stack.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                action = statement["Action"]
                actions.update([action] if isinstance(action, str) else action)
    return actions - PLATFORM_ACTIONS - EVENT_SOURCE_ACTIONS


def test_every_call_in_the_code_is_granted_and_every_grant_is_called(default_stack: Synthesized) -> None:
    called = actions_called_by_shipped_code()
    functions = default_stack.stack.functions
    bridge = default_stack.stack.bridge
    assert bridge is not None  # cdk.json's default: auth=cognito
    granted = (
        _granted(default_stack, functions.api.role)
        | _granted(default_stack, functions.worker.role)
        | _granted(default_stack, default_stack.stack.supervisor.function.role)
        | _granted(default_stack, default_stack.stack.sweeper.function.role)
        | _granted(default_stack, default_stack.stack.callbacks.function.role)
        | _granted(default_stack, bridge.function.role)
    )
    assert not set(called) - granted, f"called but not granted: { {a: called[a] for a in set(called) - granted} }"
    assert not granted - set(called), f"granted but never called: {granted - set(called)}"


def test_the_scan_sees_the_task_store_and_the_executor() -> None:
    called = actions_called_by_shipped_code()
    assert called["kms:Sign"] >= {"oauth_bridge/signing.py"}
    assert called["kms:GetPublicKey"] == {"oauth_bridge/signing.py", "mcp_runtime/tokens.py"}
    assert any("tasks/store.py" in path for path in called["dynamodb:UpdateItem"])
    assert any("tasks/executor.py" in path for path in called["states:StartExecution"])
