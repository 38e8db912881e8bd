"""A scripted person at a browser: follows the authorization URL through the local authorization
server's sign-in and consent pages (real HTML forms, real cookies) and hands back the code the
provider redirects to the client's redirect URI with. Nothing listens on that URI: the redirect is
read from the Location header, as a browser would hand it to a native client."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
from mcp.shared.auth import AuthorizationCodeResult

CALLBACK = "http://127.0.0.1:53682/callback"
_ACTION = re.compile(r'<form method="post" action="([^"]+)"')


@dataclass
class BrowserSignIn:
    username: str
    password: str
    redirect_uri: str = CALLBACK
    sign_ins: int = 0  # how many times the person was sent to sign in
    pages: list[str] = field(default_factory=list)  # the pages they saw, by title
    redirect: AuthorizationCodeResult | None = None
    location: str | None = None  # where the provider sent the browser back to, in full
    errors: list[dict[str, list[str]]] = field(default_factory=list)

    async def open(self, authorization_url: str) -> None:
        """The client's redirect handler: the person opens the URL and goes through the pages."""
        self.sign_ins += 1
        self.redirect = None
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            response = await browser.get(authorization_url)
            for _ in range(20):
                if response.status_code in (302, 303):
                    location = urljoin(str(response.url), response.headers["location"])
                    if location.startswith(self.redirect_uri):
                        self.location = location
                        params = parse_qs(urlsplit(location).query)
                        if "error" in params:
                            self.errors.append(params)
                            return
                        self.redirect = AuthorizationCodeResult(
                            code=params["code"][0],
                            state=params.get("state", [None])[0],
                            iss=params.get("iss", [None])[0],
                        )
                        return
                    response = await browser.get(location)
                    continue
                html = response.text
                title = re.search(r"<title>([^<]*)</title>", html)
                self.pages.append(title.group(1) if title else str(response.status_code))
                action = _ACTION.search(html)
                if response.status_code != 200 or action is None:
                    raise AssertionError(f"unexpected page {response.status_code}: {html[:500]}")
                form = {"username": self.username, "password": self.password} if 'name="password"' in html else {}
                response = await browser.post(urljoin(str(response.url), action.group(1)), data=form)
        raise AssertionError("the authorization server never redirected back")

    async def callback(self) -> AuthorizationCodeResult:
        """The client's callback handler: what the redirect carried."""
        assert self.redirect is not None, f"no code came back: {self.errors}"
        return self.redirect
