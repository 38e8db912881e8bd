"""Task start and resume latency through the template-driven local stack, under AWS-like stream delivery.

The stack runs as `make run` runs it (each function in its own interpreters, its template
environment and role), with the table's stream polled every 250 ms and each record held until it
is 100 ms old (`LOCAL_STREAM_POLL_MS`, `LOCAL_STREAM_DELAY_MS`): Lambda polls a shard about four
times a second, and a record reaches the stream some time after its write. A local layer
(`bench/layers/aws_calls`) stamps every AWS call each function makes; a worker invocation is seen
by its first call (the read of its task).

Measured, one task at a time (`confirm_delete`: it asks one question, then finishes):
- create to worker: from sending `tools/call` (tasks extension) to the first call of the worker
  invocation that runs the task;
- update to resume: from sending `tasks/update` (the answer) to the first call of the resumed run;
- the local stack's own overhead on that path, in the same run, interleaved: the round trip of a
  `tools/list` through the local HTTP front and the API function (the request that creates or
  answers, without its AWS calls), and from a StartExecution sent straight to moto to the worker's
  first call (the local Step Functions interpreter and the worker's invocation), on a task id that
  does not exist (the worker reads it and stops). Also reported: a Lambda `Invoke` of the worker to
  its first call.
Budget (docs/performance.md): p50 of each, minus the p50 local overhead on its path, <= 150 ms: for a create,
the request round trip plus StartExecution to the worker; for an update, the request round trip
alone (the interpreter's own time from a callback to the next invocation is not subtracted: the
stricter reading). What is left is what the runtime adds: the conditional write and the direct Step
Functions call, and no stream hop. The machine may be shared: the load average at start and end is
reported.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from testkit import RunningStack, local_stack_process, standard_headers

from bench.common import TASKS_EXTENSION, percentile, rpc, verdict

LAYER = Path(__file__).resolve().parent / "layers" / "aws_calls"
CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}
AWS_LIKE_DELIVERY = {"LOCAL_STREAM_POLL_MS": "250", "LOCAL_STREAM_DELAY_MS": "100"}
BUDGET_MS = 150.0


class Calls:
    """One function's AWS calls as a layer stamped them: the counting layer's own file per function
    (time in "time"), or the fault layer's one file for all (time in "at", the function named)."""

    def __init__(self, path: Path, function: str = "", time_key: str = "time") -> None:
        self.path = path
        self.function = function
        self.time_key = time_key

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        found = [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line]
        return [entry for entry in found if self.function in entry.get("function", self.function)]

    def first_after(self, moment: float, timeout: float = 60.0) -> float:
        """The time of the first call at or after `moment` (waiting for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            later = [entry[self.time_key] for entry in self.entries() if entry[self.time_key] >= moment]
            if later:
                return float(min(later))
            time.sleep(0.01)
        raise RuntimeError(f"no call in {self.path.name} after {moment}")

    def quiet(self, seconds: float = 0.3) -> None:
        """Until the log has not grown for `seconds`: the invocation's trailing calls are done."""
        size, since = -1, time.monotonic()
        while time.monotonic() - since < seconds:
            now = self.path.stat().st_size if self.path.exists() else 0
            if now != size:
                size, since = now, time.monotonic()
            time.sleep(0.02)


def _call(stack: RunningStack, message: dict[str, Any]) -> dict[str, Any]:
    headers = {**standard_headers(message), "authorization": "Bearer dev:bench-latency"}
    body = httpx.post(stack.url, json=message, headers=headers, timeout=60).json()
    if "result" not in body:
        raise RuntimeError(f"{message['method']} failed: {body}")
    return dict(body["result"])


def _wait_status(stack: RunningStack, task_id: str, wanted: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = _call(stack, rpc("tasks/get", {"taskId": task_id}, capabilities=CAPS))
        if task["status"] == wanted:
            return task
        time.sleep(0.02)
    raise RuntimeError(f"task {task_id} did not reach {wanted}")


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50) * 1000, "p90": percentile(values, 90) * 1000, "n": float(len(values))}


def run(samples: int = 30, backstop: bool = False) -> dict[str, Any]:
    """`backstop`: every direct Step Functions call of the API is throttled (the fault layer of
    `tests/local_stack`), so each start and resume goes the stream's way: the path the direct call saves."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    layer = scratch / "layer"
    if backstop:
        from testkit import THROTTLE, FaultLayer, Rule

        faults = FaultLayer.create(layer)
        direct = ("SFN.StartExecution", "SFN.SendTaskSuccess")
        faults.arm(*(Rule(THROTTLE, operation, "Api", times=10**9) for operation in direct))
    else:
        shutil.copytree(LAYER, layer)
    overhead: list[float] = []
    invoke_round_trip: list[float] = []
    ping: list[float] = []
    started: list[float] = []
    create: list[float] = []
    create_answer: list[float] = []
    resume: list[float] = []
    load_before = os.getloadavg()
    try:
        env = {"LOCAL_LAYERS": str(layer), **AWS_LIKE_DELIVERY}
        with local_stack_process("fixtures.patterns,fixtures.conformance", extra_env=env) as stack:
            worker_name = stack.physical_id("FunctionsWorker", "AWS::Lambda::Function")
            if backstop:
                worker = Calls(layer / "calls.jsonl", worker_name, "at")
            else:
                worker = Calls(layer / "calls" / f"{worker_name}.jsonl")
            lambda_client = stack.aws_client("lambda")
            sfn = stack.aws_client("stepfunctions")
            machine = stack.physical_id("Workflow", "AWS::StepFunctions::StateMachine")

            def execution_ends(task_id: str) -> None:
                arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
                deadline = time.monotonic() + 60
                while sfn.describe_execution(executionArn=arn)["status"] == "RUNNING":
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"execution {task_id} still running")
                    time.sleep(0.02)

            def invoke_worker(n: int) -> None:
                missing = f"latency-baseline-{n}-{time.time_ns()}"
                event = {"action": "run", "taskId": missing, "round": 0, "executionName": missing}
                sent = time.time()
                lambda_client.invoke(FunctionName=worker_name, Payload=json.dumps(event).encode())
                answered = time.time()
                overhead.append(worker.first_after(sent) - sent)
                invoke_round_trip.append(answered - sent)

            def start_to_worker(n: int) -> None:
                missing = f"latency-start-{n}-{time.time_ns()}"
                sent = time.time()
                sfn.start_execution(
                    stateMachineArn=machine, name=missing, input=json.dumps({"taskId": missing, "round": 0})
                )
                started.append(worker.first_after(sent) - sent)
                execution_ends(missing)
                worker.quiet()

            def ping_api(n: int) -> None:
                sent = time.time()
                _call(stack, rpc("tools/list", {}, request_id=n + 10_000))
                ping.append(time.time() - sent)

            def one_task(n: int) -> None:
                sent = time.time()
                created = _call(
                    stack,
                    rpc(
                        "tools/call",
                        {"name": "confirm_delete", "arguments": {"filename": f"latency-{n}.txt"}},
                        capabilities=CAPS,
                    ),
                )
                create_answer.append(time.time() - sent)
                task_id = created["taskId"]
                create.append(worker.first_after(sent) - sent)
                awaiting = _wait_status(stack, task_id, "input_required")
                worker.quiet()
                (key,) = awaiting["inputRequests"]
                answer = {key: {"action": "accept", "content": {"confirm": True}}}
                sent = time.time()
                _call(stack, rpc("tasks/update", {"taskId": task_id, "inputResponses": answer}, capabilities=CAPS))
                resume.append(worker.first_after(sent) - sent)
                _wait_status(stack, task_id, "completed")
                execution_ends(task_id)
                worker.quiet()

            # Warm every environment on the path first (its first request imports and connects).
            for n in range(3):
                invoke_worker(-n - 1)
                start_to_worker(-n - 1)
                ping_api(-n - 1)
                one_task(-n - 1)
            overhead.clear()
            invoke_round_trip.clear()
            ping.clear()
            started.clear()
            create.clear()
            create_answer.clear()
            resume.clear()
            for n in range(samples):  # interleaved, so load on the machine hits all three alike
                invoke_worker(n)
                worker.quiet()
                start_to_worker(n)
                ping_api(n)
                one_task(n)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    request = "tools/list round trip (HTTP front + API function)"
    start = "StartExecution to the worker's first call"
    figures = {
        request: _ms(ping),
        start: _ms(started),
        "Invoke to the worker's first call": _ms(overhead),
        "Invoke round trip": _ms(invoke_round_trip),
        "tools/call answered (CreateTaskResult)": _ms(create_answer),
        "create to worker": _ms(create),
        "update to resumed run": _ms(resume),
    }
    local = {
        "create to worker": figures[request]["p50"] + figures[start]["p50"],
        "update to resumed run": figures[request]["p50"],
    }
    over = {name: figures[name]["p50"] - overhead_ms for name, overhead_ms in local.items()}
    budgets = {
        f"{name}: p50 <= {BUDGET_MS:.0f} ms over the local stack's own overhead": value <= BUDGET_MS
        for name, value in over.items()
    }
    return {
        "samples": samples,
        "path": "the stream's (direct calls throttled)" if backstop else "direct calls",
        "delivery": dict(AWS_LIKE_DELIVERY),
        "figures": figures,
        "local_overhead_p50_ms": local,
        "p50_over_overhead_ms": over,
        "loadavg": {"start": list(load_before), "end": list(os.getloadavg())},
        "budgets": budgets,
    }


def report(result: dict[str, Any]) -> list[str]:
    delivery = result["delivery"]
    lines = [
        f"Task start and resume latency, {result.get('path', 'direct calls')}"
        f" ({result['samples']} tasks, one at a time; stream polled every"
        f" {delivery['LOCAL_STREAM_POLL_MS']} ms, records held {delivery['LOCAL_STREAM_DELAY_MS']} ms;"
        f" load average {result['loadavg']['start'][0]:.2f} at start, {result['loadavg']['end'][0]:.2f} at end)"
    ]
    for name, entry in result["figures"].items():
        lines.append(f"  {name:<58} p50 {entry['p50']:7.1f} ms   p90 {entry['p90']:7.1f} ms")
    for name, value in result["p50_over_overhead_ms"].items():
        local = result["local_overhead_p50_ms"][name]
        lines.append(f"  {name:<58} p50 over the local overhead ({local:.1f} ms) {value:6.1f} ms")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    return lines


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("samples", nargs="?", type=int, default=30)
    parser.add_argument("--backstop", action="store_true", help="throttle the direct calls: measure the stream path")
    args = parser.parse_args()
    print("\n".join(report(run(samples=args.samples, backstop=args.backstop))))
