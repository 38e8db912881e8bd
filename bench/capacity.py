"""DynamoDB read and write units per task operation and per task, modelled as on-demand bills them.

Whole task lifecycles run against the template's own table (`local_stack.provision` of the synthesized
template into an embedded moto, as the integration tier and `make run` provision it), through the
real `DynamoTaskStore` making the calls the API, the worker, the supervisor and the sweeper make for
each operation. Every DynamoDB call goes out with ReturnConsumedCapacity=TOTAL, but moto reports fixed
capacity (1.0 per write, 0.5 per read, whatever the size), so `CapacityMeter` models the units from
the sizes of the items each call touches, as DynamoDB documents them ("Read and write capacity" of
on-demand mode):

- a write (PutItem, UpdateItem, DeleteItem, and one that fails its condition): 1 WRU per started KB
  of the larger of the item before and after it;
- a transaction (TransactWriteItems): twice that, per item;
- a strongly consistent read (GetItem, BatchGetItem per item, Query per request): 1 RRU per started
  4 KB of what it reads (half of that, eventually consistent); a missing item still costs the minimum
  (a key a BatchGetItem asks for and does not find too).

Scenarios (`run`): 1 step, 100 steps, 1,000 steps (steps run as the worker runs them, through
`DurableRun`, after the run's first write: each marked on its own step item, its record kept on the work
part while that has room, else on the step item; `--quick` writes the first 999 records in bulk and runs
the 1,000th), a 64 KB
argument, an hour of progress (a report a second for an hour: `HOUR_REPORTS` writes, measured, not
extrapolated; `--quick` writes 60 and extrapolates), and the figure issue 31 asks for: one progress
write on a task carrying a 64 KB argument and 60 KB of step records. Each step's writes (its running
mark and its record: one write each, of the step's own item or the work part, none of the hot item) are
also reported at step 1, 100 and 1,000 (issue 38: at most 2 WRU together, whatever the steps before);
the run's own writes are apart: its first write, and its looks at the task between steps (a read at
most once a second, a lease renewal when half the lease is gone). Item sizes are DynamoDB's
(`mcp_runtime.tasks.store.item_bytes`).
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import verdict
from mcp_runtime.tasks.store import item_bytes

KB = 1024
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
STEP_WRITE_BUDGET_WRU = 2  # issue 38: a step's writes (its running mark and its record) together (small records)
MARK, RECORD = "step: running mark", "step: record"
BEGIN, LOOK = "run: first write", "run: looks between steps"
BOUNDARY = "run: boundary write (counts its step items)"
APART = "apart: "  # a label measured, and left out of its task's total
NOT_COUNTED = "(the bench's own calls, not counted)"
HOUR_REPORTS = 3_600
QUICK_HOUR_REPORTS = 60


def write_units(before: int, after: int) -> int:
    """A write's units: 1 WRU per started KB of the larger item (at least 1)."""
    return max(1, math.ceil(max(before, after) / KB))


def read_units(size: int, consistent: bool) -> float:
    """A read's units: 1 RRU per started 4 KB strongly consistent, half of that otherwise (at least one)."""
    units = max(1, math.ceil(size / (4 * KB)))
    return float(units) if consistent else units / 2


class CapacityMeter:
    """Attached to one boto3 DynamoDB client: models the units of every call made through it, by label.

    Before and after each write it reads the items the write touches (through the same client, not
    counted), so the figure is the larger of the two sizes, as DynamoDB bills it."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.label = "unlabelled"
        self.writes: dict[str, float] = defaultdict(float)
        self.reads: dict[str, float] = defaultdict(float)
        self.calls: dict[str, list[str]] = defaultdict(list)
        self._peeking = False
        self._before: list[tuple[str, dict[str, Any], int, int]] = []
        client.meta.events.register("before-parameter-build.dynamodb.*", self._before_call)
        client.meta.events.register("after-call.dynamodb.*", self._after_call)
        client.meta.events.register("after-call-error.dynamodb.*", self._after_error)

    @contextmanager
    def measuring(self, label: str) -> Iterator[None]:
        previous, self.label = self.label, label
        try:
            yield
        finally:
            self.label = previous

    def wru(self, label: str) -> float:
        return self.writes.get(label, 0.0)

    def rru(self, label: str) -> float:
        return self.reads.get(label, 0.0)

    # ---- the hooks ---------------------------------------------------------------------------------
    def _peek(self, table: str, key: dict[str, Any]) -> int:
        self._peeking = True
        try:
            item = self.client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        finally:
            self._peeking = False
        return item_bytes(item) if item else 0

    def _touched(self, name: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
        """(table, key, multiplier) of every item a write touches (a transaction's are billed twice)."""
        if name in WRITES:
            return [(params["TableName"], params.get("Key") or {"pk": params["Item"]["pk"]}, 1)]
        if name == "BatchWriteItem":
            requests = [(table, next(iter(r.values()))) for table, rs in params["RequestItems"].items() for r in rs]
            return [(table, a.get("Key") or {"pk": a["Item"]["pk"]}, 1) for table, a in requests]
        if name == "TransactWriteItems":
            actions = [next(iter(entry.values())) for entry in params["TransactItems"]]
            return [(a["TableName"], a.get("Key") or {"pk": a["Item"]["pk"]}, 2) for a in actions]
        return []

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if self._peeking:
            return
        self.calls[self.label].append(model.name)
        self._before = [(t, k, m, self._peek(t, k)) for t, k, m in self._touched(model.name, params)]
        self._pending = (model.name, params)

    def _after_call(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if self._peeking:
            return
        name, params = self._pending
        for table, key, multiplier, before in self._before:
            self.writes[self.label] += multiplier * write_units(before, self._peek(table, key))
        self._before = []
        consistent = bool(params.get("ConsistentRead"))
        if name == "GetItem":
            item = parsed.get("Item")
            self.reads[self.label] += read_units(item_bytes(item) if item else 0, consistent)
        elif name == "Query":
            size = sum(item_bytes(item) for item in parsed.get("Items") or ())
            self.reads[self.label] += read_units(size, consistent)
        elif name == "BatchGetItem":
            for table, asked in params["RequestItems"].items():
                strong = bool(asked.get("ConsistentRead"))
                items = (parsed.get("Responses") or {}).get(table) or []
                missing = (
                    len(asked["Keys"])
                    - len(items)
                    - len((parsed.get("UnprocessedKeys") or {}).get(table, {}).get("Keys") or [])
                )
                self.reads[self.label] += sum(read_units(item_bytes(item), strong) for item in items)
                self.reads[self.label] += missing * read_units(0, strong)

    def _after_error(self, model: Any, **_: Any) -> None:
        """A write refused (its condition failed) is billed on the item as it is."""
        if self._peeking:
            return
        for _table, _key, multiplier, before in self._before:
            self.writes[self.label] += multiplier * write_units(before, before)
        self._before = []


# ---- the scenarios ----------------------------------------------------------------------------------
OWNER = "bench:capacity"
SMALL_ARGUMENTS: dict[str, Any] = {"service": "api", "version": "1.0.0"}
BIG_ARGUMENT_BYTES = 64 * KB - 100  # a 64 KB argument, inside MAX_TASK_ARGUMENTS_BYTES
STEP_VALUE = {"ok": True, "n": 1}  # a small step's value (a few dozen bytes)
BIG_STEP_VALUE = "r" * 4000  # an inline record of 4 KB: 15 of them are 60 KB of step records


class _Lifecycle:
    """One task driven through the store as the API, the worker and the supervisor drive it."""

    def __init__(self, store: Any, meter: CapacityMeter, clock: Callable[[], float]) -> None:
        self.store, self.meter, self.clock = store, meter, clock

    def create(self, arguments: dict[str, Any]) -> str:
        from mcp_runtime import wire
        from mcp_runtime.tasks.models import WORKING, ClientSnapshot, TaskRecord, iso_timestamp
        from mcp_runtime.tasks.service import new_task_id

        stamp = iso_timestamp(self.clock())
        task_id = new_task_id()
        record = TaskRecord(
            task_id=task_id,
            owner=OWNER,
            status=WORKING,
            created_at=stamp,
            last_updated_at=stamp,
            ttl_ms=3_600_000,
            version=1,
            tool_name="deploy_release",
            arguments=arguments,
            client=ClientSnapshot(wire.PROTOCOL_VERSION, {"elicitation": {"form": {}}}),
            poll_interval_ms=1000,
            expires_at=int(self.clock()) + 3600,
            create_token=task_id,
            write_id=task_id,
            effect="start",
        )
        with self.meter.measuring("create"):
            self.store.create(record)
        return task_id

    def get(self, task_id: str) -> None:
        with self.meter.measuring("tasks/get"):
            self.store.get(task_id, OWNER)

    def load(self, task_id: str) -> None:
        with self.meter.measuring("worker load"):
            self.store.load(task_id)

    def steps(self, task_id: str, count: int, value: Any = STEP_VALUE, first: int = 0) -> dict[int, dict[str, float]]:
        """Steps `first`..`count - 1` of the task's tool, run as the worker runs them (`DurableRun`, the
        first `first` already recorded); each step's units (its mark's, its record's), by step number
        from 1."""
        from mcp_runtime.tasks.durable import DurableRun

        with self.meter.measuring(NOT_COUNTED):
            record = self.store.load(task_id)  # as the worker's read, measured apart (`load`)
        scratch: dict[str, Any] = {}
        run = DurableRun(
            task_id,
            record.steps,
            _Labelled(self.store, self.meter),
            None,
            payloads_expire=True,
            scratch=lambda: scratch,
            callback_url="",
            step_slots=record.step_slots,
            expires_at=record.expires_at,
            step_items=record.step_items,
        )
        with self.meter.measuring(BEGIN):
            run.begin(record.execution, 0, mark=False)
        self.run = run
        costs: dict[int, dict[str, float]] = {}
        for number in range(count):
            before = {label: self.meter.wru(label) for label in (MARK, RECORD)}
            run.step(f"s{number}", lambda: value)
            scratch["done"] = number
            if number >= first:
                costs[number + 1] = {label: self.meter.wru(label) - before[label] for label in (MARK, RECORD)}
        return costs

    def recorded_steps(self, task_id: str, count: int, value: Any = STEP_VALUE) -> None:
        """The first `count` steps recorded in bulk, each on its own step item (as a run leaves them once
        the work part is full), not measured: a shortcut for `--quick`."""
        from mcp_runtime.tasks import schema
        from mcp_runtime.tasks.store import record_to_attribute, step_key, task_key

        client, table = self.meter.client, self.store.table_name
        expires = {"N": str(int(self.clock()) + 3600)}
        items = [
            {
                **step_key(task_id, n),
                schema.STEP_KEY_ATTRIBUTE: {"S": f"step:s{n}"},
                schema.STEP_RECORD_ATTRIBUTE: record_to_attribute({"v": value, "ms": 5}),
                schema.TTL_ATTRIBUTE: expires,
            }
            for n in range(count)
        ]
        with self.meter.measuring(NOT_COUNTED):
            for first in range(0, count, 25):
                batch = [{"PutRequest": {"Item": item}} for item in items[first : first + 25]]
                client.batch_write_item(RequestItems={table: batch})
            client.update_item(
                TableName=table,
                Key=task_key(task_id),
                UpdateExpression="SET #n = :n",
                ExpressionAttributeNames={"#n": schema.STEP_ITEMS_ATTRIBUTE},
                ExpressionAttributeValues={":n": {"N": str(count)}},
            )

    def boundary(self, task_id: str) -> None:
        """The run ends at a step boundary (continued in a fresh invocation): its scratch kept, its step
        items counted on the hot item."""
        with self.meter.measuring(BOUNDARY):
            self.store.checkpoint(task_id, {"done": True}, self.run.step_items)

    def load_recorded(self, task_id: str, label: str) -> None:
        with self.meter.measuring(label):
            self.store.load(task_id)

    def progress(self, task_id: str, number: int) -> None:
        with self.meter.measuring("progress"):
            self.store.set_status_message(task_id, f"Working: {number}", None)

    def finish(self, task_id: str) -> None:
        with self.meter.measuring("terminal write"):
            self.store.finish(task_id, "completed", {"content": [{"type": "text", "text": "done"}]})


class _Labelled:
    """The task store as a durable run uses it, each step's mark and record measured under its own label."""

    def __init__(self, store: Any, meter: CapacityMeter) -> None:
        self.store, self.meter = store, meter

    def mark_step(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        with self.meter.measuring(MARK):
            marked: dict[str, Any] = self.store.mark_step(*args, **kwargs)
        return marked

    def record_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        with self.meter.measuring(RECORD):
            kept: dict[str, Any] = self.store.record_operation(*args, **kwargs)
        return kept

    def unmark_step(self, *args: Any, **kwargs: Any) -> None:
        self.store.unmark_step(*args, **kwargs)

    def begin_run(self, *args: Any, **kwargs: Any) -> None:
        self.store.begin_run(*args, **kwargs)

    def keep_working(self, *args: Any, **kwargs: Any) -> None:
        with self.meter.measuring(LOOK):
            self.store.keep_working(*args, **kwargs)


def run(quick: bool = False) -> dict[str, Any]:
    """Each scenario's units per operation and in all, on the template's table in an embedded moto."""
    import time as _time

    from local_stack.aws import DUMMY_CREDENTIALS, REGION, start_embedded_aws
    from local_stack.clients import aws_client
    from local_stack.provision import provision
    from local_stack.synth import synthesize
    from local_stack.template import DeployedTemplate

    from mcp_runtime.tasks.store import DynamoTaskStore

    assembly = synthesize()
    aws = start_embedded_aws()
    try:
        deployed = provision(DeployedTemplate.load(assembly.directory, assembly.stack_name), aws.client)
        (table,) = [name for logical_id, name in deployed.tables.items() if logical_id.startswith("TaskTable")]
        scenarios: dict[str, Any] = {}
        steps: dict[str, dict[str, dict[str, float]]] = {}
        hour = QUICK_HOUR_REPORTS if quick else HOUR_REPORTS

        def scenario(name: str, drive: Callable[[_Lifecycle], None]) -> None:
            client = aws_client("dynamodb", endpoint=aws.endpoint, region=REGION, credentials=DUMMY_CREDENTIALS)
            meter = CapacityMeter(client)
            drive(_Lifecycle(DynamoTaskStore(table, client), meter, _time.time))
            meter.calls.pop(NOT_COUNTED, None)
            labels = list(dict.fromkeys([*meter.calls]))
            scenarios[name] = {
                label: {
                    "calls": len(meter.calls[label]),
                    "wru": meter.wru(label),
                    "rru": meter.rru(label),
                }
                for label in labels
            }

        def per_step(name: str, costs: dict[int, dict[str, float]]) -> None:
            shown = {f"step {n:,}": costs[n] for n in (1, 100, 1_000) if n in costs}
            shown["most"] = {label: max(cost[label] for cost in costs.values()) for label in (MARK, RECORD)}
            steps[name] = shown

        def one_step(task: _Lifecycle) -> None:
            task_id = task.create(SMALL_ARGUMENTS)
            task.get(task_id)
            task.load(task_id)
            per_step("1 step", task.steps(task_id, 1))
            task.progress(task_id, 0)
            task.finish(task_id)
            task.get(task_id)

        def hundred_steps(task: _Lifecycle) -> None:
            task_id = task.create(SMALL_ARGUMENTS)
            task.load(task_id)
            per_step("100 steps", task.steps(task_id, 100))
            task.load_recorded(task_id, APART + "worker load after a crash, 100 steps recorded past the count")
            task.boundary(task_id)
            task.load_recorded(task_id, "worker load, 100 steps recorded")
            task.finish(task_id)

        def thousand_steps(task: _Lifecycle) -> None:
            task_id = task.create(SMALL_ARGUMENTS)
            task.load(task_id)
            first = 0
            if quick:
                first = 999
                task.recorded_steps(task_id, first)
            per_step("1,000 steps", task.steps(task_id, 1_000, first=first))
            task.load_recorded(task_id, APART + "worker load after a crash, 1,000 steps recorded past the count")
            task.boundary(task_id)
            task.load_recorded(task_id, "worker load, 1,000 steps recorded")
            task.finish(task_id)

        def big_argument(task: _Lifecycle) -> None:
            task_id = task.create({"blob": "a" * BIG_ARGUMENT_BYTES})
            task.get(task_id)
            task.load(task_id)
            task.steps(task_id, 1)
            task.progress(task_id, 0)
            task.finish(task_id)

        def hour_of_progress(task: _Lifecycle) -> None:
            task_id = task.create(SMALL_ARGUMENTS)
            task.load(task_id)
            for number in range(hour):
                task.progress(task_id, number)
            task.finish(task_id)

        def big_task_progress(task: _Lifecycle) -> None:
            task_id = task.create({"blob": "a" * BIG_ARGUMENT_BYTES})
            task.load(task_id)
            task.steps(task_id, 15, BIG_STEP_VALUE)
            with task.meter.measuring("progress on the big task"):
                task.store.set_status_message(task_id, "Step 16 of 20", 0.8)
            task.get(task_id)
            task.finish(task_id)

        scenario("1 step", one_step)
        scenario("100 steps", hundred_steps)
        scenario("1,000 steps", thousand_steps)
        scenario("64 KB argument", big_argument)
        scenario("an hour of progress", hour_of_progress)
        scenario("64 KB argument, 60 KB of step records", big_task_progress)
    finally:
        aws.stop()
    return {
        "quick": quick,
        "hour_reports": hour,
        "scenarios": scenarios,
        "steps": steps,
        "budgets": budgets(scenarios, steps),
    }


def budgets(scenarios: dict[str, Any], steps: dict[str, dict[str, dict[str, float]]] | None = None) -> dict[str, bool]:
    big = scenarios["64 KB argument, 60 KB of step records"]
    gets = [ops["tasks/get"] for ops in scenarios.values() if "tasks/get" in ops]
    held: dict[str, bool] = {}
    if steps:
        held[
            f"a step's writes (its running mark and its record) <= {STEP_WRITE_BUDGET_WRU} WRU together, at steps 1, "
            "100 and 1,000"
        ] = (
            all(
                cost[MARK] + cost[RECORD] <= STEP_WRITE_BUDGET_WRU
                for shown in steps.values()
                for cost in shown.values()
            )
            and "1,000 steps" in steps
        )
    return {
        **held,
        "a progress write on a task with a 64 KB argument and 60 KB of step records = 1 WRU": big[
            "progress on the big task"
        ]["wru"]
        == 1,
        "every progress write = 1 WRU": all(
            ops["progress"]["wru"] == ops["progress"]["calls"] for ops in scenarios.values() if "progress" in ops
        ),
        "tasks/get = 1 GetItem of at most 1 RRU": all(get["rru"] == get["calls"] for get in gets),
    }


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        "DynamoDB units per task operation (the template's table in moto; modelled on-demand units: "
        "a write 1 WRU per started KB of the larger item, a consistent read 1 RRU per started 4 KB)"
    ]
    for name, operations in result["scenarios"].items():
        wru = sum(op["wru"] for label, op in operations.items() if not label.startswith(APART))
        rru = sum(op["rru"] for label, op in operations.items() if not label.startswith(APART))
        lines.append(f"  {name}: {wru:g} WRU, {rru:g} RRU per task")
        for label, op in operations.items():
            if label == "unlabelled":
                continue
            per = f"{op['wru'] / op['calls']:.3g} WRU, {op['rru'] / op['calls']:.3g} RRU each" if op["calls"] else ""
            lines.append(f"    {label:<28} {op['calls']:5d} calls  {op['wru']:7g} WRU {op['rru']:6g} RRU  ({per})")
    if result.get("steps"):
        lines.append("  a step's writes, one write each of the step's own item or the work part (WRU):")
        for name, shown in result["steps"].items():
            for at, cost in shown.items():
                total = cost[MARK] + cost[RECORD]
                lines.append(
                    f"    {name + ', ' + at:<24} running mark {cost[MARK]:g}, record {cost[RECORD]:g}: {total:g} a step"
                )
    if result["quick"]:
        lines.append(f"  (quick: an hour of progress is {result['hour_reports']} writes, not 3,600)")
        lines.append("  (quick: of 1,000 steps, the first 999 are recorded in bulk and the 1,000th is measured)")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    result = run(quick=quick)
    print("\n".join(report(result)))
    return 0 if all(result["budgets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
