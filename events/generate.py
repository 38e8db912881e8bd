"""Writes the sample events in this folder: `python events/generate.py` (from the repository root).

Every JSON-RPC method the MCP endpoint serves gets one event per front:
- `http-api/<method>.json`: API Gateway HTTP API, payload format 2.0, as the route without an
  authorizer passes it on: the function validates the bearer token itself. The samples carry a
  development token (`Bearer dev:sample-user`), which only a function with DEV_AUTH=1 accepts (the
  local stack's default); for a deployed function, put a real access token there;
- `function-url/<method>.json`: Lambda Function URL, payload 2.0, `AWS_IAM` auth
  (`requestContext.authorizer.iam`);
`examples/<tool>.json` calls each example tool of `functions/tools/` (HTTP API form);
every step the task state machine invokes the worker with gets `worker/<action>.json`, the
`Payload` its `lambda:invoke` Task states send; and each event source of the supervisor gets
`supervisor/<source>.json`: a batch of the task table's stream, an execution status change; the
sweeper's schedule gets `sweeper/scheduled.json` (EventBridge's "Scheduled Event"); and
the callback route gets `callbacks/complete.json`, an external system completing a callback.
Headers mirror the body as the 2026-07-28 transport requires (`MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`). `tests/test_events.py` checks that the files are what this script writes and runs each
through its handler.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parent
PROTOCOL_VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# Fixed, recognisable sample identities (documentation ranges and example ids, nothing real).
ACCOUNT = "123456789012"
REQUEST_ID = "5f0e8a4b-0000-4000-8000-000000000000"
REGION = "us-east-1"
HTTP_API_ID = "a1b2c3d4e5"
URL_ID = "abcdefghijklmnopqrstuvwxyz012345"
DEV_TOKEN = "dev:sample-user"
SOURCE_IP = "203.0.113.10"
USER_AGENT = "python-httpx/0.28.1"
TIME, TIME_EPOCH = "29/Nov/2026:12:00:00 +0000", 1795953600000
# An id no task has: tasks/* events are answered with the exact "not found" error.
UNKNOWN_TASK_ID = "tsk_00000000000000000000000000000000"
CLIENT_INFO = {"name": "sample-client", "version": "1.0.0"}

# method -> (params without _meta, the body field Mcp-Name mirrors, needs the tasks extension)
METHODS: dict[str, tuple[dict[str, Any], str | None, bool]] = {
    "server/discover": ({}, None, False),
    "tools/list": ({}, None, False),
    "tools/call": ({"name": "count_words", "arguments": {"text": "the quick brown fox"}}, "name", False),
    "resources/list": ({}, None, False),
    "resources/read": ({"uri": "test://static-text"}, "uri", False),
    "resources/templates/list": ({}, None, False),
    "prompts/list": ({}, None, False),
    "prompts/get": ({"name": "test_simple_prompt", "arguments": {}}, "name", False),
    "completion/complete": (
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "a"},
        },
        None,
        False,
    ),
    "tasks/get": ({"taskId": UNKNOWN_TASK_ID}, "taskId", True),
    "tasks/update": ({"taskId": UNKNOWN_TASK_ID, "inputResponses": {"approve": {"action": "accept"}}}, "taskId", True),
    "tasks/cancel": ({"taskId": UNKNOWN_TASK_ID}, "taskId", True),
}

# The worker's actions, as the state machine's Task states send them.
WORKER_EVENTS: dict[str, dict[str, Any]] = {
    "run": {"action": "run", "taskId": UNKNOWN_TASK_ID, "round": 0, "executionName": UNKNOWN_TASK_ID},
    "store_token": {
        "action": "store_token",
        "taskId": UNKNOWN_TASK_ID,
        "taskToken": "AQCEAAAAKgAAAAMAAAAAAAAAAexampleTaskToken",
        "tokenWait": {
            "version": 1,
            "inputRequests": {
                "approve": {
                    "method": "elicitation/create",
                    "params": {"message": "Approve?", "requestedSchema": {"type": "object", "properties": {}}},
                }
            },
            "issuedKeys": [["approve", "approve"]],
            "state": {},
        },
    },
    "settle": {
        "action": "settle",
        "taskId": UNKNOWN_TASK_ID,
        "settle": {
            "status": "completed",
            "payload": {"resultType": "complete", "content": [{"type": "text", "text": "done"}]},
            "version": 1,
        },
    },
    "fail": {
        "action": "fail",
        "taskId": UNKNOWN_TASK_ID,
        "failure": {
            "Error": "Sandbox.Timedout",
            "Cause": json.dumps(
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"RequestId: {REQUEST_ID} Error: Task timed out after 300.00 seconds",
                }
            ),
        },
    },
}

STREAM_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/ServerlessMcpTasks-TaskTable/stream/2026-07-28T00:00:00.000"
STATE_MACHINE = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:ServerlessMcpTasks-tasks"
# The supervisor's event sources: a stream record asking for a (never started) execution to stop,
# and the status change of an execution whose task does not exist. Both change nothing.
SUPERVISOR_EVENTS: dict[str, dict[str, Any]] = {
    "stream-batch": {
        "Records": [
            {
                "eventID": "c81e728d9d4c2f636f067f89cc14862c",
                "eventName": "MODIFY",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": REGION,
                "dynamodb": {
                    "ApproximateCreationDateTime": 1785196800.0,
                    "Keys": {"pk": {"S": f"task#{UNKNOWN_TASK_ID}"}},
                    "NewImage": {
                        "pk": {"S": f"task#{UNKNOWN_TASK_ID}"},
                        "taskId": {"S": UNKNOWN_TASK_ID},
                        "owner": {"S": "jwt:alice|client"},
                        "status": {"S": "cancelled"},
                        "createdAt": {"S": "2026-07-28T00:00:00.000Z"},
                        "lastUpdatedAt": {"S": "2026-07-28T00:00:01.000Z"},
                        "ttlMs": {"N": "86400000"},
                        "version": {"N": "2"},
                        "toolName": {"S": "deploy_release"},
                        "arguments": {"S": "{}"},
                        "client": {"S": "{}"},
                        "effect": {"S": "stop"},
                        "executionName": {"S": UNKNOWN_TASK_ID},
                    },
                    "SequenceNumber": "100000000000000000001",
                    "SizeBytes": 420,
                    "StreamViewType": "NEW_IMAGE",
                },
                "eventSourceARN": STREAM_ARN,
            }
        ]
    },
    "execution-ended": {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": ACCOUNT,
        "time": "2026-07-28T00:00:02Z",
        "region": REGION,
        "resources": [f"arn:aws:states:{REGION}:{ACCOUNT}:execution:ServerlessMcpTasks-tasks:{UNKNOWN_TASK_ID}"],
        "detail": {
            "executionArn": f"arn:aws:states:{REGION}:{ACCOUNT}:execution:ServerlessMcpTasks-tasks:{UNKNOWN_TASK_ID}",
            "stateMachineArn": STATE_MACHINE,
            "name": UNKNOWN_TASK_ID,
            "status": "FAILED",
            "startDate": 1785196800000,
            "stopDate": 1785196802000,
            "input": json.dumps({"taskId": UNKNOWN_TASK_ID}),
            "output": None,
            "inputDetails": {"included": True},
            "outputDetails": None,
            "error": "States.TaskFailed",
            "cause": "An example",
        },
    },
}


def slug(method: str) -> str:
    return method.replace("/", "-")


# One `tools/call` per example tool (functions/tools/), declaring what its pattern needs:
# slug -> (tool, arguments, client capabilities)
EXAMPLE_CALLS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "count-words": ("count_words", {"text": "the quick brown fox"}, {}),
    "archive-project": ("archive_project", {"project": "apollo"}, {"elicitation": {}}),
    "deploy-release": (
        "deploy_release",
        {"service": "billing", "version": "1.4.2", "seconds_per_stage": 1},
        {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}},
    ),
    "cart-open": ("cart_open", {}, {}),
    "list-my-tasks": ("list_my_tasks", {"limit": 10}, {}),
}


def jsonrpc_body(method: str, request_id: int) -> tuple[dict[str, Any], dict[str, str]]:
    params, name_field, needs_tasks = METHODS[method]
    capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}} if needs_tasks else {}
    return request_body(method, params, name_field, capabilities, request_id)


def request_body(
    method: str, params: dict[str, Any], name_field: str | None, capabilities: dict[str, Any], request_id: int
) -> tuple[dict[str, Any], dict[str, str]]:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": capabilities,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL_VERSION,
        "mcp-method": method,
    }
    if name_field is not None:
        headers["mcp-name"] = str(params[name_field])
    return body, headers


def _request_context(
    domain: str, api_id: str, route_key: str, request_id: str, authorizer: dict[str, Any] | None
) -> dict[str, Any]:
    context: dict[str, Any] = {
        "accountId": ACCOUNT,
        "apiId": api_id,
        "domainName": domain,
        "domainPrefix": api_id,
        "http": {
            "method": "POST",
            "path": "/mcp",
            "protocol": "HTTP/1.1",
            "sourceIp": SOURCE_IP,
            "userAgent": USER_AGENT,
        },
        "requestId": request_id,
        "routeKey": route_key,
        "stage": "$default",
        "time": TIME,
        "timeEpoch": TIME_EPOCH,
    }
    if authorizer is not None:
        context["authorizer"] = authorizer
    return dict(sorted(context.items()))


def http_api_event(
    method: str, request_id: int, prepared: tuple[dict[str, Any], dict[str, str]] | None = None
) -> dict[str, Any]:
    body, mcp_headers = prepared or jsonrpc_body(method, request_id)
    text = json.dumps(body, separators=(",", ":"))
    domain = f"{HTTP_API_ID}.execute-api.{REGION}.amazonaws.com"
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {
            **mcp_headers,
            "authorization": f"Bearer {DEV_TOKEN}",
            "content-length": str(len(text.encode())),
            "host": domain,
            "user-agent": USER_AGENT,
            "x-amzn-trace-id": "Root=1-6925e0c0-0123456789abcdef01234567",
            "x-forwarded-for": SOURCE_IP,
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https",
        },
        "requestContext": _request_context(
            domain,
            HTTP_API_ID,
            "POST /mcp",
            f"Vb2nKjmVIAMEV{request_id:03d}=",
            None,
        ),
        "body": text,
        "isBase64Encoded": False,
    }


def function_url_event(method: str, request_id: int) -> dict[str, Any]:
    body, mcp_headers = jsonrpc_body(method, request_id)
    text = json.dumps(body, separators=(",", ":"))
    domain = f"{URL_ID}.lambda-url.{REGION}.on.aws"
    iam = {
        "accessKey": "ASIAEXAMPLEEXAMPLE01",
        "accountId": ACCOUNT,
        "callerId": "AROAEXAMPLEEXAMPLE01:mcp-client",
        "cognitoIdentity": None,
        "principalOrgId": None,
        "userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/mcp-client-role/mcp-client",
        "userId": "AROAEXAMPLEEXAMPLE01:mcp-client",
    }
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": {
            **mcp_headers,
            "authorization": (
                f"AWS4-HMAC-SHA256 Credential=ASIAEXAMPLEEXAMPLE01/20261129/{REGION}/lambda/aws4_request, "
                "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=0123456789abcdef"
            ),
            "content-length": str(len(text.encode())),
            "host": domain,
            "user-agent": USER_AGENT,
            "x-amz-date": "20261129T120000Z",
            "x-amz-security-token": "IQoJb3JpZ2luX2VjEXAMPLE",
            "x-amzn-trace-id": "Root=1-6925e0c0-0123456789abcdef01234567",
            "x-forwarded-for": SOURCE_IP,
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https",
        },
        "requestContext": _request_context(
            domain, URL_ID, "$default", f"8f1c2b3a-0000-4000-8000-{request_id:012d}", {"iam": iam}
        ),
        "body": text,
        "isBase64Encoded": False,
    }


def callback_event() -> dict[str, Any]:
    """An external system completing a callback on `POST /tasks/callbacks` (no authorizer: the token is
    the credential). The token names a task that does not exist, so the answer is the refusal."""
    body = json.dumps({"token": f"{UNKNOWN_TASK_ID}.c3RlcDpidWlsZA.{'x' * 43}", "result": {"status": "built"}})
    domain = f"{HTTP_API_ID}.execute-api.{REGION}.amazonaws.com"
    context = _request_context(domain, HTTP_API_ID, "POST /tasks/callbacks", "Vb2nKjmVIAMEV900=", {})
    context.pop("authorizer")
    context["http"]["path"] = "/tasks/callbacks"
    return {
        "version": "2.0",
        "routeKey": "POST /tasks/callbacks",
        "rawPath": "/tasks/callbacks",
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "content-length": str(len(body.encode())),
            "host": domain,
            "user-agent": "ci-runner/1.0",
            "x-forwarded-for": SOURCE_IP,
            "x-forwarded-port": "443",
            "x-forwarded-proto": "https",
        },
        "requestContext": context,
        "body": body,
        "isBase64Encoded": False,
    }


# What the sweeper's EventBridge schedule sends it (the rule's name as CloudFormation would make it).
SWEEPER_EVENT: dict[str, Any] = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": ACCOUNT,
    "time": "2026-07-28T00:05:00Z",
    "region": REGION,
    "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/ServerlessMcpTasks-SweeperSchedule37615569-1A2B3C4D5E6F"],
    "detail": {},
}


def all_events() -> dict[str, dict[str, Any]]:
    """Relative path -> event."""
    events: dict[str, dict[str, Any]] = {}
    for request_id, method in enumerate(METHODS, start=1):
        events[f"http-api/{slug(method)}.json"] = http_api_event(method, request_id)
        events[f"function-url/{slug(method)}.json"] = function_url_event(method, request_id)
    for offset, (name, (tool, arguments, capabilities)) in enumerate(EXAMPLE_CALLS.items()):
        request_id = 100 + offset
        prepared = request_body("tools/call", {"name": tool, "arguments": arguments}, "name", capabilities, request_id)
        events[f"examples/{name}.json"] = http_api_event("tools/call", request_id, prepared)
    for action, payload in WORKER_EVENTS.items():
        events[f"worker/{action}.json"] = payload
    for source, payload in SUPERVISOR_EVENTS.items():
        events[f"supervisor/{source}.json"] = payload
    events["sweeper/scheduled.json"] = SWEEPER_EVENT
    events["callbacks/complete.json"] = callback_event()
    return events


def render(event: dict[str, Any]) -> str:
    return json.dumps(event, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    for relative, event in all_events().items():
        path = EVENTS / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(event), encoding="utf-8")
    print(f"wrote {len(all_events())} events under {EVENTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
