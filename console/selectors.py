"""The console's read queries: the trace list with its filters and keyset (cursor) paging.

Keyset paging on (created_at, id) walks the `trace_newest` index from the cursor on, so page
1,000 costs what page 1 costs; nothing here counts rows.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from replay.models import Trace

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


class CursorError(ValueError):
    """A cursor that was not produced by this module (or was altered)."""


@dataclass(frozen=True)
class TraceFilters:
    format: str = ""
    verdict: str = ""
    replayable: bool | None = None
    date_from: date | None = None
    date_to: date | None = None
    q: str = ""


@dataclass(frozen=True)
class TracePage:
    traces: list[Trace]
    next_cursor: str | None  # older rows
    prev_cursor: str | None  # newer rows


def cursor_encode(created_at: datetime, pk: int, direction: str) -> str:
    raw = json.dumps([direction, created_at.isoformat(), pk], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_decode(cursor: str) -> tuple[str, datetime, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        direction, stamp, pk = json.loads(raw)
        when = parse_datetime(stamp)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError) as exc:
        raise CursorError("invalid cursor") from exc
    if direction not in ("older", "newer") or when is None or type(pk) is not int:
        raise CursorError("invalid cursor")
    return direction, when, pk


# Replayable: no missing external output, and no element of required_snapshot_ids lacks a
# Snapshot row. JSON arrays are unnested per vendor; the SQL is constant (no user input).
_REPLAYABLE_SQL = {
    "sqlite": (
        "(json_array_length(replay_trace.missing_outputs) = 0 AND NOT EXISTS ("
        "SELECT 1 FROM json_each(replay_trace.required_snapshot_ids) j "
        "WHERE NOT EXISTS (SELECT 1 FROM replay_snapshot s WHERE s.snapshot_id = j.value)))"
    ),
    "postgresql": (
        "(jsonb_array_length(replay_trace.missing_outputs) = 0 AND NOT EXISTS ("
        "SELECT 1 FROM jsonb_array_elements_text(replay_trace.required_snapshot_ids) j(v) "
        "WHERE NOT EXISTS (SELECT 1 FROM replay_snapshot s WHERE s.snapshot_id = j.v)))"
    ),
}


def _replayable_filter(qs: QuerySet[Trace], replayable: bool) -> QuerySet[Trace]:
    sql = _REPLAYABLE_SQL[connection.vendor]
    return qs.extra(where=[sql if replayable else f"NOT {sql}"])  # noqa: S610


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def trace_queryset(filters: TraceFilters) -> QuerySet[Trace]:
    qs = Trace.objects.all()
    if filters.format:
        qs = qs.filter(format=filters.format)
    if filters.verdict:
        qs = qs.filter(last_status=filters.verdict)
    if filters.date_from:
        qs = qs.filter(created_at__gte=_day_start(filters.date_from))
    if filters.date_to:
        qs = qs.filter(created_at__lt=_day_start(filters.date_to + timedelta(days=1)))
    if filters.q:
        qs = qs.filter(Q(trace_id=filters.q.lower()) | Q(job_id=filters.q))
    if filters.replayable is not None:
        qs = _replayable_filter(qs, filters.replayable)
    return qs


def trace_page(
    *, filters: TraceFilters, cursor: str | None = None, limit: int | None = None
) -> TracePage:
    """One page of traces, newest first. Raises CursorError for a cursor we did not make."""
    limit = max(1, min(limit or PAGE_SIZE, MAX_PAGE_SIZE))
    qs = trace_queryset(filters)
    direction = "older"
    if cursor:
        direction, when, pk = cursor_decode(cursor)
        if direction == "older":
            # The first conjunct bounds the index range; the second trims the equal stamps.
            qs = qs.filter(created_at__lte=when).filter(Q(created_at__lt=when) | Q(id__lt=pk))
        else:
            qs = qs.filter(created_at__gte=when).filter(Q(created_at__gt=when) | Q(id__gt=pk))
    if direction == "older":
        rows = list(qs.order_by("-created_at", "-id")[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        has_older, has_newer = more, bool(cursor)
    else:
        rows = list(qs.order_by("created_at", "id")[: limit + 1])
        more = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        has_older, has_newer = True, more
    next_cursor = prev_cursor = None
    if rows and has_older:
        last = rows[-1]
        next_cursor = cursor_encode(last.created_at, last.pk, "older")
    if rows and has_newer:
        first = rows[0]
        prev_cursor = cursor_encode(first.created_at, first.pk, "newer")
    traces_mark_replayable(rows)
    return TracePage(traces=rows, next_cursor=next_cursor, prev_cursor=prev_cursor)


def trace_formats() -> list[str]:
    """Formats offered by the filter: the registered ones if the registry says, else stored."""
    try:
        from replay.formats import FORMATS  # type: ignore[attr-defined]

        return sorted(FORMATS)
    except ImportError:
        return sorted(Trace.objects.values_list("format", flat=True).distinct()[:50])


def traces_mark_replayable(traces: list[Trace]) -> None:
    """Set `trace.replayable` on each trace of a page with one query for all snapshots."""
    from replay.models import Snapshot

    wanted = {sid for t in traces for sid in (t.required_snapshot_ids or [])}
    stored = set(
        Snapshot.objects.filter(snapshot_id__in=wanted).values_list("snapshot_id", flat=True)
    )
    for trace in traces:
        required = set(trace.required_snapshot_ids or [])
        trace.replayable = not trace.missing_outputs and required <= stored  # type: ignore[attr-defined]
