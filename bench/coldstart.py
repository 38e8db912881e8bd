"""Cold start: fresh interpreters, each variant run N times, interleaved so they share machine noise.

Figure: wall ms from spawning the interpreter until its answer is written (interpreter start, imports
and the first invocation: what a Lambda init + first invoke costs); time to process exit is also kept.
Variants:
  boto3         python -c "import boto3"
  api_discover  import the API handler, answer `server/discover` from a real-shaped API Gateway event
  api_call      the same, answering a first plain `tools/call` (count_words)
  api_discover_token  the same `server/discover` as deployed since tokens are validated in the function:
                no authorizer context, a bearer token the function verifies (`mcp_runtime/_jws.py`,
                keys fetched from a loopback JWKS; in AWS that fetch is one HTTPS round trip more),
                without the dev venv's `cryptography` (the asset has none)
  sdk_discover  MCP Python SDK 2.3.0 low-level server + stateless streamable HTTP manager + Mangum,
                answering the same `server/discover`
  sdk_call      the SDK stack answering the same `tools/call` (context only, no budget)
What deploys (`testkit/_packaged_api.py`): the asset `build_package` makes (the local stack's host
build, bytecode as shipped), `python -S` on the asset and the runtime-provided libraries only, no
bytecode written, the API function's template environment with the secret's ARN (a real secret on
moto) and the issuer on loopback:
  boto3_runtime           python -S -c "import boto3" from the runtime-provided libraries (its baseline)
  packaged_discover_token first `server/discover` with a bearer token
  packaged_call_sealing   first `tools/call` of archive_project: elicits, so it reads the secret
                          (boto3, Powertools parameters, one Secrets Manager call) and seals a requestState
  packaged_no_bytecode    packaged_discover_token on a copy of the asset without its __pycache__
  packaged_call_native    first `tools/call` of count_words (a native tool: no secret, nothing sealed)
  packaged_call_ported    first `tools/call` of find_customer, an async tool of the FastMCP-style
                          example (functions/tools/support_desk.py, over mcp_runtime.fastmcp)
The api_* variants above run the development tree (functions/ on PYTHONPATH, the venv's site,
MCP_STATE_KEY instead of the secret): kept beside, labelled "dev tree".
Budgets (docs/performance.md): packaged_discover_token / boto3_runtime <= 1.0 (wall and instructions),
api_discover / boto3 <= 1.0 (dev tree) and sdk_discover / api_discover >= 4.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testkit import SecretOnMoto, api_environment, bearer_event, packaged_asset, secret_on_moto, serve_issuer

from bench.common import api_event, issuer_environment, lambda_env, rpc, summary, verdict, with_bearer

CHILD = Path(__file__).resolve().parent / "cold" / "child.py"


# The asset's performance budget (docs/performance.md), what deploys: its first server/discover with a token, at or
# below `import boto3` from the runtime's libraries. Its size is no budget (assetSizeLimitMb, bench/assets.py).
PACKAGED_BUDGET = "cold start packaged_discover_token/boto3_runtime <= 1.0"


def _commands(event_dir: Path, fast_exit: bool = False) -> dict[str, list[str]]:
    py = sys.executable
    tail = "; import os; os._exit(0)" if fast_exit else ""
    packaged = [py, "-S", str(CHILD), "api"]
    return {
        "boto3_runtime": [py, "-S", "-c", "import boto3; print('ready', flush=True)" + tail],
        "packaged_discover_token": [*packaged, str(event_dir / "packaged-discover.json")],
        "packaged_call_sealing": [*packaged, str(event_dir / "packaged-call-sealing.json")],
        "packaged_no_bytecode": [*packaged, str(event_dir / "packaged-discover.json")],
        "packaged_call_native": [*packaged, str(event_dir / "packaged-call-native.json")],
        "packaged_call_ported": [*packaged, str(event_dir / "packaged-call-ported.json")],
        "python_pass": [py, "-c", "print('ready', flush=True)" + tail],
        "boto3": [py, "-c", "import boto3; print('ready', flush=True)" + tail],
        "api_discover": [py, str(CHILD), "api", str(event_dir / "discover.json")],
        "api_call": [py, str(CHILD), "api", str(event_dir / "call.json")],
        "api_discover_token": [py, str(CHILD), "api", str(event_dir / "discover-token.json")],
        "sdk_discover": [py, str(CHILD), "sdk", str(event_dir / "discover.json")],
        "sdk_call": [py, str(CHILD), "sdk", str(event_dir / "call.json")],
    }


def _run_once(command: list[str], env: dict[str, str]) -> tuple[float, float, dict[str, Any] | None]:
    """(ms until the answer is out, ms until the process exited, the child's own report).

    The first is the cold start a Lambda caller sees (init + first invoke; the process then stays);
    the second adds interpreter shutdown, which Lambda never waits for.
    """
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    while line and line.strip() != "ready" and '"import_ms"' not in line:  # the function's EMF and log lines
        line = process.stdout.readline()
    ready = (time.perf_counter() - start) * 1000
    _, stderr = process.communicate()
    exited = (time.perf_counter() - start) * 1000
    if process.returncode != 0 or not line:
        raise RuntimeError(f"{command} failed: {stderr[-2000:]}")
    inner = None
    if line.strip() != "ready":
        inner = json.loads(line)
        if not inner.get("ok"):
            raise RuntimeError(f"{command} answered wrongly: {inner}")
    return ready, exited, inner


def _instructions(command: list[str], env: dict[str, str], tmp: Path) -> int | None:
    """Instructions executed until the answer is out (callgrind; the child exits at once after it).

    Counts, not seconds: the same total whatever else the machine is doing, so the ratios between
    variants are free of the noise that other processes put into wall times.
    """
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    out = tmp / "callgrind.out"
    done = subprocess.run(
        [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", *command],
        env={**env, "BENCH_FAST_EXIT": "1", "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=False,
    )
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"callgrind failed for {command}: {done.stderr[-2000:]}")
    return int(match.group(1))


def run(runs: int = 21, seed: int = 7, instructions: bool = True) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp,
        serve_issuer() as issuer,
        secret_on_moto() as secret,
    ):
        return _run(Path(tmp), issuer, secret, runs, seed, instructions)


def _packaged_envs(event_dir: Path, issuer: Any, secret: SecretOnMoto) -> dict[str, dict[str, str]]:
    """The packaged variants' environments; the one without bytecode runs a copy stripped of it."""
    code = packaged_asset()
    stripped = event_dir / "asset-without-bytecode"
    shutil.copytree(code.task_root, stripped, ignore=shutil.ignore_patterns("__pycache__"))
    deployed = api_environment(code, secret, issuer)
    elicit = rpc("tools/call", {"name": "archive_project", "arguments": {"project": "apollo"}}, 1, {"elicitation": {}})
    (event_dir / "packaged-discover.json").write_text(json.dumps(bearer_event(rpc("server/discover"), issuer)))
    (event_dir / "packaged-call-sealing.json").write_text(json.dumps(bearer_event(elicit, issuer)))
    native = rpc("tools/call", {"name": "count_words", "arguments": {"text": "the quick brown fox"}})
    ported = rpc("tools/call", {"name": "find_customer", "arguments": {"email": "ada.lovelace@example.com"}})
    (event_dir / "packaged-call-native.json").write_text(json.dumps(bearer_event(native, issuer)))
    (event_dir / "packaged-call-ported.json").write_text(json.dumps(bearer_event(ported, issuer)))
    return {
        "boto3_runtime": {**deployed, "PYTHONPATH": str(code.runtime_dir)},
        "packaged_discover_token": deployed,
        "packaged_call_sealing": deployed,
        "packaged_call_native": deployed,
        "packaged_call_ported": deployed,
        "packaged_no_bytecode": {
            **deployed,
            "LAMBDA_TASK_ROOT": str(stripped),
            "PYTHONPATH": f"{stripped}:{code.runtime_dir}",
        },
    }


def _run(
    event_dir: Path, issuer: Any, secret: SecretOnMoto, runs: int, seed: int, instructions: bool
) -> dict[str, Any]:
    base = lambda_env()
    # Our functions as deployed: the Lambda asset has no `cryptography` (PyJWT would import the dev venv's).
    api = lambda_env({"BENCH_WITHOUT": "cryptography"})
    token_env = lambda_env({**issuer_environment(issuer), "BENCH_WITHOUT": "cryptography"})
    (event_dir / "discover.json").write_text(json.dumps(api_event(rpc("server/discover"))))
    (event_dir / "discover-token.json").write_text(json.dumps(with_bearer(api_event(rpc("server/discover")), issuer)))
    call = rpc(
        "tools/call", {"name": "count_words", "arguments": {"text": "the quick brown fox jumps over the lazy dog"}}
    )
    (event_dir / "call.json").write_text(json.dumps(api_event(call)))
    commands = _commands(event_dir)
    packaged = _packaged_envs(event_dir, issuer, secret)
    envs = {
        name: packaged[name]
        if name in packaged
        else token_env
        if name == "api_discover_token"
        else api
        if name.startswith("api_")
        else base
        for name in commands
    }
    # Warm-up: compile bytecode caches and warm the page cache; not counted.
    for name, command in commands.items():
        _run_once(command, envs[name])
    walls: dict[str, list[float]] = {name: [] for name in commands}
    exits: dict[str, list[float]] = {name: [] for name in commands}
    inners: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    rng = random.Random(seed)
    order = list(commands)
    for _ in range(runs):
        rng.shuffle(order)  # interleaved, in a fresh order each round
        for name in order:
            wall, exited, inner = _run_once(commands[name], envs[name])
            walls[name].append(wall)
            exits[name].append(exited)
            if inner is not None:
                inners[name].append(inner)
    counts: dict[str, int | None] = {}
    if instructions:
        for name, command in _commands(event_dir, fast_exit=True).items():
            counts[name] = _instructions(command, envs[name], event_dir)
    variants: dict[str, Any] = {}
    for name, values in walls.items():
        entry: dict[str, Any] = {
            "wall_ms": summary(values),
            "exit_ms": summary(exits[name]),
            "command": " ".join(Path(c).name if "/" in c else c for c in commands[name]),
        }
        if inners[name]:
            entry["import_ms"] = summary([i["import_ms"] for i in inners[name]])
            entry["first_call_ms"] = summary([i["call_ms"] for i in inners[name]])
            entry["boto3_loaded"] = any(i["boto3_loaded"] for i in inners[name])
            entry["modules"] = inners[name][-1]["modules"]
        if counts.get(name) is not None:
            entry["instructions"] = counts[name]
        variants[name] = entry
    med = {name: variants[name]["wall_ms"]["median"] for name in variants}
    p90 = {name: variants[name]["wall_ms"]["p90"] for name in variants}
    ratios = {
        "packaged_discover_token/boto3_runtime": med["packaged_discover_token"] / med["boto3_runtime"],
        "packaged_call_sealing/boto3_runtime": med["packaged_call_sealing"] / med["boto3_runtime"],
        "packaged_no_bytecode/packaged_discover_token": med["packaged_no_bytecode"] / med["packaged_discover_token"],
        "packaged_call_native/boto3_runtime": med["packaged_call_native"] / med["boto3_runtime"],
        "packaged_call_ported/boto3_runtime": med["packaged_call_ported"] / med["boto3_runtime"],
        "packaged_call_ported/packaged_call_native": med["packaged_call_ported"] / med["packaged_call_native"],
        "p90 packaged_discover_token/boto3_runtime": p90["packaged_discover_token"] / p90["boto3_runtime"],
        "api_discover/boto3": med["api_discover"] / med["boto3"],
        "api_call/boto3": med["api_call"] / med["boto3"],
        "api_discover_token/boto3": med["api_discover_token"] / med["boto3"],
        "sdk_discover/api_discover": med["sdk_discover"] / med["api_discover"],
        "sdk_call/api_call": med["sdk_call"] / med["api_call"],
        "sdk_discover/boto3": med["sdk_discover"] / med["boto3"],
        "p90 api_discover/boto3": p90["api_discover"] / p90["boto3"],
        "p90 sdk_discover/api_discover": p90["sdk_discover"] / p90["api_discover"],
    }
    if all(counts.get(name) for name in ("boto3", "api_discover", "api_call", "sdk_discover")):
        ins = {name: float(counts[name] or 0) for name in counts}
        ratios["instructions api_discover/boto3"] = ins["api_discover"] / ins["boto3"]
        ratios["instructions api_call/boto3"] = ins["api_call"] / ins["boto3"]
        if ins.get("api_discover_token"):
            ratios["instructions api_discover_token/boto3"] = ins["api_discover_token"] / ins["boto3"]
        ratios["instructions sdk_discover/api_discover"] = ins["sdk_discover"] / ins["api_discover"]
    if all(counts.get(name) for name in ("boto3_runtime", "packaged_discover_token", "packaged_call_sealing")):
        ins = {name: float(counts[name] or 0) for name in counts}
        for name in (
            "packaged_discover_token",
            "packaged_call_sealing",
            "packaged_call_native",
            "packaged_call_ported",
        ):
            if ins.get(name):
                ratios[f"instructions {name}/boto3_runtime"] = ins[name] / ins["boto3_runtime"]
        if ins.get("packaged_call_ported") and ins.get("packaged_call_native"):
            ratios["instructions packaged_call_ported/packaged_call_native"] = (
                ins["packaged_call_ported"] / ins["packaged_call_native"]
            )
        if ins.get("packaged_no_bytecode"):
            ratios["instructions packaged_no_bytecode/packaged_discover_token"] = (
                ins["packaged_no_bytecode"] / ins["packaged_discover_token"]
            )
    # What the first call that seals pays over a first discover: reading the secret (boto3 and
    # Powertools parameters imported, a client built, one GetSecretValue) and one seal.
    sealing_extra = {
        "wall_ms": med["packaged_call_sealing"] - med["packaged_discover_token"],
        "instructions": (counts["packaged_call_sealing"] or 0) - (counts["packaged_discover_token"] or 0)
        if counts.get("packaged_call_sealing") and counts.get("packaged_discover_token")
        else None,
    }
    budgets = {
        PACKAGED_BUDGET: ratios["packaged_discover_token/boto3_runtime"] <= 1.0,
        "cold start api_discover/boto3 <= 1.0": ratios["api_discover/boto3"] <= 1.0,
        # What a deployment's first request costs now that the function validates the token.
        "cold start api_discover_token/boto3 <= 1.0": ratios["api_discover_token/boto3"] <= 1.0,
        "cold start sdk_discover/api_discover >= 4": ratios["sdk_discover/api_discover"] >= 4.0,
    }
    if "instructions packaged_discover_token/boto3_runtime" in ratios:
        budgets["cold start instructions packaged_discover_token/boto3_runtime <= 1.0"] = (
            ratios["instructions packaged_discover_token/boto3_runtime"] <= 1.0
        )
    return {
        "runs": runs,
        "variants": variants,
        "ratios": ratios,
        "budgets": budgets,
        "sealing_extra": sealing_extra,
        "modules_loaded": {name: variants[name].get("modules") for name in variants if "modules" in variants[name]},
    }


def report(result: dict[str, Any]) -> list[str]:
    lines = [
        f"Cold start ({result['runs']} fresh interpreters per variant, interleaved; ms from spawn to answer written)"
    ]
    lines.append(
        f"  {'variant':<24} {'median':>8} {'p90':>8} {'min':>8} {'to exit':>8}"
        "   in-process import / first call (median)"
    )
    for name, entry in result["variants"].items():
        wall = entry["wall_ms"]
        extra = ""
        if "import_ms" in entry:
            extra = (
                f"   {entry['import_ms']['median']:.1f} / {entry['first_call_ms']['median']:.1f} ms,"
                f" {entry['modules']} modules, boto3 loaded: {entry['boto3_loaded']}"
            )
        if "instructions" in entry:
            extra += f"   [{entry['instructions'] / 1e6:,.0f} M instructions]"
        lines.append(
            f"  {name:<24} {wall['median']:8.1f} {wall['p90']:8.1f} {wall['min']:8.1f}"
            f" {entry['exit_ms']['median']:8.1f}{extra}"
        )
    for name, value in result["ratios"].items():
        lines.append(f"  ratio {name:<32} {value:6.2f}")
    extra = result.get("sealing_extra") or {}
    if extra:
        counted = f", {extra['instructions'] / 1e6:+,.0f} M instructions" if extra.get("instructions") else ""
        lines.append(
            f"  first call that seals, over a first discover: {extra['wall_ms']:+.1f} ms{counted}"
            " (secret read: boto3 + Powertools parameters + GetSecretValue on moto, one seal)"
        )
    for name, ok in result["budgets"].items():
        lines.append(f"  budget {name}: {verdict(ok)}")
    return lines


if __name__ == "__main__":
    outcome = run(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
    print("\n".join(report(outcome)))
