"""The per-domain limit's key (oauth_bridge/limits.py): the registrable domain from the bundled Public
Suffix List, loaded only when a metadata document registers a client, and never fetched."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from oauth_bridge.limits import registrable_domain, source_key
from tests.support import REPO


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("client.example.com", "example.com"),
        ("a.b.c.example.com", "example.com"),
        ("Deep.Evil.CO.UK.", "evil.co.uk"),  # case and the root dot do not make another domain
        ("x.evil.co.uk", "evil.co.uk"),  # co.uk is a public suffix: not "co.uk" for everyone
        ("app.other.co.uk", "other.co.uk"),
        ("someone.github.io", "someone.github.io"),  # the list's private section: each site its own
        ("docs.someone.github.io", "someone.github.io"),
        ("my-app.vercel.app", "my-app.vercel.app"),
        ("preview.my-app.vercel.app", "my-app.vercel.app"),
        ("abc.ngrok-free.app", "abc.ngrok-free.app"),
        ("github.io", "github.io"),  # a private suffix itself is its own
        ("co.uk", "co.uk"),  # a public suffix itself is its own
        ("93.184.216.34", "93.184.216.34"),  # an address is its own, never "216.34"
        ("[2001:db8::1]", "2001:db8::1"),
        ("client.test", "client.test"),  # a name under an unlisted suffix: the last label is its suffix
    ],
)
def test_the_limit_is_keyed_on_the_registrable_domain(host: str, domain: str) -> None:
    assert registrable_domain(host) == domain


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("198.51.100.7", "198.51.100.7"),
        ("::ffff:198.51.100.7", "198.51.100.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("unknown", "unknown"),
    ],
)
def test_a_source_is_an_ipv4_address_or_an_ipv6_slash_64(address: str, key: str) -> None:
    assert source_key(address) == key


PROBE = """
import json, socket, sys
def no_network(*args, **kwargs):
    raise AssertionError("the public suffix list must not be fetched")
socket.socket.connect = socket.socket.connect_ex = no_network
socket.create_connection = socket.getaddrinfo = no_network
import oauth_bridge.handler
loaded_with_the_handler = "publicsuffixlist" in sys.modules
from oauth_bridge.limits import registrable_domain
print(json.dumps({"with_handler": loaded_with_the_handler, "domain": registrable_domain("a.b.example.co.uk")}))
"""


def test_the_bundled_list_is_read_on_first_use_only_and_nothing_is_fetched() -> None:
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{REPO / 'functions'}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"with_handler": False, "domain": "example.co.uk"}
