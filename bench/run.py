"""`make bench`: every benchmark in one run, figures and ratios printed, results/latest.{json,md} written
(a --quick smoke run writes build/bench/quick/ instead, never over the committed results).

    python -m bench.run [--quick] [--only coldstart,warm,awscalls,capacity,latency,load,assets]

Benchmarks are measurements, not tests: a missed budget is reported, never an error exit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from bench import assets, awscalls, capacity, coldstart, latency, load, warm
from bench.common import QUICK_RESULTS, RESULTS, machine

MB = 1024 * 1024


def _bench(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    print(f"== {name} ...", flush=True)
    started = time.perf_counter()
    try:
        # The functions print EMF metrics and logs to stdout as in Lambda: keep them out of the report.
        with open(os.devnull, "w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
            result = fn()
    except Exception as exc:
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"}
    result["seconds"] = time.perf_counter() - started
    return result


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    out = [
        f"Run {results['date']} on {m['nproc']} cores, {m['cpu']} ({m['arch']}), Python {m['python']};"
        f" load average at start {results['loadavg']}.",
        "",
    ]
    cold = results.get("coldstart", {})
    if "variants" in cold:
        out += [
            f"**Cold start** ({cold['runs']} fresh interpreters per variant, interleaved; ms from spawn to the answer"
            " written; instructions counted by callgrind up to the answer)",
            "",
            "| variant | median ms | p90 ms | min ms | M instructions |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, entry in cold["variants"].items():
            ins = f"{entry['instructions'] / 1e6:,.0f}" if "instructions" in entry else "-"
            w = entry["wall_ms"]
            out.append(f"| {name} | {w['median']:.1f} | {w['p90']:.1f} | {w['min']:.1f} | {ins} |")
        out += ["", "| ratio | value | budget |", "|---|---:|---|"]
        budget_of = {
            "packaged_discover_token/boto3_runtime": "<= 1.0 (what deploys)",
            "instructions packaged_discover_token/boto3_runtime": "<= 1.0 (what deploys)",
            "api_discover/boto3": "<= 1.0 (dev tree)",
            "sdk_discover/api_discover": ">= 4",
            "instructions api_discover/boto3": "<= 1.0 (dev tree)",
            "instructions sdk_discover/api_discover": ">= 4",
        }
        for name, value in cold["ratios"].items():
            out.append(f"| {name} | {value:.2f} | {budget_of.get(name, '')} |")
        out.append("")
    w = results.get("warm", {})
    if "methods" in w:
        out += [
            f"**Warm overhead** per JSON-RPC call (median of {w['rounds']} batches of {w['iterations']} calls)",
            "",
            "| method | ours µs | bare µs | ratio (budget <= 10) | ours K instr. | bare K instr. | ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for name, entry in w["methods"].items():
            counted = (
                f"{entry['ours_instructions'] / 1000:,.0f} | {entry['bare_instructions'] / 1000:,.0f} |"
                f" {entry['instructions_ratio']:.2f}"
                if "ours_instructions" in entry
                else "| |"
            )
            out.append(
                f"| {name} | {entry['ours_us']:.1f} | {entry['bare_us']:.1f} | {entry['ratio']:.2f} | {counted} |"
            )
        out.append("")
    a = results.get("awscalls", {})
    if "operations" in a:
        out += [
            "**AWS calls per task operation** (moto; capacity = moto's ConsumedCapacity / modelled on-demand units)",
            "",
            "| operation | calls | capacity |",
            "|---|---|---|",
        ]
        for op, entry in a["operations"].items():
            calls = ", ".join(f"{n}x {k.split(':')[1]}" for k, n in sorted(entry["calls"].items())) or "none"
            cap = (
                f"{entry['moto_consumed_capacity']:.1f} / {entry['modelled_units']:.0f}"
                if "moto_consumed_capacity" in entry
                else ""
            )
            out.append(f"| {op} | {calls} | {cap} |")
        out.append("")
    c = results.get("capacity", {})
    if "scenarios" in c:
        out += [
            "**DynamoDB units per task** (`bench/capacity.py`: the template's table in moto, units modelled from"
            " item sizes as on-demand bills them)",
            "",
            "| task | operation | calls | WRU | RRU |",
            "|---|---|---:|---:|---:|",
        ]
        for scenario, operations in c["scenarios"].items():
            for op, entry in operations.items():
                out.append(f"| {scenario} | {op} | {entry['calls']} | {entry['wru']:g} | {entry['rru']:g} |")
        out.append("")
    lt = results.get("latency", {})
    if "figures" in lt:
        delivery = lt["delivery"]
        out += [
            f"**Task start and resume latency** ({lt['samples']} tasks one at a time; the stream polled every"
            f" {delivery['LOCAL_STREAM_POLL_MS']} ms, records held {delivery['LOCAL_STREAM_DELAY_MS']} ms;"
            f" load average {lt['loadavg']['start'][0]:.2f} at start, {lt['loadavg']['end'][0]:.2f} at end)",
            "",
            "| measure | p50 ms | p90 ms |",
            "|---|---:|---:|",
        ]
        for name, entry in lt["figures"].items():
            out.append(f"| {name} | {entry['p50']:.1f} | {entry['p90']:.1f} |")
        out += [
            "",
            "p50 over the local stack's own overhead (create: the request round trip + StartExecution to the"
            " worker's first call; update: the request round trip): "
            + "; ".join(
                f"{name} {value:.1f} ms (overhead {lt['local_overhead_p50_ms'][name]:.1f} ms)"
                for name, value in lt["p50_over_overhead_ms"].items()
            ),
            "",
        ]
    ld = results.get("load", {})
    if "methods" in ld:
        out += [
            f"**Load on the local stack**: {ld['tasks']} tasks started at once ({ld['poll_interval_ms']});"
            f" {ld['requests']} requests in {ld['elapsed_s']:.1f} s ({ld['requests_per_s']:.0f} req/s);"
            f" lost {ld['lost']}, stuck {ld['stuck']}, duplicated {ld['duplicated']}, wrong state {ld['wrong_state']};"
            f" requests timed out and sent again {ld.get('timeouts', 0)}",
            "",
            "| | count | p50 ms | p99 ms | p50 over overhead | p99 over overhead |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name in ("create", "poll"):
            entry = ld[name]
            out.append(
                f"| {name} | {entry['count']} | {entry['p50_ms']:.0f} | {entry['p99_ms']:.0f}"
                f" | {entry['p50_over_overhead_ms']:.0f} | {entry['p99_over_overhead_ms']:.0f} |"
            )
        out.append("")
    s = results.get("assets", {})
    if "ours" in s:
        o = s["ours"]
        line = (
            f"**Asset** ({s['target']}, both functions): {o['unzipped_bytes'] / MB:.2f} MB unzipped,"
            f" {o['zipped_bytes'] / MB:.2f} MB zipped"
        )
        sdk = s.get("sdk_stack") or {}
        if "unzipped_bytes" in sdk:
            line += f"; the SDK stack (mcp 2.3.0 + mangum): {sdk['unzipped_bytes'] / MB:.2f} MB unzipped"
        out += [line, ""]
    out += ["**Budgets**", ""]
    for name, ok in results["budgets"].items():
        out.append(f"- {name}: {'holds' if ok else '**missed**'}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs and iterations (a smoke run)")
    parser.add_argument("--only", default="coldstart,warm,awscalls,capacity,latency,load,assets")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    q = args.quick
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": machine(),
        "loadavg": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "quick": q,
    }
    plan: list[tuple[str, Callable[[], dict[str, Any]], Any]] = [
        ("coldstart", lambda: coldstart.run(runs=5 if q else 21, instructions=not q), coldstart.report),
        (
            "warm",
            lambda: warm.run(iterations=300 if q else 2000, rounds=5 if q else 15, instructions=not q),
            warm.report,
        ),
        ("awscalls", awscalls.run, awscalls.report),
        ("capacity", lambda: capacity.run(quick=q), capacity.report),
        ("latency", lambda: latency.run(samples=10 if q else 30), latency.report),
        ("load", lambda: load.run(tasks=40 if q else 500, settle_seconds=20 if q else 60), load.report),
        ("assets", lambda: assets.run(with_sdk=not q), assets.report),
    ]
    budgets: dict[str, bool] = {}
    for name, fn, report in plan:
        if name not in only:
            continue
        result = _bench(name, fn)
        results[name] = result
        if "error" in result:
            print(f"  {name} failed: {result['error']}")
            continue
        print("\n".join(report(result)), flush=True)
        budgets.update(result.get("budgets", {}))
    results["budgets"] = budgets
    out = QUICK_RESULTS if q else RESULTS  # a smoke run's figures are not the committed ones
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    (out / "latest.md").write_text(markdown(results))
    written = out.relative_to(RESULTS.parent.parent)
    try:
        from bench import plot

        for path in plot.main(out / "latest.json"):
            print(f"wrote {path.relative_to(RESULTS.parent.parent)}")
    except ImportError as exc:  # matplotlib is bench-only: `make bench` installs it
        print(f"plots skipped: {exc}")
    print("== budgets")
    for name, ok in budgets.items():
        print(f"  {name}: {'HOLDS' if ok else 'MISSED'}")
    print(f"wrote {written}/latest.json and {written}/latest.md ({results['machine']['nproc']} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
