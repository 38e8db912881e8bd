"""Shared helpers: statistics, the Lambda-like environment, real-shaped events and machine facts."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# One request builder for the tests and the benchmarks (`rpc` is re-exported for bench modules).
from testkit import rpc as rpc
from testkit import standard_headers

REPO = Path(__file__).resolve().parent.parent
FUNCTIONS = REPO / "functions"
RESULTS = Path(__file__).resolve().parent / "results"
# Where a smoke run (--quick) writes: never over the committed results above.
QUICK_RESULTS = REPO / "build" / "bench" / "quick"
PROTOCOL_VERSION = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

# What the Lambda runtime sets. Nothing here makes an AWS call: credentials are dummies, and clients
# must be built lazily anyway.
LAMBDA_RUNTIME_ENV: dict[str, str] = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_LAMBDA_FUNCTION_NAME": "mcp-api",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_SESSION_TOKEN": "bench",
}
# With no Secrets Manager to read, the sealing key comes from the environment instead of the secret.
BENCH_STATE_KEY = "bench-only-requestState-key-0123456789abcdef"


def template_environment(logical_id_prefix: str = "FunctionsApi") -> dict[str, str]:
    """A function's environment exactly as the synthesized template resolves it (the CDK app's own)."""
    from local_stack.sam_env import function_environments
    from local_stack.synth import synthesize
    from local_stack.template import DeployedTemplate

    assembly = synthesize()
    environments = function_environments(DeployedTemplate.load(assembly.directory, assembly.stack_name))
    (environment,) = [env for logical_id, env in environments.items() if logical_id.startswith(logical_id_prefix)]
    return environment


def _api_environment() -> dict[str, str]:
    environment = dict(template_environment())
    environment.pop("MCP_STATE_SECRET_ARN", None)
    return {**environment, "MCP_STATE_KEY": BENCH_STATE_KEY}


def lambda_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A clean environment for a child interpreter: PATH, the repo on PYTHONPATH, Lambda-like variables."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{FUNCTIONS}{os.pathsep}{REPO}",
        **LAMBDA_RUNTIME_ENV,
        **_api_environment(),
    }
    env.update(extra or {})
    return env


def api_event(message: dict[str, Any], host: str = "abc123.execute-api.us-east-1.amazonaws.com") -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event with a JWT authorizer context, as AWS sends it."""
    body = json.dumps(message)
    headers = {**standard_headers(message), "host": host, "content-length": str(len(body))}
    return {
        "version": "2.0",
        "routeKey": "POST /mcp",
        "rawPath": "/mcp",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "abc123",
            "authorizer": {"jwt": {"claims": {"sub": "user-1", "client_id": "bench-client"}, "scopes": None}},
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {
                "method": "POST",
                "path": "/mcp",
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "bench",
            },
            "requestId": "bench-request",
            "routeKey": "POST /mcp",
            "stage": "$default",
            "time": "28/Jul/2026:10:00:00 +0000",
            "timeEpoch": 1785232800000,
        },
        "body": body,
        "isBase64Encoded": False,
    }


def issuer_environment(issuer: Any) -> dict[str, str]:
    """The template's token settings pointed at a local issuer (`testkit.serve_issuer`): its JWKS on loopback."""
    return {
        "MCP_JWT_ISSUER": issuer.url,
        "MCP_JWT_JWKS_URL": f"{issuer.url}/jwks",
        "MCP_JWT_REQUIRED_SCOPES": "mcp/invoke",
    }


def with_bearer(event: dict[str, Any], issuer: Any) -> dict[str, Any]:
    """The event as API Gateway passes it to the function as deployed: no authorizer context, a bearer
    token the function validates itself."""
    del event["requestContext"]["authorizer"]
    token = issuer.token(aud=f"https://{event['headers']['host']}/mcp", exp=int(time.time()) + 7200)
    event["headers"]["authorization"] = f"Bearer {token}"
    return event


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": statistics.median(values) if values else float("nan"),
        "p90": percentile(values, 90),
        "min": min(values) if values else float("nan"),
        "max": max(values) if values else float("nan"),
    }


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if not cpu:
        try:
            out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
            cpu = next(
                (line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), ""
            )
        except OSError:
            cpu = platform.processor()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu or "unknown",
        "arch": platform.machine(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.platform(terse=True),
        "executable": sys.executable,
    }


def verdict(ok: bool) -> str:
    return "HOLDS" if ok else "MISSED"
