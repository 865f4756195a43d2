"""Reads of the OTLP receiver: the traces still open (receiving spans) and one open trace's
spans as records, for the page that shows a trace before it is sealed. Reads only."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from otel.models import OtelSpan, OtelTrace

#: the spans an open trace's page reads at most (its waterfall draws fewer still)
MAX_OPEN_SPANS = 5000


def otel_traces_open() -> QuerySet[OtelTrace]:
    """The traces still receiving spans, the most recently active first."""
    return OtelTrace.objects.filter(open=True).order_by("-last_span_at", "-id")


def otel_trace(trace_id: str) -> OtelTrace | None:
    return OtelTrace.objects.filter(trace_id=trace_id).select_related("sealed_trace__blob").first()


def otel_span_records(trace_id: str, limit: int = MAX_OPEN_SPANS) -> list[dict[str, Any]]:
    """An open trace's spans as the record holds them (the first copy of each span id), in
    start order, at most ``limit``."""
    seen: set[str] = set()
    records = []
    rows = (
        OtelSpan.objects.filter(trace_id=trace_id)
        .order_by("start_ns", "span_id", "pk")
        .values_list("span_id", "record")
    )
    for span_id, record in rows[: limit * 2]:
        if span_id in seen:
            continue
        seen.add(span_id)
        records.append(record)
        if len(records) >= limit:
            break
    return records
