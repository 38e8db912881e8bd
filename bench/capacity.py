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
  4 KB of what it reads (half of that, eventually consistent); a missing item still costs the minimum.

Scenarios (`run`): 1 step, 100 steps, a 64 KB argument, an hour of progress (a report a second for
an hour: `HOUR_REPORTS` writes, measured, not extrapolated; `--quick` writes 60 and extrapolates), and
the figure issue 31 asks for: one progress write on a task carrying a 64 KB argument and 60 KB of step
records. Item sizes are DynamoDB's (`mcp_runtime.tasks.store.item_bytes`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp_runtime.tasks.store import item_bytes

KB = 1024
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
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
            for table, items in (parsed.get("Responses") or {}).items():
                strong = bool(params["RequestItems"][table].get("ConsistentRead"))
                self.reads[self.label] += sum(read_units(item_bytes(item), strong) for item in items)

    def _after_error(self, model: Any, **_: Any) -> None:
        """A write refused (its condition failed) is billed on the item as it is."""
        if self._peeking:
            return
        for _table, _key, multiplier, before in self._before:
            self.writes[self.label] += multiplier * write_units(before, before)
        self._before = []
