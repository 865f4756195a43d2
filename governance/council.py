"""The quorum rule, pure: given the signed votes recorded on one request, what is decided.

A force-continue needs ``admins_required`` approvals in the admin role (1) AND
``council_required`` approvals in the council role (``GOVERNANCE_COUNCIL_QUORUM``, default
2), each from a distinct person with a distinct key. ``deny_threshold`` signed denials
(``GOVERNANCE_DENY_THRESHOLD``, default 1: fail closed) reject the request, and rejection
wins over approval when both are reached by the same vote. A halt clear is the same rule with
``admins_required=0``.

The services refuse a second vote by one person or one key before it is recorded; the tally
still counts people and keys, not rows, so a duplicate that slipped in could never tip it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from core.ledger.signing import APPROVE, DENY, ROLE_ADMIN, ROLE_COUNCIL

PENDING: Final = "pending"
APPROVED: Final = "approved"
REJECTED: Final = "rejected"


@dataclass(frozen=True, slots=True)
class Vote:
    person: int
    key_id: str
    role: str
    decision: str


@dataclass(frozen=True, slots=True)
class Tally:
    state: str
    admins: int
    council: int
    denials: int
    admins_required: int
    council_required: int
    deny_threshold: int

    @property
    def missing(self) -> str:
        """What is still needed, in words (for pages and the CLI)."""
        parts = []
        if self.admins < self.admins_required:
            parts.append(f"{self.admins_required - self.admins} admin approval(s)")
        if self.council < self.council_required:
            parts.append(f"{self.council_required - self.council} council approval(s)")
        return " and ".join(parts) or "nothing"


def tally(
    votes: Iterable[Vote], *, admins_required: int, council_required: int, deny_threshold: int
) -> Tally:
    seen_people: set[int] = set()
    seen_keys: set[str] = set()
    admins = council = denials = 0
    for vote in votes:
        if vote.person in seen_people or vote.key_id in seen_keys:
            continue
        seen_people.add(vote.person)
        seen_keys.add(vote.key_id)
        if vote.decision == DENY:
            denials += 1
        elif vote.decision == APPROVE and vote.role == ROLE_ADMIN:
            admins += 1
        elif vote.decision == APPROVE and vote.role == ROLE_COUNCIL:
            council += 1
    if denials >= deny_threshold:
        state = REJECTED
    elif admins >= admins_required and council >= council_required:
        state = APPROVED
    else:
        state = PENDING
    return Tally(state, admins, council, denials, admins_required, council_required, deny_threshold)
