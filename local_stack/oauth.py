"""`AUTH=oauth`: the local authorization server (oidc-provider on the project's Node 22) for the stack.

The stack is then synthesized as a deployment with its own OpenID provider would be (`auth=issuer`,
`jwtIssuer` this provider, `jwtScopes` the scope it issues), so the API function validates this
provider's tokens exactly as it validates Auth0's or Okta's: JWKS, issuer, audience (the endpoint's
canonical URI, which MCP clients ask for with `resource`), expiry, scope.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from local_stack.processes import start_announced, stop_process
from local_stack.synth import NODE_BIN, REPO

SCRIPT: Final = Path(__file__).with_name("oauth_provider.mjs")
DEFAULT_USERS: Final = "alice:alice-password,bob:bob-password"
SCOPE: Final = "mcp/invoke"


class ProviderError(RuntimeError):
    """The local authorization server did not start; the message carries its output."""


@dataclass
class LocalAuthorizationServer:
    issuer: str
    process: subprocess.Popen[str]
    users: tuple[str, ...]
    scope: str = SCOPE
    output: list[str] = field(default_factory=list)

    def cdk_context(self) -> dict[str, str]:
        """How the template is synthesized against this provider: as any bring-your-own issuer."""
        return {"auth": "issuer", "jwtIssuer": self.issuer, "jwtScopes": self.scope}

    def stop(self) -> None:
        stop_process(self.process, timeout=5)


def start_provider(
    resources: list[str], users: str | None = None, access_token_seconds: int | None = None, timeout: float = 30.0
) -> LocalAuthorizationServer:
    node = NODE_BIN / "node"
    if not node.exists() or not (REPO / "node_modules" / "oidc-provider").is_dir():
        raise ProviderError("AUTH=oauth needs the pinned Node 22 and oidc-provider: run `make install`")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "NODE_ENV": "development",
        "LOCAL_OAUTH_RESOURCES": ",".join(resources),
        "LOCAL_OAUTH_USERS": users or DEFAULT_USERS,
        "LOCAL_OAUTH_SCOPE": SCOPE,
    }
    if access_token_seconds is not None:
        env["LOCAL_OAUTH_ACCESS_TOKEN_SECONDS"] = str(access_token_seconds)
    process, output, started = start_announced(
        [str(node), str(SCRIPT)],
        cwd=REPO,
        env=env,
        announcement=_started,
        timeout=timeout,
        thread_name="oauth-provider-output",
    )
    if started is None:
        raise ProviderError("the local authorization server did not start:\n" + "\n".join(output[-40:]))
    return LocalAuthorizationServer(
        str(started["issuer"]),
        process,
        tuple(str(u) for u in started["users"]),
        output=output,
    )


def _started(line: str) -> dict[str, Any] | None:
    """What the provider prints once it listens: one JSON line with its issuer and users."""
    if not line.startswith("{"):
        return None
    started: dict[str, Any] = json.loads(line)
    return started
