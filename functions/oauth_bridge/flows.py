"""The bridge's endpoints: metadata, keys, registration, authorization, consent, callback, token and revocation.

The bridge is the authorization server; Cognito only signs the person in, through one app client of the
bridge's own (the template's), whose one callback is the bridge's `/oauth2/callback`. MCP clients (dynamic
registrations and metadata documents) are records of the bridge only: nothing per client exists in
Cognito, and nothing is written for a metadata document before a signed-in person approves it.
`/oauth2/authorize` checks the client and its redirect URI and shows the consent page; an approved
consent POST stores a short-lived record (client, redirect URI, PKCE challenge, state, resource, scopes)
bound to the browser, and sends it to Cognito. At the callback the bridge redeems Cognito's code (its own
PKCE verifier and app client secret), learns who signed in (`sub`), counts a new client against that
person's limit, records the approval, and sends the MCP client a code of its own: single use, short lived,
stored as a hash. `/oauth2/token` checks the client, the code, the redirect URI, PKCE and the resource,
and mints the tokens: a short-lived JWT signed in KMS (`iss` the bridge, `aud` the MCP resource, `sub` the
person, `client_id`, `scope`: signing.py) and a refresh token of the bridge's (random, kept as a hash).
Each refresh token works once (the answer carries the next), and one used again revokes its whole family.

Every request is checked in full before anything is written, so a refused one stores nothing. Before
the person has acted, every error is answered here (JSON), never a redirect (RFC 9700 §4.11.2); after
a deny, or a sign-in Cognito did not complete, the client hears it at its redirect URI (RFC 6749 §4.1.2.1).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import quote, unquote, urlencode

from mcp_runtime.resource_uri import canonical_resource

from .aws import (
    BridgeUnavailable,
    ConditionFailed,
    Registration,
    RegistrationStore,
    UserPoolClients,
    client_key,
    metadata_url_key,
)
from .cimd import MetadataFetcher, check_metadata_url, is_metadata_url
from .cleanup import Cleanup
from .consent import (
    CSRF_COOKIE,
    FLOW_COOKIE,
    FORM_SECONDS,
    PERSON_COOKIE,
    PERSON_SECONDS,
    ConsentRequest,
    ListedApproval,
    Signer,
    approvals_page,
    consent_page,
    cookie_name,
    new_csrf_value,
    read_cookies,
    set_cookie,
    sign_in_page,
)
from .grants import (
    CODE_SECONDS,
    FLOW_SECONDS,
    MAX_REFRESH_PER_APPROVAL,
    Approval,
    GrantStore,
    IssuedCode,
    Pending,
    RefreshRecord,
    digest,
    new_secret,
)
from .limits import RegistrationLimits
from .registration import OFFLINE_ACCESS, check_redirect_uri, parse_client_metadata
from .settings import BridgeSettings
from .signing import TokenSigner
from .web import NO_STORE, OAuthError, Request, html_response, json_response, parse_pairs, redirect, redirect_with

log = logging.getLogger(__name__)

METADATA_PATH: Final = "/.well-known/oauth-authorization-server"
JWKS_PATH: Final = "/.well-known/jwks.json"
REGISTER_PATH: Final = "/oauth2/register"
AUTHORIZE_PATH: Final = "/oauth2/authorize"
TOKEN_PATH: Final = "/oauth2/token"
CONSENT_PATH: Final = "/oauth2/consent"
CALLBACK_PATH: Final = "/oauth2/callback"
REVOKE_PATH: Final = "/oauth2/revoke"
CONSOLE_FORM: Final = "approvals"
CONSOLE_KEY: Final = "console"
# What the bridge asks Cognito for: who signed in. Cognito's tokens never reach a client.
UPSTREAM_SCOPES: Final = ("openid",)
_CSRF_VALUE: Final = re.compile(r"^[A-Za-z0-9_-]{32}$")
_SECRET_VALUE: Final = re.compile(r"^[A-Za-z0-9_-]{43}$")
_STALE_FORM: Final = "the consent form expired or was not opened in this browser: open the client's sign-in link again"
_USED_FORM: Final = "this form was sent already: open the client's sign-in link again"
_STALE_SIGN_IN: Final = "this sign-in expired or was used already: start again from your client"
_BAD_CODE: Final = "the code is invalid, expired, used already or not this client's"
_REVOKED_CODE: Final = "the approval this code was issued under was revoked: sign in again"
_BAD_REFRESH: Final = "the refresh token was revoked, has expired or is not this client's"
MCP_PATH: Final = "/mcp"
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
    """An authorize request that passed every check."""

    registration: Registration
    client_id: str
    redirect_uri: str
    state: str | None
    challenge: str
    resource: str
    scopes: tuple[str, ...]
    nonce: str | None = None

    def back(self, error: str, description: str, issuer: str) -> dict[str, Any]:
        """An answer to the client at its registered redirect URI, with its `state` and the issuer (RFC
        9207): only once the person has acted (denied), never for a request nobody looked at."""
        params = {"error": error, "error_description": description}
        if self.state is not None:
            params["state"] = self.state
        params["iss"] = issuer
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
    grants: GrantStore
    signer: TokenSigner
    fetcher: MetadataFetcher = field(default_factory=MetadataFetcher)
    post: TokenPost = post_form
    clock: Callable[[], float] = time.time

    # ---- metadata (RFC 8414) ----------------------------------------------------------------
    def metadata(self, request: Request) -> dict[str, Any]:
        base = self._issuer(request)
        document = {
            "issuer": base,
            "authorization_endpoint": base + AUTHORIZE_PATH,
            "token_endpoint": base + TOKEN_PATH,
            "jwks_uri": base + JWKS_PATH,
            "registration_endpoint": base + REGISTER_PATH,
            "revocation_endpoint": base + REVOKE_PATH,
            "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": [*self.settings.scopes, OFFLINE_ACCESS],
            "client_id_metadata_document_supported": True,
            # Every authorization response names the issuer (RFC 9207): a client talking to two
            # authorization servers cannot be sent one's code for the other (mix-up attacks).
            "authorization_response_iss_parameter_supported": True,
            # RFC 8414 §2 allows more parameters: which registration to use, for people reading this.
            "registration_note": REGISTRATION_NOTE,
        }
        return json_response(200, document, {"cache-control": "max-age=3600"})

    def jwks(self, request: Request) -> dict[str, Any]:
        """The public key of the KMS key that signs the access tokens (its private half never leaves KMS)."""
        return json_response(200, self.signer.jwks(), {"cache-control": "max-age=3600"})

    def _origin(self, request: Request) -> str:
        """Where the bridge is reached: the configured public origin (the template always sets it); the
        request's own only where none is (component tests)."""
        return (self.settings.public_origin or "").rstrip("/") or request.base_url

    def _issuer(self, request: Request) -> str:
        """The issuer, as the metadata and every authorization response (`iss`, RFC 9207) name it."""
        return self._origin(request)

    def _resource(self, request: Request) -> str:
        return self.settings.resource_url or self._origin(request) + MCP_PATH

    # ---- dynamic client registration (RFC 7591) ---------------------------------------------
    def register(self, request: Request) -> dict[str, Any]:
        """A registration is a row of the bridge's, and nothing else: no Cognito resource, no slot."""
        metadata = parse_client_metadata(request.json_object(), self.settings.scopes)
        self._count_registration(request.source_ip)
        client_id = secrets.token_hex(16)
        client_secret = new_secret() if metadata.confidential else None
        registration = Registration(
            client_key(client_id),
            "",
            metadata.redirect_uris,
            metadata.token_endpoint_auth_method,
            0,
            client_name=metadata.client_name,
            secret_hash=digest(client_secret) if client_secret else "",
        )
        self.store.add(registration, metadata.client_name)
        body: dict[str, Any] = {
            "client_id": client_id,
            "client_id_issued_at": int(self.clock()),
            **metadata.registered(),
        }
        if client_secret is not None:
            body["client_secret"] = client_secret
            body["client_secret_expires_at"] = 0
        return json_response(201, body, NO_STORE)

    def _count_registration(self, source_ip: str, metadata_host: str | None = None) -> None:
        """One more dynamic registration from this source, or (`metadata_host`) one more client from
        a metadata document on that host's registrable domain (its fetch counted the source); a 429
        with Retry-After past the limit (limits.py)."""
        limits = RegistrationLimits(self.store, self.settings)
        if metadata_host is None:
            limits.take_source(source_ip)
        else:
            limits.take_domain(metadata_host)

    # ---- clients ------------------------------------------------------------------------------
    def _registered(
        self, client_id: str, *, fetch: bool, redirect_uri: str | None = None, source_ip: str = ""
    ) -> Registration:
        """The registration behind a client id: a dynamic registration, or a metadata document (fetched
        when `fetch` and unknown or stale, and only if it lists `redirect_uri`). An unknown document
        comes back not stored: nothing is registered before a person approves."""
        if not client_id or len(client_id) > 2048:
            raise OAuthError(400, "invalid_client", "client_id is missing or too long")
        if not is_metadata_url(client_id):
            found = self.store.get(client_key(client_id)) if re.fullmatch(r"[A-Za-z0-9]{1,128}", client_id) else None
            if found is None or found.legacy:
                raise OAuthError(400, "invalid_client", "unknown client_id: register first")
            return found
        known = self.store.get(metadata_url_key(client_id))
        if known is not None and known.legacy:
            raise OAuthError(400, "invalid_client", "this client's registration is being renewed: retry in 15 minutes")
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
            with contextlib.suppress(ConditionFailed):  # refreshed concurrently: theirs is as new
                self.store.refresh_document(known, document.redirect_uris)
            return replace(known, redirect_uris=document.redirect_uris, client_name=document.client_name)
        return Registration(
            metadata_url_key(client_id),
            "",
            document.redirect_uris,
            "none",
            0,
            client_id,
            client_name=document.client_name,
            stored=False,
        )

    def _authenticated_client(self, request: Request, form: dict[str, list[str]]) -> Registration:
        """The client of a token or revocation request, its secret checked if it has one (RFC 6749 §2.3)."""
        basic = _basic_credentials(request.headers.get("authorization"))
        client_id = basic[0] if basic else request.single(form, "client_id")
        if not client_id:
            raise OAuthError(401, "invalid_client", "client authentication failed: no client_id")
        try:
            registration = self._registered(client_id, fetch=False)
        except OAuthError:
            raise OAuthError(401, "invalid_client", "client authentication failed: unknown client_id") from None
        if registration.secret_hash:
            secret = basic[1] if basic else request.single(form, "client_secret")
            if not secret or not hmac.compare_digest(digest(secret), registration.secret_hash):
                raise OAuthError(401, "invalid_client", "client authentication failed: wrong client secret")
        return registration

    # ---- authorization endpoint ---------------------------------------------------------------
    def authorize(self, request: Request) -> dict[str, Any]:
        """Checks the request, then asks the person (the consent page), unless the person this browser
        signed in as approved this client for these scopes: then straight on to Cognito, which must sign
        in that same person."""
        checked = self._check_authorization(request, request.query)
        now = self.clock()
        signer = self._signer()
        cookies = read_cookies(request.cookie)
        person = signer.person(cookies.get(cookie_name(self._origin(request), PERSON_COOKIE)), now)
        if person is not None and checked.registration.stored:
            approval = self.grants.approval(person, checked.registration.key)
            if approval is not None and approval.covers(checked.scopes, now):
                return self._to_cognito(request, checked, "standing", person)
        csrf = cookies.get(cookie_name(self._origin(request), CSRF_COOKIE)) or ""
        if not _CSRF_VALUE.fullmatch(csrf):
            csrf = new_csrf_value()
        token = signer.form_token(request.raw_query, csrf, now)
        ask = ConsentRequest(
            client_name=checked.registration.client_name,
            client_id=checked.client_id,
            metadata_url=checked.registration.metadata_url,
            redirect_uri=checked.redirect_uri,
            resource=checked.resource,
            scopes=checked.scopes,
            access_token_minutes=self.settings.access_token_minutes,
            refresh_token_days=self.settings.refresh_token_days,
            approval_days=self.settings.approval_days,
        )
        body, headers = consent_page(
            ask, self._origin(request) + CONSENT_PATH, request.raw_query, token, self.settings.cognito_domain_url
        )
        cookie = set_cookie(self._origin(request), CSRF_COOKIE, csrf, FORM_SECONDS, "Strict")
        return html_response(200, body, headers, cookie)

    def consent(self, request: Request) -> dict[str, Any]:
        """The forms' answers: approve (on to Cognito) or deny (access_denied to the client) on the
        consent page; sign in or revoke on the approvals page."""
        origin = request.headers.get("origin")
        if origin is not None and origin != self._origin(request):
            raise OAuthError(403, "access_denied", "the consent form was posted from another site")
        form = request.form()
        decision = request.single(form, "decision")
        token = request.single(form, "token") or ""
        csrf = read_cookies(request.cookie).get(cookie_name(self._origin(request), CSRF_COOKIE))
        signer = self._signer()
        if decision in ("sign-in", "revoke"):
            if not signer.form_token_valid(token, CONSOLE_FORM, csrf, self.clock()):
                raise OAuthError(403, "access_denied", _STALE_FORM)
            self._use_form(token)
            if decision == "sign-in":
                return self._console_sign_in(request)
            return self._revoke_on_page(request, form)
        raw = request.single(form, "request") or ""
        if not signer.form_token_valid(token, raw, csrf, self.clock()):
            raise OAuthError(403, "access_denied", _STALE_FORM)
        checked = self._check_authorization(request, parse_pairs(raw))
        if decision == "deny":
            self._use_form(token)
            return checked.back("access_denied", "the user denied the request", self._issuer(request))
        if decision != "approve":
            raise OAuthError(400, "invalid_request", "decision must be approve or deny")
        self._use_form(token)  # nothing is created for the client until the person has signed in
        return self._to_cognito(request, checked, "consent", None)

    def _use_form(self, token: str) -> None:
        """A form is answered once: a replayed one (each approve would write a sign-in record) is refused."""
        expires = int(token.partition(".")[0])  # checked as digits by form_token_valid
        if not self.grants.use_form(token, expires):
            raise OAuthError(403, "access_denied", _USED_FORM)

    def _to_cognito(self, request: Request, checked: Authorization, kind: str, person: str | None) -> dict[str, Any]:
        """Store the approved sign-in (bound to this browser) and send the browser to Cognito's
        managed login, which comes back to the bridge's callback only."""
        browser = self._browser_value(request)
        verifier = new_secret()
        flow_id = new_secret()
        registration = checked.registration
        self.grants.put_pending(
            flow_id,
            Pending(
                kind=kind,
                client_key=registration.key,
                client_id=checked.client_id,
                redirect_uri=checked.redirect_uri,
                code_challenge=checked.challenge,
                state=checked.state,
                resource=checked.resource,
                scopes=checked.scopes,
                verifier=verifier,
                browser=digest(browser),
                expires_at=int(self.clock()) + FLOW_SECONDS,
                person=person,
                client_name=registration.client_name,
                redirect_uris=() if registration.stored else registration.redirect_uris,
            ),
        )
        return self._cognito_login(request, flow_id, verifier, browser)

    def _cognito_login(self, request: Request, flow_id: str, verifier: str, browser: str) -> dict[str, Any]:
        """Cognito's managed login with the bridge's own app client, back to the bridge's callback only."""
        params = {
            "response_type": "code",
            "client_id": self.settings.app_client_id,
            "redirect_uri": self._origin(request) + CALLBACK_PATH,
            "state": flow_id,
            "code_challenge": _s256(verifier),
            "code_challenge_method": "S256",
            "scope": " ".join(UPSTREAM_SCOPES),
        }
        cookie = set_cookie(self._origin(request), FLOW_COOKIE, browser, FLOW_SECONDS, "Lax")
        query = urlencode(params, quote_via=quote)
        return redirect(f"{self.settings.cognito_domain_url}/oauth2/authorize?{query}", cookie)

    def _browser_value(self, request: Request) -> str:
        """This browser's sign-in cookie (kept, so two sign-ins at once in one browser both work)."""
        value = read_cookies(request.cookie).get(cookie_name(self._origin(request), FLOW_COOKIE)) or ""
        return value if _SECRET_VALUE.fullmatch(value) else new_secret()

    # ---- the callback from Cognito --------------------------------------------------------------
    def callback(self, request: Request) -> dict[str, Any]:
        """Cognito's answer for a sign-in the bridge sent: only for a stored, unexpired record, taken
        once, in the browser that approved it. The MCP client gets a code of the bridge's."""
        q = request.query
        flow_id = request.single(q, "state") or ""
        pending = self.grants.take_pending(flow_id) if _SECRET_VALUE.fullmatch(flow_id) else None
        if pending is None:
            raise OAuthError(400, "invalid_request", _STALE_SIGN_IN)
        browser = read_cookies(request.cookie).get(cookie_name(self._origin(request), FLOW_COOKIE)) or ""
        if not hmac.compare_digest(digest(browser), pending.browser):
            raise OAuthError(403, "access_denied", "this sign-in was started in another browser: start again there")
        error, code = request.single(q, "error"), request.single(q, "code")
        if pending.kind == "console":
            if error is not None or not code:
                raise OAuthError(400, "access_denied", "the sign-in did not complete")
            tokens = self._redeem(request, code, pending.verifier)
            return redirect(self._origin(request) + CONSENT_PATH, self._person_cookie(request, _subject(tokens)))
        registration = self.store.get(pending.client_key)
        if registration is None and pending.redirect_uris and is_metadata_url(pending.client_id):
            registration = Registration(
                pending.client_key,
                "",
                pending.redirect_uris,
                "none",
                0,
                pending.client_id,
                client_name=pending.client_name or "MCP client",
                stored=False,
            )
        if registration is None or registration.legacy:
            raise OAuthError(400, "invalid_client", "the client is no longer registered: register again")
        back = {} if pending.state is None else {"state": pending.state}
        back["iss"] = self._issuer(request)  # RFC 9207, in every authorization response
        if error is not None or not code:  # the person acted at Cognito (cancelled): the client hears it
            return redirect_with(
                pending.redirect_uri,
                {"error": "access_denied", "error_description": "the sign-in did not complete", **back},
            )
        upstream = self._redeem(request, code, pending.verifier)
        subject = _subject(upstream)
        now = int(self.clock())
        if pending.kind == "standing":
            standing = self.grants.approval(subject, registration.key)
            if subject != pending.person or standing is None or not standing.covers(pending.scopes, now):
                raise OAuthError(
                    403,
                    "access_denied",
                    "another person signed in than the one who approved: open the sign-in link again",
                )
            approval = standing
        else:
            try:
                registration = self._new_client_of(subject, registration, request, now)
            except OAuthError as refused:
                if refused.status != 429:
                    raise
                return redirect_with(
                    pending.redirect_uri,
                    {"error": "temporarily_unavailable", "error_description": refused.description, **back},
                )
            approval = self._approve(subject, registration, pending, now, _username(upstream))
        client_code = new_secret()
        self.grants.put_code(
            client_code,
            IssuedCode(
                client_key=registration.key,
                redirect_uri=pending.redirect_uri,
                code_challenge=pending.code_challenge,
                resource=pending.resource,
                scopes=pending.scopes,
                subject=subject,
                tokens={},
                expires_at=now + CODE_SECONDS,
                grant=approval.grant,
            ),
        )
        answer = redirect_with(pending.redirect_uri, {"code": client_code, **back})
        answer["cookies"] = [self._person_cookie(request, subject)]
        return answer

    def _new_client_of(self, subject: str, registration: Registration, request: Request, now: int) -> Registration:
        """A client this person approves for the first time counts against their limit (and a metadata
        document against its domain's); only now, the person known, is a metadata document registered."""
        current = self.grants.approval(subject, registration.key)
        if current is not None and current.expires_at > now:
            return registration
        limits = RegistrationLimits(self.store, self.settings)
        limits.take_person(subject)
        if registration.stored or registration.metadata_url is None:
            return registration
        limits.take_domain(check_metadata_url(registration.metadata_url)[0].lower())
        try:
            self.store.add(replace(registration, stored=True), registration.client_name)
        except ConditionFailed:  # another person's sign-in registered it first
            stored = self.store.get(registration.key)
            if stored is None:
                raise OAuthError(400, "invalid_client", "the client is no longer registered: register again") from None
            return stored
        return replace(registration, stored=True)

    def _person_cookie(self, request: Request, subject: str) -> str:
        value = self._signer().person_cookie(subject, self.clock())
        return set_cookie(self._origin(request), PERSON_COOKIE, value, PERSON_SECONDS, "Lax")

    def _redeem(self, request: Request, code: str, verifier: str) -> dict[str, Any]:
        """Cognito's tokens for its code (the bridge's app client, callback and verifier): read for who signed
        in, then dropped. Nothing of them is stored or reaches a client."""
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self._origin(request) + CALLBACK_PATH,
            "code_verifier": verifier,
        }
        app_id = self.settings.app_client_id
        status, body = self._cognito_token(app_id, self.clients.secret(app_id), form)
        if status in (400, 401):
            log.info("Cognito refused the code: %s", body[:300])
            raise OAuthError(400, "access_denied", "Cognito did not accept the sign-in: start again from your client")
        if status != 200:
            raise BridgeUnavailable(f"Cognito's token endpoint answered {status}")
        try:
            tokens: Any = json.loads(body)
        except ValueError:
            raise BridgeUnavailable("Cognito's token endpoint answered no JSON") from None
        if not isinstance(tokens, dict) or not isinstance(tokens.get("access_token"), str):
            raise BridgeUnavailable("Cognito's token endpoint answered no access token")
        return tokens

    def _cognito_token(self, app_id: str, secret: str, form: dict[str, str]) -> tuple[int, bytes]:
        return self.post(
            f"{self.settings.cognito_domain_url}/oauth2/token",
            urlencode({**form, "client_id": app_id}).encode(),
            _app_client_headers(app_id, secret),
        )

    def _approve(
        self, subject: str, registration: Registration, pending: Pending, now: int, username: str = ""
    ) -> Approval:
        """The person's approval, on record until it expires: the scopes approved now and before."""
        for _ in range(3):
            current = self.grants.approval(subject, registration.key)
            standing = current is not None and current.expires_at > now
            approval = Approval(
                subject=subject,
                client_key=registration.key,
                client_id=pending.client_id,
                client_name=registration.client_name,
                scopes=tuple(dict.fromkeys([*(current.scopes if current and standing else ()), *pending.scopes])),
                approved_at=now,
                expires_at=now + self.settings.approval_days * 86_400,
                grant=current.grant if current and standing else new_secret(),
                refresh=current.refresh if current and standing else (),
                revision=current.revision if current else 0,
                username=username or (current.username if current else ""),
            )
            try:
                self.grants.save_approval(approval)
            except ConditionFailed:
                continue  # changed meanwhile: read it again
            return replace(approval, revision=approval.revision + 1)
        raise BridgeUnavailable("the approval kept changing concurrently")

    def _issue_refresh(self, registration: Registration, approval: Approval, now: int, replacing: str = "") -> str:
        """A refresh token of the bridge's under this approval: recorded (as a hash) and listed in the
        approval, so it is refused and revoked with it. `replacing`: the digest of the token it rotates
        out, dropped from that list."""
        token = new_secret()
        expires = now + self.settings.refresh_token_days * 86_400
        self.grants.put_refresh(token, RefreshRecord(approval.subject, registration.key, approval.grant), expires)
        for _ in range(3):
            current = self.grants.approval(approval.subject, registration.key)
            if current is None or current.grant != approval.grant:
                return token  # revoked meanwhile: the new token is refused with its approval gone
            kept = (*[d for d in current.refresh if d != replacing], digest(token))
            try:
                self.grants.save_approval(replace(current, refresh=kept[-MAX_REFRESH_PER_APPROVAL:]))
            except ConditionFailed:
                continue
            return token
        return token

    # ---- the approvals page ---------------------------------------------------------------------
    def approvals(self, request: Request) -> dict[str, Any]:
        """`GET /oauth2/consent`: the signed-in person's approvals, each revocable; sign in first."""
        signer = self._signer()
        cookies = read_cookies(request.cookie)
        csrf = cookies.get(cookie_name(self._origin(request), CSRF_COOKIE)) or ""
        if not _CSRF_VALUE.fullmatch(csrf):
            csrf = new_csrf_value()
        token = signer.form_token(CONSOLE_FORM, csrf, self.clock())
        action = self._origin(request) + CONSENT_PATH
        person = signer.person(cookies.get(cookie_name(self._origin(request), PERSON_COOKIE)), self.clock())
        if person is None:
            body, headers = sign_in_page(action, token, self.settings.cognito_domain_url)
        else:
            listed = [
                ListedApproval(
                    a.client_key,
                    a.client_name,
                    a.client_id,
                    a.scopes,
                    datetime.fromtimestamp(a.expires_at, UTC).strftime("%Y-%m-%d"),
                )
                for a in sorted(self.grants.approvals_of(person), key=lambda a: a.approved_at)
                if a.expires_at > self.clock()
            ]
            body, headers = approvals_page(action, listed, token)
        cookie = set_cookie(self._origin(request), CSRF_COOKIE, csrf, FORM_SECONDS, "Strict")
        return html_response(200, body, headers, cookie)

    def _console_sign_in(self, request: Request) -> dict[str, Any]:
        """Sign the person in with Cognito (the bridge's own app client) to show their approvals."""
        browser = self._browser_value(request)
        verifier, flow_id = new_secret(), new_secret()
        scopes = (self.settings.resource_scope,)
        pending = Pending(
            kind="console",
            client_key=CONSOLE_KEY,
            client_id="",
            redirect_uri=self._origin(request) + CONSENT_PATH,
            code_challenge="",
            state=None,
            resource="",
            scopes=scopes,
            verifier=verifier,
            browser=digest(browser),
            expires_at=int(self.clock()) + FLOW_SECONDS,
        )
        self.grants.put_pending(flow_id, pending)
        return self._cognito_login(request, flow_id, verifier, browser)

    def _revoke_on_page(self, request: Request, form: dict[str, list[str]]) -> dict[str, Any]:
        person = self._signer().person(
            read_cookies(request.cookie).get(cookie_name(self._origin(request), PERSON_COOKIE)), self.clock()
        )
        if person is None:
            raise OAuthError(403, "access_denied", "sign in again to revoke approvals")
        approval = self.grants.approval(person, request.single(form, "client") or "")
        if approval is not None:
            self._revoke_approval(approval)
        return redirect(self._origin(request) + CONSENT_PATH)

    # ---- revocation -----------------------------------------------------------------------------
    def _revoke_approval(self, approval: Approval) -> None:
        """The approval goes, and every refresh token issued under it (and any code minted under it: a
        code carries the approval's grant, and is refused without it)."""
        with contextlib.suppress(ConditionFailed):  # revoked concurrently: the tokens still go below
            self.grants.remove_approval(approval)
        for token_digest in approval.refresh:
            self.grants.take_refresh(token_digest)

    def revoke(self, request: Request) -> dict[str, Any]:
        """`POST /oauth2/revoke` (RFC 7009): a client gives up one of its refresh tokens. Always 200 for
        an authenticated client (§2.2); access tokens run out on their own (minutes)."""
        form = request.form()
        registration = self._authenticated_client(request, form)
        token = request.single(form, "token")
        if not token:
            raise OAuthError(400, "invalid_request", "token is required")
        record = self.grants.refresh(token) if len(token) <= 512 else None
        if record is not None and record.client_key == registration.key:
            self.grants.take_refresh(digest(token))
        return {"statusCode": 200, "headers": {**NO_STORE}, "body": "", "isBase64Encoded": False}

    def revoke_client(self, client_id: str) -> dict[str, int]:
        """The operator's command: every person's approval of a client, and its refresh tokens."""
        registration = self._registered(client_id, fetch=False)
        approvals = self.grants.approvals_for(registration.key)
        for approval in approvals:
            self._revoke_approval(approval)
        log.info("revoked %d approvals of client %s", len(approvals), client_id)
        return {"revokedApprovals": len(approvals)}

    def rotate_signing_keys(self, retire: bool = False) -> dict[str, int]:
        """The operator's command: a new key signs from now on; the older ones still verify, or (`retire`,
        for a leaked key) none does, in every container at once (the keys are read on each use)."""
        return {"signingKeys": self.grants.rotate_signing_keys(retire)}

    def _signer(self) -> Signer:
        # Read on each use (one consistent read; a page or a form needs one or two): a retired key is
        # refused by every container from the moment it is retired, none caches it.
        return Signer(self.grants.signing_keys())

    def _check_authorization(self, request: Request, q: dict[str, list[str]]) -> Authorization:
        """The authorize request checked in full. Nobody has looked at it yet, so every error is
        answered here, never at the redirect URI (no open redirector)."""
        client_id = request.single(q, "client_id") or ""
        redirect_uri = request.single(q, "redirect_uri")
        if redirect_uri is None:
            raise OAuthError(400, "invalid_request", "redirect_uri is required")
        # Checked again as registered ones are: one stored under older, laxer rules is never used.
        check_redirect_uri(redirect_uri, "invalid_request")
        registration = self._registered(client_id, fetch=True, redirect_uri=redirect_uri, source_ip=request.source_ip)
        if redirect_uri not in registration.redirect_uris:
            raise OAuthError(400, "invalid_request", "redirect_uri is not registered for this client")
        state = request.single(q, "state")
        response_type = request.single(q, "response_type")
        challenge = request.single(q, "code_challenge")
        method = request.single(q, "code_challenge_method")
        scope = request.single(q, "scope")
        nonce = request.single(q, "nonce")
        if response_type != "code":
            raise OAuthError(400, "unsupported_response_type", "response_type must be code")
        if challenge is None:
            raise OAuthError(
                400, "invalid_request", "PKCE is required: send code_challenge and code_challenge_method=S256"
            )
        if method != "S256":
            raise OAuthError(400, "invalid_request", "code_challenge_method must be S256")
        if not _PKCE_CHALLENGE.match(challenge):
            raise OAuthError(400, "invalid_request", "code_challenge must be 43 to 128 characters of [A-Za-z0-9._~-]")
        resource = self._resource(request)
        if any(canonical_resource(value) != canonical_resource(resource) for value in q.get("resource") or []):
            raise OAuthError(400, "invalid_target", f"this authorization server issues tokens for {resource} only")
        requested = [s for s in (scope or "").split() if s != OFFLINE_ACCESS]
        unknown = sorted(set(requested) - set(self.settings.scopes))
        if unknown:
            raise OAuthError(400, "invalid_scope", f"unsupported scope: {' '.join(unknown)}")
        scopes = tuple(dict.fromkeys([self.settings.resource_scope, *requested]))
        return Authorization(registration, client_id, redirect_uri, state, challenge, resource, scopes, nonce)

    # ---- token endpoint -----------------------------------------------------------------------
    def token(self, request: Request) -> dict[str, Any]:
        form = request.form()
        grant_type = request.single(form, "grant_type")
        if grant_type not in ("authorization_code", "refresh_token"):
            raise OAuthError(400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
        registration = self._authenticated_client(request, form)
        resources = form.get("resource") or []
        for value in resources:
            if canonical_resource(value) != canonical_resource(self._resource(request)):
                raise OAuthError(400, "invalid_target", f"tokens are issued for {self._resource(request)} only")
        if grant_type == "authorization_code":
            return self._exchange_code(request, form, registration)
        refresh_token = request.single(form, "refresh_token")
        if not refresh_token:
            raise OAuthError(400, "invalid_request", "refresh_token is required")
        return self._refresh(request, form, registration, refresh_token)

    def _refresh(
        self, request: Request, form: dict[str, list[str]], registration: Registration, refresh_token: str
    ) -> dict[str, Any]:
        """A refresh token works once (OAuth 2.1 §4.3.1): the answer carries a new one. One presented again
        after its use is a stolen copy, or the client it was stolen from: its family (the approval, with
        every refresh token under it) is revoked."""
        record = self.grants.refresh(refresh_token) if len(refresh_token) <= 512 else None
        if record is None:
            self._revoke_family_of_spent(refresh_token)
            raise OAuthError(400, "invalid_grant", _BAD_REFRESH)
        approval = None
        if record.client_key == registration.key:
            approval = self.grants.approval(record.subject, registration.key)
        if approval is None or approval.grant != record.grant or approval.expires_at <= self.clock():
            raise OAuthError(400, "invalid_grant", _BAD_REFRESH)
        if approval.username and not self.clients.user_enabled(approval.username):
            log.info("refresh refused: %s is disabled or gone from the user pool; approval revoked", record.subject)
            self._revoke_approval(approval)
            raise OAuthError(400, "invalid_grant", _BAD_REFRESH)
        scopes = approval.scopes
        scope = request.single(form, "scope")
        if scope is not None:
            asked = tuple(dict.fromkeys(s for s in scope.split() if s != OFFLINE_ACCESS))
            if not set(asked) <= set(approval.scopes):
                raise OAuthError(400, "invalid_scope", "a refresh cannot add scopes the person did not approve")
            scopes = asked or approval.scopes
        now = int(self.clock())
        expires = now + self.settings.refresh_token_days * 86_400
        if not self.grants.spend_refresh(refresh_token, record, expires):
            self._revoke_family(record.subject, record.client_key, record.grant)  # used twice at once
            raise OAuthError(400, "invalid_grant", _BAD_REFRESH)
        self.store.touch(registration)
        answer = self._access_token(request, registration, record.subject, scopes, self._resource(request), now)
        answer["refresh_token"] = self._issue_refresh(registration, approval, now, replacing=digest(refresh_token))
        return json_response(200, answer, NO_STORE)

    def _access_token(
        self,
        request: Request,
        registration: Registration,
        subject: str,
        scopes: tuple[str, ...],
        resource: str,
        now: int,
    ) -> dict[str, Any]:
        """A short-lived JWT access token (RFC 9068) for the MCP resource (RFC 8707), signed in KMS."""
        lifetime = self.settings.access_token_minutes * 60
        claims = {
            "iss": self._issuer(request),
            "sub": subject,
            "aud": resource,
            "client_id": registration.public_client_id,
            "scope": " ".join(scopes),
            "iat": now,
            "exp": now + lifetime,
            "jti": secrets.token_urlsafe(16),
        }
        return {
            "access_token": self.signer.sign(claims),
            "token_type": "Bearer",
            "expires_in": lifetime,
            "scope": " ".join(scopes),
        }

    def _revoke_family_of_spent(self, refresh_token: str) -> None:
        spent = self.grants.spent(refresh_token) if len(refresh_token) <= 512 else None
        if spent is not None:
            log.warning("a refresh token was used again after its rotation: its family is revoked")
            self._revoke_family(*spent)

    def _revoke_family(self, subject: str, client_key: str, grant: str) -> None:
        approval = self.grants.approval(subject, client_key)
        if approval is not None and approval.grant == grant:
            self._revoke_approval(approval)

    def _exchange_code(
        self, request: Request, form: dict[str, list[str]], registration: Registration
    ) -> dict[str, Any]:
        """The bridge's code for the tokens: once, by its client, with its redirect URI, verifier and resource."""
        code = request.single(form, "code")
        verifier = request.single(form, "code_verifier")
        if not code or not verifier:
            raise OAuthError(400, "invalid_request", "code and code_verifier are required")
        issued = self.grants.take_code(code) if len(code) <= 128 else None  # taken: a second try finds nothing
        if issued is None or issued.client_key != registration.key:
            raise OAuthError(400, "invalid_grant", _BAD_CODE)
        approval = self.grants.approval(issued.subject, issued.client_key)
        if (
            approval is None
            or not issued.grant
            or approval.grant != issued.grant
            or approval.expires_at <= self.clock()
        ):
            raise OAuthError(400, "invalid_grant", _REVOKED_CODE)  # revoked since the code was minted
        if request.single(form, "redirect_uri") != issued.redirect_uri:
            raise OAuthError(400, "invalid_grant", "redirect_uri is not the one of the authorization request")
        if not _PKCE_CHALLENGE.fullmatch(verifier) or not hmac.compare_digest(_s256(verifier), issued.code_challenge):
            raise OAuthError(400, "invalid_grant", "the code_verifier does not match the code_challenge")
        for value in form.get("resource") or []:
            if canonical_resource(value) != canonical_resource(issued.resource):
                raise OAuthError(400, "invalid_target", "the resource is not the one of the authorization request")
        self.store.touch(registration)
        now = int(self.clock())
        answer = self._access_token(request, registration, issued.subject, issued.scopes, issued.resource, now)
        answer["refresh_token"] = self._issue_refresh(registration, approval, now)
        return json_response(200, answer, NO_STORE)

    # ---- cleanup ------------------------------------------------------------------------------
    def cleanup(self) -> dict[str, int]:
        """Delete the registrations unused for `unused_client_days`, and those that never completed a token
        exchange `unexchanged_client_minutes` after registering; remove what earlier versions left (cleanup.py)."""
        settings = self.settings
        run = Cleanup(
            self.store, self.clients, self.grants, settings.unused_client_days, settings.unexchanged_client_minutes
        )
        return run.run(int(self.clock()))


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


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _app_client_headers(app_id: str, secret: str) -> dict[str, str]:
    credentials = f"{quote(app_id, safe='')}:{quote(secret, safe='')}"
    return {
        "content-type": "application/x-www-form-urlencoded",
        "accept": "application/json",
        "authorization": "Basic " + base64.b64encode(credentials.encode()).decode(),
    }


def _username(tokens: dict[str, Any]) -> str:
    """Cognito's `username` claim of its access token (what AdminGetUser takes); empty if it names none."""
    try:
        payload = str(tokens["access_token"]).split(".")[1]
        claims: Any = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return ""
    username = claims.get("username") if isinstance(claims, dict) else None
    return username if isinstance(username, str) else ""


def _subject(tokens: dict[str, Any]) -> str:
    """The person Cognito signed in: the `sub` of the access token it just answered the bridge (over TLS,
    straight from its token endpoint, so its signature needs no check here: OIDC Core §3.1.3.7)."""
    try:
        payload = str(tokens["access_token"]).split(".")[1]
        claims: Any = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        raise BridgeUnavailable("Cognito's access token is not a JWT") from None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    if not isinstance(subject, str) or not subject:
        raise BridgeUnavailable("Cognito's access token names no subject")
    return subject
