# ruff: noqa: E501  (tables of exact error texts read best one per line)
"""Redirect URIs as RFC 8252 and a browser (the WHATWG URL Standard) see them: the bridge accepts one only
where its parser and a browser's read the same host, and its consent page names that host."""

from __future__ import annotations

import pytest

from oauth_bridge.consent import ConsentRequest, consent_page
from oauth_bridge.registration import check_redirect_uri, destination
from oauth_bridge.web import OAuthError


@pytest.mark.parametrize(
    ("uri", "description"),
    [
        ("https://claude.ai@attacker.example/cb", "the redirect URI 'https://claude.ai@attacker.example/cb' has user information (before an @ in its host)"),
        ("http://user:pw@127.0.0.1:5/cb", "the redirect URI 'http://user:pw@127.0.0.1:5/cb' has user information (before an @ in its host)"),
        ("https://attacker.example\\@claude.ai/cb", "the redirect URI 'https://attacker.example\\\\@claude.ai/cb' has a backslash, which browsers read as a slash"),
        ("https://claude.ai\\attacker.example/cb", "the redirect URI 'https://claude.ai\\\\attacker.example/cb' has a backslash, which browsers read as a slash"),
        ("ms-msdt:/id?PCWDiagnostic", "the redirect URI 'ms-msdt:/id?PCWDiagnostic' has a private-use scheme that is not a reverse domain name (RFC 8252 §7.1: com.example.app:/callback)"),
        ("search-ms:query=x", "the redirect URI 'search-ms:query=x' has a private-use scheme that is not a reverse domain name (RFC 8252 §7.1: com.example.app:/callback)"),
        ("myapp://callback", "the redirect URI 'myapp://callback' has a private-use scheme that is not a reverse domain name (RFC 8252 §7.1: com.example.app:/callback)"),
        ("https://%61ttacker.example/cb", "the redirect URI 'https://%61ttacker.example/cb' has a percent-encoded host"),
        ("https://0x7f.1/cb", "the redirect URI 'https://0x7f.1/cb' has a numeric host that is not a dotted IPv4 address"),
        ("https://2130706433/cb", "the redirect URI 'https://2130706433/cb' has a numeric host that is not a dotted IPv4 address"),
        ("https://127.1/cb", "the redirect URI 'https://127.1/cb' has a numeric host that is not a dotted IPv4 address"),
    ],
    ids=["user-info", "user-info-loopback", "backslash-before-at", "backslash-as-slash", "os-handler", "search-ms", "single-word-scheme", "percent-host", "hex-ipv4", "integer-ipv4", "short-ipv4"],
)  # fmt: skip
def test_a_redirect_uri_a_browser_reads_differently_is_refused(uri: str, description: str) -> None:
    with pytest.raises(OAuthError) as refused:
        check_redirect_uri(uri)
    assert (refused.value.status, refused.value.error, refused.value.description) == (
        400,
        "invalid_redirect_uri",
        description,
    )


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://claude.ai/api/mcp/auth_callback", "claude.ai"),
        ("https://App.Example.com:8443/cb", "app.example.com:8443"),
        ("http://127.0.0.1:33418", "127.0.0.1:33418"),
        ("http://[::1]:5000/cb", "[::1]:5000"),
        ("http://localhost:6274/oauth/callback", "localhost:6274"),
        ("com.example.app:/oauth2redirect", "com.example.app:"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", "cursor:"),
    ],
)
def test_an_accepted_redirect_uri_shows_the_host_a_browser_goes_to(uri: str, shown: str) -> None:
    assert check_redirect_uri(uri) == uri
    assert destination(uri) == shown


def test_the_consent_page_names_the_host_a_browser_goes_to() -> None:
    ask = ConsentRequest(
        client_name="Some client",
        client_id="abc",
        metadata_url=None,
        redirect_uri="https://App.Example.com:8443/cb",
        resource="https://mcp.example.com/mcp",
        scopes=("mcp/invoke",),
        access_token_minutes=60,
        refresh_token_days=30,
        approval_days=30,
    )
    body, _ = consent_page(ask, "https://mcp.example.com/oauth2/consent", "q=1", "t", "https://login.example.com")
    assert '<dd id="redirect-host">app.example.com:8443</dd>' in body
