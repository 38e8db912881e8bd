"""Bearer authentication of MCP requests (RFC 6750) and the challenge a refused client gets.

`BearerAuthenticator.authenticate` turns the `Authorization` header into a principal, or into the
refusal the transport answers with: 401 without a token or with an invalid one (`invalid_token`),
403 with too little scope (`insufficient_scope`), each carrying `resource_metadata` (RFC 9728) so a
client can discover where to sign in, and `scope` so it asks for the right scopes. Clients get a
short description; the log gets the detail.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

from ._value import ValueObject
from .context import Principal

if TYPE_CHECKING:  # imported on the first token, not at cold start (PyJWT, rsa)
    from .tokens import IssuerValidators, TokenValidator

log = logging.getLogger(__name__)

BEARER_PREFIX: Final = "bearer "


def escape_principal_part(part: str) -> str:
    """'|' separates the parts of a principal id, so it is escaped inside them."""
    return part.replace("%", "%25").replace("|", "%7C")


def jwt_principal(issuer: str, subject: str, client: str) -> Principal:
    """`jwt:<iss>|<sub>|<client>`: a `sub` is unique only within its issuer, so the issuer is part of who
    the caller is (two providers' `sub`s never alias), and so is the client the token was issued to."""
    parts = (issuer, subject, client)
    return Principal("jwt:" + "|".join(escape_principal_part(part) for part in parts), "jwt")


class Refusal(ValueObject):
    """Why a request is not authenticated: no token (`error` None), `invalid_token`, `insufficient_scope`."""

    __slots__ = ("description", "error", "scope", "status")
    status: int
    error: str | None
    description: str | None
    scope: tuple[str, ...]

    def __init__(
        self, status: int, error: str | None = None, description: str | None = None, scope: tuple[str, ...] = ()
    ) -> None:
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope

    def challenge(self, metadata_url: str) -> str:
        """The `WWW-Authenticate` value (RFC 6750 §3, MCP authorization "Scope Challenge Handling")."""
        parts = []
        if self.error:
            parts.append(f'error="{self.error}"')
        if self.description:
            parts.append(f'error_description="{_quoted(self.description)}"')
        if self.scope:
            parts.append(f'scope="{" ".join(self.scope)}"')
        parts.append(f'resource_metadata="{metadata_url}"')
        return "Bearer " + ", ".join(parts)

    @property
    def message(self) -> str:
        if self.status == 403:
            return "Forbidden: insufficient scope"
        return "Authentication required" if self.error is None else "Invalid access token"


def _quoted(text: str) -> str:
    # RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E.
    return "".join(c for c in text if 0x20 <= ord(c) <= 0x7E and c not in '"\\')


class BearerAuthenticator:
    def __init__(self, validator: TokenValidator | IssuerValidators) -> None:
        self.validator = validator

    @property
    def required_scopes(self) -> tuple[str, ...]:
        return self.validator.required_scopes

    def authenticate(self, authorization: str | None, resource: str) -> Principal | Refusal:
        scope = self.required_scopes
        if not authorization or not authorization.strip():
            return Refusal(401, scope=scope)
        if not authorization.lower().startswith(BEARER_PREFIX):
            # Another scheme carries no bearer token: answered as no credentials (RFC 6750 §3).
            return Refusal(401, scope=scope)
        token = authorization[len(BEARER_PREFIX) :].strip()
        try:
            validated = self.validator.validate(token, resource)
        except Exception as error:
            return _refusal(error, scope)
        return jwt_principal(validated.issuer, validated.subject, validated.client)


def _refusal(error: Exception, scope: tuple[str, ...]) -> Refusal:
    """The answer to a token the validator did not accept; anything else it raised propagates."""
    from .tokens import InsufficientScope, KeySetUnavailable, TokenRejected  # only when refusing

    if isinstance(error, InsufficientScope):
        log.info("token refused: %s", error.detail)
        return Refusal(403, "insufficient_scope", error.description, error.required)
    if isinstance(error, TokenRejected):
        log.info("token refused: %s", error.detail)
        return Refusal(401, "invalid_token", error.description, scope)
    if isinstance(error, KeySetUnavailable):
        # The issuer's keys cannot be fetched: the token cannot be judged, so it is not accepted.
        log.error("the issuer's signing keys are unavailable", exc_info=error)
        return Refusal(401, "invalid_token", "the token cannot be verified now", scope)
    raise error
