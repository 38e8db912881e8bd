"""The bridge's cleanup (every 15 minutes): remove clients nobody uses, and what earlier versions left.

Registrations are records of the bridge's only (no Cognito resource, no slot). For each one unused for
`unused_client_days`, or that never completed a token exchange `unexchanged_client_minutes` after
registering: claim it (a conditional write: skipped if it was used since it was read), then delete it.

Earlier versions made a Cognito app client per MCP client (its secret in the registration), one for the
approvals page, and a slot counter. Each run deletes those app clients and strips them from the
registrations, which stay (their MCP clients keep signing in and refreshing through the bridge's own app
client); an app client of the oldest versions, which lists the MCP client's redirect URIs, goes with its
registration. A failure is logged and counted and the next run finishes it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from .aws import COUNTER_KEY, ConditionFailed, RegistrationStore, UserPoolClients
from .grants import CONSOLE_CLIENT, LEGACY_SIGNING_KEY, GrantStore

log = logging.getLogger(__name__)


@dataclass
class Cleanup:
    store: RegistrationStore
    clients: UserPoolClients
    grants: GrantStore
    unused_client_days: int
    unexchanged_client_minutes: int

    def run(self, now: int) -> dict[str, int]:
        cutoff = now - self.unused_client_days * 86_400
        unexchanged = now - self.unexchanged_client_minutes * 60
        removed = kept = failed = 0
        for registration in list(self.store.unused_since(cutoff, unexchanged)):
            try:
                self.store.claim_for_removal(registration)
                if registration.cognito_client_id:  # an earlier version's app client goes first
                    self.clients.delete(registration.cognito_client_id)
                self.store.forget(registration)
            except ConditionFailed:
                kept += 1  # used since it was listed (or finished by another run)
                continue
            except Exception:
                log.exception("cleanup: could not remove client %s", registration.key)
                failed += 1
                continue
            removed += 1
        failed += self._earlier_versions()
        log.info("cleanup: %d unused clients removed, %d in use again, %d failed", removed, kept, failed)
        return {"removed": removed, "keptInUse": kept, "failed": failed}

    def _earlier_versions(self) -> int:
        failed = 0
        for registration in list(self.store.with_app_client()):
            if registration.legacy:
                continue  # removed whole above, once claimed
            try:
                self.clients.delete(registration.cognito_client_id)
                self.store.drop_app_client(registration)
            except ConditionFailed:
                continue
            except Exception:
                log.exception("cleanup: could not remove the app client of %s", registration.key)
                failed += 1
        try:
            console = self.grants.console_client()
            if console is not None:
                self.clients.delete(console[0])
                self.store.remove_item(CONSOLE_CLIENT)
            self.store.remove_item(COUNTER_KEY)
            if self.grants.sealer is not None and self.grants.signing_keys():  # sealed now: the clear one goes
                self.store.remove_item(LEGACY_SIGNING_KEY)
            failed += self.grants.scrub_upstream_tokens()
        except Exception:
            log.exception("cleanup: could not remove what an earlier version left")
            failed += 1
        return failed
