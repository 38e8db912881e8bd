"""The bridge's cleanup (every 15 minutes): remove clients nobody uses, and keep the slot count true.

For each registration unused for `unused_client_days`, or that never completed a token exchange
`unexchanged_client_minutes` after registering:
1. claim it (a conditional write: skipped if it was used since it was read);
2. delete its Cognito app client (already gone counts as deleted): a client that still works
   never outlives its registration;
3. delete the registration, then give its slot back.
A failure at any step is logged and counted and the run goes on with the next; the claimed
registration is found again by the next run, which finishes it. Then the run recounts the slots
from the registrations and sets the counter to that (if no registration started meanwhile), so a
counter that drifted (a crash between two steps, an old leak) is right again within one run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from .aws import BridgeUnavailable, ConditionFailed, RegistrationStore, UserPoolClients

log = logging.getLogger(__name__)


@dataclass
class Cleanup:
    store: RegistrationStore
    clients: UserPoolClients
    unused_client_days: int
    unexchanged_client_minutes: int
    # The RegisteredClients metric, written with the recounted slots.
    report_slots: Callable[[int], None]

    def run(self, now: int) -> dict[str, int]:
        cutoff = now - self.unused_client_days * 86_400
        unexchanged = now - self.unexchanged_client_minutes * 60
        removed = kept = failed = 0
        for registration in list(self.store.unused_since(cutoff, unexchanged)):
            try:
                self.store.claim_for_removal(registration)
                if registration.cognito_client_id:  # a registration nobody approved has no app client, no slot
                    self.clients.delete(registration.cognito_client_id)
                self.store.forget(registration)
            except ConditionFailed:
                kept += 1  # used since it was listed (or finished by another run)
                continue
            except Exception:
                log.exception(
                    "cleanup: could not remove client %s (%s)", registration.cognito_client_id, registration.key
                )
                failed += 1
                continue
            if registration.cognito_client_id:
                with contextlib.suppress(BridgeUnavailable):  # if not, the recount below sets it right
                    self.store.release_slot()
            removed += 1
        used = self._recount()
        if used is not None:
            self.report_slots(used)
        log.info("cleanup: %d unused clients removed, %d in use again, %d failed", removed, kept, failed)
        return {"removed": removed, "keptInUse": kept, "failed": failed}

    def _recount(self) -> int | None:
        """The slots used, recounted from the registrations; the counter is set to it unless a
        registration reserved or gave back a slot meanwhile (then the next run sets it)."""
        try:
            seen = self.store.slots_used()
            count = self.store.count_registrations()
            if count != seen:
                self.store.set_slots_used(count, seen)
                log.warning("cleanup: the slot counter said %d for %d registrations: set to %d", seen, count, count)
        except ConditionFailed:
            return None
        except BridgeUnavailable:
            log.exception("cleanup: could not recount the slots")
            return None
        return count
