"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP "Client Registration").

A client whose `client_id` is an HTTPS URL publishes its metadata there. Fetching a URL a stranger
names is a server-side request forgery risk, so the fetch follows the MCP spec's rules:
- the URL: `https`, a host, a path other than `/`, no fragment, no user info, no dot segments;
- the address: the host is resolved first and every address must be public (no private, loopback,
  link-local, shared, reserved or multicast address, IPv4-mapped ones included); the connection
  goes to the address that was checked, so a second DNS answer cannot point it elsewhere;
- the exchange: TLS with the host name verified, no redirects followed, at most `MAX_BYTES` read,
  one deadline (`TIMEOUT_SECONDS`) over all of it: name resolution, connect, handshake, headers and
  body, so a slow name server or a server sending a byte at a time is cut off at the deadline;
- the document: JSON, `client_id` exactly the URL, `client_name`, `redirect_uris` that pass the
  same rules as registration, no client secret methods.
Any failure is `invalid_client` with a description; nothing is stored.
"""

from __future__ import annotations

import io
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, cast
from urllib.parse import urlsplit

from .registration import check_redirect_uris
from .web import OAuthError

MAX_BYTES: Final = 5_120  # the draft's suggested upper bound for a metadata document
TIMEOUT_SECONDS: Final = 5.0
MAX_URL_CHARS: Final = 2048

Resolver = Callable[[str, int], list[str]]


def is_metadata_url(client_id: str) -> bool:
    return client_id.startswith("https://")


def _refuse(description: str) -> OAuthError:
    return OAuthError(400, "invalid_client", description)


def check_metadata_url(url: str) -> tuple[str, int, str]:
    """(host, port, path) of an acceptable metadata document URL."""
    if len(url) > MAX_URL_CHARS:
        raise _refuse("the client_id URL is too long")
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError:
        raise _refuse("the client_id is not a valid URL") from None
    if parts.scheme != "https" or not parts.hostname:
        raise _refuse("a client_id URL must use https and name a host")
    if parts.username is not None or parts.password is not None or parts.fragment or "#" in url:
        raise _refuse("a client_id URL must have no user info and no fragment")
    segments = parts.path.split("/")
    if parts.path in ("", "/") or any(segment in (".", "..") for segment in segments):
        raise _refuse("a client_id URL needs a path, without . or .. segments")
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port, path


def _public(address: str, allow_loopback: bool) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if allow_loopback and ip.is_loopback:
        return True
    return bool(ip.is_global and not ip.is_multicast)


def resolve(host: str, port: int) -> list[str]:
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _refuse(f"the client_id host {host!r} does not resolve") from exc
    return list(dict.fromkeys(str(answer[4][0]) for answer in answers))


@dataclass(frozen=True, slots=True)
class MetadataDocument:
    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]


@dataclass
class MetadataFetcher:
    resolver: Resolver = resolve
    ssl_context: ssl.SSLContext | None = None
    # Tests serve documents from this machine; never set in a deployment.
    allow_loopback: bool = False
    timeout: float = TIMEOUT_SECONDS
    max_bytes: int = MAX_BYTES

    def fetch(self, url: str) -> MetadataDocument:
        """The document at `url`, or `invalid_client`: all of it (DNS, connect, TLS, headers, body)
        within `timeout` seconds of the call."""
        deadline = time.monotonic() + self.timeout
        host, port, path = check_metadata_url(url)
        addresses = self._resolve(host, port, deadline)
        if not addresses:
            raise _refuse(f"the client_id host {host!r} does not resolve")
        private = [a for a in addresses if not _public(a, self.allow_loopback)]
        if private:
            raise _refuse(f"the client_id host {host!r} resolves to a private address")
        body = self._get(addresses[0], host, port, path, deadline)
        return parse_document(body, url)

    def _resolve(self, host: str, port: int, deadline: float) -> list[str]:
        """The resolver's answer by the deadline. getaddrinfo cannot be interrupted, so it runs on a
        thread of its own that is left behind (it ends when the resolver gives up) if it is late."""
        answer: list[list[str] | BaseException] = []
        done = threading.Event()

        def lookup() -> None:
            try:
                answer.append(self.resolver(host, port))
            except BaseException as exc:  # handed to the caller below
                answer.append(exc)
            finally:
                done.set()

        threading.Thread(target=lookup, name="cimd-resolve", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise _refuse(f"the client_id host {host!r} did not resolve within {self.timeout:g} s")
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    def _get(self, address: str, host: str, port: int, path: str, deadline: float) -> bytes:
        import http.client

        context = self.ssl_context or ssl.create_default_context()
        timed = _DeadlineSocket(deadline)
        try:
            raw = socket.create_connection((address, port), timeout=timed.left())
            # The handshake is one operation: CPython bounds all of it by the socket's timeout.
            with context.wrap_socket(raw, server_hostname=host) as tls:
                timed.sock = tls
                connection = http.client.HTTPSConnection(host, port, context=context)
                connection.sock = cast(Any, timed)  # already connected to the checked address
                connection.request("GET", path, headers={"accept": "application/json", "host": host})
                response = connection.getresponse()
                if response.status != 200:
                    raise _refuse(f"the client_id URL answered HTTP {response.status} (redirects are not followed)")
                content_type = response.getheader("content-type", "").split(";")[0].strip().lower()
                if content_type != "application/json" and not content_type.endswith("+json"):
                    raise _refuse("the client metadata document is not application/json")
                declared = response.getheader("content-length")
                if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                    raise _refuse(f"the client metadata document is larger than {self.max_bytes} bytes")
                chunks: list[bytes] = []
                size = 0
                while size <= self.max_bytes:
                    chunk = response.read(min(1024, self.max_bytes + 1 - size))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                if size > self.max_bytes:
                    raise _refuse(f"the client metadata document is larger than {self.max_bytes} bytes")
                return b"".join(chunks)
        except OAuthError:
            raise
        except TimeoutError:
            raise _refuse(f"the client metadata document did not arrive within {self.timeout:g} s") from None
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            raise _refuse(f"the client metadata document could not be fetched ({type(exc).__name__})") from exc


class _DeadlineSocket:
    """The connected TLS socket as http.client uses it (`sendall`, `makefile`), each send and each
    read given only what is left until the deadline: a socket timeout alone bounds one read, and a
    server sending a byte at a time never lets one run out."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.sock: ssl.SSLSocket | None = None

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the fetch's deadline passed")
        return left

    def ready(self) -> ssl.SSLSocket:
        assert self.sock is not None
        self.sock.settimeout(self.left())
        return self.sock

    def sendall(self, data: bytes) -> None:
        self.ready().sendall(data)

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        return  # the TLS socket is closed by its own `with` block


class _DeadlineReader(io.RawIOBase):
    def __init__(self, owner: _DeadlineSocket) -> None:
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self.owner.ready().recv_into(buffer)


def parse_document(body: bytes, url: str) -> MetadataDocument:
    try:
        document: Any = json.loads(body)
    except (ValueError, RecursionError):
        raise _refuse("the client metadata document is not valid JSON") from None
    if not isinstance(document, dict):
        raise _refuse("the client metadata document must be a JSON object")
    if document.get("client_id") != url:
        raise _refuse("the client metadata document's client_id is not its URL")
    name = document.get("client_name")
    if not isinstance(name, str) or not name.strip() or len(name) > 128:
        raise _refuse("the client metadata document needs a client_name")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none":
        raise _refuse("a client metadata document client authenticates with token_endpoint_auth_method none")
    grant_types = document.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not set(grant_types) <= {"authorization_code", "refresh_token"}:
        raise _refuse("the client metadata document's grant_types may only be authorization_code and refresh_token")
    try:
        uris = check_redirect_uris(document.get("redirect_uris"), "invalid_client")
    except OAuthError as error:
        raise _refuse(f"the client metadata document's {error.description}") from None
    return MetadataDocument(url, name.strip(), uris)
