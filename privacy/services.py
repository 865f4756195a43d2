"""Writes of the privacy app that commands call: indexing the traces stored before it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from privacy.ingest import index_trace
from privacy.models import SealedBlob


@dataclass
class Reindexed:
    traces: int  # traces looked at (not indexed before)
    indexed: int  # of those, traces that hold personal values
    values: int


def reindex(progress: Callable[[int], None] | None = None) -> Reindexed:
    """Index every stored trace not indexed yet (each in its own transaction); safe to run
    again: an indexed file is skipped."""
    from replay.models import Trace

    sealed = SealedBlob.objects.values_list("sha256", flat=True)
    pending = Trace.objects.exclude(blob__sha256__in=sealed).select_related("blob").order_by("pk")
    outcome = Reindexed(0, 0, 0)
    for trace in pending.iterator(chunk_size=200):
        with transaction.atomic():
            found = index_trace(trace)
        outcome.traces += 1
        outcome.indexed += bool(found)
        outcome.values += found
        if progress is not None:
            progress(outcome.traces)
    return outcome


def pending_count() -> int:
    from replay.models import Trace

    sealed = SealedBlob.objects.values_list("sha256", flat=True)
    return Trace.objects.exclude(blob__sha256__in=sealed).count()
