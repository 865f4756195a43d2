"""Governance settings, read at call time with their documented defaults.

Set them in the environment (config/settings.py reads ``GOVERNANCE_*`` variables); each
default is spelt once, here:

* ``GOVERNANCE_COUNCIL_QUORUM`` (2): distinct council members whose approvals a
  force-continue needs besides one admin approval; also the quorum that clears a halt.
* ``GOVERNANCE_DENY_THRESHOLD`` (1): signed denials that reject a force-continue request.
* ``GOVERNANCE_FORCE_CONTINUE_HOURS`` (24): a request's default lifetime.
* ``GOVERNANCE_FORCE_CONTINUE_MAX_HOURS`` (168): the longest lifetime a requester may ask.
* ``GOVERNANCE_VERIFY_INLINE_MAX`` (1000): the most events after the newest verification mark
  a request checks itself (the verification API, the checkpoint export); beyond it the
  request says how many are not yet verified and queues the background run.
* ``GOVERNANCE_VERIFICATION_STALE_SECONDS`` (900): a background verification queued, or
  running, without progress for this long is marked ``abandoned`` (its worker died) and a
  new one may start.
* ``GOVERNANCE_TLOG_ORIGIN`` (``replay-audit-console.localhost/ledger``): names this
  installation's ledger in its C2SP checkpoints (their origin line) and is the key name they
  are signed under, so the verifier key string starts with it (``governance.transparency``).
  A schema-less URL, unique to the installation; never change it once witnesses know it.
* ``GOVERNANCE_WITNESSES`` (``[]``, JSON in the environment): ``[{"url", "vkey"}]`` of the
  C2SP tlog-witnesses every new checkpoint is pushed to (``governance.witnessing``).
* ``GOVERNANCE_WITNESS_QUORUM`` (1): cosignatures a tree size needs to be "witnessed".
* ``REPLAY_RETENTION`` (none: keep everything; ``REPLAY_RETENTION_JSON`` in the environment)
  and ``REPLAY_RETENTION_HOLDS`` (``[]``): what retention deletes and what it keeps anyway
  (``governance.retention``).
"""

from __future__ import annotations

from typing import Any, Final

from django.conf import settings

DEFAULT_TLOG_ORIGIN: Final = "replay-audit-console.localhost/ledger"


def council_quorum_setting() -> Any:
    """``GOVERNANCE_COUNCIL_QUORUM`` as set, unchecked (the system check refuses a bad one)."""
    return getattr(settings, "GOVERNANCE_COUNCIL_QUORUM", 2)


def council_quorum() -> int:
    return max(1, int(council_quorum_setting()))


def deny_threshold() -> int:
    return max(1, int(getattr(settings, "GOVERNANCE_DENY_THRESHOLD", 1)))


def force_continue_hours() -> int:
    return int(getattr(settings, "GOVERNANCE_FORCE_CONTINUE_HOURS", 24))


def force_continue_max_hours() -> int:
    return int(getattr(settings, "GOVERNANCE_FORCE_CONTINUE_MAX_HOURS", 168))


def verify_inline_max() -> int:
    return max(0, int(getattr(settings, "GOVERNANCE_VERIFY_INLINE_MAX", 1000)))


def verification_stale_seconds() -> int:
    return max(1, int(getattr(settings, "GOVERNANCE_VERIFICATION_STALE_SECONDS", 900)))


def tlog_origin() -> str:
    """``GOVERNANCE_TLOG_ORIGIN``: the origin line of the ledger's checkpoints."""
    return str(getattr(settings, "GOVERNANCE_TLOG_ORIGIN", "") or DEFAULT_TLOG_ORIGIN)


def witnesses() -> list[dict[str, str]]:
    """``GOVERNANCE_WITNESSES``: the witnesses the console pushes its checkpoints to, each
    ``{"url": ..., "vkey": ...}`` (the url without ``/add-checkpoint``, the vkey the one
    ``python -m witness keygen`` printed)."""
    found = getattr(settings, "GOVERNANCE_WITNESSES", []) or []
    return [{"url": str(w["url"]).rstrip("/"), "vkey": str(w["vkey"])} for w in found]


def witness_quorum() -> int:
    """``GOVERNANCE_WITNESS_QUORUM``: cosignatures a size needs to count as witnessed."""
    return max(1, int(getattr(settings, "GOVERNANCE_WITNESS_QUORUM", 1)))


def retention() -> Any:
    """``REPLAY_RETENTION``: the retention policy as set (None keeps everything)."""
    return getattr(settings, "REPLAY_RETENTION", None)


def retention_holds() -> list[str]:
    """``REPLAY_RETENTION_HOLDS``: dotted paths of the configured holds."""
    return list(getattr(settings, "REPLAY_RETENTION_HOLDS", []) or [])
