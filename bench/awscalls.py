"""AWS calls and DynamoDB capacity per task operation, counted through the template-driven local stack.

The stack runs as `make run` runs it: each function in its own interpreters with its template
environment and role. A local layer (`bench/layers/aws_calls`, given as LOCAL_LAYERS) counts every
AWS call each function makes, with the capacity moto reports. moto reports fixed capacity (1.0 per
write, 0.5 per read, whatever the size), so on-demand units are also modelled roughly from the task's
hot item's size as DynamoDB bills them (a write: 1 WRU per started KB; a strongly consistent read: 1
RRU per started 4 KB); `bench/capacity.py` models every item each call touches.

Operations, each driven over HTTP one at a time (tools/call with the tasks extension, tasks/get,
tasks/update, tasks/cancel) on the example task tool deploy_release; the API function's calls
during an operation are that operation's (the API makes each write's Step Functions call itself,
right after the write), and the supervisor's calls it causes in the background (from the table's
stream: the same start, resume or stop again, the backstop; from the execution's status change: one
read) are reported beside them; the worker's are reported until the task awaits input and from the
answer to the terminal write ("complete"). Budget (docs/performance.md, with the task's two parts beside its
hot item, `mcp_runtime.tasks.store`): create = 3 conditional puts (the parts, the hot item) + 1
StartExecution; get = 1 consistent read; update = 1 conditional update + at most 1 SendTaskSuccess;
cancel = 1 conditional update + 1 StopExecution. The background's repeat of the same call is
reported, not budgeted: it changes nothing when the direct call was done (a repeated start meets
its execution, a repeated SendTaskSuccess an answered token). Every count is of attempts: a retry
would show as a second call.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from testkit import RunningStack, local_stack_process, standard_headers

from bench.common import TASKS_EXTENSION, rpc, verdict

LAYER = Path(__file__).resolve().parent / "layers" / "aws_calls"
CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}


class CallLog:
    """The calls the layer recorded, read incrementally per function."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._seen: dict[str, int] = {}

    def new_calls(self, function: str) -> list[dict[str, Any]]:
        path = self.directory / f"{function}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        start = self._seen.get(function, 0)
        self._seen[function] = len(lines)
        return [json.loads(line) for line in lines[start:]]


def _item_size(value: Any) -> int:
    """Bytes as DynamoDB counts them, for a low-level attribute map."""
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("S", "N", "B", "BOOL", "NULL", "M", "L"):
        ((kind, inner),) = value.items()
        if kind == "S":
            return len(inner.encode())
        if kind == "N":
            return (len(inner.lstrip("-").replace(".", "").strip("0") or "0") + 1) // 2 + 1
        if kind in ("BOOL", "NULL"):
            return 1
        if kind == "M":
            return 3 + sum(len(k.encode()) + _item_size(v) + 1 for k, v in inner.items())
        if kind == "L":
            return 3 + sum(_item_size(v) + 1 for v in inner)
        return len(inner)
    return sum(len(name.encode()) + _item_size(attribute) for name, attribute in (value or {}).items())


def _call(stack: RunningStack, message: dict[str, Any]) -> dict[str, Any]:
    headers = {**standard_headers(message), "authorization": "Bearer dev:bench"}
    body = httpx.post(stack.url, json=message, headers=headers, timeout=60).json()
    if "result" not in body:
        raise RuntimeError(f"{message['method']} failed: {body}")
    return dict(body["result"])


def _wait_status(stack: RunningStack, task_id: str, wanted: set[str], timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = _call(stack, rpc("tasks/get", {"taskId": task_id}, capabilities=CAPS))
        if task["status"] in wanted:
            return task
        time.sleep(0.05)
    raise RuntimeError(f"task {task_id} did not reach {wanted}")


def run() -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="bench-aws-calls-"))
    layer = scratch / "layer"
    shutil.copytree(LAYER, layer)
    calls: dict[str, Counter[str]] = {}
    capacity: dict[str, float] = {}
    modelled: dict[str, float] = {}
    try:
        with local_stack_process(
            "fixtures.patterns,fixtures.lifecycle", extra_env={"LOCAL_LAYERS": str(layer)}
        ) as stack:
            log = CallLog(layer / "calls")
            api = stack.physical_id("FunctionsApi", "AWS::Lambda::Function")
            worker = stack.physical_id("FunctionsWorker", "AWS::Lambda::Function")
            supervisor = stack.physical_id("SupervisorFunction", "AWS::Lambda::Function")
            table = stack.physical_id("TaskTable", "AWS::DynamoDB::Table")
            dynamodb = stack.aws_client("dynamodb")

            def task_item_size(task_id: str) -> int:
                item = dynamodb.get_item(TableName=table, Key={"pk": {"S": f"task#{task_id}"}}, ConsistentRead=True)
                return _item_size(item.get("Item") or {})

            def quiet(function: str, seconds: float = 1.0) -> None:
                """Until the function's log has not grown for `seconds` (its background work is done)."""
                path = log.directory / f"{function}.jsonl"
                size, since = -1, time.monotonic()
                while time.monotonic() - since < seconds:
                    now = path.stat().st_size if path.exists() else 0
                    if now != size:
                        size, since = now, time.monotonic()
                    time.sleep(0.05)

            def account(label: str, function: str, task_id: str | None) -> None:
                if function == supervisor:
                    quiet(function)
                entries = log.new_calls(function)
                calls[label] = Counter(entry["call"] for entry in entries)
                capacity[label] = sum(float(entry.get("capacity") or 0) for entry in entries)
                size = task_item_size(task_id) if task_id else 0
                units = 0.0
                for entry in entries:
                    if entry["call"] == "dynamodb:GetItem":
                        units += max(1, math.ceil(size / 4096))
                    elif entry["call"] == "dynamodb:BatchGetItem":  # the worker's: the hot item and its parts
                        units += 3
                    elif entry["call"] in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
                        units += max(1, math.ceil(size / 1024))
                modelled[label] = units

            _call(stack, rpc("server/discover"))
            account("first request of a container", api, None)  # the sealing key (cached for 5 minutes)
            deploy = {
                "name": "deploy_release",
                "arguments": {"service": "api", "version": "1.0.0", "seconds_per_stage": 0},
            }
            created = _call(stack, rpc("tools/call", deploy, capabilities=CAPS))
            task_id = created["taskId"]
            account("create", api, task_id)
            _call(stack, rpc("tasks/get", {"taskId": task_id}, capabilities=CAPS))
            account("get", api, task_id)
            awaiting = _wait_status(stack, task_id, {"input_required"})
            log.new_calls(api)  # the polls
            account("create, in the background", supervisor, task_id)
            account("worker until awaiting input", worker, task_id)
            key = next(iter(awaiting["inputRequests"]))
            answer = {key: {"action": "accept", "content": {"approve": True}}}
            _call(stack, rpc("tasks/update", {"taskId": task_id, "inputResponses": answer}, capabilities=CAPS))
            account("update", api, task_id)
            _wait_status(stack, task_id, {"completed"})
            log.new_calls(api)
            account("update and completion, in the background", supervisor, task_id)
            status = "RUNNING"
            arn = stack.physical_id("Workflow", "AWS::StepFunctions::StateMachine").replace(
                ":stateMachine:", ":execution:"
            )
            deadline = time.monotonic() + 30
            while status == "RUNNING" and time.monotonic() < deadline:  # the execution's last state
                status = stack.aws_client("stepfunctions").describe_execution(executionArn=f"{arn}:{task_id}")["status"]
                time.sleep(0.05)
            account("complete", worker, task_id)

            second = _call(stack, rpc("tools/call", deploy, request_id=2, capabilities=CAPS))
            _wait_status(stack, second["taskId"], {"input_required"})
            log.new_calls(api)
            log.new_calls(supervisor)
            _call(stack, rpc("tasks/cancel", {"taskId": second["taskId"]}, capabilities=CAPS))
            account("cancel", api, second["taskId"])
            account("cancel, in the background", supervisor, second["taskId"])
            durable = _durable_operations(stack, log, scratch, quiet)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    operations: dict[str, Any] = {}
    for op in (
        "first request of a container",
        "create",
        "create, in the background",
        "get",
        "update",
        "update and completion, in the background",
        "cancel",
        "cancel, in the background",
        "worker until awaiting input",
        "complete",
    ):
        op_calls = dict(calls.get(op, Counter()))
        operations[op] = {
            "calls": op_calls,
            "total_calls": sum(op_calls.values()),
            "moto_consumed_capacity": capacity.get(op, 0.0),
            "modelled_units": modelled.get(op, 0.0),
        }

    def count(op: str, name: str) -> int:
        return int(operations[op]["calls"].get(name, 0))

    def others(op: str, allowed: set[str]) -> int:
        return sum(n for name, n in operations[op]["calls"].items() if name not in allowed)

    def only(op: str, *names: str) -> bool:
        return others(op, set(names)) == 0

    put, get, update = "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem"
    start, resume, stop = "stepfunctions:StartExecution", "stepfunctions:SendTaskSuccess", "stepfunctions:StopExecution"
    budgets = {
        "create = 3 PutItem + 1 StartExecution": count("create", put) == 3
        and count("create", start) == 1
        and only("create", put, start)
        and only("create, in the background", start),
        "get = 1 GetItem": count("get", get) == 1 and only("get", get),
        "update = 1 UpdateItem + <= 1 SendTaskSuccess": count("update", update) == 1
        and count("update", resume) <= 1
        and only("update", update, resume),
        "cancel = 1 UpdateItem + 1 StopExecution": count("cancel", update) == 1
        and count("cancel", stop) == 1
        and only("cancel", update, stop)
        and only("cancel, in the background", stop),
    }
    return {"operations": operations, "budgets": budgets, "durable": durable}


def _durable_operations(stack: RunningStack, log: CallLog, scratch: Path, quiet: Any) -> dict[str, Any]:
    """What a step, a wait and a callback add, measured on whole tasks of the lifecycle fixtures:
    every function's AWS calls (the API's polls left out), worker invocations and state transitions."""
    functions = {
        "worker": stack.physical_id("FunctionsWorker", "AWS::Lambda::Function"),
        "supervisor": stack.physical_id("SupervisorFunction", "AWS::Lambda::Function"),
        "callbacks": stack.physical_id("CallbacksFunction", "AWS::Lambda::Function"),
    }
    api = stack.physical_id("FunctionsApi", "AWS::Lambda::Function")
    machine = stack.physical_id("Workflow", "AWS::StepFunctions::StateMachine")
    sfn = stack.aws_client("stepfunctions")
    route = stack.url.removesuffix("/mcp") + "/tasks/callbacks"

    def measure(tool: str, arguments: dict[str, Any], complete: Path | None = None) -> dict[str, Any]:
        for function in (*functions.values(), api):
            log.new_calls(function)
        task_id = _call(stack, rpc("tools/call", {"name": tool, "arguments": arguments}, capabilities=CAPS))["taskId"]
        if complete is not None:
            deadline = time.monotonic() + 30
            while not (complete.exists() and complete.read_text()) and time.monotonic() < deadline:
                time.sleep(0.05)
            token = json.loads(complete.read_text().splitlines()[0])["token"]
            httpx.post(route, json={"token": token, "result": {"ok": True}}, timeout=30).raise_for_status()
        _wait_status(stack, task_id, {"completed"})
        for function in functions.values():
            quiet(function)
        counted: dict[str, Any] = {
            name: dict(Counter(entry["call"] for entry in log.new_calls(function)))
            for name, function in functions.items()
        }
        log.new_calls(api)
        arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
        while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
            time.sleep(0.05)
        events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        counted["transitions"] = sum(1 for event in events if event["type"].endswith("StateEntered"))
        counted["worker invocations"] = sum(1 for event in events if event["type"] == "TaskScheduled")
        return counted

    ledger = scratch / "ledger.txt"
    one = measure("stepped_job", {"steps": 1, "ledger": str(ledger)})
    five = measure("stepped_job", {"steps": 5, "ledger": str(ledger)})
    waited = measure("stepped_job", {"steps": 1, "ledger": str(ledger), "wait_after": 0, "wait_seconds": 1})
    inbox = scratch / "inbox.jsonl"
    called_back = measure("external_job", {"inbox": str(inbox)}, complete=inbox)
    return {"1 step": one, "5 steps": five, "1 step and a wait": waited, "1 step and a callback": called_back}


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        "AWS calls per operation (the template-driven local stack, a counting layer in each function;"
        " capacity: moto's ConsumedCapacity / modelled on-demand units)"
    ]
    for op, entry in result["operations"].items():
        calls = ", ".join(f"{n} {name}" for name, n in sorted(entry["calls"].items())) or "none"
        units = ""
        if "moto_consumed_capacity" in entry:
            units = f"   [capacity {entry['moto_consumed_capacity']:.1f} / {entry['modelled_units']:.0f} units]"
        lines.append(f"  {op:<42} {entry['total_calls']:2d} calls: {calls}{units}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    lines.append("Durable operations (whole tasks of the lifecycle fixtures; the API's polls left out)")
    for scenario, counted in (result.get("durable") or {}).items():
        parts = [f"{counted['transitions']} transitions", f"{counted['worker invocations']} worker invocations"]
        for function in ("worker", "supervisor", "callbacks"):
            calls = ", ".join(f"{n} {name}" for name, n in sorted(counted[function].items()))
            if calls:
                parts.append(f"{function}: {calls}")
        lines.append(f"  {scenario:<24} " + "; ".join(parts))
    return lines


if __name__ == "__main__":
    print("\n".join(report(run())))
