"""The bridge's endpoints: metadata, registration, authorization and token, and the cleanup of clients.

Every request is checked in full before anything is written, so a refused one stores nothing. The
authorization endpoint follows RFC 6749 §4.1.2.1: with an unknown client or a redirect URI the
client did not register, the user agent is NOT redirected (the error is answered here); every other
error goes back to the registered redirect URI with `error`, `error_description` and `state`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote, unquote, urlencode

from mcp_runtime.resource_uri import canonical_resource

from .aws import (
    AppClient,
    BridgeUnavailable,
    ConditionFailed,
    RefusedByCognito,
    Registration,
    RegistrationStore,
    UserPoolClients,
    client_key,
    metadata_url_key,
)
from .cimd import MetadataFetcher, check_metadata_url, is_metadata_url
from .cleanup import Cleanup
from .consent import (
    APPROVALS_COOKIE,
    CSRF_COOKIE,
    FORM_SECONDS,
    REMEMBER_DAYS,
    ConsentRequest,
    Signer,
    approval_digest,
    consent_page,
    cookie_name,
    new_csrf_value,
    read_cookies,
    remembered_page,
    set_cookie,
)
from .limits import RegistrationLimits
from .registration import OFFLINE_ACCESS, check_redirect_uri, cognito_client_name, parse_client_metadata
from .settings import BridgeSettings
from .web import NO_STORE, OAuthError, Request, html_response, json_response, parse_pairs, redirect, redirect_with

log = logging.getLogger(__name__)

METADATA_PATH: Final = "/.well-known/oauth-authorization-server"
REGISTER_PATH: Final = "/oauth2/register"
AUTHORIZE_PATH: Final = "/oauth2/authorize"
TOKEN_PATH: Final = "/oauth2/token"
CONSENT_PATH: Final = "/oauth2/consent"
FORGET_FORM: Final = "forget"
REMEMBER_SECONDS: Final = REMEMBER_DAYS * 86_400
_CSRF_VALUE: Final = re.compile(r"^[A-Za-z0-9_-]{32}$")
_STALE_FORM: Final = "the consent form expired or was not opened in this browser: open the client's sign-in link again"
MCP_PATH: Final = "/mcp"
REGISTERED_CLIENTS: Final = "RegisteredClients"
REGISTRATION_NOTE: Final = (
    "Prefer a Client ID Metadata Document (an https client_id): MCP 2026-07-28 deprecates dynamic "
    "registration, which stays available at registration_endpoint for clients that lack it"
)
# The cleanup's schedule (the template's): a never-used client is gone at most this long after its cutoff.
CLEANUP_MINUTES: Final = 15
# A metadata document is fetched again at most this often (its redirect URIs may change).
DOCUMENT_MAX_AGE_SECONDS: Final = 3600
_PKCE_CHALLENGE: Final = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")
TOKEN_TIMEOUT_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True)
class Authorization:
    """An authorize request that passed every check, and what Cognito is to be sent."""

    registration: Registration
    client_id: str
    redirect_uri: str
    state: str | None
    cognito_params: dict[str, str]
    scopes: tuple[str, ...]

    def back(self, error: str, description: str) -> dict[str, Any]:
        """An error answered to the client at its registered redirect URI, with its `state`."""
        params = {"error": error, "error_description": description}
        if self.state is not None:
            params["state"] = self.state
        return redirect_with(self.redirect_uri, params)


# (url, form body, headers) -> (status, body bytes)
TokenPost = Callable[[str, bytes, dict[str, str]], tuple[int, bytes]]


def post_form(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST to Cognito's token endpoint (imported lazily: most invocations never call it)."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "https":
        raise BridgeUnavailable(f"the token endpoint {url!r} is not https")
    connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=TOKEN_TIMEOUT_SECONDS)
    try:
        connection.request("POST", parts.path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read(65_536)
    except (OSError, http.client.HTTPException) as exc:
        raise BridgeUnavailable(f"POST {url} failed: {exc}") from exc
    finally:
        connection.close()


@dataclass
class Bridge:
    settings: BridgeSettings
    store: RegistrationStore
    clients: UserPoolClients
    fetcher: MetadataFetcher = field(default_factory=MetadataFetcher)
    post: TokenPost = post_form
    clock: Callable[[], float] = time.time
    _signing_key: bytes | None = field(default=None, repr=False)

    # ---- metadata (RFC 8414) ----------------------------------------------------------------
    def metadata(self, request: Request) -> dict[str, Any]:
        base = request.base_url
        document = {
            "issuer": base,
            "authorization_endpoint": base + AUTHORIZE_PATH,
            "token_endpoint": base + TOKEN_PATH,
            "registration_endpoint": base + REGISTER_PATH,
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": [*self.settings.scopes, OFFLINE_ACCESS],
            "client_id_metadata_document_supported": True,
            # RFC 8414 §2 allows more parameters: which registration to use, for people reading this.
            "registration_note": REGISTRATION_NOTE,
        }
        return json_response(200, document, {"cache-control": "max-age=3600"})

    def _resource(self, request: Request) -> str:
        return self.settings.resource_url or request.base_url + MCP_PATH

    # ---- dynamic client registration (RFC 7591) ---------------------------------------------
    def register(self, request: Request) -> dict[str, Any]:
        metadata = parse_client_metadata(request.json_object(), self.settings.scopes)
        self._count_registration(request.source_ip)
        app = self._create_app_client(metadata.client_name, metadata.redirect_uris, metadata.confidential)
        registration = Registration(
            client_key(app.client_id),
            app.client_id,
            metadata.redirect_uris,
            metadata.token_endpoint_auth_method,
            0,
            client_name=metadata.client_name,
        )
        try:
            self.store.add(registration, metadata.client_name)
        except BaseException:
            self.clients.delete(app.client_id)
            self.store.release_slot()
            raise
        body: dict[str, Any] = {
            "client_id": app.client_id,
            "client_id_issued_at": int(self.clock()),
            **metadata.registered(),
        }
        if app.client_secret is not None:
            body["client_secret"] = app.client_secret
            body["client_secret_expires_at"] = 0
        return json_response(201, body, NO_STORE)

    def _create_app_client(
        self, name: str, redirect_uris: tuple[str, ...], confidential: bool, error: str = "invalid_client_metadata"
    ) -> AppClient:
        """A Cognito app client in a reserved slot; the slot is given back if Cognito does not create it."""
        self._reserve_slot()
        try:
            return self.clients.create(cognito_client_name(name), redirect_uris, confidential=confidential)
        except RefusedByCognito as refused:
            self.store.release_slot()
            raise OAuthError(400, error, f"the user pool refused this client: {refused}") from None
        except BaseException:
            self.store.release_slot()
            raise

    def _reserve_slot(self) -> None:
        try:
            used = self.store.reserve_slot(self.settings.max_clients)
        except ConditionFailed:
            raise OAuthError(
                429,
                "temporarily_unavailable",
                f"the authorization server has as many clients as it accepts ({self.settings.max_clients}); "
                "clients that never sign in are removed within an hour: retry later",
                {"retry-after": str(CLEANUP_MINUTES * 60)},
            ) from None
        self._report_slots(used)

    def _count_registration(self, source_ip: str, metadata_host: str | None = None) -> None:
        """One more dynamic registration from this source, or (`metadata_host`) one more client from
        a metadata document on that host's registrable domain (its fetch counted the source); a 429
        with Retry-After past the limit (limits.py)."""
        limits = RegistrationLimits(self.store, self.settings)
        if metadata_host is None:
            limits.take_source(source_ip)
        else:
            limits.take_domain(metadata_host)

    def _report_slots(self, used: int) -> None:
        """The RegisteredClients metric (CloudWatch EMF on the log): the slots alarm watches it."""
        print(registered_clients_emf(self.settings.metrics_namespace, used, self.clock()), flush=True)

    # ---- clients ------------------------------------------------------------------------------
    def _registered(
        self, client_id: str, *, fetch: bool, redirect_uri: str | None = None, source_ip: str = "unknown"
    ) -> Registration:
        """The registration behind a client id: a bridge-registered Cognito client, or a metadata
        document (fetched and registered on first use when `fetch`, and only if it lists
        `redirect_uri`: a refused request registers nothing)."""
        if not client_id or len(client_id) > 2048:
            raise OAuthError(400, "invalid_client", "client_id is missing or too long")
        if not is_metadata_url(client_id):
            found = self.store.get(client_key(client_id)) if re.fullmatch(r"[A-Za-z0-9]{1,128}", client_id) else None
            if found is None:
                raise OAuthError(400, "invalid_client", "unknown client_id: register first")
            return found
        known = self.store.get(metadata_url_key(client_id))
        if not fetch:
            if known is None:
                raise OAuthError(400, "invalid_client", "unknown client_id: authorize first")
            return known
        if known is not None and self.clock() - known.fetched_at < DOCUMENT_MAX_AGE_SECONDS:
            return known
        RegistrationLimits(self.store, self.settings).take_source(source_ip)  # failed fetches count too
        document = self.fetcher.fetch(client_id)
        if redirect_uri is not None and redirect_uri not in document.redirect_uris:
            raise OAuthError(400, "invalid_request", "redirect_uri is not registered for this client")
        if known is not None:
            if document.redirect_uris != known.redirect_uris:
                try:
                    self.clients.set_redirect_uris(
                        known.cognito_client_id, cognito_client_name(document.client_name), document.redirect_uris
                    )
                except RefusedByCognito as refused:
                    raise OAuthError(400, "invalid_client", f"the user pool refused the document: {refused}") from None
            with contextlib.suppress(ConditionFailed):  # refreshed concurrently: theirs is as new
                self.store.refresh_document(known, document.redirect_uris)
            return Registration(
                known.key,
                known.cognito_client_id,
                document.redirect_uris,
                "none",
                known.last_used_at,
                client_id,
                client_name=document.client_name,
            )
        # A first use registers a client: limited per registrable domain (the fetch counted the address).
        self._count_registration(source_ip, check_metadata_url(client_id)[0])
        app = self._create_app_client(document.client_name, document.redirect_uris, False, "invalid_client")
        registration = Registration(
            metadata_url_key(client_id),
            app.client_id,
            document.redirect_uris,
            "none",
            0,
            client_id,
            client_name=document.client_name,
        )
        try:
            self.store.add(registration, document.client_name)
        except ConditionFailed:
            # Another request registered this document first: use theirs, drop ours.
            self.clients.delete(app.client_id)
            self.store.release_slot()
            winner = self.store.get(registration.key)
            if winner is None:
                raise BridgeUnavailable("a concurrent registration vanished") from None
            return winner
        return registration

    # ---- authorization endpoint ---------------------------------------------------------------
    def authorize(self, request: Request) -> dict[str, Any]:
        """Checks the request, then asks the person (the consent page) unless this browser approved
        this client and redirect URI before; only then on to Cognito's managed login."""
        checked = self._check_authorization(request, request.query)
        if not isinstance(checked, Authorization):
            return checked
        signer = self._signer()
        cookies = read_cookies(request.cookie)
        remembered = signer.approvals(cookies.get(cookie_name(request.base_url, APPROVALS_COOKIE)), self.clock())
        if approval_digest(checked.client_id, checked.redirect_uri) in remembered:
            return self._to_cognito(checked)
        csrf = cookies.get(cookie_name(request.base_url, CSRF_COOKIE)) or ""
        if not _CSRF_VALUE.fullmatch(csrf):
            csrf = new_csrf_value()
        token = signer.form_token(request.raw_query, csrf, self.clock())
        ask = ConsentRequest(
            client_name=checked.registration.client_name,
            client_id=checked.client_id,
            metadata_url=checked.registration.metadata_url,
            redirect_uri=checked.redirect_uri,
            resource=self._resource(request),
            scopes=checked.scopes,
            access_token_minutes=self.settings.access_token_minutes,
            refresh_token_days=self.settings.refresh_token_days,
        )
        body, headers = consent_page(
            ask, request.base_url + CONSENT_PATH, request.raw_query, token, self.settings.cognito_domain_url
        )
        cookie = set_cookie(request.base_url, CSRF_COOKIE, csrf, FORM_SECONDS, "Strict")
        return html_response(200, body, headers, cookie)

    def consent(self, request: Request) -> dict[str, Any]:
        """The consent form's answer: approve (remembered, then Cognito), deny (access_denied to the
        client, RFC 6749 §4.1.2.1), or forget this browser's approvals."""
        origin = request.headers.get("origin")
        if origin is not None and origin != request.base_url:
            raise OAuthError(403, "access_denied", "the consent form was posted from another site")
        form = request.form()
        decision = request.single(form, "decision")
        token = request.single(form, "token") or ""
        csrf = read_cookies(request.cookie).get(cookie_name(request.base_url, CSRF_COOKIE))
        signer = self._signer()
        if decision == "forget":
            if not signer.form_token_valid(token, FORGET_FORM, csrf, self.clock()):
                raise OAuthError(403, "access_denied", _STALE_FORM)
            cookie = set_cookie(request.base_url, APPROVALS_COOKIE, "", 0, "Lax")
            body, headers = remembered_page(request.base_url + CONSENT_PATH, 0, "")
            return html_response(200, body, headers, cookie)
        raw = request.single(form, "request") or ""
        if not signer.form_token_valid(token, raw, csrf, self.clock()):
            raise OAuthError(403, "access_denied", _STALE_FORM)
        checked = self._check_authorization(request, parse_pairs(raw))
        if not isinstance(checked, Authorization):
            return checked
        if decision == "deny":
            return checked.back("access_denied", "the user denied the request")
        if decision != "approve":
            raise OAuthError(400, "invalid_request", "decision must be approve or deny")
        cookies = read_cookies(request.cookie)
        remembered = signer.approvals(cookies.get(cookie_name(request.base_url, APPROVALS_COOKIE)), self.clock())
        digests = [*remembered, approval_digest(checked.client_id, checked.redirect_uri)]
        value = signer.approvals_cookie(digests, self.clock())
        return self._to_cognito(checked, set_cookie(request.base_url, APPROVALS_COOKIE, value, REMEMBER_SECONDS, "Lax"))

    def remembered(self, request: Request) -> dict[str, Any]:
        """`GET /oauth2/consent`: how many approvals this browser remembers, and a form to forget them."""
        signer = self._signer()
        cookies = read_cookies(request.cookie)
        count = len(signer.approvals(cookies.get(cookie_name(request.base_url, APPROVALS_COOKIE)), self.clock()))
        csrf = cookies.get(cookie_name(request.base_url, CSRF_COOKIE)) or ""
        if not _CSRF_VALUE.fullmatch(csrf):
            csrf = new_csrf_value()
        token = signer.form_token(FORGET_FORM, csrf, self.clock())
        body, headers = remembered_page(request.base_url + CONSENT_PATH, count, token)
        return html_response(
            200, body, headers, set_cookie(request.base_url, CSRF_COOKIE, csrf, FORM_SECONDS, "Strict")
        )

    def _signer(self) -> Signer:
        if self._signing_key is None:
            self._signing_key = self.store.signing_key()
        return Signer(self._signing_key)

    def _check_authorization(self, request: Request, q: dict[str, list[str]]) -> Authorization | dict[str, Any]:
        """The authorize request checked in full: an Authorization, or the error redirect to send
        (errors that may not redirect are raised)."""
        client_id = request.single(q, "client_id") or ""
        redirect_uri = request.single(q, "redirect_uri")
        if redirect_uri is None:
            raise OAuthError(400, "invalid_request", "redirect_uri is required")
        registration = self._registered(client_id, fetch=True, redirect_uri=redirect_uri, source_ip=request.source_ip)
        if redirect_uri not in registration.redirect_uris:
            raise OAuthError(400, "invalid_request", "redirect_uri is not registered for this client")
        state = request.single(q, "state")
        back = Authorization(registration, client_id, redirect_uri, state, {}, ()).back
        try:
            response_type = request.single(q, "response_type")
            challenge = request.single(q, "code_challenge")
            method = request.single(q, "code_challenge_method")
            scope = request.single(q, "scope")
            nonce = request.single(q, "nonce")
        except OAuthError as error:
            return back(error.error, error.description)
        if response_type != "code":
            return back("unsupported_response_type", "response_type must be code")
        if challenge is None:
            return back("invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256")
        if method != "S256":
            return back("invalid_request", "code_challenge_method must be S256")
        if not _PKCE_CHALLENGE.match(challenge):
            return back("invalid_request", "code_challenge must be 43 to 128 characters of [A-Za-z0-9._~-]")
        resources = q.get("resource") or []
        if any(canonical_resource(value) != canonical_resource(self._resource(request)) for value in resources):
            return back("invalid_target", f"this authorization server issues tokens for {self._resource(request)} only")
        requested = [s for s in (scope or "").split() if s != "offline_access"]
        unknown = sorted(set(requested) - set(self.settings.scopes))
        if unknown:
            return back("invalid_scope", f"unsupported scope: {' '.join(unknown)}")
        scopes = list(dict.fromkeys([self.settings.resource_scope, *requested]))
        params = {
            "response_type": "code",
            "client_id": registration.cognito_client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": " ".join(scopes),
        }
        if state is not None:
            params["state"] = state
        if nonce is not None:
            params["nonce"] = nonce
        return Authorization(registration, client_id, redirect_uri, state, params, tuple(scopes))

    def _to_cognito(self, checked: Authorization, cookie: str | None = None) -> dict[str, Any]:
        query = urlencode(checked.cognito_params, quote_via=quote)
        return redirect(f"{self.settings.cognito_domain_url}/oauth2/authorize?{query}", cookie)

    # ---- token endpoint -----------------------------------------------------------------------
    def token(self, request: Request) -> dict[str, Any]:
        form = request.form()
        grant_type = request.single(form, "grant_type")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError(400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
        basic = _basic_credentials(request.headers.get("authorization"))
        client_id = basic[0] if basic else request.single(form, "client_id")
        if not client_id:
            raise OAuthError(401, "invalid_client", "client authentication failed: no client_id")
        try:
            registration = self._registered(client_id, fetch=False)
        except OAuthError:
            raise OAuthError(401, "invalid_client", "client authentication failed: unknown client_id") from None
        for value in form.get("resource") or []:
            if canonical_resource(value) != canonical_resource(self._resource(request)):
                raise OAuthError(400, "invalid_target", f"tokens are issued for {self._resource(request)} only")
        if grant_type == "authorization_code":
            redirect_uri = request.single(form, "redirect_uri")
            if redirect_uri is not None:
                check_redirect_uri(redirect_uri, "invalid_grant")
            if not request.single(form, "code") or not request.single(form, "code_verifier"):
                raise OAuthError(400, "invalid_request", "code and code_verifier are required")
        elif not request.single(form, "refresh_token"):
            raise OAuthError(400, "invalid_request", "refresh_token is required")
        upstream = {
            key: values[0]
            for key, values in form.items()
            if key in ("grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "scope", "client_secret")
        }
        upstream["client_id"] = registration.cognito_client_id
        headers = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}
        if basic is not None:
            credentials = f"{quote(registration.cognito_client_id, safe='')}:{quote(basic[1], safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(credentials.encode()).decode()
        status, body = self.post(
            f"{self.settings.cognito_domain_url}/oauth2/token", urlencode(upstream).encode(), headers
        )
        if status == 200:
            self.store.touch(registration)
        return {
            "statusCode": status if status in (200, 400, 401) else 503,
            "headers": {"content-type": "application/json", **NO_STORE},
            "body": body.decode("utf-8", "replace") if status in (200, 400, 401) else _unavailable(),
            "isBase64Encoded": False,
        }

    # ---- cleanup ------------------------------------------------------------------------------
    def cleanup(self) -> dict[str, int]:
        """Delete the app clients (and registrations) unused for `unused_client_days`, and those that
        never completed a token exchange `unexchanged_client_minutes` after registering (cleanup.py)."""
        settings = self.settings
        run = Cleanup(
            self.store,
            self.clients,
            settings.unused_client_days,
            settings.unexchanged_client_minutes,
            self._report_slots,
        )
        return run.run(int(self.clock()))


def registered_clients_emf(namespace: str, used: int, now: float) -> str:
    directive = {
        "Timestamp": int(now * 1000),
        "CloudWatchMetrics": [
            {"Namespace": namespace, "Dimensions": [[]], "Metrics": [{"Name": REGISTERED_CLIENTS, "Unit": "Count"}]}
        ],
    }
    return json.dumps({"_aws": directive, REGISTERED_CLIENTS: used}, separators=(",", ":"))


def _unavailable() -> str:
    return '{"error":"temporarily_unavailable","error_description":"the token endpoint is unavailable; retry"}'


def _basic_credentials(header: str | None) -> tuple[str, str] | None:
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        raise OAuthError(401, "invalid_client", "client authentication failed: malformed Basic credentials") from None
    client_id, separator, secret = decoded.partition(":")
    if not separator:
        raise OAuthError(401, "invalid_client", "client authentication failed: malformed Basic credentials")
    return unquote(client_id), unquote(secret)
