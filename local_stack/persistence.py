"""What the local stack keeps across restarts: the items of the template's tables.

moto keeps everything in memory, so a restart of `make run` would lose every task and handle. With
`LOCAL_STATE_DIR` (`make run` sets `build/local-stack/state`, git-ignored; `make run FRESH=1` starts
clean) the stack writes each table's items there when it stops and puts them back when it starts,
after the template's resources were created. Step Functions executions cannot be carried over: an
execution that was running when the stack stopped is gone after the restart, as if it had died: for
each task it left active, the stack puts the status change Step Functions would have sent
(`ABORTED`) on its event bus, and the supervisor settles the task as it settles any execution that
ended without a terminal write (`mcp_runtime.tasks.supervisor`).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_stack.provision import ProvisionedStack
from mcp_runtime.tasks import schema
from mcp_runtime.tasks.models import ACTIVE_STATUSES
from mcp_runtime.tasks.schema import EXECUTION_STATUS_CHANGE

log = logging.getLogger(__name__)
BATCH = 25  # BatchWriteItem's limit


def _snapshot_dir(root: Path, stack_name: str) -> Path:
    return root / stack_name


def save(root: Path, provisioned: ProvisionedStack, client: Callable[[str], Any]) -> int:
    """Write every item of every table; returns how many. Replaces the previous snapshot atomically."""
    target = _snapshot_dir(root, provisioned.template.stack_name)
    scratch = target.with_name(target.name + ".saving")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    dynamodb = client("dynamodb")
    count = 0
    for logical_id, table in provisioned.tables.items():
        with open(scratch / f"{logical_id}.jsonl", "w", encoding="utf-8") as out:
            for item in _scan(dynamodb, table):
                out.write(json.dumps(item) + "\n")
                count += 1
    shutil.rmtree(target, ignore_errors=True)
    scratch.rename(target)
    return count


@dataclass(frozen=True)
class Restored:
    items: int
    lost_executions: tuple[tuple[str, str], ...]  # (task id, execution name) of the tasks left active


def restore(root: Path, provisioned: ProvisionedStack, client: Callable[[str], Any]) -> Restored:
    """Put the saved items back into the freshly created tables."""
    source = _snapshot_dir(root, provisioned.template.stack_name)
    if not source.is_dir():
        return Restored(0, ())
    dynamodb = client("dynamodb")
    count = 0
    lost: list[tuple[str, str]] = []
    for logical_id, table in provisioned.tables.items():
        path = source / f"{logical_id}.jsonl"
        if not path.exists():
            continue
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        lost.extend(task for task in map(_active_task, items) if task is not None)
        for start in range(0, len(items), BATCH):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]
            pending: dict[str, Any] = {table: requests}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        count += len(items)
    return Restored(count, tuple(lost))


def _active_task(item: dict[str, Any]) -> tuple[str, str] | None:
    key = str(item.get(schema.PARTITION_KEY, {}).get("S", ""))
    status = str(item.get("status", {}).get("S", ""))
    if not key.startswith(schema.TASK_KEY_PREFIX) or status not in ACTIVE_STATUSES:
        return None
    task_id = key.removeprefix(schema.TASK_KEY_PREFIX)
    return task_id, str(item.get("executionName", {}).get("S") or task_id)


def lost_execution_event(state_machine_arn: str, task_id: str, execution_name: str) -> dict[str, Any]:
    """The status change Step Functions sends when an execution is stopped: `ABORTED`."""
    arn = state_machine_arn.replace(":stateMachine:", ":execution:") + f":{execution_name}"
    now = int(time.time() * 1000)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": EXECUTION_STATUS_CHANGE,
        "source": "aws.states",
        "account": arn.split(":")[4],
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": arn.split(":")[3],
        "resources": [arn],
        "detail": {
            "executionArn": arn,
            "stateMachineArn": state_machine_arn,
            "name": execution_name,
            "status": "ABORTED",
            "startDate": None,
            "stopDate": now,
            "input": json.dumps({"taskId": task_id}),
            "output": None,
            "error": None,
            "cause": None,
        },
    }


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        yield from page.get("Items") or []
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
