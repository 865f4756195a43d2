"""An erasure reaches the OTLP receiver's raw copies of a trace.

The sealed trace goes through privacy like every stored file (its personal values cut out at
rest, erased by destroying their subject's key). The receiver also keeps what it received:
each export body's bytes (:class:`OtlpBody`) and each span's record (:class:`OtelSpan`). When
``privacy.erasure.shred`` erases a subject whose values are in an ``otel-genai`` trace, every
body that carried spans of that trace has its bytes deleted from the blob store and every span
row of the trace has its record replaced by :data:`SPAN_TOMBSTONE`, in the erasure's
transaction: each the one update the database lets through on these append-only tables
(``erased_at`` set once; ``replay.dbguards.erasure_only_sql``). The rows, their digests and
the ledger's events stay. Registered with privacy in ``OtelConfig.ready``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files.storage import storages
from django.db import transaction
from django.db.models import QuerySet

from core.formats.otel.record import FORMAT
from otel.models import SPAN_TOMBSTONE, ErasedBodyBytes, OtelSpan, OtlpBody
from replay.models import Trace
from replay.storage import blob_storage

log = logging.getLogger("otel")

NAME = "otlp"
#: what an erasure of an OTel trace's raw copies leaves (its plan and outcome say so)
STAYS = (
    "each OTLP body's row: its SHA-256, size, content type and span count, and the "
    "OTLP_RECEIVED ledger event naming that digest",
    "each span row's trace and span ids, digest, name and times (a digest can confirm a guess "
    "of the erased record)",
    "the span rows of other traces the deleted bodies also carried",
    "the sealed versions of the trace, their personal values erased as in every stored file",
)
BODY_ERASED = (
    "OTLP body {sha256} was erased on {when} (a personal-data erasure): its bytes are no "
    "longer kept"
)


class BodyErased(Exception):
    """An OTLP body whose bytes an erasure deleted."""


def body_refusal(body: OtlpBody) -> BodyErased | None:
    """The error to raise instead of reading an erased body's bytes, or None."""
    if body.erased_at is None:
        return None
    when = body.erased_at.isoformat(timespec="seconds")
    return BodyErased(BODY_ERASED.format(sha256=body.sha256, when=when))


def live_spans(trace_id: str) -> QuerySet[OtelSpan]:
    """A trace's span rows that hold their record (an erased one holds a tombstone): what an
    assembly reads. An erased span cannot be rebuilt; a version sealed after the erasure
    holds the trace's other spans."""
    return OtelSpan.objects.filter(trace_id=trace_id, erased_at__isnull=True)


def _scope(trace_pks: list[int]) -> tuple[list[str], QuerySet[OtelSpan], QuerySet[OtlpBody]]:
    trace_ids = sorted(
        set(
            Trace.objects.filter(pk__in=trace_pks, format=FORMAT).values_list("trace_id", flat=True)
        )
    )
    spans = OtelSpan.objects.filter(trace_id__in=trace_ids)
    bodies = OtlpBody.objects.filter(pk__in=spans.values("body_id"))
    return trace_ids, spans, bodies


def _others(trace_ids: list[str], bodies: QuerySet[OtlpBody]) -> int:
    """How many other traces the bodies also carried spans of."""
    return (
        OtelSpan.objects.filter(body__in=bodies)
        .exclude(trace_id__in=trace_ids)
        .values("trace_id")
        .distinct()
        .count()
    )


def otel_erasure_plan(trace_pks: list[int]) -> dict[str, Any] | None:
    """What erasing these traces' subjects removes of the receiver's raw copies: the OTel
    traces' ids, the bodies whose bytes are deleted (by digest), how many span rows are
    tombstoned; None when it holds none of them (or none still to remove)."""
    trace_ids, spans, bodies = _scope(trace_pks)
    if not trace_ids:
        return None
    live = bodies.filter(erased_at__isnull=True)
    shas = sorted(live.values_list("sha256", flat=True))
    count = spans.filter(erased_at__isnull=True).count()
    if not shas and not count:
        return None
    return {
        "trace_ids": trace_ids,
        "bodies": shas,
        "spans": count,
        "other_traces": _others(trace_ids, live),
        "stays": list(STAYS),
    }


def otel_erase(trace_pks: list[int], at: datetime) -> dict[str, Any] | None:
    """Remove the receiver's raw copies of these traces (inside the erasure's transaction):
    each span row's record becomes the tombstone and each body is marked erased, then, once
    the transaction commits, the bodies' bytes are deleted from the blob store (a store that
    refuses leaves them to :func:`otlp_erased_content_sweep`). What was removed, or None."""
    planned = otel_erasure_plan(trace_pks)
    if planned is None:
        return None
    trace_ids, spans, _bodies = _scope(trace_pks)
    # locked in primary-key order: two erasures of traces sharing a body never deadlock
    bodies = list(
        OtlpBody.objects.select_for_update()
        .filter(sha256__in=planned["bodies"], erased_at__isnull=True)
        .order_by("pk")
    )
    spans_erased = spans.filter(erased_at__isnull=True).update(record=SPAN_TOMBSTONE, erased_at=at)
    OtlpBody.objects.filter(pk__in=[b.pk for b in bodies], erased_at__isnull=True).update(
        erased_at=at
    )
    # the bytes are deleted once the erasure commits (never before: a rollback keeps them);
    # until then, and if the store refuses, a row says they are still to delete
    pending = ErasedBodyBytes.objects.bulk_create(
        [ErasedBodyBytes(body=b, storage_name=b.storage_name) for b in bodies]
    )
    transaction.on_commit(lambda: _contents_remove(pending))
    log.info(
        "otel: erased %d span records and %d bodies of traces %s",
        spans_erased,
        len(bodies),
        ", ".join(trace_ids),
    )
    return {
        "trace_ids": trace_ids,
        "bodies": sorted(b.sha256 for b in bodies),
        "spans": spans_erased,
        "other_traces": planned["other_traces"],
        "stays": list(STAYS),
    }


def _store() -> Any:
    # the identity that may delete (the worker's), as retention deletes expired files
    return storages["blobs_retention"] if "blobs_retention" in settings.STORAGES else blob_storage()


def _content_remove(pending: ErasedBodyBytes) -> bool:
    """Delete one erased body's bytes (and its row saying they are still to delete); True
    when they were deleted or already gone. A store that refuses (or cannot be reached)
    leaves both for :func:`otlp_erased_content_sweep` (logged)."""
    storage = _store()
    try:
        if storage.exists(pending.storage_name):
            storage.delete(pending.storage_name)
    except (OSError, ClientError, BotoCoreError):
        log.warning(
            "erased OTLP body %s not deleted: `manage.py otel sweep` retries",
            pending.storage_name,
        )
        return False
    ErasedBodyBytes.objects.filter(pk=pending.pk).delete()
    return True


def _contents_remove(pending: list[ErasedBodyBytes]) -> int:
    return sum(_content_remove(row) for row in pending)


def otlp_erased_content_sweep() -> int:
    """Delete the bytes of every erased body still to delete (the store refused, or the
    process ended between the erasure's commit and the deletion): one query when there is
    none, so it may run with every sweep. How many were deleted."""
    return _contents_remove(list(ErasedBodyBytes.objects.order_by("pk")))


def register() -> None:
    """Make ``privacy.erasure`` reach these raw copies (from ``OtelConfig.ready``), when
    the privacy app is installed (without it nothing is erased)."""
    from django.apps import apps

    if not apps.is_installed("privacy"):
        return
    from privacy.erasure import RawCopies, raw_copies_register

    raw_copies_register(RawCopies(name=NAME, planned=otel_erasure_plan, erase=otel_erase))
