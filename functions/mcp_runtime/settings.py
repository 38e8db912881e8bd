"""Settings, read once per container from the environment into one validated model."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .limits import MAX_OPERATIONS, MAX_OPERATIONS_CEILING, MAX_TASK_TTL_MS  # MAX_TASK_TTL_MS: a task's ttlMs at most

if TYPE_CHECKING:
    from pathlib import Path

# Environment spellings of "no TTL" (the wire's null): the task stays retrievable until it is deleted.
_NULL_SPELLINGS = frozenset({"", "null", "none"})

# A fixed development key: fine on loopback, refused when a deployment forgets to configure one.
DEV_STATE_KEY = "local-development-only-requestState-key-0123456789"


class MissingSetting(RuntimeError):
    """The environment lacks a variable this function needs (its template sets it)."""


# A dotted Python module name, as MCP_TOOL_PACKAGES lists them.
_PACKAGE = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    server_name: str = Field("serverless-mcp-tasks", alias="MCP_SERVER_NAME")
    server_version: str = Field("0.1.0", alias="MCP_SERVER_VERSION")
    instructions: str | None = Field(None, alias="MCP_INSTRUCTIONS")
    # The packages whose tools, prompts and resources are served (comma-separated, in order), each with a
    # `register(catalog, *, table_backed)`: the project's `tools` unless set otherwise (empty: none).
    tool_packages: str = Field("tools", alias="MCP_TOOL_PACKAGES", pattern=rf"^({_PACKAGE}(,{_PACKAGE})*)?$")
    # Register them when the function starts, not at the first lookup: server/discover (and the 2025
    # initialize) then advertise the prompts and resources of ported modules from the first request, at
    # the cost of importing every tool module on a cold start.
    register_tools_at_start: bool = Field(False, alias="MCP_REGISTER_TOOLS_AT_START")
    # DNS-rebinding protection: the origins browsers may call from (comma-separated, exact), and the
    # host names requests may name (empty: any; API Gateway routes by host already).
    allowed_origins: str = Field("", alias="MCP_ALLOWED_ORIGINS")
    allowed_hosts: str = Field("", alias="MCP_ALLOWED_HOSTS")
    dev_auth: bool = Field(False, alias="DEV_AUTH")
    # Deployed behind a JWT authorizer or IAM auth: a request without that identity is refused.
    require_principal: bool = Field(False, alias="MCP_REQUIRE_PRINCIPAL")
    # Who an IAM (SigV4) caller is: "session", its user or role session ARN (stable across credential
    # refreshes), or "access-key", that ARN and, for temporary credentials, the access key id too.
    iam_principal: Literal["session", "access-key"] = Field("session", alias="MCP_IAM_PRINCIPAL")
    # OAuth 2.0 Protected Resource Metadata (RFC 9728). The resource is the endpoint's canonical URI
    # (default: from the request's Host, which API Gateway only routes for its own domains);
    # authorization servers are comma-separated, "self" meaning this API's origin (the Cognito bridge).
    resource_url: str | None = Field(None, alias="MCP_RESOURCE_URL")
    authorization_servers: str = Field("", alias="MCP_AUTHORIZATION_SERVERS")
    scopes_supported: str = Field("", alias="MCP_SCOPES_SUPPORTED")
    # Access tokens, validated by the function (mcp_runtime/tokens.py): the issuer (exact), the
    # accepted audiences (comma-separated; empty: the resource URI), the scopes every call needs
    # (space- or comma-separated), the JWKS (empty: from the issuer's metadata), and whether a token
    # without `aud` is accepted on its scopes alone (Cognito access tokens carry none).
    jwt_issuer: str | None = Field(None, alias="MCP_JWT_ISSUER")
    jwt_audience: str = Field("", alias="MCP_JWT_AUDIENCE")
    jwt_required_scopes: str = Field("", alias="MCP_JWT_REQUIRED_SCOPES")
    jwt_jwks_url: str | None = Field(None, alias="MCP_JWT_JWKS_URL")
    jwt_audience_optional: bool = Field(False, alias="MCP_JWT_AUDIENCE_OPTIONAL")
    # The OAuth bridge's access tokens (auth=cognito with sign-in): its issuer and the KMS key that signs
    # them (read with kms:GetPublicKey). Their `aud` must name this resource; the other checks are the same.
    bridge_issuer: str | None = Field(None, alias="MCP_BRIDGE_ISSUER")
    bridge_signing_key_id: str | None = Field(None, alias="MCP_BRIDGE_SIGNING_KEY_ID")
    # requestState sealing: a Secrets Manager secret in AWS, a configured key locally.
    state_secret_arn: str | None = Field(None, alias="MCP_STATE_SECRET_ARN")
    state_key: str | None = Field(None, alias="MCP_STATE_KEY")
    state_lifetime_seconds: int = Field(900, alias="MCP_STATE_LIFETIME_SECONDS", ge=10, le=86_400)
    list_ttl_ms: int = Field(60_000, alias="MCP_LIST_TTL_MS", ge=0)
    discover_ttl_ms: int = Field(3_600_000, alias="MCP_DISCOVER_TTL_MS", ge=0)
    # Durable tasks
    task_table_name: str | None = Field(None, alias="TASK_TABLE_NAME")
    state_machine_arn: str | None = Field(None, alias="TASK_STATE_MACHINE_ARN")
    task_default_ttl_ms: int | None = Field(86_400_000, alias="TASK_DEFAULT_TTL_MS", ge=1, le=MAX_TASK_TTL_MS)
    task_poll_interval_ms: int = Field(1_000, alias="TASK_POLL_INTERVAL_MS", ge=1)
    # Minimum spacing of the statusMessage writes a running tool's progress reports cause.
    task_progress_interval_ms: int = Field(1_000, alias="TASK_PROGRESS_INTERVAL_MS", ge=0)
    # The S3 bucket for results and durable records too large for the task item.
    task_payload_bucket: str | None = Field(None, alias="TASK_PAYLOAD_BUCKET")
    # Where an external system completes a `ctx.wait_for_callback` (the template's callback route).
    task_callback_url: str = Field("", alias="TASK_CALLBACK_URL")
    # Tool runs per execution before a new execution takes over (Step Functions' 25,000-event history).
    # The template sets it from the workflow's retry policy; the default is the deployed policy's.
    task_rounds_per_execution: int = Field(138, alias="TASK_ROUNDS_PER_EXECUTION", ge=1, le=1_200)
    # Steps, waits and callbacks one task may record: one more fails the task, naming this limit.
    task_max_steps: int = Field(MAX_OPERATIONS, alias="TASK_MAX_STEPS", ge=1, le=MAX_OPERATIONS_CEILING)
    # How long an active task may go without a write before the sweeper asks Step Functions about its
    # execution (every write that leaves it active renews the lease), and how many it asks about per run.
    task_lease_seconds: int = Field(600, alias="TASK_LEASE_SECONDS", ge=1, le=86_400)
    task_sweep_max_checks: int = Field(100, alias="TASK_SWEEP_MAX_CHECKS", ge=1, le=1_000)
    # How long the supervisor retries a throttled or failing Step Functions call inside one invocation
    # (whatever the number of attempts) before it reports the stream record failed for Lambda to retry.
    task_supervisor_retry_seconds: float = Field(40.0, alias="TASK_SUPERVISOR_RETRY_SECONDS", ge=0, le=840)
    aws_endpoint_url: str | None = Field(None, alias="AWS_ENDPOINT_URL")
    # The secrets the tools read with ctx.secret(name): JSON, name -> Secrets Manager name or ARN
    # (the template sets it from cdk.json's toolSecrets).
    tool_secrets: dict[str, str] = Field(default_factory=dict, alias="MCP_TOOL_SECRETS")
    # Handshake-era (2025) clients: sealed sessions and resumable event streams.
    legacy_clients: bool = Field(True, alias="MCP_LEGACY_CLIENTS")
    legacy_session_lifetime_seconds: int = Field(86_400, alias="MCP_LEGACY_SESSION_LIFETIME_SECONDS", ge=60, le=604_800)
    # How long a stream waiting for the client's answer (or a task's news) is kept, renewed by every event.
    legacy_stream_ttl_seconds: int = Field(900, alias="MCP_LEGACY_STREAM_TTL_SECONDS", ge=30, le=86_400)
    # The `retry` a closed stream tells the client to wait before it reconnects with Last-Event-ID.
    legacy_retry_ms: int = Field(500, alias="MCP_LEGACY_RETRY_MS", ge=0, le=60_000)
    # How long a reconnect waits for news before it ends the stream again (stay under the front's timeout).
    legacy_stream_wait_seconds: float = Field(10.0, alias="MCP_LEGACY_STREAM_WAIT_SECONDS", ge=0, le=25)
    # Hardening
    max_body_bytes: int = Field(1_048_576, alias="MCP_MAX_BODY_BYTES", ge=1_024)

    @field_validator("task_default_ttl_ms", mode="before")
    @classmethod
    def _null_ttl(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in _NULL_SPELLINGS:
            return None
        return value

    @field_validator("tool_secrets", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    # Derived once per container, like the settings they come from (read on every request).
    @cached_property
    def tool_package_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.tool_packages.split(",") if name)

    @cached_property
    def allowed_origins_set(self) -> frozenset[str]:
        return frozenset(o.strip().lower().rstrip("/") for o in self.allowed_origins.split(",") if o.strip())

    @cached_property
    def jwt_audiences(self) -> tuple[str, ...]:
        return tuple(a.strip() for a in self.jwt_audience.split(",") if a.strip())

    @cached_property
    def jwt_scopes(self) -> tuple[str, ...]:
        return tuple(s for s in self.jwt_required_scopes.replace(",", " ").split() if s)

    @cached_property
    def allowed_hosts_set(self) -> frozenset[str]:
        return frozenset(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())

    def require(self, field_name: str, purpose: str) -> str:
        """A setting this function cannot work without; a clear error names its variable if unset."""
        value = getattr(self, field_name)
        if not value:
            alias = type(self).model_fields[field_name].alias
            raise MissingSetting(f"{alias} is not set: {purpose}")
        return str(value)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        source = os.environ if environ is None else environ
        aliases = [field.alias for field in cls.model_fields.values() if field.alias is not None]
        values = {alias: source[alias] for alias in aliases if alias in source}
        return cls.model_validate(values)


# The team's room names its server: this file beside the first tool package's modules
# (functions/tools/server.json), `{"name": ..., "instructions": ...}`, each key optional.
SERVER_DESCRIPTION_FILE = "server.json"


class BadServerDescription(ValueError):
    """The room's server.json is not an object of a non-empty `name` and `instructions` strings."""


def on_import_path(*parts: str) -> Path | None:
    """The first file or folder `parts` names under an entry of the import path (`sys.path`), as the
    import would find it, without importing anything: looked for as files, never through the import
    system (whose finders may do more than find: a layer's finder that serves a package's modules is
    left for the import)."""
    import sys
    from pathlib import Path

    return next((found for entry in sys.path if entry and (found := Path(entry, *parts)).exists()), None)


def with_room_description(settings: Settings) -> Settings:
    """`settings` with the server's name and instructions the team's room gives (`server.json` in the
    first tool package): each given there wins over MCP_SERVER_NAME and MCP_INSTRUCTIONS (the
    deployment's defaults, from cdk.json's projectName). Read once per container, without importing the
    package's modules, so a cold server/discover and initialize report them."""
    packages = settings.tool_package_names
    path = on_import_path(*packages[0].split("."), SERVER_DESCRIPTION_FILE) if packages else None
    if path is None or not path.is_file():
        return settings
    try:
        described = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise BadServerDescription(f"{path}: not JSON ({error})") from None
    allowed = {"name": "server_name", "instructions": "instructions"}
    if not isinstance(described, dict) or set(described) - set(allowed):
        raise BadServerDescription(f"{path}: an object of {' and '.join(allowed)} (each optional), nothing else")
    for key, value in described.items():
        if not isinstance(value, str) or not value.strip():
            raise BadServerDescription(f"{path}: {key!r} must be a non-empty string")
    return settings.model_copy(update={allowed[key]: value for key, value in described.items()})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return with_room_description(Settings.from_environ())
