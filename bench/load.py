"""Load on the local stack: hundreds of MCP clients at once, each driving one durable task to its end.

The local stack (`python -m local_stack`: the synthesized template served by the loopback HTTP front,
each function in execution environments of its own, two per core, an embedded moto server running the
task table and the real ASL, which invokes the worker function; the lifecycle fixtures as a layer) is
started as its own process on a free loopback port. Then `tasks` clients start their task at the same
instant (a barrier), each on its own thread with its own keep-alive connection and its own principal:

  tools/call load_job (tasks extension) -> CreateTaskResult
  tasks/get every `pollIntervalMs` (as advertised) until the task is terminal;
  its durable steps, a durable wait and a question (answered with tasks/update), by role;
  the "cancel" clients send tasks/cancel (at once after creating, or once the task awaits input).

What it counts, at the end (after a grace period for executions to settle):
- lost: not terminal by the deadline; wrong: terminal in another state than the role expects, or a
  last tasks/get that disagrees;
- stuck: terminal, but its execution still runs (or active, and its execution ended);
- duplicated: a durable step that ran more than once (the fixture writes each run to a ledger);
- latency of tools/call (create) and tasks/get (poll), p50 and p99, over the local stack's own
  overhead in the same run (a probe thread's `server/discover` round trips, sent throughout);
- the supervisor's and the sweeper's work: their invocations (START lines in their logs), the sweeps'
  own reports, and the stream batches given up to the on-failure queue.

Bounded in count and time, loopback only. `python -m bench.load 500` runs it alone.
"""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from local_stack.processes import stop_process

from bench.common import FUNCTIONS, PROTOCOL_VERSION, REPO, TASKS_EXTENSION, percentile, rpc

CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}
TERMINAL = {"completed", "failed", "cancelled"}
# AWS's delivery periods divided by this (LOCAL_TIME_SCALE): the sweeper's 5-minute schedule runs every 10 s.
TIME_SCALE = 30
LOGS = REPO / "build" / "local-stack" / "logs"
# Each role: (the tool's arguments besides the ledger, what the client does, the status it expects).
ROLES: dict[str, tuple[dict[str, Any], str, str]] = {
    "steps": ({"steps": 3}, "poll", "completed"),
    "steps and a wait": ({"steps": 2, "wait_seconds": 2}, "poll", "completed"),
    "a question": ({"steps": 1, "ask": True}, "answer", "completed"),
    "a wait, then a question": ({"steps": 1, "wait_seconds": 1, "ask": True}, "answer", "completed"),
    "cancel at once": ({"steps": 3, "wait_seconds": 5}, "cancel at once", "cancelled"),
    "cancel while awaiting input": ({"steps": 1, "ask": True}, "cancel when asked", "cancelled"),
}
ROLE_CYCLE = (
    "steps",
    "steps and a wait",
    "a question",
    "steps",
    "a wait, then a question",
    "cancel at once",
    "steps and a wait",
    "cancel while awaiting input",
)


class Client:
    def __init__(self, url: str, principal: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.Client(timeout=60.0)
        self.principal = principal
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.timeouts = 0
        self._id = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        message = rpc(method, params, request_id=self._id, capabilities=CAPS)
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL_VERSION,
            "mcp-method": method,
            "authorization": f"Bearer dev:{self.principal}",
        }
        for key in ("name", "taskId"):
            if isinstance(params.get(key), str):
                headers["mcp-name"] = params[key]
                break
        start = time.perf_counter()
        response = self.http.post(self.url, content=json.dumps(message), headers=headers)
        self.latencies[method].append((time.perf_counter() - start) * 1000)
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or "result" not in body:
            raise RuntimeError(f"{method} -> {response.status_code} {response.text[:300]}")
        return dict(body["result"])

    def close(self) -> None:
        self.http.close()


def drive(client: Client, role: str, ledger: Path, barrier: threading.Barrier, deadline: float) -> dict[str, Any]:
    """One client's whole task: what it saw. A request that times out is sent again at the next poll,
    as a polling client would; a task counts as lost only if it is not terminal by the deadline."""
    import httpx

    arguments, behaviour, expected = ROLES[role]
    outcome: dict[str, Any] = {"role": role, "expected": expected}
    try:
        barrier.wait(timeout=120)
        created = client.call("tools/call", {"name": "load_job", "arguments": {**arguments, "ledger": str(ledger)}})
        task_id = created["taskId"]
        outcome["task_id"] = task_id
        interval = (created.get("pollIntervalMs") or 1000) / 1000
        if behaviour == "cancel at once":
            client.call("tasks/cancel", {"taskId": task_id})
        acted = False
        status = created["status"]
        while status not in TERMINAL and time.monotonic() < deadline:
            time.sleep(interval)
            try:
                task = client.call("tasks/get", {"taskId": task_id})
                status = task["status"]
                interval = (task.get("pollIntervalMs") or 1000) / 1000
                if status == "input_required" and not acted:
                    if behaviour == "cancel when asked":
                        client.call("tasks/cancel", {"taskId": task_id})
                    else:
                        key = next(iter(task["inputRequests"]))
                        client.call(
                            "tasks/update",
                            {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"go": True}}}},
                        )
                    acted = True
            except httpx.TimeoutException:
                client.timeouts += 1
        outcome["status"] = status
        if status in TERMINAL:
            outcome["final"] = client.call("tasks/get", {"taskId": task_id})["status"]
    except Exception as exc:  # recorded; counted as lost or wrong below
        client.errors.append(repr(exc))
        outcome["error"] = repr(exc)
    return outcome


def probe(url: str, stop: threading.Event, latencies: list[float]) -> None:
    """The local stack's own overhead under the same load: a `server/discover` round trip every 200 ms."""
    client = Client(url, "load-probe")
    try:
        while not stop.wait(0.2):
            try:
                client.call("server/discover", {})
            except Exception:  # a probe that missed is simply not counted
                continue
        latencies.extend(client.latencies["server/discover"])
    finally:
        client.close()


def environments_per_function(cores: int | None = None) -> int:
    """Execution environments per function for the load run: two per core (32 per function on 2 cores
    spent the run starting and switching between about 100 interpreters; bench/README.md)."""
    return 2 * (cores or os.cpu_count() or 1)


def _start_stack() -> tuple[subprocess.Popen[bytes], str, Any, int]:
    """`python -m local_stack` on a free loopback port, in its own process (its own GIL): the clients'
    threads here do not slow the server down. Its output goes to a temp file."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {
        **os.environ,
        "PORT": str(port),
        "PYTHONPATH": f"{FUNCTIONS}{os.pathsep}{REPO}",
        "FIXTURES": "lifecycle",
        "LOCAL_LAMBDA_CONCURRENCY": str(environments_per_function()),
        "LOCAL_TIME_SCALE": str(TIME_SCALE),
        "LOCAL_DEFAULT_USER": "",
    }
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by run() once the server is stopped
    server = subprocess.Popen([sys.executable, "-m", "local_stack"], cwd=REPO, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        log.seek(0)
        if b"MCP endpoint:" in log.read():
            return server, f"http://127.0.0.1:{port}/mcp", log, port
        if server.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"local stack exited: {log.read()[-2000:]!r}")
        time.sleep(0.2)
    server.kill()
    raise RuntimeError("local stack did not start")


def _function_logs(port: int) -> dict[str, Path]:
    """The supervisor's and the sweeper's log files (build/local-stack/logs/<function name>.log)."""
    state = json.loads((REPO / "build" / "local-stack" / "run" / f"{port}.json").read_text())
    names = {lid: spec["name"] for lid, spec in state["functions"].items()}
    (supervisor,) = [name for lid, name in names.items() if lid.startswith("SupervisorFunction")]
    (sweeper,) = [name for lid, name in names.items() if lid.startswith("Sweeper")]
    return {"supervisor": LOGS / f"{supervisor}.log", "sweeper": LOGS / f"{sweeper}.log"}


def _work_since(logs: dict[str, Path], offsets: dict[str, int]) -> dict[str, Any]:
    work: dict[str, Any] = {}
    sweeps: Counter[str] = Counter()
    for name, path in logs.items():
        text = path.read_bytes()[offsets[name] :].decode("utf-8", "replace") if path.exists() else ""
        work[f"{name}_invocations"] = text.count("START RequestId:")
        if name == "sweeper":
            for line in text.splitlines():
                found = re.search(r"sweep: (\{.*?\})", line)
                if found:
                    sweep = ast.literal_eval(found.group(1))  # the sweeper logs its report's dict
                    sweeps.update({k: int(v) for k, v in sweep.items() if isinstance(v, int | bool)})
    work["sweeps"] = dict(sweeps)
    return work


def _given_up(port: int) -> int:
    """Messages in the stream mapping's on-failure queue (stream batches the supervisor gave up)."""
    from local_stack.sam_env import admin_client

    state = json.loads((REPO / "build" / "local-stack" / "run" / f"{port}.json").read_text())
    sqs = admin_client(state, "sqs")
    (url,) = [u for lid, u in state["queues"].items() if lid.startswith("SupervisorStreamFailures")]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _executions(port: int, task_ids: list[str]) -> dict[str, str]:
    """Each task's execution status, as Step Functions has it at the end."""
    from local_stack.sam_env import admin_client

    state = json.loads((REPO / "build" / "local-stack" / "run" / f"{port}.json").read_text())
    sfn = admin_client(state, "stepfunctions")
    (machine,) = [
        state["physicalIds"][lid]
        for lid, kind in state["resourceTypes"].items()
        if kind == "AWS::StepFunctions::StateMachine"
    ]
    statuses = {}
    for task_id in task_ids:
        arn = machine.replace(":stateMachine:", ":execution:") + f":{task_id}"
        try:
            statuses[task_id] = str(sfn.describe_execution(executionArn=arn)["status"])
        except sfn.exceptions.ExecutionDoesNotExist:
            statuses[task_id] = "none"
    return statuses


def _latency(values: list[float], overhead: list[float]) -> dict[str, float]:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    base50, base99 = percentile(overhead, 50), percentile(overhead, 99)
    return {
        "count": len(values),
        "p50_ms": p50,
        "p99_ms": p99,
        "p50_over_overhead_ms": p50 - base50,
        "p99_over_overhead_ms": p99 - base99,
    }


def run(tasks: int = 500, time_limit: float = 900.0, settle_seconds: float = 60.0) -> dict[str, Any]:
    server, url, log, port = _start_stack()
    logs = _function_logs(port)
    offsets = {name: path.stat().st_size if path.exists() else 0 for name, path in logs.items()}
    ledger = Path(tempfile.mkdtemp(prefix="load-ledger-")) / "steps.txt"
    clients = [Client(url, f"load-client-{i}") for i in range(tasks)]
    barrier = threading.Barrier(tasks + 1)
    results: list[dict[str, Any]] = [{} for _ in range(tasks)]
    overhead: list[float] = []
    stop_probe = threading.Event()
    prober = threading.Thread(target=probe, args=(url, stop_probe, overhead), daemon=True)
    threads = []
    deadline = time.monotonic() + time_limit
    loadavg_start = os.getloadavg()
    try:
        for i, client in enumerate(clients):

            def target(i: int = i, client: Client = client) -> None:
                results[i] = drive(client, ROLE_CYCLE[i % len(ROLE_CYCLE)], ledger, barrier, deadline)

            thread = threading.Thread(target=target, name=f"load-{i}", daemon=True)
            thread.start()
            threads.append(thread)
        prober.start()
        barrier.wait(timeout=120)
        started = time.perf_counter()
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
        elapsed = time.perf_counter() - started
        stop_probe.set()
        prober.join(timeout=10)
        task_ids = [r["task_id"] for r in results if "task_id" in r]
        settle_by = time.monotonic() + settle_seconds
        executions = _executions(port, task_ids)
        while any(status == "RUNNING" for status in executions.values()) and time.monotonic() < settle_by:
            time.sleep(2)
            executions = _executions(port, task_ids)
        given_up = _given_up(port)
        work = _work_since(logs, offsets)
    finally:
        for client in clients:
            client.close()
        stop_process(server, timeout=15)
        log.close()

    latencies: dict[str, list[float]] = defaultdict(list)
    for client in clients:
        for method, values in client.latencies.items():
            latencies[method].extend(values)
    runs = Counter(tuple(line.split()) for line in ledger.read_text().splitlines()) if ledger.exists() else Counter()
    duplicated = sorted({task for (task, _step), count in runs.items() if count > 1})
    lost = [r for r in results if r.get("status") not in TERMINAL]
    wrong = [
        r
        for r in results
        if r.get("status") in TERMINAL and (r["status"] != r["expected"] or r.get("final") != r["status"])
    ]
    stuck = [
        r
        for r in results
        if "task_id" in r
        and (
            (r.get("final") in TERMINAL and executions.get(r["task_id"]) == "RUNNING")
            or (r.get("status") not in TERMINAL and executions.get(r["task_id"]) not in ("RUNNING", None))
        )
    ]
    roles = Counter(r.get("role", "?") for r in results)
    requests = sum(len(v) for v in latencies.values())
    return {
        "tasks": tasks,
        "poll_interval_ms": "as advertised (pollIntervalMs: 1000 ms, growing with the task's age)",
        "environments_per_function": environments_per_function(),
        "elapsed_s": elapsed,
        "loadavg": {"start": loadavg_start, "end": os.getloadavg()},
        "requests": requests,
        "requests_per_s": requests / elapsed,
        "create": _latency(latencies["tools/call"], overhead),
        "poll": _latency(latencies["tasks/get"], overhead),
        "overhead": {"count": len(overhead), "p50_ms": percentile(overhead, 50), "p99_ms": percentile(overhead, 99)},
        "methods": {
            method: {"count": len(values), "p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}
            for method, values in sorted(latencies.items())
        },
        "roles": dict(roles),
        "steps_run": sum(runs.values()),
        "lost": len(lost),
        "stuck": len(stuck),
        "duplicated": len(duplicated),
        "wrong_state": len(wrong),
        "errors": sum(len(c.errors) for c in clients),
        "timeouts": sum(c.timeouts for c in clients),
        "stream_batches_given_up": given_up,
        "work": work,
        "examples": [*lost, *stuck, *wrong][:5] + [{"duplicated": task} for task in duplicated[:3]],
        "budgets": {
            "load: no task lost, stuck, duplicated or in a wrong state": not (lost or stuck or wrong or duplicated)
        },
    }


def report(result: dict[str, Any]) -> list[str]:
    work = result["work"]
    lines = [
        f"Load on the local stack: {result['tasks']} tasks started at once, polled as advertised,"
        f" {result['environments_per_function']} environments per function"
        f" ({', '.join(f'{n} {role}' for role, n in result['roles'].items())})",
        f"  {result['requests']} requests in {result['elapsed_s']:.1f} s ({result['requests_per_s']:.0f}/s),"
        f" load average {result['loadavg']['start'][0]:.1f} at start, {result['loadavg']['end'][0]:.1f} at end",
        f"  {'':<8} {'count':>6} {'p50 ms':>8} {'p99 ms':>8} {'p50 over overhead':>18} {'p99 over overhead':>18}",
    ]
    for name in ("create", "poll"):
        entry = result[name]
        lines.append(
            f"  {name:<8} {entry['count']:6d} {entry['p50_ms']:8.1f} {entry['p99_ms']:8.1f}"
            f" {entry['p50_over_overhead_ms']:18.1f} {entry['p99_over_overhead_ms']:18.1f}"
        )
    overhead = result["overhead"]
    lines.append(
        f"  overhead (server/discover, {overhead['count']} probes): p50 {overhead['p50_ms']:.1f} ms,"
        f" p99 {overhead['p99_ms']:.1f} ms"
    )
    lines.append(
        f"  lost {result['lost']}, stuck {result['stuck']}, duplicated {result['duplicated']},"
        f" wrong state {result['wrong_state']}; client errors {result['errors']},"
        f" requests timed out and sent again {result['timeouts']}; {result['steps_run']} step runs"
    )
    lines.append(
        f"  supervisor: {work['supervisor_invocations']} invocations, {result['stream_batches_given_up']} stream"
        f" batches given up; sweeper: {work['sweeper_invocations']} runs, {work['sweeps']}"
    )
    for example in result["examples"]:
        lines.append(f"    e.g. {example}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {'HOLDS' if ok else 'MISSED'}")
    return lines


if __name__ == "__main__":
    import contextlib

    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        outcome = run(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
    print("\n".join(report(outcome)))
    print(json.dumps({k: v for k, v in outcome.items() if k != "examples"}, default=str))
