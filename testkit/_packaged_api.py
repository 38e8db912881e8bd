"""The API function as it deploys, in a fresh interpreter: the packaged asset and its template environment.

Shared by the cold-path tests and `bench/coldstart.py`, so both measure the same thing:
- the code is the asset `build_package` makes (the local stack's host-interpreter build, bytecode as
  shipped), on an import path of the asset and the runtime-provided libraries only (`-S`: no venv),
  with no bytecode written (`PYTHONDONTWRITEBYTECODE=1`, as on Lambda's read-only `/var/task`);
- the environment is the API function's, as the synthesized template resolves it, with only what AWS
  alone has put in local equivalents: the sealing secret is a real secret on moto (its ARN, never a
  key in its place) and the issuer is a local one on loopback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from local_stack.code import FunctionCode, build_function_code

API_LOGICAL_ID_PREFIX = "FunctionsApi"
REGION = "us-east-1"
# What the Lambda runtime sets; credentials are moto's (any value).
LAMBDA_RUNTIME_ENV = {
    "AWS_REGION": REGION,
    "AWS_DEFAULT_REGION": REGION,
    "AWS_LAMBDA_FUNCTION_NAME": "mcp-api",
    "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
    "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
    "AWS_ACCESS_KEY_ID": "packaged",
    "AWS_SECRET_ACCESS_KEY": "packaged",
    "AWS_SESSION_TOKEN": "packaged",
    "LANG": "C.UTF-8",
}


def template_environment(logical_id_prefix: str = API_LOGICAL_ID_PREFIX) -> dict[str, str]:
    """A function's environment exactly as the synthesized template resolves it."""
    from local_stack.sam_env import function_environments
    from local_stack.synth import synthesize
    from local_stack.template import DeployedTemplate

    assembly = synthesize()
    environments = function_environments(DeployedTemplate.load(assembly.directory, assembly.stack_name))
    (environment,) = [env for logical_id, env in environments.items() if logical_id.startswith(logical_id_prefix)]
    return environment


class SecretOnMoto:
    """A Secrets Manager secret on a moto server of its own, shaped as the template generates it."""

    def __init__(self, endpoint: str, arn: str) -> None:
        self.endpoint = endpoint
        self.arn = arn


@contextlib.contextmanager
def secret_on_moto() -> Iterator[SecretOnMoto]:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client(
            "secretsmanager",
            region_name=REGION,
            endpoint_url=endpoint,
            aws_access_key_id="packaged",
            aws_secret_access_key="packaged",
        )
        value = json.dumps({"keys": [{"id": "k1", "secret": secrets.token_urlsafe(48)}]})
        arn = str(client.create_secret(Name="mcp-request-state", SecretString=value)["ARN"])
        yield SecretOnMoto(endpoint, arn)
    finally:
        server.stop()


def packaged_asset() -> FunctionCode:
    """The asset the local stack runs: `build_package` for this interpreter (cached by fingerprint)."""
    return build_function_code()


def api_environment(
    code: FunctionCode, secret: SecretOnMoto, issuer: Any, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The API function's environment for a child `python -S`: template values, local AWS and issuer."""
    environment = template_environment()
    assert "MCP_STATE_SECRET_ARN" in environment and "MCP_STATE_KEY" not in environment, environment
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        **LAMBDA_RUNTIME_ENV,
        **environment,
        "MCP_STATE_SECRET_ARN": secret.arn,
        "AWS_ENDPOINT_URL": secret.endpoint,
        "MCP_JWT_ISSUER": issuer.url,
        "MCP_JWT_JWKS_URL": f"{issuer.url}/jwks",
        "LAMBDA_TASK_ROOT": str(code.task_root),
        "PYTHONPATH": f"{code.task_root}:{code.runtime_dir}",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(extra or {}),
    }


def asset_modules(task_root: Path) -> list[Path]:
    """Every `.py` file of an asset (what must have bytecode beside it)."""
    return sorted(path for path in task_root.rglob("*.py") if "__pycache__" not in path.parts)


def bearer_event(
    message: dict[str, Any], issuer: Any, host: str = "abc123.execute-api.us-east-1.amazonaws.com"
) -> dict[str, Any]:
    """An HTTP API event as the function gets it when it validates tokens itself: no authorizer
    context, a bearer token of the issuer for this host's resource."""
    from testkit._wire import api_event, standard_headers

    token = issuer.token(aud=f"https://{host}/mcp", exp=int(time.time()) + 7200)
    headers = {**standard_headers(message), "host": host, "authorization": f"Bearer {token}"}
    return api_event(message, headers)
