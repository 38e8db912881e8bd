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
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

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
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


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
    process = subprocess.Popen(
        [str(node), str(SCRIPT)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    ready = threading.Event()
    found: list[dict[str, Any]] = []

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            if line.startswith("{") and not found:
                found.append(json.loads(line))
                ready.set()
        ready.set()

    threading.Thread(target=drain, name="oauth-provider-output", daemon=True).start()
    ready.wait(timeout)
    if not found:
        process.kill()
        process.wait()
        raise ProviderError("the local authorization server did not start:\n" + "\n".join(output[-40:]))
    started = found[0]
    return LocalAuthorizationServer(
        str(started["issuer"]),
        process,
        tuple(str(u) for u in started["users"]),
        output=output,
    )
