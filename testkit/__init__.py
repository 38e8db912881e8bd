"""The test kit: test a project's tools in-process and as durable tasks on the real state machine.

- `ToolClient`: the tool packages (MCP_TOOL_PACKAGES; the project's `tools` by default) served in this
  process by the API function's own server: list, call, answer what the tools ask (MRTR).
- `local_stack_process` + `StackClient`: `make run` as a child process (the synthesized template on an
  embedded moto, IAM enforced, each function as Lambda runs it), and a client that runs a tool as a task
  on the state machine and answers its questions (`StackClient.run_task`).
- The wire: `rpc`, `meta`, `standard_headers`, `api_event` (an API Gateway event), `PROTOCOL_VERSION`.
- For the platform's own tests and benchmarks: a local token issuer (`serve_issuer`, `SigningKey`), the
  API function as packaged (`packaged_asset`, `api_environment`, ...), and the fault layer (`FaultLayer`).

docs/testing.md, "Testing your tools", shows them at work.
"""

from ._faults import CRASH, ERROR, LOST, THROTTLE, TIMEOUT, FaultLayer, Rule
from ._in_process import ToolCallFailed, ToolClient
from ._packaged_api import (
    API_LOGICAL_ID_PREFIX,
    LAMBDA_RUNTIME_ENV,
    SecretOnMoto,
    api_environment,
    asset_modules,
    bearer_event,
    packaged_asset,
    secret_on_moto,
    template_environment,
)
from ._stack import REPO, RunningStack, free_port, local_stack_process
from ._stack_client import TASKS, TERMINAL, StackClient
from ._token_issuer import LocalIssuer, SigningKey, serve_issuer
from ._wire import PROTOCOL_VERSION, api_event, meta, rpc, standard_headers

__all__ = [
    "API_LOGICAL_ID_PREFIX",
    "CRASH",
    "ERROR",
    "LAMBDA_RUNTIME_ENV",
    "LOST",
    "PROTOCOL_VERSION",
    "REPO",
    "TASKS",
    "TERMINAL",
    "THROTTLE",
    "TIMEOUT",
    "FaultLayer",
    "LocalIssuer",
    "Rule",
    "RunningStack",
    "SecretOnMoto",
    "SigningKey",
    "StackClient",
    "ToolCallFailed",
    "ToolClient",
    "api_environment",
    "api_event",
    "asset_modules",
    "bearer_event",
    "free_port",
    "local_stack_process",
    "meta",
    "packaged_asset",
    "rpc",
    "secret_on_moto",
    "serve_issuer",
    "standard_headers",
    "template_environment",
]
