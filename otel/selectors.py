"""Reads of the OTLP receiver: the traces still open (receiving spans) and one open trace's
spans as records, for the page that shows a trace before it is sealed; and the stored traces'
facts the trace list filters by (``OtelTraceFacts``). Reads only."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet

from core.formats.otel import facts as otel_facts
from otel.models import OtelFactValue, OtelSpan, OtelTrace, OtelTraceFacts, OtelTraceValue

#: the spans an open trace's page reads at most (its waterfall draws fewer still)
MAX_OPEN_SPANS = 5000


def otel_traces_open() -> QuerySet[OtelTrace]:
    """The traces still receiving spans, the most recently active first."""
    return OtelTrace.objects.filter(open=True).order_by("-last_span_at", "-id")


def otel_trace(trace_id: str) -> OtelTrace | None:
    return OtelTrace.objects.filter(trace_id=trace_id).select_related("sealed_trace__blob").first()


def otel_span_records(trace_id: str, limit: int = MAX_OPEN_SPANS) -> list[dict[str, Any]]:
    """An open trace's spans as the record holds them (the first copy of each span id), in
    start order, at most ``limit``; without the spans an erasure tombstoned
    (:func:`otel_spans_erased` counts them)."""
    seen: set[str] = set()
    records = []
    rows = (
        OtelSpan.objects.filter(trace_id=trace_id, erased_at__isnull=True)
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


def otel_spans_erased(trace_id: str) -> int:
    """How many of a trace's span rows an erasure tombstoned (their records are gone)."""
    return OtelSpan.objects.filter(trace_id=trace_id, erased_at__isnull=False).count()


# --- the stored traces' facts, for the trace list ---------------------------------------------

#: the list's filters (``?service=`` ...), each the kind of value it looks up
FILTER_KINDS = otel_facts.KINDS
#: the kinds whose values a filter finds in any case (names people type); the others are ids
#: and model names, matched exactly
ANY_CASE = frozenset({otel_facts.SERVICE, otel_facts.AGENT})
#: the most known values of a kind the list's filter offers as a choice; more: a text field
KNOWN_MAX = 50


def otel_value_ids(kind: str, value: str) -> list[int]:
    """The ids of the rows of ``value`` of ``kind`` (``FILTER_KINDS``): at most one, or one
    per spelling for a kind in :data:`ANY_CASE` (``Weather-Agent``, ``weather-agent``). One
    query: the ``(kind, value)`` unique index, or ``(kind, UPPER(value))``."""
    if kind not in FILTER_KINDS:
        raise ValueError(f"no OpenTelemetry filter {kind!r}")
    values = OtelFactValue.objects.filter(kind=kind)
    values = values.filter(value__iexact=value) if kind in ANY_CASE else values.filter(value=value)
    return list(values.order_by("pk").values_list("pk", flat=True))


def otel_traces_q(value_ids: list[int]) -> Q:
    """The traces holding one of these values: a ``Q`` over ``replay.Trace`` (a semi-join on
    the ``(value, trace)`` unique index). Naming the ids rather than a subquery that finds
    them lets PostgreSQL's planner count their traces from the column's statistics. No id: a
    ``Q`` nothing matches (the list then runs no query)."""
    return Q(pk__in=OtelTraceValue.objects.filter(value_id__in=value_ids).values("trace_id"))


def otel_value_holds_few(value_id: int, most: int) -> bool:
    """Whether at most ``most`` traces hold this value: one query, reading at most
    ``most + 1`` entries of the ``(value, trace)`` index."""
    return OtelTraceValue.objects.filter(value_id=value_id)[: most + 1].count() <= most


#: one query for every kind's first values: each branch reads its kind's end of the
#: ``(kind, value)`` index, at most KNOWN_MAX + 1 rows (constant SQL: the kinds are ours)
_KNOWN_SQL = " UNION ALL ".join(
    f"SELECT * FROM (SELECT kind, value FROM {OtelFactValue._meta.db_table} "  # noqa: S608
    f"WHERE kind = '{kind}' ORDER BY value LIMIT {KNOWN_MAX + 1}) AS k{i}"
    for i, kind in enumerate(FILTER_KINDS)
)


def otel_known_values() -> dict[str, list[str] | None]:
    """Each filter's known values, sorted, when there are at most :data:`KNOWN_MAX` (the list
    offers them as a choice), else None (a text field); ``{}`` when no OpenTelemetry trace's
    value is stored (the list then shows no such filter). One query."""
    found: dict[str, list[str]] = {}
    with connection.cursor() as cur:
        cur.execute(_KNOWN_SQL)
        for kind, value in cur.fetchall():
            found.setdefault(kind, []).append(value)
    if not found:
        return {}
    # sorted here, not by the database's collation: the same order on every database
    return {
        kind: (sorted(values) if len(values) <= KNOWN_MAX else None)
        for kind in FILTER_KINDS
        for values in [found.get(kind, [])]
    }


def otel_facts_of(trace_pks: list[int]) -> dict[int, OtelTraceFacts]:
    """The facts of these traces (those that have some), by trace pk. One query."""
    if not trace_pks:
        return {}
    return {f.trace_id: f for f in OtelTraceFacts.objects.filter(trace_id__in=trace_pks)}
