"""Warm overhead per JSON-RPC call through the API handler, against a bare handler.

The bare handler only json-parses the event body and dumps the same response JSON (the result our
handler produced for that request), so the ratio is what the runtime adds on top of the JSON work
any handler does. Methods: tools/list, a plain tools/call (count_words), an MRTR round of
archive_project (the first round, which seals a requestState, and the answer round, which opens it
and seals the next), and tasks/get with the store stubbed out by an in-memory `TaskOperations`.
Budget (docs/performance.md): within 10x of the bare handler. No AWS calls anywhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testkit import SigningKey, serve_issuer

from bench.common import REPO, TASKS_EXTENSION, api_event, issuer_environment, lambda_env, rpc, verdict, with_bearer

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


class InMemoryTaskOperations:
    """The `TaskOperations` protocol of mcp_runtime.server over a dict: no store, no executor, no AWS."""

    def __init__(self) -> None:
        from mcp_runtime.tasks.models import WORKING, ClientSnapshot, TaskRecord

        self._record = TaskRecord
        self._snapshot = ClientSnapshot
        self._working = WORKING
        self.tasks: dict[str, Any] = {}

    def create(self, spec: Any, arguments: dict[str, Any], ctx: Any, prepared: Any) -> dict[str, Any]:
        from mcp_runtime.tasks.models import create_task_result

        task_id = f"task-{len(self.tasks) + 1}"
        record = self._record(
            task_id=task_id,
            owner=ctx.principal.id,
            status=self._working,
            created_at="2026-07-28T10:00:00.000Z",
            last_updated_at="2026-07-28T10:00:00.000Z",
            ttl_ms=86_400_000,
            version=1,
            tool_name=spec.name,
            arguments=dict(arguments),
            client=self._snapshot(ctx.meta.protocol_version, dict(ctx.meta.client_capabilities)),
            poll_interval_ms=1000,
        )
        self.tasks[task_id] = record
        return create_task_result(record)

    def get(self, task_id: str, ctx: Any) -> dict[str, Any]:
        from mcp_runtime.errors import InvalidParams
        from mcp_runtime.tasks.models import get_task_result

        record = self.tasks.get(task_id)
        if record is None or record.owner != ctx.principal.id:
            raise InvalidParams("Failed to retrieve task: Task not found")
        return get_task_result(record)

    def update(self, task_id: str, input_responses: dict[str, Any], ctx: Any) -> None:
        self.get(task_id, ctx)

    def cancel(self, task_id: str, ctx: Any) -> None:
        self.get(task_id, ctx)


def make_bare(results: dict[str, Any]) -> Handler:
    def bare_handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        message = json.loads(event["body"])
        response = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": results[event["headers"]["mcp-method"] + "|" + event["requestContext"]["requestId"]],
        }
        return {
            "statusCode": 200,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(response, separators=(",", ":"), ensure_ascii=False),
            "isBase64Encoded": False,
        }

    return bare_handler


def setup(
    issuer: Any, environment: dict[str, str] | None = None
) -> tuple[Handler, dict[str, dict[str, Any]], dict[str, str]]:
    """The API handler as the template configures it, with its token settings pointed at `issuer`."""
    for key, value in (lambda_env() if environment is None else environment).items():
        if key not in ("PATH", "HOME", "PYTHONPATH"):
            os.environ.setdefault(key, value)
    os.environ.update(issuer_environment(issuer))
    from app import handlers
    from app.handlers import api_handler as lambda_handler

    handlers.reset()
    in_memory = InMemoryTaskOperations()
    handlers.api_endpoint().transport.server.tasks = in_memory  # the store stubbed out
    tasks_caps = {"extensions": {TASKS_EXTENSION: {}}}
    from mcp_runtime.context import Principal, RequestContext, RequestMeta
    from mcp_runtime.lambda_http import principal_from_event
    from mcp_runtime.tasks.models import COMPLETED

    # Whom the JWT authorizer context in api_event maps to (the task below must be that caller's).
    caller = principal_from_event(api_event(rpc("tools/list")), {}, dev_auth=False, require_principal=True)
    assert caller is not None
    principal_id = caller.id
    ctx = RequestContext(1, "tools/call", RequestMeta("2026-07-28", tasks_caps), Principal(principal_id, "jwt"), {})

    class _Spec:
        name = "count_words"

    in_memory.create(_Spec(), {"text": "a b c"}, ctx, None)
    done = {
        "resultType": "complete",
        "content": [{"type": "text", "text": "3 words"}],
        "structuredContent": {"words": 3},
    }
    in_memory.tasks["task-1"] = dataclasses.replace(in_memory.tasks["task-1"], status=COMPLETED, result=done)

    messages = {
        "tools/list": rpc("tools/list", {}, request_id=11),
        "tools/call": rpc(
            "tools/call",
            {"name": "count_words", "arguments": {"text": "the quick brown fox jumps over the lazy dog"}},
            request_id=12,
        ),
        "mrtr first round": rpc(
            "tools/call",
            {"name": "archive_project", "arguments": {"project": "apollo"}},
            request_id=13,
            capabilities={"elicitation": {"form": {}}},
        ),
        # The same kind of call to tools of the FastMCP-style example (functions/tools/support_desk.py):
        # what the facade (mcp_runtime.fastmcp) adds to a warm tools/call, sync and async.
        "tools/call ported": rpc(
            "tools/call", {"name": "ticket_summary", "arguments": {"ticket_id": 101, "max_words": 5}}, request_id=16
        ),
        "tools/call ported async": rpc(
            "tools/call", {"name": "find_customer", "arguments": {"email": "ada.lovelace@example.com"}}, request_id=17
        ),
    }
    events = {name: api_event(message) for name, message in messages.items()}
    first = json.loads(lambda_handler(events["mrtr first round"], None)["body"])["result"]
    assert first["resultType"] == "input_required", first
    answer_key = next(iter(first["inputRequests"]))
    messages["mrtr answer round"] = rpc(
        "tools/call",
        {
            "name": "archive_project",
            "arguments": {"project": "apollo"},
            "inputResponses": {answer_key: {"action": "accept", "content": {"confirm": True}}},
            "requestState": first["requestState"],
        },
        request_id=14,
        capabilities={"elicitation": {"form": {}}},
    )
    messages["tasks/get"] = rpc("tasks/get", {"taskId": "task-1"}, request_id=15, capabilities=tasks_caps)
    events = {name: api_event(message) for name, message in messages.items()}
    # As deployed (no API Gateway authorizer): the function validates the bearer token of every call.
    events["tools/call, bearer token"] = with_bearer(api_event(messages["tools/call"]), issuer)
    expected = {
        "tools/list": "complete",
        "tools/call": "complete",
        "tools/call, bearer token": "complete",
        "tools/call ported": "complete",
        "tools/call ported async": "complete",
        "mrtr first round": "input_required",
        "mrtr answer round": "input_required",
        "tasks/get": "complete",
    }
    for name, event in events.items():
        event["requestContext"]["requestId"] = name  # lets the bare handler find its canned result
    return lambda_handler, events, expected


def _per_call_us(handler: Handler, event: dict[str, Any], iterations: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(iterations):
        handler(event, None)
    return (time.perf_counter_ns() - start) / iterations / 1000


def run(iterations: int = 2000, rounds: int = 15, instructions: bool = True) -> dict[str, Any]:
    # Metrics (EMF) and logs go to stdout as in Lambda; here they go to /dev/null, not the report.
    with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        return _run(iterations, rounds, instructions)


def canned_results(
    handler: Handler, events: dict[str, dict[str, Any]], expected: dict[str, str] | None = None
) -> dict[str, Any]:
    """Our handler's result for each event, checked against what it should be, for the bare handler."""
    results: dict[str, Any] = {}
    for name, event in events.items():
        response = handler(event, None)
        body = json.loads(response["body"])
        assert response["statusCode"] == 200 and "result" in body, (name, response)
        if expected is not None:
            assert body["result"]["resultType"] == expected[name], (name, body)
        if name == "tasks/get":
            assert body["result"]["status"] == "completed", body
        results[f"{event['headers']['mcp-method']}|{name}"] = body["result"]
    return results


def _run(iterations: int, rounds: int, instructions: bool) -> dict[str, Any]:
    with serve_issuer() as issuer:
        return _measure(*setup(issuer), iterations, rounds, instructions)


def _measure(
    handler: Handler,
    events: dict[str, dict[str, Any]],
    expected: dict[str, str],
    iterations: int,
    rounds: int,
    instructions: bool,
) -> dict[str, Any]:
    bare = make_bare(canned_results(handler, events, expected))
    methods: dict[str, Any] = {}
    for name, event in events.items():
        assert json.loads(bare(event)["body"]) == json.loads(handler(event, None)["body"]) or name.startswith("mrtr")
        ours_samples, bare_samples = [], []
        for _ in range(rounds):  # alternate batches so both see the same machine state
            ours_samples.append(_per_call_us(handler, event, iterations))
            bare_samples.append(_per_call_us(bare, event, iterations))
        ours_us = statistics.median(ours_samples)
        bare_us = statistics.median(bare_samples)
        methods[name] = {
            "ours_us": ours_us,
            "bare_us": bare_us,
            "ratio": ours_us / bare_us,
            "ours_min_us": min(ours_samples),
            "bare_min_us": min(bare_samples),
            "body_bytes": len(event["body"]),
        }
    worst = max(entry["ratio"] for entry in methods.values())
    geo = statistics.geometric_mean([entry["ratio"] for entry in methods.values()])
    ratios = {"worst method ours/bare": worst, "geometric mean ours/bare": geo}
    # What the facade adds to a warm tools/call: a ported tool's ratio over the native one's.
    for ported in ("tools/call ported", "tools/call ported async"):
        if ported in methods and "tools/call" in methods:
            ratios[f"{ported} / native tools/call"] = methods[ported]["ratio"] / methods["tools/call"]["ratio"]
    budgets = {"warm overhead ours/bare <= 10x (every method)": worst <= 10.0}
    if "tools/call ported / native tools/call" in ratios:
        budgets["the facade adds <= 10% to a warm tools/call"] = ratios["tools/call ported / native tools/call"] <= 1.10
    counted = _instructions(list(events)) if instructions else None
    if counted is not None:
        for name, (ours_count, bare_count) in counted.items():
            methods[name].update(ours_instructions=ours_count, bare_instructions=bare_count)
            methods[name]["instructions_ratio"] = ours_count / bare_count
        for ported in ("tools/call ported", "tools/call ported async"):
            if ported in methods and "tools/call" in methods:
                ratios[f"instructions {ported} / native tools/call"] = (
                    methods[ported]["instructions_ratio"] / methods["tools/call"]["instructions_ratio"]
                )
        worst_counted = max(entry["instructions_ratio"] for entry in methods.values())
        ratios["instructions worst method ours/bare"] = worst_counted
        budgets["warm overhead ours/bare <= 10x in instructions (every method)"] = worst_counted <= 10.0
    return {"iterations": iterations, "rounds": rounds, "methods": methods, "ratios": ratios, "budgets": budgets}


INSTRUCTION_CALLS = 200


def _instructions(methods: list[str]) -> dict[str, tuple[float, float]] | None:
    """Instructions per call, ours and bare, counted by callgrind: a fresh interpreter per method and
    handler makes INSTRUCTION_CALLS calls after the same setup and warm-up as a baseline run that makes
    none, and the difference is divided by the calls. Counts, not seconds: the same figures whatever
    else the machine does, where the timed ratios above move with the machine's state."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    child = Path(__file__).resolve().parent / "warm_calls" / "child.py"
    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        env_file = Path(tmp) / "env.json"
        env_file.write_text(json.dumps({k: v for k, v in lambda_env().items() if k not in ("PATH", "HOME")}))
        key_file = Path(tmp) / "key.pem"
        key_file.write_bytes(SigningKey.generate("k1").private_pem())
        env = {
            **os.environ,
            "PYTHONHASHSEED": "0",
            "BENCH_WARM_ENV": str(env_file),
            "BENCH_WARM_KEY": str(key_file),
            "BENCH_REPO": str(REPO),
        }

        def count(method: str, calls: int, which: str) -> int:
            out = Path(tmp) / f"callgrind.{method.replace('/', '_').replace(' ', '_')}.{which}.{calls}"
            command = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, str(child)]
            done = subprocess.run([*command, method, str(calls), which], env=env, capture_output=True, text=True)
            match = re.search(r"Collected : (\d+)", done.stderr)
            if done.returncode != 0 or match is None:
                raise RuntimeError(f"callgrind failed for {method} {which}: {done.stderr[-2000:]}")
            return int(match.group(1))

        jobs = [(methods[0], 0, "ours")] + [(m, INSTRUCTION_CALLS, w) for m in methods for w in ("ours", "bare")]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            totals = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    baseline = totals[jobs[0]]
    return {
        method: (
            (totals[(method, INSTRUCTION_CALLS, "ours")] - baseline) / INSTRUCTION_CALLS,
            (totals[(method, INSTRUCTION_CALLS, "bare")] - baseline) / INSTRUCTION_CALLS,
        )
        for method in methods
    }


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        f"Warm overhead per call (median of {result['rounds']} batches x {result['iterations']} calls,"
        " in-process, no AWS)"
    ]
    lines.append(f"  {'method':<18} {'ours us':>9} {'bare us':>9} {'ratio':>7}   instructions per call")
    for name, entry in result["methods"].items():
        counted = ""
        if "ours_instructions" in entry:
            counted = (
                f"   [{entry['ours_instructions'] / 1000:,.0f} K / {entry['bare_instructions'] / 1000:,.0f} K"
                f" = {entry['instructions_ratio']:.2f}]"
            )
        lines.append(f"  {name:<18} {entry['ours_us']:9.1f} {entry['bare_us']:9.1f} {entry['ratio']:7.2f}{counted}")
    for name, value in result["ratios"].items():
        lines.append(f"  ratio {name:<32} {value:6.2f}")
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    return lines


if __name__ == "__main__":
    print("\n".join(report(run())))
