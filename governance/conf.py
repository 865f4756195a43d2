"""Governance settings, read at call time with their documented defaults.

Set them in the environment (console/settings.py reads ``GOVERNANCE_*`` variables):

* ``GOVERNANCE_COUNCIL_QUORUM`` (2): distinct council members whose approvals a
  force-continue needs besides one admin approval; also the quorum that clears a halt.
* ``GOVERNANCE_DENY_THRESHOLD`` (1): signed denials that reject a force-continue request.
* ``GOVERNANCE_FORCE_CONTINUE_HOURS`` (24): a request's default lifetime.
* ``GOVERNANCE_FORCE_CONTINUE_MAX_HOURS`` (168): the longest lifetime a requester may ask.
"""

from __future__ import annotations

from django.conf import settings


def council_quorum() -> int:
    return max(1, int(getattr(settings, "GOVERNANCE_COUNCIL_QUORUM", 2)))


def deny_threshold() -> int:
    return max(1, int(getattr(settings, "GOVERNANCE_DENY_THRESHOLD", 1)))


def force_continue_hours() -> int:
    return int(getattr(settings, "GOVERNANCE_FORCE_CONTINUE_HOURS", 24))


def force_continue_max_hours() -> int:
    return int(getattr(settings, "GOVERNANCE_FORCE_CONTINUE_MAX_HOURS", 168))
