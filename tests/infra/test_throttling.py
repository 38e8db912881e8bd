"""Throttling delays tasks, never fails them (issue 21 items 3 and 7): the retry policy the template
deploys, the concurrency split, the state machine's own terminal write, and the renewal arithmetic."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match
from infra.capabilities._lambda import API_HANDLER, BRIDGE_HANDLER
from infra.capabilities.callbacks import CALLBACK_PATH
from infra.capabilities.http_front import MCP_METHODS, MCP_PATH, METADATA_PATHS
from infra.capabilities.oauth_bridge import BRIDGE_ROUTES
from infra.capabilities.workflow import (
    ASL_PATH,
    HISTORY_EVENT_LIMIT,
    load_definition,
    rounds_within_history_limit,
    state_events,
    worst_case_events,
)
from infra.config import ThrottleRetry

from mcp_runtime.settings import Settings
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import ACTIVE_STATUSES, EXECUTION_FAILED_ERROR, FAILED
from mcp_runtime.tasks.store import WORKING_PARTS, DynamoTaskStore
from mcp_runtime.tasks.worker import DEFAULT_ROUNDS_PER_EXECUTION
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

THROTTLE = "Lambda.TooManyRequestsException"
LAMBDA_STATES = ("RunTool", "WaitForToken", "Settle")
DEPLOYED = ThrottleRetry()


def _definition(retry: ThrottleRetry = DEPLOYED) -> dict[str, Any]:
    return load_definition(ASL_PATH.read_text(encoding="utf-8"), retry)


def _raw_states() -> dict[str, Any]:
    """The file as written: numeric placeholders quoted so it parses, to read which placeholder sits where."""
    text = ASL_PATH.read_text(encoding="utf-8")
    for name in ("ThrottleRetryIntervalSeconds", "ThrottleRetryMaxDelaySeconds", "ThrottleRetryMaxAttempts"):
        text = text.replace("${" + name + "}", f'"${{{name}}}"')
    states: dict[str, Any] = json.loads(text)["States"]
    return states


def _worker(stack: Synthesized) -> dict[str, Any]:
    return stack.json["Resources"][stack.logical_id(stack.stack.functions.worker_function)]["Properties"]


# ---- the retry policy ---------------------------------------------------------------------------
@pytest.mark.parametrize("state", LAMBDA_STATES)
def test_every_worker_step_waits_out_throttling_with_full_jitter_backoff_from_substituted_intervals(state: str) -> None:
    retriers = _raw_states()[state]["Retry"]
    assert retriers[0] == {
        "ErrorEquals": [THROTTLE],
        "IntervalSeconds": "${ThrottleRetryIntervalSeconds}",
        "MaxDelaySeconds": "${ThrottleRetryMaxDelaySeconds}",
        "BackoffRate": 2,
        "JitterStrategy": "FULL",
        "MaxAttempts": "${ThrottleRetryMaxAttempts}",
    }
    # No later retrier catches the throttle with a short policy first (Step Functions takes the first match).
    assert all(THROTTLE not in retrier["ErrorEquals"] for retrier in retriers[1:])
    assert all("States.ALL" not in retrier["ErrorEquals"] for retrier in retriers)


def test_the_deployed_throttle_backoff_starts_at_seconds_keeps_its_cap_and_cdk_fills_it_in(
    default_stack: Synthesized,
) -> None:
    substitutions = Capture()
    default_stack.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine", {"DefinitionSubstitutions": substitutions}
    )
    values = substitutions.as_object()
    assert {key: values[key] for key in values if key.startswith("Throttle")} == {
        "ThrottleRetryIntervalSeconds": "2",  # a slot may free in a second: the first wait is short
        "ThrottleRetryMaxDelaySeconds": "900",
        "ThrottleRetryMaxAttempts": "20",
    }
    # Each wait is random in [0, min(2 * 2^n, 900)] s: the bound on all the waits of one step.
    caps = [min(2 * 2**attempt, 900) for attempt in range(20)]
    assert caps[:3] == [2, 4, 8] and caps[-1] == 900
    assert sum(caps) == 10_922  # 3 h 2 min


def test_the_throttle_intervals_come_from_context_so_tests_can_scale_them_down(synth: Any) -> None:
    stack = synth(throttleRetryIntervalSeconds="1", throttleRetryMaxDelaySeconds="2", throttleRetryMaxAttempts="4")
    stack.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "DefinitionSubstitutions": Match.object_like(
                {
                    "ThrottleRetryIntervalSeconds": "1",
                    "ThrottleRetryMaxDelaySeconds": "2",
                    "ThrottleRetryMaxAttempts": "4",
                }
            )
        },
    )


# ---- the terminal path that needs no worker ------------------------------------------------------
def test_mark_failed_falls_back_to_its_own_table_write_when_the_worker_cannot_be_invoked() -> None:
    states = _definition()["States"]
    assert states["MarkFailed"]["Catch"] == [
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.markFailed", "Next": "MarkFailedInTable"}
    ]
    direct = states["MarkFailedInTable"]
    assert direct["Resource"] == "arn:aws:states:::dynamodb:updateItem"
    assert direct["Next"] == "ExecutionFailed"
    assert [catcher["Next"] for catcher in direct["Catch"]] == ["ExecutionFailed"]
    params = direct["Parameters"]
    assert params["TableName"] == "${TaskTableName}"
    assert params["Key"] == {schema.PARTITION_KEY: {"S.$": f"States.Format('{schema.TASK_KEY_PREFIX}{{}}', $.taskId)"}}


def test_the_state_machines_fail_write_is_the_workers_fail_write() -> None:
    """What TaskStore.finish(failed) sets and removes (tests/integration/test_throttling.py runs both)."""
    params = _definition()["States"]["MarkFailedInTable"]["Parameters"]
    names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
    update = params["UpdateExpression"]
    removes, sets = update.removeprefix("REMOVE ").split(" SET ")  # removals first, as the store writes it
    assigned = {names[part.split(" = ")[0].strip()]: part.split(" = ", 1)[1].strip() for part in sets.split(", ")}
    assert set(assigned) == {"status", "error", "lastUpdatedAt", "writeId", "version"}
    assert values[assigned["status"]] == {"S": FAILED}
    assert json.loads(values[assigned["error"]]["S"]) == EXECUTION_FAILED_ERROR
    assert values[assigned["error"]]["S"] == json.dumps(EXECUTION_FAILED_ERROR, separators=(",", ":"))
    assert values[assigned["lastUpdatedAt"]] == {"S.$": "$$.State.EnteredTime"}
    assert assigned["version"] == "#version + :one" and values[":one"] == {"N": "1"}
    removed = {names[name.strip()] for name in removes.split(",")}
    # What every terminal write removes, the active-task index attribute (its sparse index), and what
    # only a working task needs (so the write fits whatever the task carried).
    assert removed == {"taskToken", "statusMessage", "effect", "leaseExpiresAt", *WORKING_PARTS}
    # The store's own terminal write, attribute for attribute: change one, change the other.
    terminal, _ = DynamoTaskStore("tasks")._terminal(FAILED, dict(EXECUTION_FAILED_ERROR))
    assert {terminal.names[part.split(" = ")[0]] for part in terminal.sets} == set(assigned)
    assert {terminal.names[name] for name in terminal.removes} | {"leaseExpiresAt"} == removed
    condition = params["ConditionExpression"]
    assert condition == (
        "attribute_exists(#pk) AND #status IN (:working, :inputRequired)"
        " AND (#executionName = :execution OR attribute_not_exists(#executionName))"
    )  # as TaskStore.settle_lost requires the execution: only the current one fails the task
    assert (names["#executionName"], values[":execution"]) == ("executionName", {"S.$": "$$.Execution.Name"})
    assert {values[":working"]["S"], values[":inputRequired"]["S"]} == set(ACTIVE_STATUSES)


def test_the_state_machine_role_invokes_the_worker_and_updates_task_items_only(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    role = stack.get_logical_id(stack.workflow.state_machine.role.node.default_child)
    table = default_stack.logical_id(stack.tasks.table)
    worker = default_stack.logical_id(stack.functions.worker_function)
    default_stack.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": role}],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        {
                            "Action": "dynamodb:UpdateItem",
                            "Effect": "Allow",
                            "Resource": {"Fn::GetAtt": [table, "Arn"]},
                            "Condition": {
                                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{schema.TASK_KEY_PREFIX}*"]}
                            },
                        },
                        {
                            "Action": "lambda:InvokeFunction",
                            "Effect": "Allow",
                            "Resource": {"Fn::GetAtt": [worker, "Arn"]},
                        },
                    ]
                )
            },
        },
    )
    assert stack.workflow.integrations == {"table": ["dynamodb:UpdateItem"], "worker": ["lambda:InvokeFunction"]}


# ---- the concurrency split -----------------------------------------------------------------------
def _reserved(stack: Synthesized) -> dict[str, Any]:
    functions = {
        "api": stack.stack.functions.api_function,
        "worker": stack.stack.functions.worker_function,
        "supervisor": stack.stack.supervisor.function.function,
    }
    if stack.stack.bridge is not None:
        functions["bridge"] = stack.stack.bridge.function.function
    resources = stack.json["Resources"]
    return {
        name: resources[stack.logical_id(fn)]["Properties"].get("ReservedConcurrentExecutions")
        for name, fn in functions.items()
    }


def test_the_worker_and_supervisor_reserve_concurrency_and_the_api_keeps_the_unreserved_pool(
    default_stack: Synthesized,
) -> None:
    assert _reserved(default_stack) == {"api": None, "worker": 50, "supervisor": 10, "bridge": 20}


def test_cdk_json_sets_the_concurrency_split() -> None:
    context = json.loads((ASL_PATH.parents[2] / "cdk.json").read_text())["context"]
    assert {key: context[key] for key in context if "Concurrency" in key} == {
        "lambdaAccountConcurrency": 1000,
        "workerReservedConcurrency": 50,
        "supervisorReservedConcurrency": 10,
        "apiReservedConcurrency": "none",
        "bridgeReservedConcurrency": 20,
    }


def test_each_reservation_comes_from_context_and_none_leaves_a_function_unreserved(synth: Any) -> None:
    stack = synth(
        apiReservedConcurrency="20",
        workerReservedConcurrency="none",
        supervisorReservedConcurrency="3",
        bridgeReservedConcurrency="2",
    )
    assert _reserved(stack) == {"api": 20, "worker": None, "supervisor": 3, "bridge": 2}


@pytest.mark.parametrize(
    ("context", "message"),
    [
        # A young account (10 concurrent executions) cannot reserve anything: said before the deploy.
        ({"lambdaAccountConcurrency": "10"}, r"reserved concurrency 80 leaves -70 of the account's 10"),
        ({"lambdaAccountConcurrency": "150"}, r"Lambda keeps at least 100 unreserved"),
        ({"workerReservedConcurrency": "0"}, "'workerReservedConcurrency' must be between 1 and"),
        ({"throttleRetryIntervalSeconds": "120", "throttleRetryMaxDelaySeconds": "60"}, "must be at least"),
        ({"executionRoundLimit": "1000"}, "at most 138 rounds fit in Step Functions' 25,000-event history"),
    ],
)
def test_a_split_or_policy_that_cannot_deploy_stops_the_synth_with_a_clear_message(
    synth: Any, context: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        synth(**context)


def test_a_young_account_deploys_with_nothing_reserved(synth: Any) -> None:
    stack = synth(
        lambdaAccountConcurrency="10",
        workerReservedConcurrency="none",
        supervisorReservedConcurrency="none",
        bridgeReservedConcurrency="none",
    )
    assert _reserved(stack) == {"api": None, "worker": None, "supervisor": None, "bridge": None}


def test_the_bridge_reserves_concurrency_of_its_own_so_a_flood_of_sign_ins_cannot_take_the_apis(
    default_stack: Synthesized,
) -> None:
    reserved = Capture()
    default_stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        Match.object_like({"Handler": BRIDGE_HANDLER, "ReservedConcurrentExecutions": reserved}),
    )
    context = json.loads((ASL_PATH.parents[2] / "cdk.json").read_text())["context"]
    assert reserved.as_number() == context["bridgeReservedConcurrency"] == 20
    default_stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        Match.object_like({"Handler": API_HANDLER, "ReservedConcurrentExecutions": Match.absent()}),
    )


def test_without_a_bridge_its_reservation_is_neither_made_nor_counted(synth: Any) -> None:
    # 50 + 10 leave exactly the 100 Lambda keeps: the bridge's 20 would not fit, and is not asked for.
    stack = synth(auth="client-credentials", lambdaAccountConcurrency="160")
    assert stack.stack.bridge is None
    assert _reserved(stack) == {"api": None, "worker": 50, "supervisor": 10}
    with pytest.raises(ValueError, match="reserved concurrency 80 leaves 80 of the account's 160"):
        synth(lambdaAccountConcurrency="160")


def test_throttling_of_the_api_worker_and_supervisor_each_raise_an_alarm(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    throttled = {
        props["Dimensions"][0]["Value"]["Ref"]
        for props in (alarm["Properties"] for alarm in default_stack.resources("AWS::CloudWatch::Alarm").values())
        if props.get("MetricName") == "Throttles"
    }
    assert throttled == {
        default_stack.logical_id(stack.functions.api_function),
        default_stack.logical_id(stack.functions.worker_function),
        default_stack.logical_id(stack.supervisor.function.function),
    }


# ---- the history-limit arithmetic (item 7) -------------------------------------------------------
def test_a_task_state_counts_every_attempt_its_retriers_allow() -> None:
    states = _definition()["States"]
    # RunTool: 1 attempt + 20 throttle retries + 3 service retries + 1 rerun, 3 events each, plus entered/exited.
    assert state_events(states["RunTool"]) == 2 + 3 * (1 + 20 + 3 + 1)
    # A task-token wait also logs TaskSubmitted.
    assert state_events(states["WaitForToken"]) == 2 + 4 * (1 + 20 + 3)
    assert state_events(states["NextStep"]) == 2


def test_renewal_comes_before_the_history_limit_even_when_every_retry_is_taken(default_stack: Synthesized) -> None:
    round_events, end_events = worst_case_events(_definition())
    assert round_events == 77 + 2 + 98 + 2  # RunTool, NextStep, WaitForToken, NextRound
    rounds = rounds_within_history_limit(_definition())
    assert rounds == 138
    assert 2 + rounds * round_events + end_events <= HISTORY_EVENT_LIMIT
    assert 2 + (rounds + 1) * round_events + end_events > HISTORY_EVENT_LIMIT
    # The old fixed 1,000 rounds would have reached 179,000 events with every retry taken.
    assert 1000 * round_events > HISTORY_EVENT_LIMIT
    assert _worker(default_stack)["Environment"]["Variables"]["TASK_ROUNDS_PER_EXECUTION"] == str(rounds)
    # What the worker and its settings assume when the variable is missing is the same bound.
    assert rounds == DEFAULT_ROUNDS_PER_EXECUTION
    assert Settings.model_fields["task_rounds_per_execution"].default == rounds


def test_fewer_throttle_retries_let_more_rounds_fit(synth: Any) -> None:
    scaled = ThrottleRetry(1, 1, 3)
    rounds = rounds_within_history_limit(_definition(scaled))
    assert rounds > 138
    stack = synth(throttleRetryIntervalSeconds="1", throttleRetryMaxDelaySeconds="1", throttleRetryMaxAttempts="3")
    assert _worker(stack)["Environment"]["Variables"]["TASK_ROUNDS_PER_EXECUTION"] == str(rounds)


# ---- per-route limits: the sign-in routes and /mcp apart (issue 36 item 5) ----------------------
def _route_keys(stack: Synthesized) -> set[str]:
    return {route["Properties"]["RouteKey"] for route in stack.resources("AWS::ApiGatewayV2::Route").values()}


def _route_settings(stack: Synthesized) -> dict[str, Any]:
    settings = Capture()
    stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage", Match.object_like({"StageName": "$default", "RouteSettings": settings})
    )
    return settings.as_object()


MCP_KEYS = {f"{method} {MCP_PATH}" for method in MCP_METHODS}
SIGN_IN_KEYS = {f"{method.value} {path}" for method, path in BRIDGE_ROUTES}


def test_the_sign_in_routes_and_mcp_each_have_limits_of_their_own_and_the_rest_keep_the_stage_default(
    default_stack: Synthesized,
) -> None:
    settings = _route_settings(default_stack)
    assert settings == {
        **{key: {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100} for key in MCP_KEYS},
        **{key: {"ThrottlingRateLimit": 10, "ThrottlingBurstLimit": 20} for key in SIGN_IN_KEYS},
    }
    # Every key names a route the stack creates; the routes left out fall back to the stage's default.
    assert set(settings) <= _route_keys(default_stack)
    assert _route_keys(default_stack) - set(settings) == {
        *(f"GET {path}" for path in METADATA_PATHS),
        f"POST {CALLBACK_PATH}",
    }
    default_stack.template.has_resource_properties(
        "AWS::ApiGatewayV2::Stage",
        Match.object_like({"DefaultRouteSettings": {"ThrottlingRateLimit": 50, "ThrottlingBurstLimit": 100}}),
    )


def test_the_stage_waits_for_every_route_it_throttles(default_stack: Synthesized) -> None:
    # A RouteSettings key naming a route not created yet fails the deployment.
    stage = next(iter(default_stack.resources("AWS::ApiGatewayV2::Stage").values()))
    route_ids = {
        logical_id
        for logical_id, route in default_stack.resources("AWS::ApiGatewayV2::Route").items()
        if route["Properties"]["RouteKey"] in MCP_KEYS | SIGN_IN_KEYS
    }
    assert len(route_ids) == len(MCP_KEYS | SIGN_IN_KEYS)
    assert route_ids <= set(stage["DependsOn"])


# The template's own cdk.json: a project's is its team's (never updated); the code's defaults stand for its keys.
template_cdk_json = pytest.mark.skipif(
    not (ASL_PATH.parents[2] / "copier.yml").exists(), reason="the template's cdk.json: a project's own is its team's"
)


@template_cdk_json
def test_cdk_json_sets_the_per_route_limits() -> None:
    context = json.loads((ASL_PATH.parents[2] / "cdk.json").read_text())["context"]
    assert {key: context[key] for key in context if "throttle" in key.lower() and "Retry" not in key} == {
        "throttleRateLimit": 50,
        "throttleBurstLimit": 100,
        "mcpThrottleRateLimit": 50,
        "mcpThrottleBurstLimit": 100,
        "signInThrottleRateLimit": 10,
        "signInThrottleBurstLimit": 20,
    }


def test_each_per_route_limit_comes_from_context(synth: Any) -> None:
    stack = synth(
        mcpThrottleRateLimit="200",
        mcpThrottleBurstLimit="400",
        signInThrottleRateLimit="2",
        signInThrottleBurstLimit="5",
    )
    settings = _route_settings(stack)
    assert {key: settings[key] for key in ("POST /mcp", "POST /oauth2/token")} == {
        "POST /mcp": {"ThrottlingRateLimit": 200, "ThrottlingBurstLimit": 400},
        "POST /oauth2/token": {"ThrottlingRateLimit": 2, "ThrottlingBurstLimit": 5},
    }


def test_without_the_bridge_only_mcp_has_limits_of_its_own(synth: Any) -> None:
    assert set(_route_settings(synth(auth="client-credentials"))) == MCP_KEYS


def test_a_per_route_limit_out_of_range_stops_the_synth(synth: Any) -> None:
    with pytest.raises(ValueError, match="context 'signInThrottleBurstLimit' must be between 1 and 5000, got 0"):
        synth(signInThrottleBurstLimit="0")


# ---- the per-source rate rule: AWS WAF on the Cognito user pool ---------------------------------
def test_a_waf_rate_rule_per_source_address_guards_the_user_pool_by_default(default_stack: Synthesized) -> None:
    web_acl = Capture()
    default_stack.template.has_resource_properties(
        "AWS::WAFv2::WebACL",
        Match.object_like(
            {
                "Scope": "REGIONAL",
                "DefaultAction": {"Allow": {}},
                "Rules": [
                    Match.object_like(
                        {
                            "Name": "PerSourceRate",
                            "Priority": 0,
                            "Action": {"Block": {}},
                            "Statement": {
                                "RateBasedStatement": {
                                    "AggregateKeyType": "IP",
                                    "Limit": 300,
                                    "EvaluationWindowSec": 300,
                                }
                            },
                        }
                    )
                ],
            }
        ),
    )
    default_stack.template.resource_count_is("AWS::WAFv2::WebACL", 1)
    default_stack.template.has_resource_properties(
        "AWS::WAFv2::WebACLAssociation",
        {
            "ResourceArn": {
                "Fn::GetAtt": [default_stack.logical_id(default_stack.stack.front.user_pool.user_pool), "Arn"]
            },
            "WebACLArn": {"Fn::GetAtt": [web_acl, "Arn"]},
        },
    )
    assert web_acl.as_string() == default_stack.stack.get_logical_id(default_stack.stack.sign_in_firewall.web_acl)


@template_cdk_json
def test_cdk_json_turns_the_waf_rule_on_at_300_requests_in_five_minutes() -> None:
    context = json.loads((ASL_PATH.parents[2] / "cdk.json").read_text())["context"]
    assert (context["signInWaf"], context["signInWafRateLimit"]) == (True, 300)


def test_the_waf_rate_limit_comes_from_context_and_signinwaf_false_leaves_no_web_acl(synth: Any) -> None:
    limit = Capture()
    synth(signInWafRateLimit="1000").template.has_resource_properties(
        "AWS::WAFv2::WebACL",
        Match.object_like(
            {"Rules": [Match.object_like({"Statement": {"RateBasedStatement": Match.object_like({"Limit": limit})}})]}
        ),
    )
    assert limit.as_number() == 1000
    off = synth(signInWaf="false")
    assert off.stack.sign_in_firewall is None
    off.template.resource_count_is("AWS::WAFv2::WebACL", 0)
    off.template.resource_count_is("AWS::WAFv2::WebACLAssociation", 0)


def test_the_machine_client_pool_is_guarded_too_and_an_own_issuer_has_no_web_acl(synth: Any) -> None:
    synth(auth="client-credentials").template.resource_count_is("AWS::WAFv2::WebACLAssociation", 1)
    synth(jwtIssuer="https://login.example.com/tenant").template.resource_count_is("AWS::WAFv2::WebACL", 0)


def test_a_waf_rate_limit_below_what_waf_accepts_stops_the_synth(synth: Any) -> None:
    with pytest.raises(ValueError, match="context 'signInWafRateLimit' must be between 10 and 2000000000, got 5"):
        synth(signInWafRateLimit="5")
