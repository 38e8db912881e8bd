"""How much one source, and one metadata-document domain, may register: token buckets in the table.

- Per source (an IPv4 address, or an IPv6 address's /64): every dynamic registration and every
  metadata document fetch, failed ones included, takes a token from a bucket of
  `registration_burst` tokens that refills at `registrations_per_hour`. An office behind one NAT
  onboards its people at once (the burst); a flood from one address is held to the hourly rate.
- Per registrable domain (eTLD+1 from the whole Public Suffix List, its private section included, as
  bundled by the pinned `publicsuffixlist`): every new client from a metadata document takes a token
  from a bucket of `registrations_per_host_per_hour` refilling at that rate. Wildcard DNS gives an
  attacker every name under its domain, never another registrable domain. Under a suffix of the
  private section (`github.io`, `vercel.app`, `ngrok-free.app`) each site is a domain of its own, as
  browsers treat it: one party's flood on `attacker.github.io` leaves `someone.github.io` its bucket.
  A party that mints such sites for free is still held by its source's bucket, which every metadata
  fetch takes from.

- Per signed-in person: every client a person approves for the first time takes a token from a bucket of
  `clients_per_person_per_hour` (checked at the callback, once the person is known).

A refusal is 429 `temporarily_unavailable` with `Retry-After`: the seconds until a token is back.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from .aws import RegistrationStore
from .web import OAuthError

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

    from .settings import BridgeSettings

SOURCE_BUCKET: Final = "source#"
DOMAIN_BUCKET: Final = "host#"
PERSON_BUCKET: Final = "person#"


def source_key(address: str) -> str:
    """What one source is for the limits: an IPv4 address, or an IPv6 address's /64 (one subscriber's)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip)


@lru_cache(maxsize=1)
def _suffixes() -> PublicSuffixList:
    # Imported and parsed (about 0.1 s) only on the first registration from a metadata document in a
    # container: the bridge's other paths never pay for it.
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()  # ICANN and private sections


def registrable_domain(host: str) -> str:
    """The host's registrable domain (eTLD+1): `a.b.example.co.uk` -> `example.co.uk`. An IP address,
    or a host that is itself a public suffix, is its own."""
    name = host.strip().rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        pass
    return _suffixes().privatesuffix(name) or name


class RegistrationLimits:
    def __init__(self, store: RegistrationStore, settings: BridgeSettings) -> None:
        self.store = store
        self.settings = settings

    def take_source(self, source_ip: str) -> None:
        """One registration or metadata fetch from this source; 429 past its bucket."""
        burst, per_hour = self.settings.registration_burst, self.settings.registrations_per_hour
        wait = self.store.take_token(SOURCE_BUCKET + source_key(source_ip), burst, per_hour)
        if wait:
            raise _too_many(
                f"too many registrations from one address: a burst of {burst}, then {per_hour} an hour", wait
            )

    def take_domain(self, metadata_host: str) -> None:
        """One new client from a metadata document on this host's registrable domain; 429 past its bucket."""
        domain = registrable_domain(metadata_host)
        per_hour = self.settings.registrations_per_host_per_hour
        wait = self.store.take_token(DOMAIN_BUCKET + domain, per_hour, per_hour)
        if wait:
            raise _too_many(f"at most {per_hour} new clients per hour from metadata documents on {domain}", wait)

    def take_person(self, subject: str) -> None:
        """One more client approved by this signed-in person; 429 past their bucket."""
        per_hour = self.settings.clients_per_person_per_hour
        wait = self.store.take_token(PERSON_BUCKET + subject, per_hour, per_hour)
        if wait:
            raise _too_many(f"at most {per_hour} new clients per hour for one person", wait)


def _too_many(description: str, wait: int) -> OAuthError:
    return OAuthError(429, "temporarily_unavailable", description, {"retry-after": str(wait)})
