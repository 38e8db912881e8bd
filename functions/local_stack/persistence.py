"""What the local stack keeps across restarts: the items of the template's tables.

moto keeps everything in memory, so a restart of `make run` would lose every task and handle. With
`LOCAL_STATE_DIR` (`make run` sets `build/local-stack/state`, git-ignored; `make run FRESH=1` starts
clean) the stack writes each table's items there when it stops and puts them back when it starts,
after the template's resources were created. Step Functions executions cannot be carried over: an
execution that was running when the stack stopped is gone after the restart, as if it had died, and
the tasks it left active are settled the way the runtime settles a task whose execution ended
without a terminal write (`mcp_runtime.tasks.service.TaskService` reconciliation).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from local_stack.provision import ProvisionedStack

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


def restore(root: Path, provisioned: ProvisionedStack, client: Callable[[str], Any]) -> int:
    """Put the saved items back into the freshly created tables; returns how many."""
    source = _snapshot_dir(root, provisioned.template.stack_name)
    if not source.is_dir():
        return 0
    dynamodb = client("dynamodb")
    count = 0
    for logical_id, table in provisioned.tables.items():
        path = source / f"{logical_id}.jsonl"
        if not path.exists():
            continue
        items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for start in range(0, len(items), BATCH):
            requests = [{"PutRequest": {"Item": item}} for item in items[start : start + BATCH]]
            pending: dict[str, Any] = {table: requests}
            while pending:
                pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
        count += len(items)
    return count


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = dynamodb.scan(**kwargs)
        yield from page.get("Items") or []
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
