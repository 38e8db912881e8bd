"""Load on the local stack: many MCP clients at once, each driving one durable task to its end.

The local stack (`python -m local_stack`: the synthesized template served by the loopback HTTP
front, each function in execution environments of its own, two per core, and an embedded moto
server running the task table and the real ASL, which invokes the worker function) is started as
its own process on a free loopback port. Then `tasks` clients start their task at the same instant (a
barrier), each on its own thread with its own keep-alive connection and its own dev principal:
  tools/call deploy_release (tasks extension) -> CreateTaskResult
  tasks/get every pollIntervalMs until the task is terminal;
  when it is input_required: tasks/update (approve, or decline) -- answered mid-flight;
  the "cancel" clients send tasks/cancel (half at once after creating, half once it awaits input).
Expected end: completed for answered tasks, cancelled for cancelled ones. Lost = not terminal by
the deadline; wrong = terminal in another state, or a final tasks/get that disagrees. Bounded in
count and time, loopback only. Figures: p50/p95/p99 per method, requests/s, tasks/s.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from typing import Any

from local_stack.processes import stop_process

from bench.common import FUNCTIONS, PROTOCOL_VERSION, REPO, TASKS_EXTENSION, percentile, rpc

CAPS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {"form": {}}}
TERMINAL = {"completed", "failed", "cancelled"}


class Client:
    def __init__(self, url: str, principal: str) -> None:
        import httpx

        self.url = url
        self.http = httpx.Client(timeout=30.0)
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


def drive(client: Client, role: str, barrier: threading.Barrier, deadline: float) -> dict[str, Any]:
    """One client's whole task: returns what it saw.

    A poll, answer or cancel that times out is sent again on the next poll, as a polling client would:
    with 120 clients and a few local environments per function, requests queue (in AWS, Lambda would
    add environments instead). The timeouts are counted and reported; a task counts as lost only if it
    is not terminal by the deadline.
    """
    import httpx

    outcome: dict[str, Any] = {"role": role, "expected": "cancelled" if role.startswith("cancel") else "completed"}
    try:
        barrier.wait(timeout=60)
        arguments = {"service": f"svc-{client.principal}", "version": "1.0.0", "seconds_per_stage": 0}
        created = client.call("tools/call", {"name": "deploy_release", "arguments": arguments})
        task_id = created["taskId"]
        outcome["task_id"] = task_id
        interval = (created.get("pollIntervalMs") or 1000) / 1000
        if role == "cancel at once":
            client.call("tasks/cancel", {"taskId": task_id})
        answered = False
        status = created["status"]
        while status not in TERMINAL and time.monotonic() < deadline:
            time.sleep(interval)
            try:
                task = client.call("tasks/get", {"taskId": task_id})
                status = task["status"]
                interval = (task.get("pollIntervalMs") or 1000) / 1000
                if status == "input_required" and not answered:
                    if role == "cancel when awaiting input":
                        client.call("tasks/cancel", {"taskId": task_id})
                    else:
                        key = next(iter(task["inputRequests"]))
                        approve = role == "approve"
                        answer = {key: {"action": "accept", "content": {"approve": approve}}}
                        client.call("tasks/update", {"taskId": task_id, "inputResponses": answer})
                    answered = True
            except httpx.TimeoutException:
                client.timeouts += 1
        outcome["status"] = status
        if status in TERMINAL:
            outcome["final"] = client.call("tasks/get", {"taskId": task_id})["status"]
    except Exception as exc:  # recorded; counted as lost or wrong below
        client.errors.append(repr(exc))
        outcome["error"] = repr(exc)
    return outcome


def environments_per_function(cores: int | None = None) -> int:
    """Execution environments per function for the load run: two per core. Each is an interpreter of
    its own; 32 per function on 2 cores (the figure before 2026-12-01) spent the run starting and
    switching between about 100 of them: 76 of 120 tasks were still working at the deadline, where
    4 per function settle all 120 in 75 s (bench/README.md)."""
    return 2 * (cores or os.cpu_count() or 1)


def _start_stack() -> tuple[subprocess.Popen[bytes], str, Any]:
    """`python -m local_stack` on a free loopback port, in its own process (its own GIL): the clients'
    threads here do not slow the server down. Its stdout (EMF metrics, logs) goes to a temp file."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "PORT": str(port),
        "PYTHONPATH": f"{FUNCTIONS}{os.pathsep}{REPO}",
        "LOCAL_LAMBDA_CONCURRENCY": str(environments_per_function()),
    }
    env.pop("FIXTURES", None)
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by run() once the server is stopped
    server = subprocess.Popen([sys.executable, "-m", "local_stack"], cwd=REPO, env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    url = f"http://127.0.0.1:{port}/mcp"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"local stack exited: {log.read()[-2000:]!r}")
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return server, url, log
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("local stack did not start")


ROLES = ("approve", "approve", "decline", "cancel at once", "approve", "cancel when awaiting input")


def run(tasks: int = 120, time_limit: float = 180.0) -> dict[str, Any]:
    server, url, log = _start_stack()
    clients = [Client(url, f"client-{i}") for i in range(tasks)]
    barrier = threading.Barrier(tasks + 1)
    results: list[dict[str, Any]] = [{} for _ in range(tasks)]
    threads = []
    deadline = time.monotonic() + time_limit
    try:
        for i, client in enumerate(clients):

            def target(i: int = i, client: Client = client) -> None:
                results[i] = drive(client, ROLES[i % len(ROLES)], barrier, deadline)

            thread = threading.Thread(target=target, name=f"load-{i}", daemon=True)
            thread.start()
            threads.append(thread)
        barrier.wait(timeout=60)
        started = time.perf_counter()
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + 5)
        elapsed = time.perf_counter() - started
    finally:
        for client in clients:
            client.close()
        stop_process(server, timeout=15)
        log.close()

    latencies: dict[str, list[float]] = defaultdict(list)
    for client in clients:
        for method, values in client.latencies.items():
            latencies[method].extend(values)
    per_method = {
        method: {
            "count": len(values),
            "p50_ms": percentile(values, 50),
            "p95_ms": percentile(values, 95),
            "p99_ms": percentile(values, 99),
            "max_ms": max(values),
        }
        for method, values in sorted(latencies.items())
    }
    requests = sum(len(v) for v in latencies.values())
    lost = [r for r in results if r.get("status") not in TERMINAL]
    wrong = [
        r
        for r in results
        if r.get("status") in TERMINAL and (r["status"] != r["expected"] or r.get("final") != r["status"])
    ]
    roles: dict[str, int] = defaultdict(int)
    for r in results:
        roles[r.get("role", "?")] += 1
    return {
        "tasks": tasks,
        "poll_interval_ms": 1000,  # TASK_POLL_INTERVAL_MS of the template (its default): clients follow pollIntervalMs
        "elapsed_s": elapsed,
        "requests": requests,
        "requests_per_s": requests / elapsed,
        "tasks_per_s": (tasks - len(lost)) / elapsed,
        "methods": per_method,
        "roles": dict(roles),
        "lost": len(lost),
        "wrong_state": len(wrong),
        "errors": sum(len(c.errors) for c in clients),
        "timeouts": sum(c.timeouts for c in clients),
        "examples": [r for r in lost + wrong][:5],
        "budgets": {"load: no task lost or in a wrong state": not lost and not wrong},
    }


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        f"Load on the local stack: {result['tasks']} tasks started at once,"
        f" polled every {result['poll_interval_ms']} ms"
        f" ({', '.join(f'{n} {role}' for role, n in result['roles'].items())})"
    ]
    lines.append(f"  {'method':<14} {'count':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for method, entry in result["methods"].items():
        lines.append(
            f"  {method:<14} {entry['count']:6d} {entry['p50_ms']:8.1f} {entry['p95_ms']:8.1f}"
            f" {entry['p99_ms']:8.1f} {entry['max_ms']:8.1f}"
        )
    lines.append(
        f"  {result['requests']} requests in {result['elapsed_s']:.1f} s: {result['requests_per_s']:.0f} req/s,"
        f" {result['tasks_per_s']:.1f} tasks/s to a terminal state"
    )
    lines.append(
        f"  lost: {result['lost']}, wrong state: {result['wrong_state']}, client errors: {result['errors']},"
        f" requests timed out and sent again: {result.get('timeouts', 0)}"
    )
    for example in result["examples"]:
        lines.append(f"    e.g. {example}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {'HOLDS' if ok else 'MISSED'}")
    return lines


if __name__ == "__main__":
    import contextlib
    import sys

    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        outcome = run(int(sys.argv[1]) if len(sys.argv) > 1 else 120)
    print("\n".join(report(outcome)))
