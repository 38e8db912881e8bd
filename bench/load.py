"""Load on the local stack: hundreds of MCP clients, each driving one durable task to its end, all live at once.

The local stack (`python -m local_stack`: the synthesized template served by the loopback HTTP front,
each function in execution environments of its own, two per core, an embedded moto server running the
task table and the real ASL, which invokes the worker function; the lifecycle fixtures as a layer) is
started as its own process on a free loopback port. Then `tasks` clients, each on its own thread with
its own keep-alive connection and its own principal, do as a polling client would:

  tools/call load_job (tasks extension) -> CreateTaskResult, with at most WRITES_IN_FLIGHT writes
  (creates, answers, cancels) in flight across all clients, so creates arrive as a ramp, not at one
  instant; a create that got no answer is followed by the shipped `list_my_tasks` tool (the
  protocol has no idempotent create and no tasks/list), so its client learns the task the server made,
  or that it made none and the create is sent again;
  tasks/get every `pollIntervalMs` (as advertised) until the task is terminal;
  every task first asks "ready?" (parked, as a task waiting for a person is), and no client answers it
  until every task is live, so at least `tasks` are live at once (the peak is measured in the table);
  then its durable steps, a durable wait and a question (answered with tasks/update), by role;
  the "cancel" clients send tasks/cancel (at once after the release, or once the task asks again).

What it counts, at the end, once every task's item and execution agree (awaited, bounded):
- lost: a task the server made that is not terminal by the deadline, or whose client never learned
  it; wrong: terminal in another state than the role expects, or a last tasks/get that disagrees;
- stuck: terminal while its execution still runs, or active while its execution ended, after the
  bounded wait (an execution still stopping when the clients finish is not stuck);
- duplicated: a durable step that ran more than once (the fixture writes each run to a ledger), or
  more than one task for one client's one create;
- latency of tools/call (create) and tasks/get (poll), p50 and p99, over the local stack's own
  overhead at that moment (the median of a probe thread's `server/discover` round trips, sent every
  200 ms throughout, within 2 s of the request);
- the supervisor's and the sweeper's work: their invocations (START lines in their logs), the sweeps'
  own reports, and the stream batches given up to the on-failure queue.

Bounded in count and time, loopback only. `python -m bench.load 500` runs it alone.
"""

from __future__ import annotations

import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from local_stack.processes import stop_process

from bench.common import FUNCTIONS, PROTOCOL_VERSION, REPO, TASKS_EXTENSION, percentile, rpc

CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}
TERMINAL = {"completed", "failed", "cancelled"}
# AWS's delivery periods divided by this (LOCAL_TIME_SCALE): the sweeper's 5-minute schedule runs every 10 s.
TIME_SCALE = 30
LOGS = REPO / "build" / "local-stack" / "logs"
# Creates, answers and cancels in flight at once across all clients: the creates arrive as a ramp that
# the four API interpreters keep up with (all 500 at one instant left 282 unanswered after 60 s).
WRITES_IN_FLIGHT = 8
# Longer than a request can wait for an interpreter in this run: a client hears how its request ended.
CLIENT_TIMEOUT_S = 120.0
CREATE_ATTEMPTS = 3
OVERHEAD_WINDOW_S = 2.0
# What Step Functions should say once a client sees its task end (anything else is told with its history).
EXPECTED_ENDS = {("completed", "SUCCEEDED"), ("cancelled", "ABORTED")}
# Each role: (the tool's arguments besides the ledger and the hold, what the client does once released,
# the status it expects).
ROLES: dict[str, tuple[dict[str, Any], str, str]] = {
    "steps": ({"steps": 3}, "poll", "completed"),
    "steps and a wait": ({"steps": 2, "wait_seconds": 2}, "poll", "completed"),
    "a question": ({"steps": 1, "ask": True}, "answer", "completed"),
    "a wait, then a question": ({"steps": 1, "wait_seconds": 1, "ask": True}, "answer", "completed"),
    "cancel at once": ({"steps": 3, "wait_seconds": 30}, "cancel at once", "cancelled"),
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
YES = {"action": "accept", "content": {"go": True}}


class Client:
    def __init__(self, url: str, principal: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.Client(timeout=CLIENT_TIMEOUT_S)
        self.principal = principal
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.started: dict[str, list[float]] = defaultdict(list)  # each request's start (perf_counter)
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
        key = "tools/call (list_my_tasks)" if params.get("name") == "list_my_tasks" else method
        self.latencies[key].append((time.perf_counter() - start) * 1000)
        self.started[key].append(start)
        body = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code != 200 or "result" not in body:
            raise RuntimeError(f"{method} -> {response.status_code} {response.text[:300]}")
        return dict(body["result"])

    def close(self) -> None:
        self.http.close()


class Gate:
    """What the clients share: the bound on writes in flight, and the release once every task is live."""

    def __init__(self, tasks: int) -> None:
        self.writes = threading.BoundedSemaphore(WRITES_IN_FLIGHT)
        self.released = threading.Event()
        self._waiting = tasks
        self._lock = threading.Lock()

    def arrived(self) -> None:
        """This client's task is live and parked (or the client has no task): release at the last one."""
        with self._lock:
            self._waiting -= 1
            if self._waiting == 0:
                self.released.set()

    def write(self, client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with self.writes:
            return client.call(method, params)


def create(client: Client, gate: Gate, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The task id and the CreateTaskResult (or the history's entry). A create that failed or timed out
    may have made the task anyway: the client asks its own task history before sending it again."""
    import httpx

    for _ in range(CREATE_ATTEMPTS):
        try:
            created = gate.write(client, "tools/call", {"name": "load_job", "arguments": arguments})
            return str(created["taskId"]), created
        except (httpx.HTTPError, RuntimeError) as exc:
            client.errors.append(f"create: {exc!r}")
            if isinstance(exc, httpx.TimeoutException):
                client.timeouts += 1
        mine = gate.write(client, "tools/call", {"name": "list_my_tasks", "arguments": {"limit": 5}})
        tasks = mine["structuredContent"]["tasks"]
        if tasks:
            return str(tasks[0]["taskId"]), {"status": tasks[0]["status"], "recovered": True}
    return None


def drive(
    client: Client, role: str, ledger: Path, gate: Gate, deadline: float, execution: Any = None, story: Any = None
) -> dict[str, Any]:
    """One client's whole task: what it saw. A poll that fails or times out is sent again at the next
    interval, as a polling client would; an answer or cancel that fails is sent again."""
    import httpx

    arguments, behaviour, expected = ROLES[role]
    outcome: dict[str, Any] = {"role": role, "expected": expected}
    arrived = False
    try:
        made = create(client, gate, {**arguments, "ledger": str(ledger), "hold": True})
        if made is None:
            outcome["error"] = "no task after every create attempt"
            return outcome
        task_id, created = made
        outcome["task_id"] = task_id
        outcome["recovered"] = bool(created.get("recovered"))
        interval = (created.get("pollIntervalMs") or 1000) / 1000
        status = str(created["status"])
        done: set[str] = set()  # what this client did: "ready", "go" (answered or cancelled), "cancel"

        def write(what: str, method: str, params: dict[str, Any]) -> None:
            try:
                gate.write(client, method, params)
                done.add(what)
            except (httpx.HTTPError, RuntimeError) as exc:  # sent again at the next poll
                client.errors.append(f"{method}: {exc!r}")
                client.timeouts += isinstance(exc, httpx.TimeoutException)

        while status not in TERMINAL and time.monotonic() < deadline:
            if behaviour == "cancel at once" and "ready" in done and "cancel" not in done:
                write("cancel", "tasks/cancel", {"taskId": task_id})
            time.sleep(interval)
            try:
                task = client.call("tasks/get", {"taskId": task_id})
            except (httpx.HTTPError, RuntimeError) as exc:
                client.errors.append(f"tasks/get: {exc!r}")
                client.timeouts += isinstance(exc, httpx.TimeoutException)
                continue
            status = str(task["status"])
            interval = (task.get("pollIntervalMs") or 1000) / 1000
            asked = set(task.get("inputRequests") or ()) if status == "input_required" else set()
            if "ready" in asked:
                if not arrived:
                    arrived = True
                    gate.arrived()
                if gate.released.is_set() and "ready" not in done:
                    write("ready", "tasks/update", {"taskId": task_id, "inputResponses": {"ready": YES}})
            elif "go" in asked and "go" not in done:
                if behaviour == "cancel when asked":
                    write("go", "tasks/cancel", {"taskId": task_id})
                else:
                    write("go", "tasks/update", {"taskId": task_id, "inputResponses": {"go": YES}})
        outcome["status"] = status
        if status in TERMINAL:
            outcome["final"] = client.call("tasks/get", {"taskId": task_id})["status"]
            if execution is not None:  # what Step Functions says the moment the client sees the end
                outcome["execution_when_seen"] = execution(task_id)
                if (outcome["final"], outcome["execution_when_seen"]) not in EXPECTED_ENDS:
                    outcome["story"] = story(task_id)
    except Exception as exc:  # recorded; counted as lost or wrong below
        client.errors.append(repr(exc))
        outcome["error"] = repr(exc)
    finally:
        if not arrived:
            gate.arrived()  # a client without a parked task holds nobody back
    return outcome


def probe(url: str, stop: threading.Event, latencies: list[tuple[float, float]]) -> None:
    """The local stack's own overhead under the same load: a `server/discover` round trip every 200 ms."""
    client = Client(url, "load-probe")
    try:
        while not stop.wait(0.2):
            try:
                client.call("server/discover", {})
            except Exception:  # a probe that missed is simply not counted
                continue
        latencies.extend(zip(client.started["server/discover"], client.latencies["server/discover"], strict=True))
    finally:
        client.close()


def environments_per_function(cores: int | None = None) -> int:
    """Execution environments per function for the load run: two per core (32 per function on 2 cores
    spent the run starting and switching between about 100 interpreters; bench/README.md)."""
    return 2 * (cores or os.cpu_count() or 1)


def _start_stack() -> tuple[subprocess.Popen[bytes], str, Any, int]:
    """`python -m local_stack` on a loopback port of its choice, in its own process (its own GIL): the clients'
    threads here do not slow the server down. Its output goes to a temp file."""
    env = {
        **os.environ,
        "PORT": "0",  # the stack's choice, held from its first step
        "PYTHONPATH": f"{FUNCTIONS}{os.pathsep}{REPO}",
        "MCP_TOOL_PACKAGES": "fixtures.patterns,fixtures.lifecycle",
        "LOCAL_LAMBDA_CONCURRENCY": str(environments_per_function()),
        "LOCAL_TIME_SCALE": str(TIME_SCALE),
        "LOCAL_DEFAULT_USER": "",
    }
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by run() once the server is stopped
    server = subprocess.Popen([sys.executable, "-m", "local_stack"], cwd=REPO, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        log.seek(0)
        announced = [line for line in log.read().decode().splitlines() if line.startswith("MCP endpoint: ")]
        if announced:
            url = announced[0].split()[2]
            return server, url, log, int(urlsplit(url).port or 0)
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


class Aws:
    """The running stack's embedded AWS, as its administrator: what the table and Step Functions hold."""

    def __init__(self, port: int) -> None:
        from local_stack.sam_env import admin_client

        state = json.loads((REPO / "build" / "local-stack" / "run" / f"{port}.json").read_text())
        self.dynamodb = admin_client(state, "dynamodb")
        self.sfn = admin_client(state, "stepfunctions")
        kinds = state["resourceTypes"]
        (self.table,) = [
            state["physicalIds"][lid]
            for lid, kind in kinds.items()
            if kind == "AWS::DynamoDB::Table" and lid.startswith("TaskTable")
        ]
        (machine,) = [
            state["physicalIds"][lid] for lid, kind in kinds.items() if kind == "AWS::StepFunctions::StateMachine"
        ]
        self.executions_prefix = machine.replace(":stateMachine:", ":execution:") + ":"

    def tasks(self) -> dict[str, dict[str, str]]:
        """Every task item: its owner, status and current execution's name."""
        found: dict[str, dict[str, str]] = {}
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": "begins_with(pk, :task)",
            "ExpressionAttributeValues": {":task": {"S": "task#"}},
            "ProjectionExpression": "taskId, #owner, #status, executionName",
            "ExpressionAttributeNames": {"#owner": "owner", "#status": "status"},
        }
        while True:
            page = self.dynamodb.scan(**kwargs)
            for item in page["Items"]:
                found[item["taskId"]["S"]] = {
                    "owner": item["owner"]["S"],
                    "status": item["status"]["S"],
                    "execution": item.get("executionName", {}).get("S", item["taskId"]["S"]),
                }
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def live(self) -> int:
        return sum(1 for task in self.tasks().values() if task["status"] not in TERMINAL)

    def execution(self, name: str) -> str:
        try:
            return str(self.sfn.describe_execution(executionArn=self.executions_prefix + name)["status"])
        except self.sfn.exceptions.ExecutionDoesNotExist:
            return "none"

    def story(self, name: str) -> list[str]:
        """An execution's history, told short: its event types, and what any failure said."""
        events = self.sfn.get_execution_history(executionArn=self.executions_prefix + name, maxResults=1000)["events"]
        told = []
        for event in events:
            details = next((v for k, v in event.items() if k.endswith("EventDetails") and isinstance(v, dict)), {})
            said = {k: str(v)[:200] for k, v in details.items() if k in ("error", "cause", "name")}
            told.append(f"{event['type']}{' ' + json.dumps(said) if said else ''}")
        return told


def disagreeing(aws: Aws, tasks: dict[str, dict[str, str]], among: set[str] | None = None) -> dict[str, str]:
    """Tasks whose item and execution disagree: terminal while the execution runs, or active while it ended."""
    found = {}
    for task_id in sorted(tasks if among is None else among & set(tasks)):
        task = tasks[task_id]
        execution = aws.execution(task["execution"])
        if (task["status"] in TERMINAL) == (execution == "RUNNING"):
            found[task_id] = f"{task['status']} with its execution {execution}"
    return found


def sample_live(aws: Aws, stop: threading.Event, peak: list[int]) -> None:
    """The most tasks active in the table at once, counted every 2 s while the clients run."""
    while not stop.wait(2.0):
        try:
            peak[0] = max(peak[0], aws.live())
        except Exception:  # a sample that failed is simply not counted
            continue


def _latency(starts: list[float], values: list[float], probes: list[tuple[float, float]]) -> dict[str, float]:
    """p50 and p99, and the same over the stack's own overhead at that moment: each request less the
    median of the probes sent within OVERHEAD_WINDOW_S of it (a no-op request waits for an interpreter
    like any other; what is left is the request's own work)."""
    probes = sorted(probes)
    times = [t for t, _ in probes]
    over = []
    for start, value in zip(starts, values, strict=True):
        near = [
            lat
            for _, lat in probes[
                bisect_left(times, start - OVERHEAD_WINDOW_S) : bisect_right(times, start + OVERHEAD_WINDOW_S)
            ]
        ]
        if near:
            over.append(value - statistics.median(near))
    return {
        "count": len(values),
        "p50_ms": percentile(values, 50),
        "p99_ms": percentile(values, 99),
        "p50_over_overhead_ms": percentile(over, 50),
        "p99_over_overhead_ms": percentile(over, 99),
    }


def run(tasks: int = 500, time_limit: float = 900.0, settle_seconds: float = 60.0) -> dict[str, Any]:
    server, url, log, port = _start_stack()
    logs = _function_logs(port)
    offsets = {name: path.stat().st_size if path.exists() else 0 for name, path in logs.items()}
    ledger = Path(tempfile.mkdtemp(prefix="load-ledger-")) / "steps.txt"
    clients = [Client(url, f"load-client-{i}") for i in range(tasks)]
    gate = Gate(tasks)
    results: list[dict[str, Any]] = [{} for _ in range(tasks)]
    overhead: list[tuple[float, float]] = []
    stop_probe = threading.Event()
    prober = threading.Thread(target=probe, args=(url, stop_probe, overhead), daemon=True)
    aws = Aws(port)
    peak = [0]
    sampler = threading.Thread(target=sample_live, args=(aws, stop_probe, peak), daemon=True)
    threads = []
    deadline = time.monotonic() + time_limit
    loadavg_start = os.getloadavg()
    try:
        prober.start()
        sampler.start()
        started = time.perf_counter()
        for i, client in enumerate(clients):

            def target(i: int = i, client: Client = client) -> None:
                results[i] = drive(
                    client, ROLE_CYCLE[i % len(ROLE_CYCLE)], ledger, gate, deadline, aws.execution, aws.story
                )

            thread = threading.Thread(target=target, name=f"load-{i}", daemon=True)
            thread.start()
            threads.append(thread)
        gate.released.wait(timeout=max(0.0, deadline - time.monotonic()))
        released_after = time.perf_counter() - started
        live_at_release = aws.live()
        peak[0] = max(peak[0], live_at_release)
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
        elapsed = time.perf_counter() - started
        stop_probe.set()
        prober.join(timeout=10)
        sampler.join(timeout=10)
        # An execution may still be stopping (or a terminal write still landing) when the last client
        # has its answer: wait, bounded, until every task's item and execution agree.
        in_table = aws.tasks()
        pending = disagreeing(aws, in_table)
        at_clients_end = Counter(pending.values())
        settling = time.monotonic()
        settle_by = settling + settle_seconds
        while pending and time.monotonic() < settle_by:
            time.sleep(2)
            in_table = aws.tasks()
            pending = disagreeing(aws, in_table, set(pending))
        agreed_after = time.monotonic() - settling
        given_up = _given_up(port)
        work = _work_since(logs, offsets)
    finally:
        for client in clients:
            client.close()
        stop_process(server, timeout=15)
        log.close()

    latencies: dict[str, list[float]] = defaultdict(list)
    starts: dict[str, list[float]] = defaultdict(list)
    for client in clients:
        for method, values in client.latencies.items():
            latencies[method].extend(values)
            starts[method].extend(client.started[method])
    probed = [latency for _, latency in overhead]
    runs = Counter(tuple(line.split()) for line in ledger.read_text().splitlines()) if ledger.exists() else Counter()
    duplicated_steps = sorted({task for (task, _step), count in runs.items() if count > 1})
    by_owner: dict[str, list[str]] = defaultdict(list)
    for task_id, task in in_table.items():
        by_owner[task["owner"]].append(task_id)
    duplicated_creates = sorted(owner for owner, ids in by_owner.items() if len(ids) > 1)
    learned = {r["task_id"] for r in results if "task_id" in r}
    unlearned = sorted(set(in_table) - learned)  # made by the server, never known to its client
    lost = [r for r in results if "task_id" in r and r.get("status") not in TERMINAL]
    lost += [{"task_id": task_id, "unknown to its client": in_table[task_id]} for task_id in unlearned]
    no_task = [r for r in results if "task_id" not in r]  # a client whose creates made nothing
    wrong = [
        r
        for r in results
        if r.get("status") in TERMINAL and (r["status"] != r["expected"] or r.get("final") != r["status"])
    ]
    stuck = [{"task_id": task_id, "state": state} for task_id, state in pending.items()]
    roles = Counter(r.get("role", "?") for r in results)
    requests = sum(len(v) for v in latencies.values())
    return {
        "tasks": tasks,
        "writes_in_flight": WRITES_IN_FLIGHT,
        "poll_interval_ms": "as advertised (pollIntervalMs: 1000 ms, growing with the task's age)",
        "environments_per_function": environments_per_function(),
        "elapsed_s": elapsed,
        "all_live_after_s": released_after,
        "live_at_release": live_at_release,
        "peak_live": peak[0],
        "loadavg": {"start": loadavg_start, "end": os.getloadavg()},
        "requests": requests,
        "requests_per_s": requests / elapsed,
        "create": _latency(starts["tools/call"], latencies["tools/call"], overhead),
        "poll": _latency(starts["tasks/get"], latencies["tasks/get"], overhead),
        "overhead": {"count": len(probed), "p50_ms": percentile(probed, 50), "p99_ms": percentile(probed, 99)},
        "methods": {
            method: {"count": len(values), "p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}
            for method, values in sorted(latencies.items())
        },
        "roles": dict(roles),
        "tasks_in_table": len(in_table),
        "recovered_from_history": sum(1 for r in results if r.get("recovered")),
        "steps_run": sum(runs.values()),
        "lost": len(lost),
        "stuck": len(stuck),
        "disagreeing_when_clients_done": dict(at_clients_end),
        "execution_when_the_client_saw_the_end": dict(
            Counter(
                f"{r['final']}, execution {r['execution_when_seen']}" for r in results if "execution_when_seen" in r
            )
        ),
        "agreed_after_s": agreed_after,
        "stories": {r["task_id"]: r["story"] for r in results if "story" in r},
        "execution_examples": {
            combination: [
                r["task_id"]
                for r in results
                if r.get("execution_when_seen") and combination == f"{r['final']}, execution {r['execution_when_seen']}"
            ][:3]
            for combination in {
                f"{r['final']}, execution {r['execution_when_seen']}" for r in results if "execution_when_seen" in r
            }
            if combination not in ("completed, execution SUCCEEDED", "cancelled, execution ABORTED")
        },
        "duplicated": len(duplicated_steps) + len(duplicated_creates),
        "wrong_state": len(wrong),
        "clients_without_a_task": len(no_task),
        "errors": sum(len(c.errors) for c in clients),
        "timeouts": sum(c.timeouts for c in clients),
        "stream_batches_given_up": given_up,
        "work": work,
        "examples": [*lost, *stuck, *wrong, *no_task][:8]
        + [{"duplicated step": task} for task in duplicated_steps[:3]]
        + [{"duplicated create": owner} for owner in duplicated_creates[:3]],
        "error_examples": sorted({e for c in clients for e in c.errors})[:5],
        "budgets": {
            "load: no task lost, stuck, duplicated or in a wrong state": not (
                lost or stuck or wrong or duplicated_steps or duplicated_creates or no_task
            ),
            f"load: all {tasks} tasks live at once": peak[0] >= tasks,
        },
    }


def report(result: dict[str, Any]) -> list[str]:
    work = result["work"]
    lines = [
        f"Load on the local stack: {result['tasks']} tasks, at most {result['writes_in_flight']} writes in flight,"
        f" polled as advertised, {result['environments_per_function']} environments per function"
        f" ({', '.join(f'{n} {role}' for role, n in result['roles'].items())})",
        f"  all live after {result['all_live_after_s']:.1f} s: {result['live_at_release']} active in the table at"
        f" the release, peak {result['peak_live']}; {result['tasks_in_table']} tasks in the table,"
        f" {result['recovered_from_history']} learned from list_my_tasks after a create went unanswered",
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
        f" wrong state {result['wrong_state']}, clients without a task {result['clients_without_a_task']};"
        f" client errors {result['errors']},"
        f" requests timed out and sent again {result['timeouts']}; {result['steps_run']} step runs"
    )
    lines.append(
        f"  when the last client finished, {sum(result['disagreeing_when_clients_done'].values())} tasks' item and"
        f" execution disagreed ({result['disagreeing_when_clients_done']}); all agreed after"
        f" {result['agreed_after_s']:.1f} s, {result['stuck']} never did (stuck); as each client saw its task end:"
        f" {result['execution_when_the_client_saw_the_end']}"
    )
    lines.append(
        f"  supervisor: {work['supervisor_invocations']} invocations, {result['stream_batches_given_up']} stream"
        f" batches given up; sweeper: {work['sweeper_invocations']} runs, {work['sweeps']}"
    )
    for example in result["examples"]:
        lines.append(f"    e.g. {example}")
    for combination, task_ids in result["execution_examples"].items():
        lines.append(f"    seen {combination}: e.g. {', '.join(task_ids)}")
    for task_id, told in result["stories"].items():
        lines.append(f"    {task_id}: {' > '.join(told)}")
    for error in result["error_examples"]:
        lines.append(f"    error e.g. {error[:300]}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {'HOLDS' if ok else 'MISSED'}")
    return lines


if __name__ == "__main__":
    import contextlib

    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        outcome = run(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
    print("\n".join(report(outcome)))
    print(json.dumps({k: v for k, v in outcome.items() if not k.endswith("examples") and k != "stories"}, default=str))
