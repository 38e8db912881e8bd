"""What the template must say, asserted against the code's own constants where they exist."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Capture, Match
from infra.capabilities._lambda import McpFunction
from infra.capabilities.workflow import ASL_PATH, StateMachineIdentity, load_definition
from infra.config import ThrottleRetry

from mcp_runtime.settings import Settings
from mcp_runtime.tasks import payloads, schema, store
from tests.infra.conftest import (
    CLIENT_CREDENTIALS,
    DEFAULT_STACK_NAME,
    FULL_OPTIONS,
    OWN_ISSUER,
    PROJECT_NAME,
    REPO,
    Synthesized,
)

pytestmark = pytest.mark.infra

STATE_MACHINE_NAME = f"{DEFAULT_STACK_NAME}-tasks"


def _arn(resource: str, name: str) -> dict[str, Any]:
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":states:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":{resource}:{name}",
            ],
        ]
    }


def _get_att(logical_id: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _payload_objects(stack: Synthesized) -> list[dict[str, Any]]:
    """The bucket's two prefixes: `tasks/` (expires with the task), `kept/` (tasks without a TTL)."""
    bucket = _get_att(stack.logical_id(stack.stack.payloads.bucket))
    return [{"Fn::Join": ["", [bucket, "/tasks/*"]]}, {"Fn::Join": ["", [bucket, "/kept/*"]]}]


def _statements_of(stack: Synthesized, role_logical_id: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in stack.resources("AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _assert_policy(stack: Synthesized, function: McpFunction, granted: list[dict[str, Any]]) -> None:
    """The function's role holds exactly the `granted` statements and those every McpFunction holds:
    X-Ray's actions, and the streams of its own log group."""
    expected = [
        {"Action": ["xray:PutTelemetryRecords", "xray:PutTraceSegments"], "Effect": "Allow", "Resource": "*"},
        {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": _get_att(stack.logical_id(function.log_group)),
        },
        *granted,
    ]
    assert _normalized(_statements_of(stack, stack.logical_id(function.role))) == _normalized(expected)


def _normalized(statements: list[dict[str, Any]]) -> list[str]:
    """Order-free comparison: one canonical JSON string per statement, actions as sorted lists."""
    out = []
    for statement in statements:
        item = dict(statement)
        actions = item["Action"]
        item["Action"] = sorted([actions] if isinstance(actions, str) else actions)
        if isinstance(item.get("Resource"), list) and len(item["Resource"]) == 1:
            item["Resource"] = item["Resource"][0]
        out.append(json.dumps(item, sort_keys=True))
    return sorted(out)


# ---- task table ---------------------------------------------------------------------------------
def test_table_key_schema_is_the_stores(default_stack: Synthesized) -> None:
    key = store.task_key("any-task-id")
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": name, "KeyType": "HASH"} for name in key],
            "AttributeDefinitions": Match.array_with(
                [{"AttributeName": name, "AttributeType": next(iter(value))} for name, value in key.items()]
            ),
        },
    )
    assert list(key) == [schema.PARTITION_KEY]


def test_table_ttl_attribute_is_the_codes(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {"TimeToLiveSpecification": {"AttributeName": schema.TTL_ATTRIBUTE, "Enabled": True}},
    )


def test_the_owner_index_keeps_the_keys_and_only_what_the_task_history_reads(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    {
                        "IndexName": schema.OWNER_INDEX,
                        "KeySchema": [
                            {"AttributeName": schema.OWNER_INDEX_PARTITION_KEY, "KeyType": "HASH"},
                            {"AttributeName": schema.OWNER_INDEX_SORT_KEY, "KeyType": "RANGE"},
                        ],
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": [
                                "taskId",
                                "toolName",
                                "status",
                                "lastUpdatedAt",
                                "statusMessage",
                                "expiresAt",
                            ],
                        },
                    }
                ]
            ),
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": schema.OWNER_INDEX_PARTITION_KEY, "AttributeType": "S"},
                    {"AttributeName": schema.OWNER_INDEX_SORT_KEY, "AttributeType": "S"},
                ]
            ),
        },
    )


def test_table_is_on_demand_recoverable_encrypted_and_retained_by_default(default_stack: Synthesized) -> None:
    default_stack.template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like(
                {
                    "BillingMode": "PAY_PER_REQUEST",
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    # SSEEnabled without a key: the AWS managed KMS key (aws/dynamodb).
                    "SSESpecification": {"SSEEnabled": True},
                    "DeletionProtectionEnabled": True,
                }
            ),
            "DeletionPolicy": "Retain",
            "UpdateReplacePolicy": "Retain",
        },
    )


def test_removal_policy_comes_from_context(synth: Any) -> None:
    destroyable = synth(removalPolicy="destroy")
    destroyable.template.has_resource(
        "AWS::DynamoDB::Table",
        {"DeletionPolicy": "Delete", "Properties": Match.object_like({"DeletionProtectionEnabled": False})},
    )
    for log_group in destroyable.resources("AWS::Logs::LogGroup").values():
        assert log_group["DeletionPolicy"] == "Delete"


# ---- functions ----------------------------------------------------------------------------------
def test_the_api_function_times_out_before_the_http_api_gives_up_at_30_s_or_at_api_timeout_seconds(
    synth: Any, default_stack: Synthesized
) -> None:
    api = {"Handler": "app.handlers.api_handler"}
    default_stack.template.has_resource_properties("AWS::Lambda::Function", {**api, "Timeout": 29})
    synth(apiTimeoutSeconds=8).template.has_resource_properties("AWS::Lambda::Function", {**api, "Timeout": 8})
    with pytest.raises(ValueError, match=re.escape("context 'apiTimeoutSeconds' must be between 3 and 29, got 30")):
        synth(apiTimeoutSeconds=30)


@pytest.mark.parametrize(
    ("construct", "handler"),
    [
        ("api", "app.handlers.api_handler"),
        ("worker", "app.handlers.worker_handler"),
        ("supervisor", "app.handlers.supervisor_handler"),
        ("callbacks", "app.handlers.callback_handler"),
    ],
)
def test_functions_run_python313_on_arm64_with_tracing_and_own_log_group(
    default_stack: Synthesized, construct: str, handler: str
) -> None:
    stack = default_stack.stack
    own = {"supervisor": stack.supervisor.function, "callbacks": stack.callbacks.function}
    function = own[construct] if construct in own else getattr(stack.functions, construct)
    log_group_id = default_stack.stack.get_logical_id(function.log_group.node.default_child)
    default_stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": handler,
            "Runtime": "python3.13",
            "Architectures": ["arm64"],
            "TracingConfig": {"Mode": "Active"},
            "LoggingConfig": {"LogGroup": {"Ref": log_group_id}},
        },
    )
    log_group = default_stack.json["Resources"][log_group_id]
    assert log_group["Properties"]["RetentionInDays"] == 30


def test_function_environment_names_are_settings_the_code_reads(default_stack: Synthesized) -> None:
    from oauth_bridge.settings import BridgeSettings

    aliases = {field.alias for model in (Settings, BridgeSettings) for field in model.model_fields.values()}
    functions = default_stack.resources("AWS::Lambda::Function")
    assert (
        len(functions) == 6
    )  # the API, the worker, the supervisor, the sweeper, the callback function, the OAuth bridge
    for function in functions.values():
        names = set(function["Properties"]["Environment"]["Variables"])
        # POWERTOOLS_* are Powertools' own; PYDANTIC_DISABLE_PLUGINS is read by pydantic and app/cold_start.py.
        unknown = {
            name
            for name in names
            if name not in aliases and not name.startswith("POWERTOOLS_") and name != "PYDANTIC_DISABLE_PLUGINS"
        }
        assert not unknown, f"environment variables no code reads: {unknown}"
        assert function["Properties"]["Environment"]["Variables"]["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


def test_api_function_environment(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    env = default_stack.json["Resources"][default_stack.logical_id(stack.functions.api_function)]["Properties"][
        "Environment"
    ]["Variables"]
    assert env["TASK_TABLE_NAME"] == {"Ref": default_stack.logical_id(stack.tasks.table)}
    # Built from the state machine's fixed name: the function exists before the state machine does.
    assert env["TASK_STATE_MACHINE_ARN"] == _arn("stateMachine", STATE_MACHINE_NAME)
    assert env["MCP_STATE_SECRET_ARN"] == {"Ref": default_stack.logical_id(stack.sealing.secret)}
    assert env["MCP_REQUIRE_PRINCIPAL"] == "true"
    assert env["MCP_SCOPES_SUPPORTED"] == "mcp/invoke"
    assert env["POWERTOOLS_SERVICE_NAME"] == PROJECT_NAME
    worker_env = default_stack.json["Resources"][default_stack.logical_id(stack.functions.worker_function)][
        "Properties"
    ]["Environment"]["Variables"]
    # The worker needs no secret and no state machine ARN (it would be a dependency cycle).
    assert "MCP_STATE_SECRET_ARN" not in worker_env
    assert "TASK_STATE_MACHINE_ARN" not in worker_env


def part_deletes(table: Any, *actions: str) -> dict[str, Any]:
    """A settler deletes the parts and step items of a task without a TTL, 25 a BatchWriteItem, and only
    those (`actions`: the worker also deletes a step item holding a running mark it takes back)."""
    return {
        "Action": list(actions or ("dynamodb:BatchWriteItem",)),
        "Effect": "Allow",
        "Resource": table,
        "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{schema.PART_KEY_PREFIX}*"]}},
    }


def test_api_function_policy_is_exactly_what_it_calls(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    table = _get_att(default_stack.logical_id(stack.tasks.table))
    granted = [
        {
            "Action": ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
            "Effect": "Allow",
            "Resource": table,
        },
        {
            "Action": ["dynamodb:DeleteItem"],
            "Effect": "Allow",
            "Resource": table,
            # Handles, a task's items only to take back a create whose answer was lost, and the parts
            # of a task without a TTL once it is cancelled.
            "Condition": {
                "ForAllValues:StringLike": {
                    "dynamodb:LeadingKeys": [
                        f"{schema.HANDLE_KEY_PREFIX}*",
                        f"{schema.TASK_KEY_PREFIX}*",
                        f"{schema.PART_KEY_PREFIX}*",
                    ]
                }
            },
        },
        part_deletes(table),  # a cancelled task without a TTL: its parts and step items
        {
            "Action": ["dynamodb:Query"],
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [table, f"/index/{schema.OWNER_INDEX}"]]},
        },
        # The direct calls after its writes (the supervisor makes them again from the stream).
        {
            "Action": ["states:SendTaskSuccess", "states:StartExecution"],
            "Effect": "Allow",
            "Resource": _arn("stateMachine", STATE_MACHINE_NAME),
        },
        {
            "Action": ["states:StopExecution"],
            "Effect": "Allow",
            "Resource": _arn("execution", f"{STATE_MACHINE_NAME}:*"),
        },
        {"Action": ["s3:GetObject"], "Effect": "Allow", "Resource": _payload_objects(default_stack)},
        {
            "Action": ["secretsmanager:GetSecretValue"],
            "Effect": "Allow",
            "Resource": {"Ref": default_stack.logical_id(stack.sealing.secret)},
        },
        # The public key of the bridge's token signing key (its access tokens are checked with it).
        {
            "Action": ["kms:GetPublicKey"],
            "Effect": "Allow",
            "Resource": _get_att(default_stack.logical_id(stack.bridge.signing_key)),  # type: ignore[union-attr]
        },
    ]
    _assert_policy(default_stack, stack.functions.api, granted)


def test_worker_function_policy_is_exactly_what_it_calls(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    table = _get_att(default_stack.logical_id(stack.tasks.table))
    granted = [
        {
            "Action": ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"],
            "Effect": "Allow",
            "Resource": table,
        },
        {
            "Action": ["dynamodb:DeleteItem", "dynamodb:PutItem"],
            "Effect": "Allow",
            "Resource": table,
            "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{schema.HANDLE_KEY_PREFIX}*"]}},
        },
        part_deletes(table, "dynamodb:BatchWriteItem", "dynamodb:DeleteItem"),
        {"Action": ["states:SendTaskSuccess"], "Effect": "Allow", "Resource": _arn("stateMachine", STATE_MACHINE_NAME)},
        {"Action": ["s3:GetObject", "s3:PutObject"], "Effect": "Allow", "Resource": _payload_objects(default_stack)},
    ]
    _assert_policy(default_stack, stack.functions.worker, granted)


def test_supervisor_policy_is_exactly_what_it_and_its_stream_mapping_call(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    table = default_stack.logical_id(stack.tasks.table)
    granted = [
        {"Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Effect": "Allow", "Resource": _get_att(table)},
        part_deletes(_get_att(table)),
        {
            "Action": ["states:SendTaskSuccess", "states:StartExecution"],
            "Effect": "Allow",
            "Resource": _arn("stateMachine", STATE_MACHINE_NAME),
        },
        {
            "Action": ["states:StopExecution"],
            "Effect": "Allow",
            "Resource": _arn("execution", f"{STATE_MACHINE_NAME}:*"),
        },
        {"Action": ["dynamodb:ListStreams"], "Effect": "Allow", "Resource": "*"},
        {
            "Action": ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [table, "StreamArn"]},
        },
        # Lambda sends what it gave up as the function's role: the stream's pointers, the status events.
        *(
            {
                "Action": ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
                "Effect": "Allow",
                "Resource": _get_att(default_stack.logical_id(queue)),
            }
            for queue in (stack.supervisor.stream_failures, stack.supervisor.status_event_failures)
        ),
    ]
    _assert_policy(default_stack, stack.supervisor.function, granted)


def test_the_table_streams_new_images_to_the_supervisor_filtered_to_writes_that_leave_an_effect(
    default_stack: Synthesized,
) -> None:
    stack = default_stack.stack
    table = default_stack.logical_id(stack.tasks.table)
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table", {"StreamSpecification": {"StreamViewType": "NEW_IMAGE"}}
    )
    pattern = Capture()
    default_stack.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [table, "StreamArn"]},
            "FunctionName": {"Ref": default_stack.logical_id(stack.supervisor.function.function)},
            "StartingPosition": "TRIM_HORIZON",
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "FilterCriteria": {"Filters": [{"Pattern": pattern}]},
        },
    )
    assert json.loads(pattern.as_string()) == {
        "dynamodb": {"NewImage": {schema.EFFECT_ATTRIBUTE: {"S": list(schema.EFFECTS)}}}
    }


def test_a_stream_record_the_supervisor_cannot_process_is_given_up_within_bounds_to_an_alarmed_queue(
    default_stack: Synthesized,
) -> None:
    """Bisected, retried a bounded number of times within a bounded age (well inside the stream's 24 h,
    so the redrive still finds the records), then pointed to from an encrypted, TLS-only queue."""
    stack = default_stack.stack
    queue = default_stack.logical_id(stack.supervisor.stream_failures)
    retries, age, factor = Capture(), Capture(), Capture()
    default_stack.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": retries,
            "MaximumRecordAgeInSeconds": age,
            "ParallelizationFactor": factor,
            "DestinationConfig": {"OnFailure": {"Destination": _get_att(queue)}},
        },
    )
    assert 0 < retries.as_number() <= 20
    assert 60 <= age.as_number() <= 6 * 3600  # at least 18 h of the stream's 24 h left to replay
    assert factor.as_number() > 1  # a failing task holds back only its share of a shard
    _assert_failure_queue(default_stack, queue)


def test_each_stream_retry_rides_out_throttling_for_a_time_the_context_sets_within_the_supervisors_timeout(
    synth: Any,
) -> None:
    """Retries budgeted in time: inside each invocation the supervisor retries a throttled call for
    `supervisorRetrySeconds`, so the mapping's retries ride out minutes of throttling, not seconds."""

    def supervisor(stack: Synthesized) -> dict[str, Any]:
        props: dict[str, Any] = stack.resources("AWS::Lambda::Function")[
            stack.logical_id(stack.stack.supervisor.function.function)
        ]["Properties"]
        return props

    default = supervisor(synth())
    retries = Capture()
    synth().template.has_resource_properties("AWS::Lambda::EventSourceMapping", {"MaximumRetryAttempts": retries})
    budget = int(default["Environment"]["Variables"]["TASK_SUPERVISOR_RETRY_SECONDS"])
    assert budget == 40 and budget + 10 <= default["Timeout"]
    assert retries.as_number() * budget >= 5 * 60  # the retries together ride out five minutes at least
    tuned = supervisor(synth(supervisorRetrySeconds="2"))
    assert tuned["Environment"]["Variables"]["TASK_SUPERVISOR_RETRY_SECONDS"] == "2"
    with pytest.raises(Exception, match=re.escape("context 'supervisorRetrySeconds' must be between 0 and 50, got 55")):
        synth(supervisorRetrySeconds="55")


def _assert_failure_queue(stack: Synthesized, queue: str) -> None:
    props = stack.resources("AWS::SQS::Queue")[queue]["Properties"]
    assert props["SqsManagedSseEnabled"] is True
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
    stack.template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "Queues": [{"Ref": queue}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})]
                )
            },
        },
    )


def test_ended_executions_of_the_task_state_machine_go_to_the_supervisor_and_what_fails_to_a_dead_letter_queue(
    default_stack: Synthesized,
) -> None:
    stack = default_stack.stack
    supervisor = default_stack.logical_id(stack.supervisor.function.function)
    dead_letters = default_stack.logical_id(stack.supervisor.status_event_failures)
    default_stack.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.states"],
                "detail-type": [schema.EXECUTION_STATUS_CHANGE],
                "detail": {
                    "stateMachineArn": [_arn("stateMachine", STATE_MACHINE_NAME)],
                    # A SUCCEEDED execution wrote its task's terminal status itself or handed the
                    # task on: finished tasks do not invoke the supervisor on its reserved slots.
                    "status": ["ABORTED", "FAILED", "TIMED_OUT"],
                },
            },
            "Targets": [
                Match.object_like(
                    {
                        "Arn": _get_att(supervisor),
                        "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 6 * 3600},
                        "DeadLetterConfig": {"Arn": _get_att(dead_letters)},
                    }
                )
            ],
        },
    )
    default_stack.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "FunctionName": {"Ref": supervisor},
            "MaximumRetryAttempts": 2,
            "DestinationConfig": {"OnFailure": {"Destination": _get_att(dead_letters)}},
        },
    )
    _assert_failure_queue(default_stack, dead_letters)


def test_function_roles_have_no_managed_policies(default_stack: Synthesized) -> None:
    for role in default_stack.resources("AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


# ---- workflow -----------------------------------------------------------------------------------
def test_state_machine_is_standard_logged_traced_and_named(default_stack: Synthesized) -> None:
    log_group = default_stack.logical_id(default_stack.stack.workflow.log_group)
    default_stack.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineName": STATE_MACHINE_NAME,
            "StateMachineType": "STANDARD",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": {
                "Level": "ALL",
                "IncludeExecutionData": False,
                "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": _get_att(log_group)}}],
            },
        },
    )


def test_state_machine_names_are_per_stack_and_within_the_step_functions_limit() -> None:
    app = App()
    assert StateMachineIdentity.of(Stack(app, "McpDev")).name == "McpDev-tasks"
    assert len(StateMachineIdentity.of(Stack(app, "S" * 74)).name) == 80
    with pytest.raises(ValueError, match="longer than 80"):
        StateMachineIdentity.of(Stack(app, "S" * 75))


def test_state_machine_runs_the_asl_file_against_the_worker(default_stack: Synthesized) -> None:
    worker = default_stack.logical_id(default_stack.stack.functions.worker_function)
    location = Capture()
    default_stack.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "DefinitionS3Location": location,
            "DefinitionSubstitutions": Match.object_like({"WorkerFunctionArn": _get_att(worker)}),
        },
    )
    # The deployed definition is the very file the local stack runs, byte for byte.
    staged = default_stack.outdir / f"asset.{location.as_object()['Key']}"
    assert staged.read_bytes() == ASL_PATH.read_bytes()
    definition = load_definition(ASL_PATH.read_text(), ThrottleRetry())
    function_names = [
        (state.get("Parameters") or {}).get("FunctionName")
        for state in definition["States"].values()
        if state["Type"] == "Task" and state["Resource"].startswith("arn:aws:states:::lambda:")
    ]
    assert function_names and set(function_names) == {"${WorkerFunctionArn}"}


def test_state_machine_role_invokes_only_the_worker(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    role = stack.get_logical_id(stack.workflow.state_machine.role.node.default_child)
    statements = _statements_of(default_stack, role)
    invoke = [s for s in statements if "lambda:InvokeFunction" in json.dumps(s["Action"])]
    assert invoke == [
        {
            "Action": "lambda:InvokeFunction",
            "Effect": "Allow",
            "Resource": _get_att(default_stack.logical_id(stack.functions.worker_function)),
        }
    ]
    # Besides its one table write (MarkFailedInTable, tests/infra/test_throttling.py), everything else
    # on that role is what Step Functions needs for logging and X-Ray, on "*" because those actions
    # have no resource-level permissions.
    others = {
        action for s in statements if s not in invoke and s["Action"] != "dynamodb:UpdateItem" for action in s["Action"]
    }
    assert others <= {
        "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
        "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
        "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets",
    }  # fmt: skip


# ---- HTTP front ---------------------------------------------------------------------------------
def test_the_mcp_route_has_no_authorizer_and_the_function_checks_the_pools_tokens(default_stack: Synthesized) -> None:
    template = default_stack.template
    route = next(
        r["Properties"]
        for r in default_stack.resources("AWS::ApiGatewayV2::Route").values()
        if r["Properties"]["RouteKey"] == "POST /mcp"
    )
    assert route["AuthorizationType"] == "NONE" and "AuthorizerId" not in route
    template.resource_count_is("AWS::ApiGatewayV2::Authorizer", 0)
    front = default_stack.stack.front
    assert front.user_pool is not None
    pool = default_stack.logical_id(front.user_pool.user_pool)
    resource_server = default_stack.logical_id(front.user_pool.resource_server)
    env = default_stack.json["Resources"][default_stack.logical_id(default_stack.stack.functions.api_function)][
        "Properties"
    ]["Environment"]["Variables"]
    issuer = {"Fn::GetAtt": [pool, "ProviderURL"]}
    assert {k: v for k, v in env.items() if k.startswith("MCP_JWT_") or k == "MCP_AUTHORIZATION_SERVERS"} == {
        "MCP_JWT_ISSUER": issuer,
        "MCP_JWT_JWKS_URL": {"Fn::Join": ["", [issuer, "/.well-known/jwks.json"]]},
        "MCP_JWT_REQUIRED_SCOPES": "mcp/invoke",
        "MCP_JWT_AUDIENCE_OPTIONAL": "true",
        "MCP_AUTHORIZATION_SERVERS": "self",  # the bridge, on this API's origin
    }
    # The 2025 clients' stream resumption (GET) and session end (DELETE): the same function, no authorizer.
    for route_key in ("GET /mcp", "DELETE /mcp"):
        template.has_resource_properties(
            "AWS::ApiGatewayV2::Route", {"RouteKey": route_key, "AuthorizationType": "NONE"}
        )
    template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {
            "AllowedOAuthFlows": ["client_credentials"],
            "GenerateSecret": True,
            # "mcp/invoke", spelled through the resource server so the client is created after it.
            "AllowedOAuthScopes": [{"Fn::Join": ["", [{"Ref": resource_server}, "/invoke"]]}],
        },
    )


def test_every_route_is_public_and_the_bridges_and_callbacks_routes_reach_their_functions(
    default_stack: Synthesized,
) -> None:
    routes = {
        r["Properties"]["RouteKey"]: r["Properties"]
        for r in default_stack.resources("AWS::ApiGatewayV2::Route").values()
    }
    assert set(routes) == {
        "POST /mcp",
        "GET /mcp",
        "DELETE /mcp",
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp",
        "GET /.well-known/oauth-authorization-server",
        "GET /.well-known/jwks.json",
        "POST /oauth2/register",
        "GET /oauth2/authorize",
        "POST /oauth2/token",
        "GET /oauth2/consent",
        "POST /oauth2/consent",
        "GET /oauth2/callback",
        "POST /oauth2/revoke",
        "POST /tasks/callbacks",  # the callback's token is its credential
    }
    assert {route["AuthorizationType"] for route in routes.values()} == {"NONE"}
    integrations = default_stack.resources("AWS::ApiGatewayV2::Integration")
    bridge = default_stack.logical_id(default_stack.stack.bridge.function.function)  # type: ignore[union-attr]
    for key in (
        "GET /.well-known/oauth-authorization-server",
        "GET /.well-known/jwks.json",
        "POST /oauth2/register",
        "GET /oauth2/authorize",
        "POST /oauth2/consent",
        "GET /oauth2/callback",
        "POST /oauth2/revoke",
    ):
        integration = routes[key]["Target"]["Fn::Join"][1][1]["Ref"]
        assert integrations[integration]["Properties"]["IntegrationUri"] == {"Fn::GetAtt": [bridge, "Arn"]}


def test_the_bridge_cleans_up_every_15_minutes_and_limits_new_clients_per_source_domain_and_person(
    default_stack: Synthesized,
) -> None:
    bridge = default_stack.stack.bridge
    assert bridge is not None
    function = default_stack.logical_id(bridge.function.function)
    default_stack.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(15 minutes)",
            "Targets": [Match.object_like({"Arn": _get_att(function), "Input": '{"action":"cleanup"}'})],
        },
    )
    metrics = [a["Properties"].get("MetricName") for a in default_stack.resources("AWS::CloudWatch::Alarm").values()]
    assert "RegisteredClients" not in metrics  # no client slots any more: nothing to fill
    variables = default_stack.resources("AWS::Lambda::Function")[function]["Properties"]["Environment"]["Variables"]
    # The bridge's origin is configured (the API's execute-api endpoint), never read from a request's Host.
    (api,) = default_stack.resources("AWS::ApiGatewayV2::Api")
    assert variables["BRIDGE_PUBLIC_ORIGIN"] == {"Fn::GetAtt": [api, "ApiEndpoint"]}
    assert default_stack.resources("AWS::ApiGatewayV2::Api")[api]["Properties"]["DisableExecuteApiEndpoint"] is False
    assert {k: v for k, v in variables.items() if k.endswith(("_PER_HOUR", "_BURST"))} == {
        "BRIDGE_REGISTRATIONS_PER_HOUR": "10",
        "BRIDGE_REGISTRATION_BURST": "30",
        "BRIDGE_REGISTRATIONS_PER_HOST_PER_HOUR": "10",
        "BRIDGE_CLIENTS_PER_PERSON_PER_HOUR": "10",
    }
    assert "BRIDGE_MAX_CLIENTS" not in variables


def test_cognito_signs_people_in_through_one_app_client_of_the_bridge_whose_only_callback_is_the_bridges(
    default_stack: Synthesized,
) -> None:
    bridge = default_stack.stack.bridge
    assert bridge is not None
    (api,) = default_stack.resources("AWS::ApiGatewayV2::Api")
    clients = default_stack.resources("AWS::Cognito::UserPoolClient")
    assert len(clients) == 2  # the machine client and the bridge's: none per MCP client
    callback = Capture()
    default_stack.template.has_resource_properties(
        "AWS::Cognito::UserPoolClient",
        {
            "AllowedOAuthFlows": ["code"],
            "AllowedOAuthScopes": ["openid"],
            "AllowedOAuthFlowsUserPoolClient": True,
            "CallbackURLs": [callback],
            "GenerateSecret": True,
            "SupportedIdentityProviders": ["COGNITO"],
            "PreventUserExistenceErrors": "ENABLED",
            "EnableTokenRevocation": True,
        },
    )
    assert callback.as_object() == {"Fn::Join": ["", [{"Fn::GetAtt": [api, "ApiEndpoint"]}, "/oauth2/callback"]]}
    function = default_stack.logical_id(bridge.function.function)
    variables = default_stack.resources("AWS::Lambda::Function")[function]["Properties"]["Environment"]["Variables"]
    assert variables["BRIDGE_APP_CLIENT_ID"] == {"Ref": default_stack.logical_id(bridge.app_client)}
    granted = [
        s
        for p in default_stack.resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"]
        == ["cognito-idp:DescribeUserPoolClient", "cognito-idp:DeleteUserPoolClient", "cognito-idp:AdminGetUser"]
    ]
    # Reads its own secret and whether a person is still enabled; deletes what earlier versions made; creates nothing.
    assert len(granted) == 1


def test_the_bridge_signs_access_tokens_with_a_kms_key_that_never_leaves_kms_and_the_api_reads_its_public_key(
    default_stack: Synthesized,
) -> None:
    bridge = default_stack.stack.bridge
    assert bridge is not None
    default_stack.template.has_resource_properties("AWS::KMS::Key", {"KeySpec": "RSA_2048", "KeyUsage": "SIGN_VERIFY"})
    key = default_stack.logical_id(bridge.signing_key)
    functions = default_stack.resources("AWS::Lambda::Function")
    bridge_variables = functions[default_stack.logical_id(bridge.function.function)]["Properties"]["Environment"]
    api_variables = functions[default_stack.logical_id(default_stack.stack.functions.api_function)]["Properties"][
        "Environment"
    ]
    assert bridge_variables["Variables"]["BRIDGE_SIGNING_KEY_ID"] == {"Ref": key}
    assert api_variables["Variables"]["MCP_BRIDGE_SIGNING_KEY_ID"] == {"Ref": key}
    assert api_variables["Variables"]["MCP_BRIDGE_ISSUER"] == bridge_variables["Variables"]["BRIDGE_PUBLIC_ORIGIN"]
    statements = {
        json.dumps(s["Action"]): s["Resource"]
        for p in default_stack.resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "kms:" in json.dumps(s["Action"])
    }
    sealing = default_stack.logical_id(bridge.sealing_key)
    assert statements == {
        json.dumps(["kms:Sign", "kms:GetPublicKey"]): {"Fn::GetAtt": [key, "Arn"]},  # the bridge only
        json.dumps("kms:GetPublicKey"): {"Fn::GetAtt": [key, "Arn"]},  # the API
        json.dumps(["kms:Encrypt", "kms:Decrypt"]): {"Fn::GetAtt": [sealing, "Arn"]},  # the bridge's form keys
    }
    default_stack.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    assert bridge_variables["Variables"]["BRIDGE_SEALING_KEY_ID"] == {"Ref": sealing}


def test_the_callback_route_invokes_its_own_function_which_touches_only_task_items_and_the_bucket(
    default_stack: Synthesized,
) -> None:
    stack = default_stack.stack
    table = _get_att(default_stack.logical_id(stack.tasks.table))
    granted = [
        {
            "Action": ["dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem"],
            "Effect": "Allow",
            "Resource": table,
            "Condition": {
                "ForAllValues:StringLike": {
                    "dynamodb:LeadingKeys": [f"{schema.TASK_KEY_PREFIX}*", f"{schema.PART_KEY_PREFIX}*"]
                }
            },
        },
        {"Action": ["s3:PutObject"], "Effect": "Allow", "Resource": _payload_objects(default_stack)},
    ]
    _assert_policy(default_stack, stack.callbacks.function, granted)
    default_stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::Integration",
        {
            "IntegrationUri": _get_att(default_stack.logical_id(stack.callbacks.function.function)),
            "PayloadFormatVersion": "2.0",
        },
    )
    worker = default_stack.json["Resources"][default_stack.logical_id(stack.functions.worker_function)]
    callback_url = worker["Properties"]["Environment"]["Variables"]["TASK_CALLBACK_URL"]
    assert json.dumps(callback_url).endswith('"/tasks/callbacks"]]}')


def test_the_payload_bucket_is_private_encrypted_tls_only_and_expires_objects_a_day_after_the_task(
    default_stack: Synthesized,
) -> None:
    rules = Capture()
    default_stack.template.has_resource_properties("AWS::S3::Bucket", {"LifecycleConfiguration": {"Rules": rules}})
    # Only the prefix the runtime writes a task with a TTL under expires; no rule reaches what it keeps.
    assert [(rule.get("Prefix"), rule.get("ExpirationInDays")) for rule in rules.as_array()] == [
        (payloads.EXPIRING_PREFIX, 2)
    ]
    assert not any(payloads.KEPT_PREFIX.startswith(rule.get("Prefix", "")) for rule in rules.as_array())
    default_stack.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": {
                "Rules": [Match.object_like({"ExpirationInDays": 2, "Prefix": "tasks/", "Status": "Enabled"})]
            },
        },
    )
    default_stack.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": [
                    Match.object_like({"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
                ],
                "Version": "2012-10-17",
            }
        },
    )
    api = default_stack.json["Resources"][default_stack.logical_id(default_stack.stack.functions.api_function)]
    assert api["Properties"]["Environment"]["Variables"]["TASK_DEFAULT_TTL_MS"] == "86400000"


def test_http_api_has_no_cors_by_default_and_a_throttled_logged_stage(default_stack: Synthesized) -> None:
    api = next(iter(default_stack.resources("AWS::ApiGatewayV2::Api").values()))["Properties"]
    assert api["ProtocolType"] == "HTTP"
    assert "CorsConfiguration" not in api
    default_stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        {
            "StageName": "$default",
            "AutoDeploy": True,
            "DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100},
            "AccessLogSettings": {
                "DestinationArn": Match.any_value(),
                "Format": Match.string_like_regexp(r"requestId"),
            },
        },
    )
    default_stack.template.resource_count_is("AWS::Lambda::Url", 0)


def test_own_issuer_replaces_the_user_pool_and_cors_is_opt_in(synth: Any) -> None:
    stack = synth(**OWN_ISSUER)
    stack.template.resource_count_is("AWS::Cognito::UserPool", 0)
    stack.template.resource_count_is("AWS::ApiGatewayV2::Authorizer", 0)
    env = stack.json["Resources"][stack.logical_id(stack.stack.functions.api_function)]["Properties"]["Environment"][
        "Variables"
    ]
    assert env["MCP_JWT_ISSUER"] == env["MCP_AUTHORIZATION_SERVERS"] == "https://login.example.com/tenant"
    assert env["MCP_JWT_AUDIENCE"] == "mcp-api,mcp-api-staging"
    assert "MCP_JWT_AUDIENCE_OPTIONAL" not in env and "MCP_JWT_REQUIRED_SCOPES" not in env
    stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::Api",
        {
            "CorsConfiguration": Match.object_like(
                {
                    "AllowOrigins": ["https://console.example.com"],
                    "AllowMethods": ["POST", "GET", "DELETE"],
                    "ExposeHeaders": ["mcp-session-id", "www-authenticate"],
                }
            )
        },
    )


def test_client_credentials_only_keeps_the_pool_and_machine_client_but_no_bridge(synth: Any) -> None:
    stack = synth(**CLIENT_CREDENTIALS)
    assert stack.stack.bridge is None
    stack.template.resource_count_is("AWS::Cognito::UserPoolClient", 1)
    stack.template.resource_count_is("AWS::Lambda::Function", 5)  # API, worker, supervisor, sweeper, callbacks
    env = stack.json["Resources"][stack.logical_id(stack.stack.functions.api_function)]["Properties"]["Environment"][
        "Variables"
    ]
    pool = stack.logical_id(stack.stack.front.user_pool.user_pool)  # type: ignore[union-attr]
    assert env["MCP_AUTHORIZATION_SERVERS"] == {"Fn::GetAtt": [pool, "ProviderURL"]}  # Cognito itself
    assert {r["Properties"]["RouteKey"] for r in stack.resources("AWS::ApiGatewayV2::Route").values()} == {
        "POST /mcp",
        "GET /mcp",
        "DELETE /mcp",
        "GET /.well-known/oauth-protected-resource",
        "GET /.well-known/oauth-protected-resource/mcp",
        "POST /tasks/callbacks",
    }


def test_the_readme_own_issuer_example_synthesizes_with_cdk_json_as_it_is(synth: Any) -> None:
    """Issue 15 item 5: `-c jwtIssuer=... -c jwtAudience=...` on top of cdk.json's context."""
    from local_stack.synth import context_for

    context = context_for({"jwtIssuer": "https://login.example.com/", "jwtAudience": "mcp-api"})
    stack = synth(**{k: v for k, v in context.items() if not k.startswith("@aws-cdk")})
    assert stack.stack.config.auth.mode == "issuer"
    stack.template.resource_count_is("AWS::Cognito::UserPool", 0)


def test_two_stacks_in_one_account_get_different_cognito_domains(synth: Any) -> None:
    """Issue 15 item 5: the prefix was `mcp-<account>` for every stack."""
    domains = [
        next(iter(synth(stackName=name).resources("AWS::Cognito::UserPoolDomain").values()))["Properties"]["Domain"]
        for name in ("McpDev", "McpProd")
    ]
    assert domains == [
        {"Fn::Join": ["-", ["mcpdev", {"Ref": "AWS::AccountId"}]]},
        {"Fn::Join": ["-", ["mcpprod", {"Ref": "AWS::AccountId"}]]},
    ]
    chosen = synth(cognitoDomainPrefix="acme-mcp-login").resources("AWS::Cognito::UserPoolDomain")
    assert next(iter(chosen.values()))["Properties"]["Domain"] == "acme-mcp-login"


def test_function_url_is_optional_and_iam_only(synth: Any) -> None:
    stack = synth(**FULL_OPTIONS)
    stack.template.has_resource_properties(
        "AWS::Lambda::Url",
        {"AuthType": "AWS_IAM", "TargetFunctionArn": _get_att(stack.logical_id(stack.stack.functions.api_function))},
    )
    url = next(iter(stack.resources("AWS::Lambda::Url").values()))["Properties"]
    assert "Cors" not in url
    stack.template.has_output("FunctionUrl", {})


def test_an_iam_caller_is_its_role_session_unless_the_context_binds_it_to_the_access_key(synth: Any) -> None:
    def api_environment(stack: Synthesized) -> dict[str, Any]:
        function = stack.resources("AWS::Lambda::Function")[stack.logical_id(stack.stack.functions.api_function)]
        environment: dict[str, Any] = function["Properties"]["Environment"]["Variables"]
        return environment

    assert "MCP_IAM_PRINCIPAL" not in api_environment(synth(functionUrl="true"))  # the default: the session
    assert api_environment(synth(functionUrl="true", iamPrincipal="accessKey"))["MCP_IAM_PRINCIPAL"] == "access-key"


def test_the_asset_ceiling_is_50_mb_unless_cdk_json_says_otherwise(synth: Any) -> None:
    cdk_json = json.loads((REPO / "cdk.json").read_text())["context"]
    assert (synth().stack.config.asset_size_limit_mb, cdk_json["assetSizeLimitMb"]) == (50, 50)
    assert synth(assetSizeLimitMb="120").stack.config.asset_size_limit_mb == 120  # `-c assetSizeLimitMb=120`
    assert synth().stack.asset_sizes == {}  # bundling skipped here: the CLI synth's asset is checked instead


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"createUserPool": "true"}, "'createUserPool' was replaced by 'auth'"),
        ({"auth": "issuer"}, "auth=issuer needs 'jwtIssuer'"),
        ({"auth": "cognito", "jwtIssuer": "https://issuer.example.com"}, "'jwtIssuer' is for auth=issuer"),
        ({"jwtIssuer": "http://login.example.com"}, "'jwtIssuer' must be an https URL"),
        ({"auth": "okta"}, "context 'auth' must be one of"),
        ({"cognitoDomainPrefix": "my-aws-login"}, "Cognito domain prefix 'my-aws-login' is not allowed"),
        ({"stackName": "Amazon-Mcp"}, "Cognito domain prefix 'amazon-mcp' is not allowed"),
        ({"resourceUrl": "http://mcp.example.com/mcp"}, "'resourceUrl' must be an https URL"),
        ({"removalPolicy": "sometimes"}, "removalPolicy"),
        ({"logRetentionDays": "13"}, "log retention"),
        (
            {"throttleRateLimit": "fifty"},
            "context 'throttleRateLimit' must be a whole number between 1 and 10000, got 'fifty'",
        ),
        ({"logRetentionDays": "a month"}, "context 'logRetentionDays' must be a whole number between 1 and 3653"),
        ({"iamPrincipal": "key"}, "context 'iamPrincipal' must be one of ['session', 'accessKey'], got 'key'"),
        ({"registrationBurst": "-1"}, "context 'registrationBurst' must be between 1 and 10000, got -1"),
        ({"throttleRateLmit": "50"}, "unknown context key 'throttleRateLmit' (did you mean 'throttleRateLimit'?): "),
        (
            {"workerTimeout": "60"},
            "the keys are alarmEmail, alarmTopicArn, apiMemoryMb, apiReservedConcurrency, apiTimeoutSeconds, ",
        ),
        (
            {"alarmTopicArn": "pager"},
            "context 'alarmTopicArn' must be an SNS topic ARN such as arn:aws:sns:eu-west-1:111122223333:pager, "
            "got 'pager'",
        ),
        ({"assetSizeLimitMb": "big"}, "context 'assetSizeLimitMb' must be a whole number between 1 and 250, got 'big'"),
        ({"assetSizeLimitMb": 12.5}, "context 'assetSizeLimitMb' must be a whole number between 1 and 250, got 12.5"),
        ({"assetSizeLimitMb": True}, "context 'assetSizeLimitMb' must be a whole number between 1 and 250, got True"),
        ({"assetSizeLimitMb": 0}, "context 'assetSizeLimitMb' must be between 1 and 250, got 0"),
        ({"assetSizeLimitMb": "300"}, "context 'assetSizeLimitMb' must be between 1 and 250, got 300"),
    ],
)
def test_bad_context_stops_the_synth_with_a_clear_message(synth: Any, context: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=re.escape(message)):
        synth(**context)


# ---- secret, monitoring, outputs ----------------------------------------------------------------
def test_sealing_secret_is_generated(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::SecretsManager::Secret",
        {"GenerateSecretString": Match.object_like({"PasswordLength": 64, "ExcludePunctuation": True})},
    )


def test_alarms_go_to_a_topic_the_team_already_has_without_a_topic_of_the_templates(synth: Any) -> None:
    pager = "arn:aws:sns:eu-west-1:111122223333:pager"
    stack = synth(alarmTopicArn=pager)
    alarms = stack.resources("AWS::CloudWatch::Alarm")
    assert len(alarms) > 10
    assert {json.dumps(alarm["Properties"]["AlarmActions"]) for alarm in alarms.values()} == {json.dumps([pager])}
    assert stack.resources("AWS::SNS::Topic") == {}


def test_with_an_email_and_the_teams_topic_every_alarm_notifies_both(synth: Any) -> None:
    pager = "arn:aws:sns:eu-west-1:111122223333:pager"
    stack = synth(alarmTopicArn=pager, alarmEmail="ops@example.com")
    (own_topic,) = stack.resources("AWS::SNS::Topic")
    for alarm in stack.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": own_topic}, pager]


def test_alarms_cover_errors_throttles_failed_executions_and_table_throttling(synth: Any) -> None:
    stack = synth(**FULL_OPTIONS)
    alarms = stack.resources("AWS::CloudWatch::Alarm")
    by_metric = {}
    for alarm in alarms.values():
        props = alarm["Properties"]
        if "MetricName" in props:
            by_metric.setdefault(props["MetricName"], []).append(props)
        else:
            names = {m["MetricStat"]["Metric"]["MetricName"] for m in props["Metrics"] if "MetricStat" in m}
            by_metric.setdefault(" + ".join(sorted(names)), []).append(props)
        assert props["AlarmActions"], "every alarm notifies the alarm topic when an email is configured"
    assert sorted(by_metric) == [
        "ApproximateNumberOfMessagesVisible",  # stream records and status events given up to their queues
        "Errors",
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "IteratorAge",  # starts, resumes or stops waiting in the stream
        "ReadThrottleEvents + WriteThrottleEvents",
        "RejectedRequests",  # answered -32603 (tests/infra/test_dashboard_metrics.py)
        "SweepBehind",  # the sweeper falls behind (tests/infra/test_sweeper_intent.py)
        "TaskWritesRefused",  # a task's write refused for good (tests/infra/test_sweeper_intent.py)
        "TasksRepaired",  # the sweeper's repairs
        "TasksStale",  # working tasks silent for a lease while their execution runs (a hanging tool)
        "Throttles",
    ]
    assert len(by_metric["Errors"]) == 4  # API, worker, supervisor and sweeper
    assert by_metric["IteratorAge"][0]["Threshold"] == 60_000
    queues = {
        stack.logical_id(queue)
        for queue in (stack.stack.supervisor.stream_failures, stack.stack.supervisor.status_event_failures)
    }
    given_up = by_metric["ApproximateNumberOfMessagesVisible"]
    assert {alarm["Dimensions"][0]["Value"]["Fn::GetAtt"][0] for alarm in given_up} == queues
    assert all(alarm["Threshold"] == 1 and alarm["Statistic"] == "Maximum" for alarm in given_up)
    stack.template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    stack.template.has_resource_properties(
        "AWS::SNS::TopicPolicy", Match.object_like({"PolicyDocument": Match.any_value()})
    )


def test_outputs(default_stack: Synthesized) -> None:
    outputs = default_stack.json["Outputs"]
    assert {"EndpointUrl", "TaskTableName", "StateMachineArn", "UserPoolId", "UserPoolClientId", "TokenUrl"} <= set(
        outputs
    )
    assert outputs["TaskTableName"]["Value"] == {"Ref": default_stack.logical_id(default_stack.stack.tasks.table)}
    # What `make redrive STACK=...` reads: the on-failure queue and the supervisor it replays to.
    supervisor = default_stack.stack.supervisor
    assert outputs["StreamFailureQueueUrl"]["Value"] == {"Ref": default_stack.logical_id(supervisor.stream_failures)}
    assert outputs["SupervisorFunctionName"]["Value"] == {"Ref": default_stack.logical_id(supervisor.function.function)}
    endpoint = json.dumps(outputs["EndpointUrl"]["Value"])
    assert "/mcp" in endpoint and "ApiEndpoint" in endpoint


CUSTOM_DOMAIN = {
    "customDomainName": "mcp.example.com",
    "customDomainCertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0f0e0d0c",
}


def test_a_custom_domain_is_mapped_at_its_root_and_becomes_the_endpoints_resource_uri(synth: Any) -> None:
    stack = synth(**CUSTOM_DOMAIN)
    stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::DomainName",
        {
            "DomainName": "mcp.example.com",
            "DomainNameConfigurations": [
                Match.object_like({"CertificateArn": CUSTOM_DOMAIN["customDomainCertificateArn"]})
            ],
        },
    )
    (mapping,) = stack.resources("AWS::ApiGatewayV2::ApiMapping").values()
    assert "ApiMappingKey" not in mapping["Properties"]  # a base path would hide /.well-known/* from clients
    functions = stack.resources("AWS::Lambda::Function").values()
    variables = [f["Properties"]["Environment"]["Variables"] for f in functions]
    assert {v.get("MCP_RESOURCE_URL") for v in variables if "MCP_JWT_ISSUER" in v} == {"https://mcp.example.com/mcp"}
    assert {v.get("BRIDGE_RESOURCE_URL") for v in variables if "BRIDGE_TABLE_NAME" in v} == {
        "https://mcp.example.com/mcp"
    }
    # The domain is the one origin: the bridge names it, and the execute-api host beside it is off.
    assert {v.get("BRIDGE_PUBLIC_ORIGIN") for v in variables if "BRIDGE_TABLE_NAME" in v} == {"https://mcp.example.com"}
    stack.template.has_resource_properties("AWS::ApiGatewayV2::Api", {"DisableExecuteApiEndpoint": True})
    assert stack.json["Outputs"]["EndpointUrl"]["Value"] == "https://mcp.example.com/mcp"
    assert "CustomDomainTarget" in stack.json["Outputs"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (
            {"customDomainName": "mcp.example.com"},
            "'customDomainName' and 'customDomainCertificateArn' are set together",
        ),
        ({**CUSTOM_DOMAIN, "customDomainName": "https://mcp.example.com/"}, "'customDomainName' must be a host name"),
        ({**CUSTOM_DOMAIN, "customDomainCertificateArn": "cert-1"}, "'customDomainCertificateArn' must be an ACM"),
    ],
)
def test_a_custom_domain_that_cannot_work_is_refused_at_synth(
    synth: Any, context: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        synth(**context)
