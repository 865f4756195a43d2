"""The trace list: its filters, sorting and keyset (cursor) paging.

Keyset paging on (created_at, id) walks the `trace_newest` index from the cursor on, so page
1,000 costs what page 1 costs; nothing here counts rows.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, F, OrderBy, Q, QuerySet, Subquery, Value
from django.db.models.functions import Concat
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.formats import format_names
from core.formats.otel.record import FORMAT as OTEL_FORMAT
from otel.selectors import (
    FILTER_KINDS,
    otel_facts_of,
    otel_traces_q,
    otel_value_holds_few,
    otel_value_ids,
)
from replay.models import Snapshot, Trace

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


class CursorError(ValueError):
    """A cursor that was not produced by this module (or was altered)."""


#: what a verdict is also called in a URL: the list shows "new" as "not replayed", so a person
#: who types ``?verdict=not_replayed`` (page or API) means "new"
VERDICT_ALIASES = {"not_replayed": "new"}


@dataclass(frozen=True)
class TraceFilters:
    format: str = ""
    verdict: str = ""
    replayable: bool | None = None
    date_from: date | None = None
    date_to: date | None = None
    q: str = ""
    # OpenTelemetry traces' facts (otel.selectors.otel_value_ids): a service or agent name in
    # any case, an exact model (requested or answered), operation or conversation id
    service: str = ""
    model: str = ""
    operation: str = ""
    conversation: str = ""
    agent: str = ""

    def otel(self) -> dict[str, str]:
        """The OpenTelemetry filters given: kind -> value."""
        return {kind: value for kind in OTEL_FILTERS if (value := getattr(self, kind))}


#: the list's filters over OpenTelemetry traces' facts, each a TraceFilters field, a ``?name=``
#: of the page, its export and ``GET /api/traces/``
OTEL_FILTERS = FILTER_KINDS
#: what each OpenTelemetry filter is called on the page, and what it matches (the page's
#: hints, the API's descriptions)
OTEL_LABELS = {
    "service": ("service", "a service name (any case)"),
    "model": ("model", "a model, requested or answered (exact)"),
    "operation": ("operation", "an operation: chat, execute_tool, invoke_agent ... (exact)"),
    "conversation": ("conversation id", "a conversation id (exact)"),
    "agent": ("agent", "an agent name (any case)"),
}


@dataclass(frozen=True)
class TracePage:
    traces: list[Trace]
    next_cursor: str | None  # older rows
    prev_cursor: str | None  # newer rows


#: ``?sort=`` key (ascending; ``-key`` descending) -> the Trace column; the id breaks ties
SORTS: dict[str, str] = {
    "created_at": "created_at",
    "trace_id": "trace_id",
    "format": "format",
    "job": "job_id",
    "verdict": "last_status",
}
SORT_DEFAULT = "-created_at"
SORT_CHOICES = tuple(key for name in SORTS for key in (name, f"-{name}"))
SORT_UNKNOWN_MESSAGE = "unknown sort {sort!r}: sort by one of " + ", ".join(SORT_CHOICES)


class SortError(ValueError):
    """A ``?sort=`` key that is not in :data:`SORTS` (``-`` for descending)."""


def sort_parse(sort: str | None) -> tuple[str, bool]:
    """``"-created_at"`` -> ("created_at", True): the Trace column and whether descending."""
    sort = sort or SORT_DEFAULT
    name = sort.removeprefix("-")
    if name not in SORTS or sort.count("-") > 1:
        raise SortError(SORT_UNKNOWN_MESSAGE.format(sort=sort))
    return SORTS[name], sort.startswith("-")


def sort_ordering(sort: str | None) -> tuple[str, str]:
    """The ``order_by`` of a sort: its column, then the id the same way round."""
    column, descending = sort_parse(sort)
    sign = "-" if descending else ""
    return f"{sign}{column}", f"{sign}id"


def _cursor_value(trace: Trace, column: str) -> str:
    value = getattr(trace, column)
    return value.isoformat() if isinstance(value, datetime) else str(value)


def cursor_encode(value: datetime | str, pk: int, direction: str, sort: str = SORT_DEFAULT) -> str:
    """A page link's position: ``direction`` ("older": on in the sort's order, "newer": back),
    the sort it belongs to, and the last row's sort value and id."""
    stamp = value.isoformat() if isinstance(value, datetime) else value
    raw = json.dumps([direction, sort, stamp, pk], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_decode(cursor: str, sort: str = SORT_DEFAULT) -> tuple[str, Any, int]:
    """(direction, sort value, id); CursorError for a cursor we did not make, or made for
    another sort (its position means nothing in this order)."""
    column, _descending = sort_parse(sort)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        direction, made_for, stamp, pk = json.loads(raw)
        value = parse_datetime(stamp) if column == "created_at" else stamp
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise CursorError("invalid cursor") from exc
    if (
        direction not in ("older", "newer")
        or made_for != (sort or SORT_DEFAULT)
        or not isinstance(value, (str, datetime))
        or type(pk) is not int
    ):
        raise CursorError("invalid cursor")
    return direction, value, pk


# Replayable: no missing external output, and every required snapshot is referenced and has a
# Snapshot row (required_snapshot_ids holds {"kind", "snapshot_id"} objects; see
# replay.selectors.trace_missing, which says the same for one trace). JSON arrays are
# unnested per vendor; the SQL is constant (no user input).
_REPLAYABLE_SQL = {
    "sqlite": (
        "(json_array_length(replay_trace.missing_outputs) = 0 AND NOT EXISTS ("
        "SELECT 1 FROM json_each(replay_trace.required_snapshot_ids) j "
        "WHERE json_extract(j.value, '$.snapshot_id') IS NULL OR NOT EXISTS ("
        "SELECT 1 FROM replay_snapshot s "
        "WHERE s.snapshot_id = json_extract(j.value, '$.snapshot_id'))))"
    ),
    "postgresql": (
        "(jsonb_array_length(replay_trace.missing_outputs) = 0 AND NOT EXISTS ("
        "SELECT 1 FROM jsonb_array_elements(replay_trace.required_snapshot_ids) j(v) "
        "WHERE j.v->>'snapshot_id' IS NULL OR NOT EXISTS ("
        "SELECT 1 FROM replay_snapshot s WHERE s.snapshot_id = j.v->>'snapshot_id')))"
    ),
}


def _replayable_filter(qs: QuerySet[Trace], replayable: bool) -> QuerySet[Trace]:
    sql = _REPLAYABLE_SQL[connection.vendor]
    return qs.extra(where=[sql if replayable else f"NOT {sql}"])  # noqa: S610


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


#: the shortest part of a file name ``?q=`` looks for: a trigram's length, the least the index
#: can look up (a shorter search still finds an exact trace id, job id or user name)
FILENAME_PART_MIN = 3


def search_q(q: str) -> Q:
    """What ``?q=`` matches: an exact trace id (any case) or job id, an uploader's exact user
    name, or a part of the file name (any case) of at least :data:`FILENAME_PART_MIN`
    characters.

    Each alternative is answered by an index on PostgreSQL, so the database ORs four index
    scans instead of reading every row: ``trace_id``, ``job_id`` and ``uploaded_by_id`` are
    b-trees, and the file name's ``UPPER(filename) LIKE UPPER('%q%')`` (what ``icontains``
    writes) is the trigram index ``trace_filename_trgm`` (replay migration 0011, pg_trgm).
    The uploader is one scalar subquery (user names are unique), not a join, which no index
    could answer inside the OR. A part shorter than three characters has no trigram to look
    up, and found nearly every file anyway: it is not searched (SQLite, which has no such
    index, answers the same)."""
    uploader = get_user_model().objects.filter(username=q).values("pk")[:1]
    match = Q(trace_id=q.lower()) | Q(job_id=q) | Q(uploaded_by_id=Subquery(uploader))
    if len(q) >= FILENAME_PART_MIN:
        match |= Q(filename__icontains=q)
    return match


#: which OpenTelemetry filter leads a page in the list's time order when several are given
#: (the first of these whose value has one spelling): the kinds that usually hold fewest
#: traces first
OTEL_LEADS = ("conversation", "agent", "model", "service", "operation")
#: the most traces of a lead value (:func:`trace_page`) read and sorted for a page in another
#: order than time's: about 5 microseconds each inside PostgreSQL (7,300 in 35-40 ms on the
#: shared 2-core machine, docs/otel.md); a value of more is a tenth of a 100,000-trace list
OTEL_FEW = 10_000


def otel_value_ids_of(filters: TraceFilters) -> dict[str, list[int]]:
    """The ids of the values the OpenTelemetry filters name (one query each)."""
    return {kind: otel_value_ids(kind, value) for kind, value in filters.otel().items()}


def trace_queryset(
    filters: TraceFilters,
    *,
    otel_ids: dict[str, list[int]] | None = None,
    led_by: str | None = None,
) -> QuerySet[Trace]:
    """The traces the filters list. ``otel_ids``: the OpenTelemetry filters' value ids when
    the caller looked them up (:func:`otel_value_ids_of`); ``led_by``: the one of them the
    caller joins itself (:func:`trace_page`), left out here."""
    qs = Trace.objects.select_related("blob")
    if filters.format:
        qs = qs.filter(format=filters.format)
    if filters.verdict:
        qs = qs.filter(last_status=filters.verdict)
    if filters.date_from:
        qs = qs.filter(created_at__gte=_day_start(filters.date_from))
    if filters.date_to:
        qs = qs.filter(created_at__lt=_day_start(filters.date_to + timedelta(days=1)))
    if filters.q:
        qs = qs.filter(search_q(filters.q))
    for kind, ids in (otel_value_ids_of(filters) if otel_ids is None else otel_ids).items():
        if kind != led_by:
            qs = qs.filter(otel_traces_q(ids))
    if filters.replayable is not None:
        qs = _replayable_filter(qs, filters.replayable)
    return qs


def trace_page(
    *,
    filters: TraceFilters,
    cursor: str | None = None,
    limit: int | None = None,
    sort: str | None = None,
) -> TracePage:
    """One page of traces in ``sort``'s order (newest first by default). Raises SortError for
    an unknown sort, CursorError for a cursor we did not make or made for another sort.

    Keyset paging on (the sort's column, id): the default walks the ``trace_newest`` index;
    the other columns are indexed too (the id orders the equal values).

    Filtered by an OpenTelemetry value (the first of :data:`OTEL_LEADS` given with one
    spelling: the page's lead), the page does not walk the sort's index testing each trace
    for the value, which reads every trace before the value's first when they are far apart
    (a model used only last year, a service whose job ids sort last). In time order it walks
    the value's own traces in the ``otel_trace_value_newest`` index
    (:func:`_led_by_otel_value`); in another order, a value of at most :data:`OTEL_FEW`
    traces has them read and sorted, whatever the sort's index holds, and a value of more is
    left to the planner (the sort's index, each trace tested for the value: those traces are
    then dense)."""
    sort = sort or SORT_DEFAULT
    column, descending = sort_parse(sort)
    limit = max(1, min(limit or PAGE_SIZE, MAX_PAGE_SIZE))
    otel_ids = otel_value_ids_of(filters)
    lead = next((kind for kind in OTEL_LEADS if len(otel_ids.get(kind, ())) == 1), None)
    few = False
    if lead is not None and column != "created_at":
        few = otel_value_holds_few(otel_ids[lead][0], OTEL_FEW)
        lead = lead if few else None
    qs = trace_queryset(filters, otel_ids=otel_ids, led_by=lead)
    if lead is not None and not few:
        qs = _led_by_otel_value(qs, otel_ids[lead][0], filters)
        column = "otel_at"
    elif lead is not None:
        qs = qs.filter(otel_values__value_id=otel_ids[lead][0])
    # the list never shows the verification report, which is the largest column
    qs = qs.select_related("uploaded_by").defer("ingest_report")
    direction = "older"
    if cursor:
        direction, value, pk = cursor_decode(cursor, sort)
        # "on" is the sort's own direction; the first conjunct bounds the index range and the
        # second trims the rows equal to the cursor's value
        on = descending == (direction == "older")
        lt, lte = ("lt", "lte") if on else ("gt", "gte")
        qs = qs.filter(**{f"{column}__{lte}": value}).filter(
            Q(**{f"{column}__{lt}": value}) | Q(**{f"id__{lt}": pk})
        )
    # a few traces sorted by the column's value, not read in its index's order (the same order)
    key: Any = Concat(F(column), Value("")) if few else F(column)
    back = descending if direction == "older" else not descending
    ordered = qs.order_by(OrderBy(key, descending=back), OrderBy(F("id"), descending=back))
    rows = _sorted_few(ordered, limit + 1) if few else list(ordered[: limit + 1])
    more = len(rows) > limit
    if direction == "older":
        rows = rows[:limit]
        has_older, has_newer = more, bool(cursor)
    else:
        rows = list(reversed(rows[:limit]))
        has_older, has_newer = True, more
    next_cursor = prev_cursor = None
    if rows and has_older:
        last = rows[-1]
        next_cursor = cursor_encode(_cursor_value(last, column), last.pk, "older", sort)
    if rows and has_newer:
        first = rows[0]
        prev_cursor = cursor_encode(_cursor_value(first, column), first.pk, "newer", sort)
    traces_mark_replayable(rows)
    traces_mark_shared_ids(rows)
    return TracePage(traces=rows, next_cursor=next_cursor, prev_cursor=prev_cursor)


def _sorted_few(ordered: QuerySet[Trace], n: int) -> list[Trace]:
    """The first ``n`` traces of ``ordered`` (a lead value's few traces, sorted): their ids
    sorted first, narrow, then those rows read whole."""
    ids = list(ordered.values_list("id", flat=True)[:n])
    rows = ordered.order_by().in_bulk(ids)
    return [rows[pk] for pk in ids]


def _led_by_otel_value(
    qs: QuerySet[Trace], value_id: int, filters: TraceFilters
) -> QuerySet[Trace]:
    """``qs`` joined to one OpenTelemetry value's traces, ordered by the upload time the
    value's row keeps (``otel_at``: the trace's ``created_at``, copied when it was stored and
    never changed since), so PostgreSQL walks the ``(value, created_at DESC, trace DESC)``
    index from the cursor on and stops when the page is full: a value whose traces are all
    years old costs what a value of today's traces costs, where walking ``trace_newest``
    would read every newer trace first. The date bounds bound that walk too."""
    qs = qs.filter(otel_values__value_id=value_id).annotate(otel_at=F("otel_values__created_at"))
    if filters.date_from:
        qs = qs.filter(otel_at__gte=_day_start(filters.date_from))
    if filters.date_to:
        qs = qs.filter(otel_at__lt=_day_start(filters.date_to + timedelta(days=1)))
    return qs


def traces_mark_shared_ids(traces: list[Trace]) -> None:
    """Sets `shares_trace_id` on each trace whose trace id another stored trace also has (a
    re-run, a re-export): the list then names its file, size, digest and uploader."""
    ids = {t.trace_id for t in traces}
    shared = set(
        Trace.objects.filter(trace_id__in=ids)
        .values("trace_id")
        .annotate(copies=Count("id"))
        .filter(copies__gt=1)
        .values_list("trace_id", flat=True)
    )
    for trace in traces:
        trace.shares_trace_id = trace.trace_id in shared  # type: ignore[attr-defined]


def traces_mark_otel(traces: list[Trace]) -> None:
    """Set ``trace.otel`` on each trace of a page: its OpenTelemetry facts (services, models
    ...: ``otel.models.OtelTraceFacts``), None for another format's; one query, none for a
    page without an OpenTelemetry trace."""
    found = otel_facts_of([t.pk for t in traces if t.format == OTEL_FORMAT])
    for trace in traces:
        trace.otel = found.get(trace.pk)  # type: ignore[attr-defined]


def trace_formats() -> list[str]:
    """The formats the filter offers: every format this console reads."""
    return sorted(format_names())


def traces_mark_replayable(traces: list[Trace]) -> None:
    """Set `trace.replayable` on each trace of a page with one query for all snapshots."""
    wanted = {
        ref.get("snapshot_id")
        for t in traces
        for ref in (t.required_snapshot_ids or [])
        if ref.get("snapshot_id")
    }
    stored = set(
        Snapshot.objects.filter(snapshot_id__in=wanted).values_list("snapshot_id", flat=True)
    )
    for trace in traces:
        refs = trace.required_snapshot_ids or []
        trace.replayable = not trace.missing_outputs and all(  # type: ignore[attr-defined]
            ref.get("snapshot_id") in stored for ref in refs
        )


# --- one trace, for its page ----------------------------------------------------------------
