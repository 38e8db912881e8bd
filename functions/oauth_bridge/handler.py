"""The bridge's Lambda entry point: `oauth_bridge.handler.handle`.

API Gateway (payload 2.0) routes the bridge's endpoints here; its cleanup schedule (every 15 minutes) sends
`{"action": "cleanup"}`; the operator's commands (scripts/bridge_admin.py) send `{"action": "revoke-client",
"clientId": ...}` and `{"action": "rotate-signing-keys", "retire": false|true}`. Clients get OAuth-shaped
errors with a short description; the log gets everything. An unexpected failure is `server_error` (500) without detail.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from .aws import BridgeUnavailable, RegistrationStore, UserPoolClients
from .flows import (
    AUTHORIZE_PATH,
    CALLBACK_PATH,
    CONSENT_PATH,
    JWKS_PATH,
    METADATA_PATH,
    REGISTER_PATH,
    REVOKE_PATH,
    TOKEN_PATH,
    Bridge,
)
from .grants import GrantStore, KeySealer
from .settings import BridgeSettings, get_settings
from .signing import TokenSigner
from .web import OAuthError, error_response, json_response, request_from_event

log = logging.getLogger("oauth_bridge")
ROUTES = {
    ("GET", METADATA_PATH): "metadata",
    ("GET", JWKS_PATH): "jwks",
    ("POST", REGISTER_PATH): "register",
    ("GET", AUTHORIZE_PATH): "authorize",
    ("POST", TOKEN_PATH): "token",
    ("GET", CONSENT_PATH): "approvals",
    ("POST", CONSENT_PATH): "consent",
    ("GET", CALLBACK_PATH): "callback",
    ("POST", REVOKE_PATH): "revoke",
}


def build_bridge(settings: BridgeSettings) -> Bridge:
    return Bridge(
        settings,
        RegistrationStore(settings.table_name, settings.aws_endpoint_url),
        UserPoolClients(settings.user_pool_id, endpoint_url=settings.aws_endpoint_url),
        GrantStore(
            settings.table_name,
            settings.aws_endpoint_url,
            sealer=KeySealer(settings.sealing_key_id, endpoint_url=settings.aws_endpoint_url)
            if settings.sealing_key_id
            else None,
        ),
        TokenSigner(settings.signing_key_id, endpoint_url=settings.aws_endpoint_url),
    )


@lru_cache(maxsize=1)
def bridge() -> Bridge:
    logging.getLogger().setLevel(logging.INFO)
    return build_bridge(get_settings())


def handle(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return dispatch(bridge(), event)


def dispatch(target: Bridge, event: dict[str, Any]) -> dict[str, Any]:
    if event.get("action") == "cleanup" or event.get("source") == "aws.events":
        return target.cleanup()
    if event.get("action") == "revoke-client":
        try:
            return target.revoke_client(str(event.get("clientId") or ""))
        except OAuthError as error:
            return {"error": error.description}
    if event.get("action") == "rotate-signing-keys":
        return target.rotate_signing_keys(retire=event.get("retire") is True)
    try:
        request = request_from_event(event)
        name = ROUTES.get((request.method, request.path))
        if name is None:
            allowed = [method for method, path in ROUTES if path == request.path]
            if allowed:
                raise OAuthError(405, "invalid_request", f"use {allowed[0]}", {"allow": ", ".join(allowed)})
            raise OAuthError(404, "invalid_request", "no such endpoint")
        response: dict[str, Any] = getattr(target, name)(request)
        return response
    except OAuthError as error:
        log.info("refused %s: %s", event.get("rawPath"), error)
        return error_response(error)
    except BridgeUnavailable:
        log.exception("an AWS call failed while serving %s", event.get("rawPath"))
        return json_response(
            503,
            {"error": "temporarily_unavailable", "error_description": "the authorization server is unavailable; retry"},
            {"cache-control": "no-store", "retry-after": "5"},
        )
    except Exception:
        log.exception("unhandled error while serving %s", event.get("rawPath"))
        return json_response(500, {"error": "server_error", "error_description": "internal error"})
