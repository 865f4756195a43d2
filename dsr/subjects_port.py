"""The one place the DSR workflow reaches the ``privacy`` app (issue 14, D2): subject refs,
the subject index, the subjects' values, the erasure plan and the shredding.

``privacy.subjects.ref_for(identifier)`` normalises an identifier, keeps it only encrypted
under the subject's own key (plus a keyed lookup digest), and returns an opaque ref: the
workflow never stores, logs or puts an identifier in a ledger payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.apps import apps


def privacy_installed() -> bool:
    return apps.is_installed("privacy")


def ref_for(identifier: str) -> str:
    from privacy.subjects import ref_for as privacy_ref_for  # the single source of refs

    return privacy_ref_for(identifier)


def refs_for(identifiers: Iterable[str]) -> list[str]:
    """Each distinct, non-blank identifier's opaque ref, sorted (the order never leaks input)."""
    return sorted({ref_for(i) for i in identifiers if i and i.strip()})


def erasure_plan(refs: Sequence[str]) -> dict[str, Any] | None:
    """What erasing these subjects would destroy and what stays
    (``privacy.erasure.plan(refs).as_dict()``: refs, traces, fields, keys; no personal data),
    or None while the privacy app is not installed."""
    if not privacy_installed():
        return None
    from privacy.erasure import plan

    return plan(list(refs)).as_dict()


class PrivacyUnavailable(RuntimeError):
    """The privacy app (subject index, per-subject keys) is not installed here."""


def _require_privacy() -> None:
    if not privacy_installed():
        raise PrivacyUnavailable("the privacy app is not installed: no subject index, no keys")


def find(refs: Sequence[str]) -> list[Any]:
    """``privacy.index.find``: every indexed field of these subjects (Hit rows)."""
    _require_privacy()
    from privacy.index import find as privacy_find

    return privacy_find(list(refs))


def subject_values(refs: Sequence[str], *, reveal: bool) -> list[tuple[Any, str]]:
    """``privacy.values.subject_values``: "[redacted]" unless reveal, "[erased]" once erased."""
    _require_privacy()
    from privacy.values import subject_values as privacy_values

    return privacy_values(list(refs), reveal=reveal)


def shred(refs: Sequence[str]) -> Any:
    """``privacy.erasure.shred``: destroy the subjects' keys, once (an ErasureOutcome)."""
    _require_privacy()
    from privacy.erasure import shred as privacy_shred

    return privacy_shred(list(refs))


def traces_concerning(refs: Sequence[str], trace_pks: Sequence[int]) -> dict[int, set[str]]:
    """Among ``trace_pks``, those the subject index says concern one of ``refs`` -> which."""
    if not refs or not trace_pks or not privacy_installed():
        return {}
    from privacy.models import PersonalValue

    found: dict[int, set[str]] = {}
    rows = (
        PersonalValue.objects.filter(subject__ref__in=list(refs), trace_id__in=list(trace_pks))
        .values_list("trace_id", "subject__ref")
        .distinct()
    )
    for trace_pk, ref in rows:
        found.setdefault(trace_pk, set()).add(ref)
    return found
