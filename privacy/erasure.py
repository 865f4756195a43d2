"""Erasure by crypto-shredding: destroy the subjects' keys, and with them every value.

`plan(refs)` says what an erasure would destroy and what stays, naming no personal data;
`shred(refs)` does it, once: a second call destroys nothing and returns the first outcome.

An app above this one that keeps raw copies of a trace's data outside its stored file (the
OTLP receiver's bodies and span rows) registers them (:func:`raw_copies_register`, from its
``AppConfig.ready``): the plan then says what of them an erasure removes, and the erasure
removes it in its own transaction. This app imports no such app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.core.cache import caches
from django.db import transaction
from django.utils import timezone

from privacy.models import ErasureReceipt, PersonalValue, Subject, SubjectKey

log = logging.getLogger("privacy")

#: what an erasure leaves in place (the plan and the outcome say so)
STAYS = (
    "every trace row, its stored file's SHA-256, hashes, signatures and verdicts",
    "the governance ledger and its chain (it names subjects by opaque ref only)",
    "the stored files' bytes other than the erased values (each reads as [erased]___)",
    "the subject's opaque ref and where its fields were (trace, location, path), no values",
    "other subjects' values, each under its own key",
)


@dataclass(frozen=True)
class RawCopies:
    """Copies of stored traces' data an app keeps outside their stored files. Each callable
    takes the primary keys of the traces (``replay.Trace``) holding the erased subjects'
    values and returns what it would remove (``planned``) or removed (``erase``, run inside
    the erasure's transaction, with the erasure's time) as a JSON object naming no personal
    data, with a ``stays`` list of what it leaves; None when it holds nothing of them."""

    name: str
    planned: Callable[[list[int]], dict[str, Any] | None]
    erase: Callable[[list[int], datetime], dict[str, Any] | None]


_RAW_COPIES: dict[str, RawCopies] = {}


def raw_copies_register(copies: RawCopies) -> None:
    """Make erasures reach ``copies`` too (registered once by name: registering again
    replaces it)."""
    _RAW_COPIES[copies.name] = copies


def _raw_copies(trace_pks: list[int], at: datetime | None) -> list[dict[str, Any]]:
    found = []
    for copies in _RAW_COPIES.values():
        done = copies.planned(trace_pks) if at is None else copies.erase(trace_pks, at)
        if done:
            found.append({"copies": copies.name, **done})
    return found


@dataclass
class ErasurePlan:
    subjects: list[str]
    unknown: list[str]
    already_erased: list[str]
    traces: list[dict[str, Any]]
    fields: int
    keys: int
    #: what registered raw copies (:class:`RawCopies`) of these traces the erasure removes
    raw_copies: list[dict[str, Any]] = field(default_factory=list)
    stays: list[str] = field(default_factory=lambda: list(STAYS))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ErasureOutcome:
    receipt: int
    subjects: list[str]
    unknown: list[str]
    traces: list[dict[str, Any]]
    fields: int
    keys_destroyed: int
    erased_at: str
    first_time: bool = True
    #: what the registered raw copies removed, and what of them stays
    raw_copies: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _traces(subject_ids: Sequence[int]) -> list[dict[str, Any]]:
    per: dict[int, dict[str, Any]] = {}
    for v in (
        PersonalValue.objects.filter(subject_id__in=list(subject_ids))
        .select_related("trace__blob")
        .order_by("trace_id", "start")
    ):
        entry = per.setdefault(
            v.trace_id,
            {
                "trace_id": v.trace.trace_id,
                "file_sha256": v.trace.blob.sha256,
                "format": v.trace.format,
                "fields": [],
            },
        )
        entry["fields"].append(f"{v.location} {v.path}")
    return list(per.values())


def _trace_pks(subject_ids: Sequence[int]) -> list[int]:
    return sorted(
        set(
            PersonalValue.objects.filter(subject_id__in=list(subject_ids)).values_list(
                "trace_id", flat=True
            )
        )
    )


def plan(refs: Sequence[str]) -> ErasurePlan:
    wanted = list(dict.fromkeys(refs))
    rows = {s.ref: s for s in Subject.objects.filter(ref__in=wanted)}
    live = [rows[r] for r in wanted if r in rows and rows[r].erased_at is None]
    traces = _traces([s.pk for s in live])
    return ErasurePlan(
        subjects=[s.ref for s in live],
        unknown=[r for r in wanted if r not in rows],
        already_erased=[r for r in wanted if r in rows and rows[r].erased_at is not None],
        traces=traces,
        fields=sum(len(t["fields"]) for t in traces),
        keys=len(live),
        raw_copies=_raw_copies(_trace_pks([s.pk for s in live]), None) if live else [],
    )


def _first_receipt(rows: Sequence[Subject]) -> ErasureReceipt | None:
    ids = [s.erasure_id for s in rows if s.erasure_id is not None]
    return ErasureReceipt.objects.filter(pk__in=ids).order_by("pk").first()


def purge_caches() -> None:
    """Every cache that may hold a rendered value (pages, exports)."""
    for alias in caches:
        caches[alias].clear()


@transaction.atomic
def shred(refs: Sequence[str]) -> ErasureOutcome:
    """Destroy the keys (and encrypted identifiers and values) of the subjects `refs` name.

    Idempotent: when none of them is left to erase, nothing is destroyed and the first
    erasure's outcome comes back with ``first_time=False``."""
    wanted = list(dict.fromkeys(refs))
    rows = list(Subject.objects.select_for_update().filter(ref__in=wanted))
    known = {s.ref for s in rows}
    live = [s for s in rows if s.erased_at is None]
    if not live and rows:
        first = _first_receipt(rows)
        if first is not None:
            return ErasureOutcome(**{**first.outcome, "first_time": False})
    now = timezone.now()
    traces = _traces([s.pk for s in live])
    ids = [s.pk for s in live]
    PersonalValue.objects.filter(subject_id__in=ids).update(nonce=None, ciphertext=None)
    SubjectKey.objects.filter(subject__in=ids).update(wrapped=None, destroyed_at=now)
    Subject.objects.filter(pk__in=ids).update(
        lookup_digest=None, identifier_nonce=None, identifier_ciphertext=None, erased_at=now
    )
    raw = _raw_copies(_trace_pks(ids), now) if ids else []
    outcome = ErasureOutcome(
        receipt=0,
        subjects=[s.ref for s in live],
        unknown=[r for r in wanted if r not in known],
        traces=traces,
        fields=sum(len(t["fields"]) for t in traces),
        keys_destroyed=len(live),
        erased_at=now.isoformat(),
        raw_copies=raw,
    )
    receipt = ErasureReceipt.objects.create(refs=outcome.subjects, outcome={})
    outcome.receipt = receipt.pk
    ErasureReceipt.objects.filter(pk=receipt.pk).update(outcome=outcome.as_dict())
    Subject.objects.filter(pk__in=ids).update(erasure=receipt)
    transaction.on_commit(purge_caches)
    log.info(
        "privacy: erasure receipt %s: %d subjects, %d traces, %d fields, %d keys destroyed",
        receipt.pk,
        len(live),
        len(traces),
        outcome.fields,
        outcome.keys_destroyed,
    )
    return outcome
