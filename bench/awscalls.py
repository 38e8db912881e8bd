"""AWS calls and DynamoDB capacity per task operation, counted through botocore events under moto.

The real local stack runs in this process (embedded moto server, the task table, the real ASL
executing with our worker in-process). Every client comes from the runtime's one boto3 session, so
hooks registered on that session's event system see every call:
  before-parameter-build.dynamodb  asks for ReturnConsumedCapacity=TOTAL on every DynamoDB call;
  before-call                      counts the call under the operation in flight and who made it;
  after-call.dynamodb              records the ConsumedCapacity moto returns.
moto reports fixed capacity (1.0 per write, 0.5 per read, whatever the size), so the on-demand
units are also modelled from the item's size as DynamoDB bills them (a write: 1 WRU per started KB
of the larger of the old and new item; a strongly consistent read: 1 RRU per started 4 KB).

Operations, each driven through the API handler (tools/call with the tasks extension, tasks/get,
tasks/update, tasks/cancel) on the example task tool deploy_release; "complete" is what the worker
does from the resuming answer to the terminal write. Budget (DESIGN.md): create = 1 conditional
write + 1 StartExecution; get = 1 consistent read; update = 1 conditional update + at most 1
SendTaskSuccess; cancel = 1 conditional update + 1 StopExecution.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from bench.common import TASKS_EXTENSION, api_event, rpc, verdict

_state = threading.local()
_lock = threading.Lock()
CALLS: dict[str, Counter[str]] = defaultdict(Counter)
CAPACITY: dict[str, float] = defaultdict(float)
MODELLED: dict[str, float] = defaultdict(float)
_sizer: Any = None
_table = "mcp-tasks"


def _label() -> str:
    return getattr(_state, "label", None) or "other"


def _attr_size(value: dict[str, Any]) -> int:
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        digits = inner.lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _attr_size(v) + 1 for k, v in inner.items())
    if kind == "L":
        return 3 + sum(_attr_size(v) + 1 for v in inner)
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(v).encode()) for v in inner)
    return 0


def item_size(item: dict[str, Any] | None) -> int:
    """Bytes as DynamoDB counts them: attribute names plus values."""
    return sum(len(name.encode()) + _attr_size(value) for name, value in (item or {}).items())


def _current_item(key: dict[str, Any]) -> dict[str, Any] | None:
    response = _sizer.get_item(TableName=_table, Key=key, ConsistentRead=True)
    return response.get("Item")


def _before_params(params: dict[str, Any], **_: Any) -> None:
    params.setdefault("ReturnConsumedCapacity", "TOTAL")
    key = params.get("Key")
    if key is not None and _sizer is not None:
        _state.before_size = item_size(_current_item(key))  # for the "larger of old and new" rule
    else:
        _state.before_size = 0


def _before_call(model: Any, params: dict[str, Any], **_: Any) -> None:
    with _lock:
        CALLS[_label()][f"{model.service_model.service_name}:{model.name}"] += 1


def _after_call_dynamodb(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
    label = _label()
    consumed = parsed.get("ConsumedCapacity")
    if isinstance(consumed, dict):
        with _lock:
            CAPACITY[label] += float(consumed.get("CapacityUnits") or 0)
    name = model.name
    units = 0.0
    if name == "GetItem":
        units = float(max(1, math.ceil(item_size(parsed.get("Item")) / 4096)))
    elif name in ("PutItem", "UpdateItem", "DeleteItem") and _sizer is not None:
        params = getattr(_state, "params", None) or {}
        after = item_size(params.get("Item")) if name == "PutItem" else 0
        key = params.get("Key")
        if key is not None and name != "PutItem":
            after = item_size(_current_item(key))
        units = float(max(1, math.ceil(max(after, getattr(_state, "before_size", 0)) / 1024)))
    with _lock:
        MODELLED[label] += units


def _remember_params(params: dict[str, Any], **_: Any) -> None:
    _state.params = dict(params)


class labelled:
    """Attribute the AWS calls made on this thread to an operation."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __enter__(self) -> None:
        self.previous = getattr(_state, "label", None)
        _state.label = self.label

    def __exit__(self, *exc: object) -> None:
        _state.label = self.previous


def _install_hooks() -> None:
    global _sizer
    from mcp_runtime.tasks.aws_clients import shared_session

    events = shared_session().events
    events.register("before-parameter-build.dynamodb", _remember_params)
    events.register("before-parameter-build.dynamodb", _before_params)
    events.register("before-call", _before_call)
    events.register("after-call.dynamodb", _after_call_dynamodb)


def _call(handler: Any, message: dict[str, Any]) -> dict[str, Any]:
    event = api_event(message, host="127.0.0.1")
    response = handler(event, None)
    body = json.loads(response["body"])
    if "result" not in body:
        raise RuntimeError(f"{message['method']} failed: {body}")
    return dict(body["result"])


def _wait_status(handler: Any, task_id: str, wanted: set[str], timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with labelled("uncounted poll"):
            task = _call(handler, rpc("tasks/get", {"taskId": task_id}, capabilities=CAPS))
        if task["status"] in wanted:
            return task
        time.sleep(0.05)
    raise RuntimeError(f"task {task_id} did not reach {wanted}")


CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}


def run() -> dict[str, Any]:
    global _sizer
    os.environ.setdefault("TASK_POLL_INTERVAL_MS", "100")
    from local_stack import stack

    stack.configure_environment()
    aws = stack.start_local_aws()
    try:
        _install_hooks()
        import boto3

        _sizer = boto3.session.Session().client(
            "dynamodb",
            endpoint_url=aws.endpoint,
            region_name="us-east-1",
            aws_access_key_id="t",
            aws_secret_access_key="t",
        )
        from local_stack.aws import register_function

        def worker(event: dict[str, Any], context: Any) -> Any:
            from app.handlers import worker_handler

            with labelled("worker"):
                return worker_handler(event, context)

        register_function(os.environ.get("TASK_WORKER_FUNCTION", "mcp-task-worker"), worker)
        from app import composition

        composition.reset()
        handler = composition.handle_api_event
        deploy = {"name": "deploy_release", "arguments": {"service": "api", "version": "1.0.0", "seconds_per_stage": 0}}

        with labelled("create"):
            created = _call(handler, rpc("tools/call", deploy, capabilities=CAPS))
        task_id = created["taskId"]
        with labelled("get"):
            _call(handler, rpc("tasks/get", {"taskId": task_id}, capabilities=CAPS))
        parked = _wait_status(handler, task_id, {"input_required"})
        key = next(iter(parked["inputRequests"]))
        with _lock:
            worker_until_parked = dict(CALLS.pop("worker", Counter()))
            CAPACITY.pop("worker", None), MODELLED.pop("worker", None)
        answer = {key: {"action": "accept", "content": {"approve": True}}}
        with labelled("update"):
            _call(handler, rpc("tasks/update", {"taskId": task_id, "inputResponses": answer}, capabilities=CAPS))
        _wait_status(handler, task_id, {"completed"})
        time.sleep(0.3)  # let the execution's last state finish
        with _lock:
            CALLS["complete"] = CALLS.pop("worker", Counter())
            CAPACITY["complete"] = CAPACITY.pop("worker", 0.0)
            MODELLED["complete"] = MODELLED.pop("worker", 0.0)

        second = _call(handler, rpc("tools/call", deploy, request_id=2, capabilities=CAPS))
        _wait_status(handler, second["taskId"], {"input_required"})
        with labelled("cancel"):
            _call(handler, rpc("tasks/cancel", {"taskId": second["taskId"]}, capabilities=CAPS))
        _wait_status(handler, second["taskId"], {"cancelled"})
    finally:
        aws.stop()

    operations: dict[str, Any] = {}
    for op in ("create", "get", "update", "cancel", "complete"):
        calls = dict(CALLS.get(op, Counter()))
        operations[op] = {
            "calls": calls,
            "total_calls": sum(calls.values()),
            "moto_consumed_capacity": CAPACITY.get(op, 0.0),
            "modelled_units": MODELLED.get(op, 0.0),
        }
    operations["worker until parked"] = {"calls": worker_until_parked, "total_calls": sum(worker_until_parked.values())}

    def count(op: str, name: str) -> int:
        return int(operations[op]["calls"].get(name, 0))

    def others(op: str, allowed: set[str]) -> int:
        return sum(n for name, n in operations[op]["calls"].items() if name not in allowed)

    budgets = {
        "create = 1 PutItem + 1 StartExecution": count("create", "dynamodb:PutItem") == 1
        and count("create", "stepfunctions:StartExecution") == 1
        and others("create", {"dynamodb:PutItem", "stepfunctions:StartExecution"}) == 0,
        "get = 1 GetItem": count("get", "dynamodb:GetItem") == 1 and others("get", {"dynamodb:GetItem"}) == 0,
        "update = 1 UpdateItem + <= 1 SendTaskSuccess": count("update", "dynamodb:UpdateItem") == 1
        and count("update", "stepfunctions:SendTaskSuccess") <= 1
        and others("update", {"dynamodb:UpdateItem", "stepfunctions:SendTaskSuccess"}) == 0,
        "cancel = 1 UpdateItem + 1 StopExecution": count("cancel", "dynamodb:UpdateItem") == 1
        and count("cancel", "stepfunctions:StopExecution") == 1
        and others("cancel", {"dynamodb:UpdateItem", "stepfunctions:StopExecution"}) == 0,
    }
    return {"operations": operations, "budgets": budgets}


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        "AWS calls per operation (botocore before-call hooks, moto;"
        " capacity: moto's ConsumedCapacity / modelled on-demand units)"
    ]
    for op, entry in result["operations"].items():
        calls = ", ".join(f"{n} {name}" for name, n in sorted(entry["calls"].items())) or "none"
        units = ""
        if "moto_consumed_capacity" in entry:
            units = f"   [capacity {entry['moto_consumed_capacity']:.1f} / {entry['modelled_units']:.0f} units]"
        lines.append(f"  {op:<20} {entry['total_calls']:2d} calls: {calls}{units}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    return lines


if __name__ == "__main__":
    print("\n".join(report(run())))
