"""DSR settings, read at call time with their documented defaults.

* ``DSR_APPROVAL_BY`` (``"admin"``): who approves a bundle's release or an erasure. ``"admin"``:
  one admin's signature; ``"council"``: a council quorum (``GOVERNANCE_COUNCIL_QUORUM``).
  Never the person who opened the request.
* ``DSR_DUE_MONTHS`` (1): a new request's default due date, in calendar months from today.
"""

from __future__ import annotations

import calendar
from datetime import date

from django.conf import settings

from core.ledger import signing
from governance import conf as gov_conf

APPROVAL_CHOICES = (signing.ROLE_ADMIN, signing.ROLE_COUNCIL)


def approval_by() -> str:
    """The capacity an approval must be signed in: ``admin`` or ``council``."""
    value = str(getattr(settings, "DSR_APPROVAL_BY", signing.ROLE_ADMIN)).strip().lower()
    if value not in APPROVAL_CHOICES:
        raise ValueError(f"DSR_APPROVAL_BY must be one of {APPROVAL_CHOICES}, not {value!r}")
    return value


def approvals_needed() -> int:
    """How many distinct signatures in that capacity complete an approval."""
    return gov_conf.council_quorum() if approval_by() == signing.ROLE_COUNCIL else 1


def due_months() -> int:
    return max(1, int(getattr(settings, "DSR_DUE_MONTHS", 1)))


def add_months(day: date, months: int) -> date:
    """The same day ``months`` calendar months later, clamped to that month's last day."""
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))
