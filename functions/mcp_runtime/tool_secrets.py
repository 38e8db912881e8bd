"""The secrets a deployment gives its tools (cdk.json's `toolSecrets`), read by name with `ctx.secret(name)`.

The template hands the functions that run tools a map of name -> Secrets Manager secret name or ARN
(`MCP_TOOL_SECRETS`) and `secretsmanager:GetSecretValue` on exactly those secrets. A value is read on
its first use in a container (never at import: boto3 loads then) and kept for the container's life,
so a rotated value reaches containers started after the rotation.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._aws import AwsCaller


class UnknownSecret(LookupError):
    """A tool asked for a name `toolSecrets` does not give it: a mistake in the tool or in cdk.json."""


class SecretUnavailable(RuntimeError):
    """Secrets Manager did not give a configured secret's value (missing, not allowed, binary, unreachable)."""


class ToolSecrets:
    """Name -> secret value, each read once per container, on first use."""

    def __init__(
        self, secret_ids: Mapping[str, str], *, endpoint_url: str | None = None, caller: AwsCaller | None = None
    ) -> None:
        self._ids = dict(secret_ids)
        self._endpoint_url = endpoint_url
        self._caller = caller
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._ids))

    def get(self, name: str) -> str:
        value = self._values.get(name)
        if value is not None:
            return value
        secret_id = self._ids.get(name)
        if secret_id is None:
            given = ", ".join(repr(known) for known in self.names) or "none"
            raise UnknownSecret(
                f"ctx.secret({name!r}): no tool secret has that name; cdk.json's toolSecrets gives the tools {given}"
            )
        with self._lock:  # one read per container, however many requests ask at once
            value = self._values.get(name)
            if value is None:
                value = self._values[name] = self._read(name, secret_id)
        return value

    def _read(self, name: str, secret_id: str) -> str:
        from ._aws import AwsCaller, AwsCallError

        caller = self._caller or AwsCaller("secretsmanager", endpoint_url=self._endpoint_url)
        try:
            response = caller.call("get_secret_value", SecretId=secret_id)
        except AwsCallError as exc:
            raise SecretUnavailable(f"tool secret {name!r} ({secret_id}) could not be read: {exc.code}") from exc
        secret = response.get("SecretString")
        if not isinstance(secret, str):
            raise SecretUnavailable(f"tool secret {name!r} ({secret_id}) has no text value (ctx.secret reads text)")
        return secret


NO_SECRETS = ToolSecrets({})
