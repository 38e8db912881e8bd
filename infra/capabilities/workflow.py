"""The task workflow: a Standard state machine from the ASL file the local stack runs too.

The definition is not repeated here. CDK loads `infra/statemachine/task_workflow.asl.json`
(`DefinitionBody.from_file`) and fills its `${...}` placeholders. The role's permissions are read
off the same file: every Task state's resource maps to exactly one IAM statement, and a resource
this module does not know stops the synth, so a new integration cannot ship without its grant.

The state machine's name is fixed, `<stack name>-tasks` (`StateMachineIdentity`), so its ARN is known
before anything is built: the functions are given it in their constructors, though the state
machine is built after the worker it invokes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.capabilities._lambda import retention
from infra.config import ThrottleRetry
from infra.nag import acknowledge
from mcp_runtime.tasks.schema import TASK_KEY_PREFIX

ASL_PATH = Path(__file__).resolve().parents[1] / "statemachine" / "task_workflow.asl.json"
WORKER_PLACEHOLDER = "WorkerFunctionArn"
TABLE_PLACEHOLDER = "TaskTableName"
# Numbers in the definition (retry policy fields), written unquoted:
# `"IntervalSeconds": ${ThrottleRetryIntervalSeconds}`.
THROTTLE_INTERVAL_PLACEHOLDER = "ThrottleRetryIntervalSeconds"
THROTTLE_MAX_DELAY_PLACEHOLDER = "ThrottleRetryMaxDelaySeconds"
THROTTLE_ATTEMPTS_PLACEHOLDER = "ThrottleRetryMaxAttempts"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
# Step Functions ends a Standard execution at this many history events.
HISTORY_EVENT_LIMIT = 25_000
# The worker's own bound on TASK_ROUNDS_PER_EXECUTION (functions/mcp_runtime/settings.py).
MAX_ROUNDS_PER_EXECUTION = 1_200
_LAMBDA_INVOKE = re.compile(r"^arn:aws:states:::lambda:invoke(\.waitForTaskToken)?$")
_DYNAMODB = re.compile(r"^arn:aws:states:::dynamodb:(getItem|putItem|updateItem|deleteItem)$")
# Step Functions' limit on a state machine's name.
NAME_MAX_LENGTH = 80


@dataclass(frozen=True, slots=True)
class StateMachineIdentity:
    """The state machine's name and the ARNs made from it, computed from the stack's name alone."""

    name: str
    arn: str
    executions_arn: str
    # How cdk-nag spells `executions_arn` in its finding id.
    executions_arn_for_nag: str

    @classmethod
    def of(cls, stack: Stack) -> StateMachineIdentity:
        # One per stack: a second stack in the account and region (dev and prod, a renamed copy) gets its own.
        name = f"{stack.stack_name}-tasks"
        if len(name) > NAME_MAX_LENGTH:
            raise ValueError(
                f"state machine name {name!r} is longer than {NAME_MAX_LENGTH} characters: use a shorter stack name"
            )
        return cls(
            name=name,
            arn=stack.format_arn(
                service="states",
                resource="stateMachine",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
            executions_arn=stack.format_arn(
                service="states",
                resource="execution",
                resource_name=f"{name}:*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
            executions_arn_for_nag=f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{name}:*",
        )


@dataclass(frozen=True, slots=True)
class Integration:
    """One service the definition calls: `target` is "worker" or "table"."""

    action: str
    target: str


def placeholders(definition_text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(definition_text))


def throttle_substitutions(retry: ThrottleRetry) -> dict[str, str]:
    return {
        THROTTLE_INTERVAL_PLACEHOLDER: str(retry.interval_seconds),
        THROTTLE_MAX_DELAY_PLACEHOLDER: str(retry.max_delay_seconds),
        THROTTLE_ATTEMPTS_PLACEHOLDER: str(retry.attempts),
    }


def load_definition(definition_text: str, retry: ThrottleRetry) -> dict[str, Any]:
    """The definition with its numbers filled in (resource placeholders, inside strings, stay)."""
    text = definition_text
    for key, value in throttle_substitutions(retry).items():
        text = text.replace("${" + key + "}", value)
    definition: dict[str, Any] = json.loads(text)
    return definition


# ---- the history-limit arithmetic -------------------------------------------------------------
def state_events(state: Mapping[str, Any]) -> int:
    """History events one entry into `state` adds at most: entered and exited, and for a Task each
    attempt (its first and every retry any retrier allows) scheduled, started and ended, plus
    submitted for a task-token wait."""
    kind = state.get("Type")
    if kind in ("Parallel", "Map"):
        raise ValueError("the history arithmetic does not count Parallel or Map states: extend state_events")
    if kind in ("Succeed", "Fail"):
        return 1
    if kind != "Task":
        return 2
    attempts = 1 + sum(int(retrier.get("MaxAttempts", 3)) for retrier in state.get("Retry") or ())
    per_attempt = 4 if str(state.get("Resource", "")).endswith(".waitForTaskToken") else 3
    return 2 + per_attempt * attempts


def _successors(state: Mapping[str, Any]) -> list[str]:
    found = [state["Next"]] if "Next" in state else []
    found += [choice["Next"] for choice in state.get("Choices") or ()]
    found += [state["Default"]] if "Default" in state else []
    found += [catcher["Next"] for catcher in state.get("Catch") or ()]
    return found


def worst_case_events(definition: Mapping[str, Any]) -> tuple[int, int]:
    """(events of the costliest round: a path from StartAt back to it, every retry taken; events of
    the costliest way from StartAt to the end, counted once per execution)."""
    states: Mapping[str, Mapping[str, Any]] = definition["States"]
    start = str(definition["StartAt"])
    round_events = end_events = 0

    def walk(name: str, seen: tuple[str, ...], events: int) -> None:
        nonlocal round_events, end_events
        state = states[name]
        events += state_events(state)
        following = _successors(state)
        if not following:
            end_events = max(end_events, events)
        for successor in dict.fromkeys(following):
            if successor == start:
                round_events = max(round_events, events)
            elif successor in seen:
                raise ValueError(
                    f"{name} -> {successor} loops without passing {start}: the round count cannot bound it"
                )
            else:
                walk(successor, (*seen, successor), events)

    walk(start, (start,), 0)
    return round_events, end_events


def rounds_within_history_limit(definition: Mapping[str, Any]) -> int:
    """Rounds an execution may run before it renews so that, even with every retry taken, its history
    stays under 25,000 events (2 for the execution's start and end, the costliest ending once)."""
    round_events, end_events = worst_case_events(definition)
    return min(MAX_ROUNDS_PER_EXECUTION, (HISTORY_EVENT_LIMIT - 2 - end_events) // round_events)


def round_limit(configured: int | None, retry: ThrottleRetry, definition_path: Path = ASL_PATH) -> int:
    """The worker's TASK_ROUNDS_PER_EXECUTION: the configured limit, or the most the history allows."""
    fits = rounds_within_history_limit(load_definition(definition_path.read_text(encoding="utf-8"), retry))
    if configured is None:
        return fits
    if configured > fits:
        raise ValueError(
            f"context 'executionRoundLimit' is {configured}, but with this retry policy at most {fits} rounds fit in "
            f"Step Functions' {HISTORY_EVENT_LIMIT:,}-event history: leave it unset or lower it"
        )
    return configured


def task_states(definition: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every Task state, including those inside Parallel branches and Map iterators."""
    for name, state in (definition.get("States") or {}).items():
        if state.get("Type") == "Task":
            yield name, state
        for branch in state.get("Branches") or ():
            yield from task_states(branch)
        for key in ("ItemProcessor", "Iterator"):
            if isinstance(state.get(key), Mapping):
                yield from task_states(state[key])


def _argument(state: Mapping[str, Any], key: str) -> Any:
    for block in ("Parameters", "Arguments"):
        params = state.get(block) or {}
        for candidate in (key, f"{key}.$"):
            if candidate in params:
                return params[candidate]
    return None


def integrations(definition: Mapping[str, Any]) -> set[Integration]:
    """The IAM actions the definition needs, derived from its Task states."""
    needed: set[Integration] = set()
    worker_ref = f"${{{WORKER_PLACEHOLDER}}}"
    table_ref = f"${{{TABLE_PLACEHOLDER}}}"
    for name, state in task_states(definition):
        resource = state.get("Resource")
        if resource == worker_ref:
            needed.add(Integration("lambda:InvokeFunction", "worker"))
        elif isinstance(resource, str) and _LAMBDA_INVOKE.match(resource):
            function = _argument(state, "FunctionName")
            if function != worker_ref:
                raise ValueError(f"state {name!r} invokes {function!r}; only {worker_ref} is granted")
            needed.add(Integration("lambda:InvokeFunction", "worker"))
        elif isinstance(resource, str) and (found := _DYNAMODB.match(resource)):
            table = _argument(state, "TableName")
            if table != table_ref:
                raise ValueError(f"state {name!r} uses table {table!r}; only {table_ref} is granted")
            operation = found.group(1)
            needed.add(Integration(f"dynamodb:{operation[0].upper()}{operation[1:]}", "table"))
        else:
            raise ValueError(
                f"state {name!r} calls {resource!r}, which infra/capabilities/workflow.py does not grant: add it there"
            )
    return needed


class TaskWorkflow(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        identity: StateMachineIdentity,
        worker: lambda_.IFunction,
        table: dynamodb.ITable,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
        throttle_retry: ThrottleRetry,
        definition_path: Path = ASL_PATH,
    ) -> None:
        super().__init__(scope, construct_id)
        text = definition_path.read_text(encoding="utf-8")
        definition = load_definition(text, throttle_retry)
        values = {
            WORKER_PLACEHOLDER: worker.function_arn,
            TABLE_PLACEHOLDER: table.table_name,
            **throttle_substitutions(throttle_retry),
        }
        unknown = placeholders(text) - values.keys()
        if unknown:
            raise ValueError(f"{definition_path.name} uses placeholders with no value: {sorted(unknown)}")
        substitutions = {key: value for key, value in values.items() if key in placeholders(text)}

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            # The vended-logs prefix keeps CloudWatch's resource policy small (AWS guidance for Step Functions).
            log_group_name=f"/aws/vendedlogs/states/{identity.name}",
            retention=retention(log_retention_days),
            removal_policy=removal_policy,
        )
        self.identity = identity
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=identity.name,
            definition_body=sfn.DefinitionBody.from_file(str(definition_path)),
            definition_substitutions=substitutions,
            state_machine_type=sfn.StateMachineType.STANDARD,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # Execution data carries tool arguments and results: kept out of logs by default.
                include_execution_data=False,
            ),
        )
        targets = {"worker": worker.function_arn, "table": table.table_arn}
        by_target: dict[str, list[str]] = {}
        for integration in sorted(integrations(definition), key=lambda item: (item.target, item.action)):
            by_target.setdefault(integration.target, []).append(integration.action)
        # Its table writes touch task items only (MarkFailedInTable).
        conditions = {"table": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{TASK_KEY_PREFIX}*"]}}}
        for target, actions in by_target.items():
            self.state_machine.add_to_role_policy(
                iam.PolicyStatement(actions=actions, resources=[targets[target]], conditions=conditions.get(target))
            )
        self.integrations = by_target
        acknowledge(
            self.state_machine.role.node.find_child("DefaultPolicy"),
            "AwsSolutions-IAM5[Resource::*]",
            "Step Functions log delivery (logs:*LogDelivery, PutResourcePolicy, Describe*) and X-Ray tracing "
            "actions have no resource-level permissions; CDK adds exactly these for logging and tracing.",
        )
