"""The bridge's settings, read once per container from the environment the template sets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field


class BridgeSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    table_name: str = Field(alias="BRIDGE_TABLE_NAME")
    user_pool_id: str = Field(alias="BRIDGE_USER_POOL_ID")
    # The bridge's own app client (the template's): Cognito signs people in through it, for every MCP client.
    app_client_id: str = Field("", alias="BRIDGE_APP_CLIENT_ID")
    # The asymmetric KMS key (RSA_2048, SIGN_VERIFY) that signs the bridge's access tokens.
    signing_key_id: str = Field("", alias="BRIDGE_SIGNING_KEY_ID")
    # The symmetric KMS key that seals the form and cookie keys in the table.
    sealing_key_id: str = Field("", alias="BRIDGE_SEALING_KEY_ID")
    # Cognito's managed login and OAuth endpoints: https://<prefix>.auth.<region>.amazoncognito.com
    cognito_domain_url: str = Field(alias="BRIDGE_COGNITO_DOMAIN_URL")
    # The scope of the MCP endpoint's resource server (what a token needs), and others a client may ask for.
    resource_scope: str = Field(alias="BRIDGE_RESOURCE_SCOPE")
    extra_scopes: str = Field("openid", alias="BRIDGE_EXTRA_SCOPES")
    # The MCP endpoint's canonical URI (default: the public origin + /mcp).
    resource_url: str | None = Field(None, alias="BRIDGE_RESOURCE_URL")
    # The origin the bridge is reached at (the template's: the custom domain's, else the execute-api one).
    # Its metadata, callback, cookies and redirects name it; a request's Host never does.
    public_origin: str | None = Field(None, alias="BRIDGE_PUBLIC_ORIGIN")
    # Per source: a token bucket of `registration_burst` that refills `registrations_per_hour` (limits.py).
    registrations_per_hour: int = Field(10, alias="BRIDGE_REGISTRATIONS_PER_HOUR", ge=1)
    registration_burst: int = Field(30, alias="BRIDGE_REGISTRATION_BURST", ge=1)
    registrations_per_host_per_hour: int = Field(10, alias="BRIDGE_REGISTRATIONS_PER_HOST_PER_HOUR", ge=1)
    # New clients one signed-in person may approve per hour (a bucket of that many).
    clients_per_person_per_hour: int = Field(10, alias="BRIDGE_CLIENTS_PER_PERSON_PER_HOUR", ge=1)
    unused_client_days: int = Field(30, alias="BRIDGE_UNUSED_CLIENT_DAYS", ge=1)
    # A client that never completed a token exchange is deleted this long after it registered.
    unexchanged_client_minutes: int = Field(30, alias="BRIDGE_UNEXCHANGED_CLIENT_MINUTES", ge=1, le=45)
    # The bridge's access tokens live this long (the API checks `exp`; a refresh gets the next).
    access_token_minutes: int = Field(15, alias="BRIDGE_ACCESS_TOKEN_MINUTES", ge=1, le=60)
    refresh_token_days: int = Field(30, alias="BRIDGE_REFRESH_TOKEN_DAYS", ge=1, le=3650)
    # A person's approval of a client lasts this long; then (and when the client asks for more scopes) the
    # consent page asks again, and the refresh tokens issued under it stop working.
    approval_days: int = Field(30, alias="BRIDGE_APPROVAL_DAYS", ge=1, le=3650)
    aws_endpoint_url: str | None = Field(None, alias="AWS_ENDPOINT_URL")

    @property
    def scopes(self) -> tuple[str, ...]:
        extra = [s for s in self.extra_scopes.replace(",", " ").split() if s != self.resource_scope]
        return (self.resource_scope, *extra)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> BridgeSettings:
        source = os.environ if environ is None else environ
        aliases = [field.alias for field in cls.model_fields.values() if field.alias is not None]
        return cls.model_validate({alias: source[alias] for alias in aliases if alias in source})


@lru_cache(maxsize=1)
def get_settings() -> BridgeSettings:
    return BridgeSettings.from_environ()
