"""The sweeper as the template declares it: the sparse, sharded `ActiveTasks` index and what it
projects, the schedule and its context setting, the lease every task function renews, the sweeper's
exact grants, and the alarm on what it repaired."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match

from mcp_runtime import observability as obs
from mcp_runtime.tasks import schema
from tests.infra.conftest import FULL_OPTIONS, Synthesized
from tests.infra.test_stack_intent import STATE_MACHINE_NAME, _arn, _assert_policy, _get_att, part_deletes

pytestmark = pytest.mark.infra


def test_the_active_tasks_index_is_sparse_on_the_lease_sharded_and_projects_what_the_sweeper_reads(
    default_stack: Synthesized,
) -> None:
    default_stack.template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "GlobalSecondaryIndexes": Match.array_with(
                [
                    {
                        "IndexName": schema.ACTIVE_INDEX,
                        "KeySchema": [
                            {"AttributeName": schema.LEASE_SHARD_ATTRIBUTE, "KeyType": "HASH"},
                            {"AttributeName": schema.LEASE_ATTRIBUTE, "KeyType": "RANGE"},
                        ],
                        "Projection": {
                            "ProjectionType": "INCLUDE",
                            "NonKeyAttributes": list(schema.ACTIVE_INDEX_PROJECTION),
                        },
                    }
                ]
            ),
            "AttributeDefinitions": Match.array_with(
                [
                    {"AttributeName": schema.LEASE_SHARD_ATTRIBUTE, "AttributeType": "S"},
                    {"AttributeName": schema.LEASE_ATTRIBUTE, "AttributeType": "N"},
                ]
            ),
        },
    )
    assert schema.LEASE_ATTRIBUTE == "leaseExpiresAt" and schema.ACTIVE_INDEX == "ActiveTasks"


def test_the_sweeper_runs_on_a_schedule_of_the_context_interval_without_retries(synth: Any) -> None:
    for context, expression in (({}, "rate(5 minutes)"), ({"sweepIntervalMinutes": 1}, "rate(1 minute)")):
        stack: Synthesized = synth(**context)
        sweeper = stack.logical_id(stack.stack.sweeper.function.function)
        stack.template.has_resource_properties(
            "AWS::Events::Rule",
            {
                "ScheduleExpression": expression,
                "State": "ENABLED",
                "Targets": [Match.object_like({"Arn": _get_att(sweeper), "RetryPolicy": {"MaximumRetryAttempts": 0}})],
            },
        )
        stack.template.has_resource_properties(
            "AWS::Lambda::EventInvokeConfig", {"FunctionName": {"Ref": sweeper}, "MaximumRetryAttempts": 0}
        )


def test_every_task_function_renews_leases_of_the_context_length_and_the_sweeper_caps_its_checks(synth: Any) -> None:
    for context, lease, checks in (({}, "600", "100"), ({"taskLeaseSeconds": 3, "sweepMaxChecks": 7}, "3", "7")):
        stack: Synthesized = synth(**context)
        task_functions = [
            stack.stack.functions.api_function,
            stack.stack.functions.worker_function,
            stack.stack.supervisor.function.function,
            stack.stack.sweeper.function.function,
            stack.stack.callbacks.function.function,
        ]
        for function in task_functions:
            variables = stack.json["Resources"][stack.logical_id(function)]["Properties"]["Environment"]["Variables"]
            assert variables["TASK_LEASE_SECONDS"] == lease
        sweeper = stack.json["Resources"][stack.logical_id(stack.stack.sweeper.function.function)]
        assert sweeper["Properties"]["Environment"]["Variables"]["TASK_SWEEP_MAX_CHECKS"] == checks
        assert sweeper["Properties"]["Handler"] == "app.handlers.sweeper_handler"
        assert sweeper["Properties"]["Timeout"] == 60


def test_sweeper_policy_is_exactly_what_it_calls(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    table = _get_att(default_stack.logical_id(stack.tasks.table))
    granted = [
        {"Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"], "Effect": "Allow", "Resource": table},
        part_deletes(table),
        {
            "Action": "dynamodb:Query",
            "Effect": "Allow",
            "Resource": {"Fn::Join": ["", [table, f"/index/{schema.ACTIVE_INDEX}"]]},
        },
        {"Action": "states:StartExecution", "Effect": "Allow", "Resource": _arn("stateMachine", STATE_MACHINE_NAME)},
        {
            "Action": "states:DescribeExecution",
            "Effect": "Allow",
            "Resource": _arn("execution", f"{STATE_MACHINE_NAME}:*"),
        },
    ]
    _assert_policy(default_stack, stack.sweeper.function, granted)


def test_an_alarm_fires_on_any_task_the_sweeper_repaired(synth: Any) -> None:
    stack: Synthesized = synth(**FULL_OPTIONS)
    metrics = Capture()
    stack.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmDescription": Match.string_like_regexp("sweeper settled, started or resumed"),
            "Threshold": 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
            "EvaluationPeriods": 1,
            "TreatMissingData": "notBreaching",
            "Metrics": metrics,
            "AlarmActions": Match.any_value(),
        },
    )
    _assert_sum(metrics, obs.TASKS_REPAIRED, "repair", ("settled", "restarted", "resumed"))


def test_an_alarm_fires_when_sweeps_leave_stale_leases_behind_for_three_periods_in_a_row(synth: Any) -> None:
    stack: Synthesized = synth(**FULL_OPTIONS)
    metrics = Capture()
    stack.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmDescription": Match.string_like_regexp("leaves stale leases behind"),
            "Threshold": 1,
            "EvaluationPeriods": 3,
            "Metrics": metrics,
        },
    )
    _assert_sum(metrics, obs.SWEEP_BEHIND, "cause", ("cap", "unavailable"))


def test_an_alarm_fires_on_any_task_write_the_table_refused_for_good(synth: Any) -> None:
    stack: Synthesized = synth(**FULL_OPTIONS)
    metrics = Capture()
    stack.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmDescription": Match.string_like_regexp("task table refused a task's write"),
            "Threshold": 1,
            "EvaluationPeriods": 1,
            "TreatMissingData": "notBreaching",
            "Metrics": metrics,
            "AlarmActions": Match.any_value(),
        },
    )
    _assert_sum(metrics, obs.TASK_WRITES_REFUSED, "by", ("sweeper", "supervisor", "worker"))


def _assert_sum(metrics: Capture, metric: str, dimension: str, values: tuple[str, ...]) -> None:
    by_id = {entry["Id"]: entry for entry in metrics.as_array()}
    assert by_id["expr_1"]["Expression"] == " + ".join(f"FILL({value}, 0)" for value in values)
    for value in values:
        stat = by_id[value]["MetricStat"]
        assert stat["Metric"]["MetricName"] == metric
        assert stat["Metric"]["Dimensions"] == [{"Name": dimension, "Value": value}]
        assert (stat["Stat"], stat["Period"]) == ("Sum", 300)
