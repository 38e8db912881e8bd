"""A certificate made here, an HTTPS server on loopback that answers from a routes table, and one that
holds its client (a byte at a time, or no TLS handshake at all): for the Client ID Metadata Document
tests, which need real TLS but must never leave this machine."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# path -> (status, headers, body)
Routes = dict[str, tuple[int, dict[str, str], bytes]]


def make_certificate(folder: Path, host: str, *more_names: str) -> tuple[Path, Path]:
    """A self-signed certificate for `host` and `more_names` (wildcards allowed; its own CA): (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    names = x509.SubjectAlternativeName([x509.DNSName(name) for name in (host, *more_names)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(names, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return folder / "cert.pem", folder / "key.pem"


@contextmanager
def serve_https(tls: tuple[Path, Path]) -> Iterator[tuple[int, Routes]]:
    """(port, routes): fill `routes` with what each path answers."""
    routes: Routes = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            status, headers, body = routes.get(self.path, (404, {}, b""))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1], routes
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def serve_slowly(
    tls: tuple[Path, Path], response: Callable[[int], bytes], *, at_once: int, every: float
) -> Iterator[int]:
    """An HTTPS server on loopback that reads a request, sends the first `at_once` bytes of
    `response(its port)` and then one more byte every `every` seconds (a server dripping to hold its client); with
    `at_once` < 0 it accepts the connection and never answers the TLS handshake. It yields its port
    and stops, connections included, when the block ends."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # how often the accept loop looks at `stop`
    port = listener.getsockname()[1]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls)

    def drip(raw: socket.socket) -> None:
        with raw:
            if at_once < 0:
                stop.wait()
                return
            try:
                with context.wrap_socket(raw, server_side=True) as connection:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        chunk = connection.recv(4096)
                        if not chunk:
                            return
                        request += chunk
                    answer = response(port)
                    connection.sendall(answer[:at_once])
                    for index in range(at_once, len(answer)):
                        if stop.wait(every):
                            return
                        connection.sendall(answer[index : index + 1])
            except OSError:  # the client gave up and closed: what the tests want
                return

    def accept() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(None)
            threading.Thread(target=drip, args=(raw,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield port
    finally:
        stop.set()
        acceptor.join()
        listener.close()
