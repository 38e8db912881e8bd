"""Access-token validation for the MCP endpoint, as an OAuth 2.1 resource server (RFC 9068, RFC 8707).

With the OAuth bridge there are two issuers: the user pool (machine tokens) and the bridge, whose keys are
one KMS key's public half (`KmsKeySet`); `IssuerValidators` gives each token to its issuer's checks.

The function validates bearer tokens itself instead of API Gateway's JWT authorizer, so that a
refused request gets the challenge an MCP client needs (`WWW-Authenticate` with `resource_metadata`,
`scope`, `error`: see `bearer.py`), and so that tokens of dynamically registered clients (whose
client ids no authorizer lists) are accepted.

What is checked, in this order: the JWS signature (RS256/RS384/RS512, keys from the issuer's JWKS,
fetched on first use and cached; `_jws.py`), then the claims: `exp`, `iss` and `sub` present, `exp`,
`nbf` and `iat` against the clock with a leeway of `LEEWAY_SECONDS` (a token is accepted up to 30 s
after its `exp`), `iss` (exactly the configured issuer), `aud` (one of the accepted audiences: by
default the MCP endpoint's canonical URI; compared in canonical form, `resource_uri.py`), `token_use` (when present,
"access": a Cognito ID token is not an access token), and finally the required scopes (`scope` as a
space-separated string, or `scp` as a list).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from . import _jws
from ._jws import RsaPublicKey
from ._value import ValueObject
from .limits import MAX_ACCESS_TOKEN_CHARS, MAX_KEY_DOCUMENT_BYTES
from .resource_uri import canonical_resource

log = logging.getLogger(__name__)

LEEWAY_SECONDS: Final = 30
FETCH_TIMEOUT_SECONDS: Final = 3.0
# Keys are refetched after this long, or sooner when a token names a key id we do not hold (but
# never more often than REFETCH_AFTER_UNKNOWN_KID_SECONDS: random kids must not amplify into fetches).
JWKS_MAX_AGE_SECONDS: Final = 3600.0
REFETCH_AFTER_UNKNOWN_KID_SECONDS: Final = 60.0
RETRY_AFTER_FAILURE_SECONDS: Final = 5.0
# A token verified once is taken from memory on its next requests: an RSA verification in pure
# Python costs about 0.25 ms of every request otherwise (bench/README.md, warm). Its expiry is
# checked on every hit, and it is verified afresh after this long: the cache adds at most that to
# how long a key the issuer withdraws is honoured (the key set itself is refetched hourly).
VERIFIED_TOKEN_CACHE_SIZE: Final = 1024
VERIFIED_TOKEN_MAX_AGE_SECONDS: Final = 300.0
_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


class TokenRejected(Exception):
    """The token is not acceptable. `description` goes to the client; `detail` to the log only."""

    def __init__(self, description: str, detail: str | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.detail = detail or description


class InsufficientScope(TokenRejected):
    """A valid token that lacks scopes this resource requires (403 `insufficient_scope`)."""

    def __init__(self, required: Sequence[str], granted: Iterable[str]) -> None:
        missing = sorted(set(required) - set(granted))
        super().__init__(f"the token lacks the scope {' '.join(missing)}")
        self.required = tuple(required)


class KeySetUnavailable(Exception):
    """The issuer's keys could not be fetched (network, status, body): the request cannot be judged."""


class ValidatedToken(ValueObject):
    """A token whose signature, claims and scopes passed: its claims and the scopes it grants."""

    __slots__ = ("claims", "scopes")
    claims: dict[str, Any]
    scopes: frozenset[str]

    def __init__(self, claims: dict[str, Any], scopes: frozenset[str]) -> None:
        self.claims = claims
        self.scopes = scopes

    @property
    def subject(self) -> str:
        return str(self.claims["sub"])

    @property
    def issuer(self) -> str:
        return str(self.claims["iss"])

    @property
    def client(self) -> str:
        """Who the token was issued to: `client_id` (RFC 9068, Cognito), else `azp`, else `-`."""
        for claim in ("client_id", "azp"):
            value = self.claims.get(claim)
            if isinstance(value, str) and value:
                return value
        return "-"


def rsa_keys_of(document: Any) -> dict[str, RsaPublicKey]:
    """The RSA signing keys of a JWKS document by key id (keys for encryption, without a kid, or too
    short to trust, skipped)."""
    keys: dict[str, RsaPublicKey] = {}
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError("the JWKS document has no 'keys' array")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "RSA" or entry.get("use", "sig") != "sig":
            continue
        kid = entry.get("kid")
        if not isinstance(kid, str):
            continue
        try:
            keys[kid] = RsaPublicKey.from_jwk(entry)
        except ValueError as exc:
            log.info("skipping the JWKS key %r: %s", kid, exc)
    return keys


def check_fetch_url(url: str) -> None:
    """Keys and metadata are fetched over HTTPS; plain HTTP only from a loopback issuer (local development)."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in _LOOPBACK_HOSTS:
        return
    raise ValueError(f"keys and metadata must be fetched over https, not {url!r}")


def fetch_json(url: str, headers: Mapping[str, str] | None = None, timeout: float = FETCH_TIMEOUT_SECONDS) -> Any:
    """GET a JSON document with a time and a size limit (imported lazily: only the first token pays)."""
    import http.client

    check_fetch_url(url)
    parts = urlsplit(url)
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_type(parts.hostname or "", parts.port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("GET", path, headers={"accept": "application/json", **(headers or {})})
        response = connection.getresponse()
        body = response.read(MAX_KEY_DOCUMENT_BYTES + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise KeySetUnavailable(f"GET {url} failed: {exc}") from exc
    finally:
        connection.close()
    if response.status != 200:
        raise KeySetUnavailable(f"GET {url} answered {response.status}")
    if len(body) > MAX_KEY_DOCUMENT_BYTES:
        raise KeySetUnavailable(f"GET {url}: the document is larger than {MAX_KEY_DOCUMENT_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise KeySetUnavailable(f"GET {url}: not JSON") from exc


class KeySet:
    """The issuer's signing keys, fetched once per container and refreshed as described above."""

    __slots__ = (
        "_failed_at",
        "_fetched_at",
        "_keys",
        "_lock",
        "aws_endpoint_url",
        "clock",
        "fetch",
        "issuer",
        "jwks_url",
    )

    def __init__(
        self,
        issuer: str,
        jwks_url: str | None = None,
        aws_endpoint_url: str | None = None,
        fetch: Callable[..., Any] = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer
        self.jwks_url = jwks_url
        # AWS_ENDPOINT_URL, when set, also redirects the Cognito JWKS (an AWS endpoint) like every SDK call.
        self.aws_endpoint_url = aws_endpoint_url
        self.fetch = fetch
        self.clock = clock
        self._keys: dict[str, RsaPublicKey] = {}
        self._fetched_at: float | None = None
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def key(self, kid: str) -> RsaPublicKey | None:
        now = self.clock()
        with self._lock:
            stale = self._fetched_at is None or now - self._fetched_at > JWKS_MAX_AGE_SECONDS
            unknown = kid not in self._keys and (
                self._fetched_at is None or now - self._fetched_at > REFETCH_AFTER_UNKNOWN_KID_SECONDS
            )
            # After a failed fetch, requests do not each wait on the issuer again for a while.
            cooling = self._failed_at is not None and now - self._failed_at < RETRY_AFTER_FAILURE_SECONDS
            if (stale or unknown) and not cooling:
                try:
                    self._keys = rsa_keys_of(self._get(self._resolve_jwks_url()))
                    self._fetched_at, self._failed_at = now, None
                except (KeySetUnavailable, ValueError) as exc:
                    self._failed_at = now
                    if not self._keys:
                        raise KeySetUnavailable(str(exc)) from exc
                    log.warning("keeping the cached signing keys: %s", exc)  # stale keys beat no keys
            elif cooling and not self._keys:
                raise KeySetUnavailable("the issuer's keys could not be fetched moments ago")
            return self._keys.get(kid)

    def _resolve_jwks_url(self) -> str:
        if self.jwks_url:
            return self.jwks_url
        # OpenID Connect discovery, then RFC 8414 (path insertion), as the issuer publishes them.
        base = self.issuer.rstrip("/")
        parts = urlsplit(base)
        candidates = [
            f"{base}/.well-known/openid-configuration",
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
        ]
        for url in candidates:
            try:
                document = self._get(url)
            except KeySetUnavailable as exc:
                log.info("no issuer metadata at %s: %s", url, exc)
                continue
            if isinstance(document, dict) and isinstance(document.get("jwks_uri"), str):
                if document.get("issuer") != self.issuer:
                    raise KeySetUnavailable(f"the metadata at {url} names another issuer: {document.get('issuer')!r}")
                self.jwks_url = str(document["jwks_uri"])
                return self.jwks_url
        raise KeySetUnavailable(f"no jwks_uri in the metadata of {self.issuer}")

    def _get(self, url: str) -> Any:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if self.aws_endpoint_url and host.startswith("cognito-idp.") and host.endswith(".amazonaws.com"):
            # The local stack's Cognito: same path, the endpoint every AWS call of this function uses.
            return self.fetch(self.aws_endpoint_url.rstrip("/") + parts.path, {"host": host})
        return self.fetch(url)


class KmsKeySet:
    """The public half of one asymmetric KMS key (the OAuth bridge's, which signs its access tokens in KMS):
    read once per container with `kms:GetPublicKey` (a KMS key's public key never changes). Its key id is
    the tokens' `kid`; any other kid is unknown."""

    __slots__ = ("_key", "_lock", "caller", "key_id", "kid")

    def __init__(self, key_id: str, aws_endpoint_url: str | None = None, client: Any | None = None) -> None:
        from ._aws import AwsCaller

        self.key_id = key_id
        self.kid = key_id.rsplit("/", 1)[-1]
        self.caller = AwsCaller("kms", client, endpoint_url=aws_endpoint_url)  # client built on first use
        self._key: RsaPublicKey | None = None
        self._lock = threading.Lock()

    def key(self, kid: str) -> RsaPublicKey | None:
        if kid != self.kid:
            return None
        with self._lock:
            if self._key is None:
                from ._aws import AwsCallError

                try:
                    answer = self.caller.call("get_public_key", KeyId=self.key_id)
                    self._key = RsaPublicKey.from_der(bytes(answer["PublicKey"]), "RS256")
                except (AwsCallError, KeyError, ValueError) as exc:
                    raise KeySetUnavailable(f"kms:GetPublicKey of {self.key_id} failed: {exc}") from exc
            return self._key


class IssuerValidators:
    """Several issuers on one endpoint (the user pool's machine tokens and the OAuth bridge's): a token goes
    to the validator of the `iss` it names (read before any check, only to choose), or to the first one,
    which refuses it as from another issuer. Every check is the chosen validator's."""

    __slots__ = ("by_issuer", "first")

    def __init__(self, *validators: TokenValidator) -> None:
        self.first = validators[0]
        self.by_issuer = {validator.issuer: validator for validator in validators}

    @property
    def required_scopes(self) -> tuple[str, ...]:
        return self.first.required_scopes

    def validate(self, token: str, resource: str) -> ValidatedToken:
        chosen = self.by_issuer.get(_named_issuer(token) or "", self.first)
        return chosen.validate(token, resource)


def _named_issuer(token: str) -> str | None:
    """The `iss` a token names, unverified (None for anything malformed: the first validator refuses it)."""
    try:
        if not token or len(token) > MAX_ACCESS_TOKEN_CHARS or not token.isascii():
            return None
        payload = _jws.parse(token).payload
        if _jws.nests_too_deeply(payload):
            return None
        claims = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    issuer = claims.get("iss") if isinstance(claims, dict) else None
    return issuer if isinstance(issuer, str) else None


class TokenValidator:
    """Validates bearer tokens for one issuer and one resource."""

    __slots__ = (
        "_verified",
        "_verified_lock",
        "audience_optional",
        "audiences",
        "clock",
        "issuer",
        "keys",
        "leeway",
        "required_scopes",
    )

    def __init__(
        self,
        issuer: str,
        keys: KeySet | KmsKeySet,
        audiences: tuple[str, ...] = (),
        required_scopes: tuple[str, ...] = (),
        audience_optional: bool = False,
        leeway: int = LEEWAY_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.issuer = issuer
        self.keys = keys
        self.audiences = audiences  # empty: the resource URI the request was made to
        self.required_scopes = required_scopes
        # Cognito access tokens carry no `aud`; its scopes are named after this pool's resource server,
        # so a token without `aud` is taken as issued for this resource when it holds the required scopes.
        self.audience_optional = audience_optional
        self.leeway = leeway
        self.clock = clock
        # (SHA-256 of the token, resource) -> (the validation, until when it may be reused)
        self._verified: OrderedDict[tuple[bytes, str], tuple[ValidatedToken, float]] = OrderedDict()
        self._verified_lock = threading.Lock()

    def validate(self, token: str, resource: str) -> ValidatedToken:
        if not token or len(token) > MAX_ACCESS_TOKEN_CHARS:
            raise TokenRejected("the token is malformed", f"token of {len(token)} characters")
        if not token.isascii():
            raise TokenRejected("the token is malformed", "characters outside ASCII")
        key = (hashlib.sha256(token.encode("ascii")).digest(), resource)
        now = self.clock()
        with self._verified_lock:
            remembered = self._verified.get(key)
            if remembered is not None:
                if now < remembered[1]:
                    self._verified.move_to_end(key)
                    return remembered[0]
                del self._verified[key]
        validated = self._validated(token, resource)
        reusable_until = min(float(validated.claims["exp"]) + self.leeway, now + VERIFIED_TOKEN_MAX_AGE_SECONDS)
        with self._verified_lock:
            self._verified[key] = (validated, reusable_until)
            while len(self._verified) > VERIFIED_TOKEN_CACHE_SIZE:
                self._verified.popitem(last=False)
        return validated

    def _validated(self, token: str, resource: str) -> ValidatedToken:
        """The whole check: signature, claims and scopes."""
        try:
            jws = _jws.parse(token)
        except _jws.MalformedJws as exc:
            raise TokenRejected("the token is malformed", f"JWS: {exc}") from None
        algorithm, kid = jws.header.get("alg"), jws.header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in _jws.SUPPORTED_ALGORITHMS:
            raise TokenRejected("the token is signed with an unsupported algorithm", f"alg {algorithm!r}")
        if not isinstance(kid, str) or not kid:
            raise TokenRejected("the token names no signing key", "no kid in the header")
        key = self.keys.key(kid)
        if key is None:
            raise TokenRejected("the token is signed with an unknown key", f"kid {kid!r} is not in the JWKS")
        if not _jws.verify(jws, algorithm, key):
            raise TokenRejected("the token signature is invalid")
        claims = self._checked_claims(jws.payload, resource)
        granted = _scopes_of(claims)
        if self.required_scopes and not set(self.required_scopes) <= granted:
            raise InsufficientScope(self.required_scopes, granted)
        return ValidatedToken(claims, frozenset(granted))

    def _checked_claims(self, payload: bytes, resource: str) -> dict[str, Any]:
        """The claims of a token whose signature holds: times, issuer, audience, use and subject."""
        if _jws.nests_too_deeply(payload):
            raise TokenRejected("the token is malformed", "the payload nests too deeply")
        try:
            claims = json.loads(payload)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes
            raise TokenRejected("the token is malformed", "the payload is not JSON") from None
        if not isinstance(claims, dict):
            raise TokenRejected("the token is malformed", "the payload is not a JSON object")
        for required in ("exp", "iss", "sub"):
            if required not in claims:
                raise TokenRejected(f"the token has no {required!r} claim")
        now = self.clock()
        expires = _numeric_date(claims, "exp")
        not_before, issued_at = _numeric_date(claims, "nbf"), _numeric_date(claims, "iat")
        if expires <= now - self.leeway:
            raise TokenRejected("the token has expired")
        if not_before > now + self.leeway or issued_at > now + self.leeway:
            raise TokenRejected("the token is not valid yet")
        if claims["iss"] != self.issuer:
            raise TokenRejected("the token was issued by another authorization server", f"iss {claims['iss']!r}")
        self._check_audience(claims.get("aud"), self.audiences or (resource,))
        if "token_use" in claims and claims["token_use"] != "access":
            raise TokenRejected("the token is not an access token", f"token_use {claims['token_use']!r}")
        if not isinstance(claims["sub"], str) or not claims["sub"]:
            raise TokenRejected("the token has no subject")
        return claims

    def _check_audience(self, audience: Any, accepted: tuple[str, ...]) -> None:
        if audience is None:
            if not self.audience_optional:
                raise TokenRejected("the token names no audience")
            return
        named = [audience] if isinstance(audience, str) else audience if isinstance(audience, list) else None
        if named is None or not all(isinstance(item, str) for item in named):
            raise TokenRejected("the token is malformed", f"aud {audience!r}")
        if not {canonical_resource(item) for item in named} & {canonical_resource(item) for item in accepted}:
            raise TokenRejected("the token was issued for another resource", f"aud {audience!r}, expected {accepted}")


def _numeric_date(claims: Mapping[str, Any], name: str) -> float:
    """A NumericDate claim as seconds (an absent one as 0, which no check refuses)."""
    value = claims.get(name, 0)
    if not isinstance(value, bool) and isinstance(value, int | float):
        with contextlib.suppress(OverflowError):
            if math.isfinite(seconds := float(value)):
                return seconds
    raise TokenRejected("the token is malformed", f"{name} {value!r} is not a NumericDate")


def _scopes_of(claims: Mapping[str, Any]) -> set[str]:
    scope = claims.get("scope")
    if isinstance(scope, str):
        return set(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return {str(item) for item in scp}
    if isinstance(scp, str):
        return set(scp.split())
    return set()
