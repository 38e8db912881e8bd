"""`make tasks` and `make task ID=...`: the operator's read-only view of the task table, across users.

    make tasks                              # the local stack `make run` started (newest, or PORT=...)
    make tasks STATUS=failed                # only failed tasks (any of working, input_required,
                                            # completed, failed, cancelled; comma-separated)
    make tasks STALE=10m                    # working tasks whose execution runs and whose worker has
                                            # written nothing for 10 minutes (s, m, h or d)
    make tasks OWNER=<principal>            # one caller's tasks
    make tasks STACK=ServerlessMcpTasks     # a deployed stack, with boto3's default credentials
    make task ID=<task id>                  # one task, with its execution's recent history

Nothing is written: the table is read with Scan (paged, however large it is) and the executions with
DescribeExecution and GetExecutionHistory. A Scan reads the whole table, so on a large deployed table
narrow it with STATUS= or OWNER= (the filters run on DynamoDB's side; the read cost is the same) and
keep LIMIT= small: each listed task costs one DescribeExecution (a low quota, shared with the sweeper).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_stack, for the local state
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functions"))  # the table's schema

from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import OPERATOR_REASON

STATUSES: Final = ("working", "input_required", "completed", "failed", "cancelled")
WORKING: Final = "working"
TABLE_LOGICAL_ID: Final = "TaskTable"  # infra/stack.py: the task table construct's id, the start of its logical id
DEFAULT_LIMIT: Final = 100
HISTORY_EVENTS: Final = 20
# The attributes the listing reads of each task (the large ones, arguments, results and steps, stay unread).
SUMMARY_ATTRIBUTES: Final = (
    "taskId",
    "toolName",
    "owner",
    "status",
    "createdAt",
    "lastUpdatedAt",
    "executionName",
    "statusMessage",
)
# An execution whose latest event is one of these waits for a timer or a callback: it is parked, not hung.
PARKED_EVENTS: Final = frozenset({"WaitStateEntered", "TaskSubmitted"})
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS: Final = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Target:
    """The table and state machine to read, and the clients that read them."""

    table_name: str
    state_machine_arn: str
    dynamodb: Any
    stepfunctions: Any

    def execution_arn(self, execution_name: str) -> str:
        return self.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    tool: str
    owner: str
    status: str
    created: str
    updated: str
    execution_name: str
    status_message: str | None
    execution_status: str = "-"

    @classmethod
    def of(cls, item: dict[str, Any]) -> TaskRow:
        def text(name: str) -> str:
            value = item.get(name) or {}
            return str(value.get("S", ""))

        return cls(
            task_id=text("taskId"),
            tool=text("toolName"),
            owner=text("owner"),
            status=text("status"),
            created=text("createdAt"),
            updated=text("lastUpdatedAt"),
            execution_name=text("executionName"),
            status_message=text("statusMessage") or None,
        )


def parse_duration(text: str) -> float:
    """`90s`, `10m`, `2h`, `1d` or plain seconds, as seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: use seconds or a number with s, m, h or d")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def parse_statuses(text: str) -> tuple[str, ...]:
    statuses = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [status for status in statuses if status not in STATUSES]
    if unknown or not statuses:
        named = ", ".join(unknown) if unknown else repr(text)
        raise argparse.ArgumentTypeError(f"unknown status {named}: one of {', '.join(STATUSES)}")
    return statuses


def local_target(port: int | None) -> Target:
    """The running local stack: its moto endpoint, as its administrator (`build/local-stack/run/<port>.json`)."""
    from local_stack.sam_env import admin_client, local_state

    state = local_state(port)
    types, physical = state["resourceTypes"], state["physicalIds"]
    (table,) = [
        physical[lid]
        for lid, kind in types.items()
        if kind == "AWS::DynamoDB::Table" and lid.startswith(TABLE_LOGICAL_ID)
    ]
    (machine,) = [physical[lid] for lid, kind in types.items() if kind == "AWS::StepFunctions::StateMachine"]
    return Target(table, machine, admin_client(state, "dynamodb"), admin_client(state, "stepfunctions"))


def deployed_target(stack_name: str) -> Target:
    """A deployed stack: its outputs name the table and the state machine (boto3's default credentials)."""
    import boto3

    session = boto3.session.Session()
    stack = session.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs") or ()}
    return Target(
        outputs["TaskTableName"],
        outputs["StateMachineArn"],
        session.client("dynamodb"),
        session.client("stepfunctions"),
    )


def scan(target: Target, statuses: Sequence[str], owner: str | None) -> Iterator[TaskRow]:
    """Every task item matching the filters, page after page (Scan answers at most 1 MB a page)."""
    names = {f"#a{n}": name for n, name in enumerate(SUMMARY_ATTRIBUTES)}
    names["#pk"] = schema.PARTITION_KEY
    values: dict[str, Any] = {":prefix": {"S": schema.TASK_KEY_PREFIX}}
    conditions = ["begins_with(#pk, :prefix)"]
    status_name = next(key for key, name in names.items() if name == "status")
    owner_name = next(key for key, name in names.items() if name == "owner")
    if statuses:
        for n, status in enumerate(statuses):
            values[f":s{n}"] = {"S": status}
        conditions.append(f"{status_name} IN ({', '.join(f':s{n}' for n in range(len(statuses)))})")
    if owner:
        values[":owner"] = {"S": owner}
        conditions.append(f"{owner_name} = :owner")
    paginator = target.dynamodb.get_paginator("scan")
    pages = paginator.paginate(
        TableName=target.table_name,
        ProjectionExpression=", ".join(key for key in names if key != "#pk"),
        FilterExpression=" AND ".join(conditions),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
    )
    for page in pages:
        for item in page.get("Items") or ():
            if "taskId" in item:
                yield TaskRow.of(item)


def execution_status(target: Target, row: TaskRow) -> str:
    if not row.execution_name:
        return "-"
    try:
        described = target.stepfunctions.describe_execution(executionArn=target.execution_arn(row.execution_name))
    except target.stepfunctions.exceptions.ExecutionDoesNotExist:
        return "none"
    return str(described["status"])


def latest_event(target: Target, row: TaskRow) -> str | None:
    history = target.stepfunctions.get_execution_history(
        executionArn=target.execution_arn(row.execution_name), reverseOrder=True, maxResults=1
    )
    events = newest_first(history.get("events") or [])
    return str(events[0]["type"]) if events else None


def newest_first(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events by id, newest first (AWS honours `reverseOrder`; moto answers oldest first, all of them)."""
    return sorted(events, key=lambda event: int(event["id"]), reverse=True)


def age_seconds(timestamp: str, now: datetime) -> float:
    return (now - datetime.fromisoformat(timestamp.replace("Z", "+00:00"))).total_seconds()


def is_stale(target: Target, row: TaskRow, stale_seconds: float, now: datetime) -> bool:
    """Working, nothing written for `stale_seconds`, its execution running and not parked on a timer or callback."""
    if row.status != WORKING or not row.updated or age_seconds(row.updated, now) < stale_seconds:
        return False
    if row.execution_status != "RUNNING":
        return False
    return latest_event(target, row) not in PARKED_EVENTS


def list_tasks(
    target: Target,
    *,
    statuses: Sequence[str] = (),
    owner: str | None = None,
    stale_seconds: float | None = None,
    limit: int = DEFAULT_LIMIT,
    now: datetime | None = None,
) -> list[TaskRow]:
    """The matching tasks, newest first, at most `limit`, each with its execution's status."""
    now = now or datetime.now(UTC)
    if stale_seconds is not None:
        statuses = (WORKING,)
    rows = sorted(scan(target, statuses, owner), key=lambda row: row.created, reverse=True)
    found: list[TaskRow] = []
    for row in rows:
        if stale_seconds is not None and (not row.updated or age_seconds(row.updated, now) < stale_seconds):
            continue
        described = replace(row, execution_status=execution_status(target, row))
        if stale_seconds is not None and not is_stale(target, described, stale_seconds, now):
            continue
        found.append(described)
        if len(found) >= limit:
            break
    return found


COLUMNS: Final = ("TASK", "TOOL", "OWNER", "STATUS", "CREATED", "LAST UPDATE", "EXECUTION")


def print_table(rows: Sequence[TaskRow], out: TextIO) -> None:
    cells = [(r.task_id, r.tool, r.owner, r.status, r.created, r.updated, r.execution_status) for r in rows]
    widths = [max([len(title), *(len(row[n]) for row in cells)]) for n, title in enumerate(COLUMNS)]
    for line in (COLUMNS, *cells):
        out.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() + "\n")


def show_task(target: Target, task_id: str, out: TextIO) -> int:
    """One task's item (large values shortened) and its execution's latest events, newest first."""
    item = target.dynamodb.get_item(
        TableName=target.table_name, Key={schema.PARTITION_KEY: {"S": schema.TASK_KEY_PREFIX + task_id}}
    ).get("Item")
    if not item:
        out.write(f"no task {task_id} in {target.table_name}\n")
        return 1
    for name in sorted(item):
        out.write(f"{name}: {_shortened(_plain(item[name]))}\n")
    reason = _failure_reason(item)
    if reason:
        out.write(f"reason: {reason}\n")  # whole: it is what the operator came for
    row = TaskRow.of(item)
    if not row.execution_name:
        out.write("execution: none recorded\n")
        return 0
    arn = target.execution_arn(row.execution_name)
    try:
        execution = target.stepfunctions.describe_execution(executionArn=arn)
    except target.stepfunctions.exceptions.ExecutionDoesNotExist:
        out.write(f"execution {arn}: does not exist\n")
        return 0
    out.write(f"execution {arn}: {execution['status']} (started {_iso(execution['startDate'])})\n")
    history = target.stepfunctions.get_execution_history(executionArn=arn, reverseOrder=True, maxResults=HISTORY_EVENTS)
    for event in newest_first(history.get("events") or ())[:HISTORY_EVENTS]:
        details = next((value for key, value in event.items() if key.endswith("EventDetails")), None)
        about = f" {_shortened(json.dumps(details, default=str), 160)}" if details else ""
        out.write(f"  {_iso(event['timestamp'])} #{event['id']} {event['type']}{about}\n")
    return 0


def _failure_reason(item: dict[str, Any]) -> str | None:
    """A failed task's reason, kept on its item for the operator (never sent to the client)."""
    try:
        error = json.loads(_plain(item["error"])) if "error" in item else None
    except (TypeError, ValueError):
        return None
    reason = error.get(OPERATOR_REASON) if isinstance(error, dict) else None
    return reason if isinstance(reason, str) else None


def _iso(moment: Any) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds") if isinstance(moment, datetime) else str(moment)


def _plain(attribute: dict[str, Any]) -> Any:
    (kind, value), *_ = attribute.items()
    if kind == "M":
        return {key: _plain(entry) for key, entry in value.items()}
    if kind == "L":
        return [_plain(entry) for entry in value]
    if kind == "NULL":
        return None
    return value


def _shortened(value: Any, width: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="make tasks", description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--stack", help="a deployed stack's name (default: the running local stack)")
    parser.add_argument("--port", type=int, help="the local stack's port (default: the newest one running)")
    parser.add_argument("--task", metavar="ID", help="show this task and its execution's history")
    parser.add_argument("--status", type=parse_statuses, default=(), help="comma-separated statuses")
    parser.add_argument("--owner", help="one principal's tasks")
    parser.add_argument("--stale", type=parse_duration, help="working tasks that wrote nothing for this long")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"at most this many (default {DEFAULT_LIMIT})")
    args = parser.parse_args(argv)
    target = deployed_target(args.stack) if args.stack else local_target(args.port)
    if args.task:
        return show_task(target, args.task, out)
    rows = list_tasks(target, statuses=args.status, owner=args.owner, stale_seconds=args.stale, limit=args.limit)
    print_table(rows, out)
    out.write(f"{len(rows)} task{'' if len(rows) == 1 else 's'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
