"""The console's read queries: the trace list with its filters and keyset (cursor) paging.

Keyset paging on (created_at, id) walks the `trace_newest` index from the cursor on, so page
1,000 costs what page 1 costs; nothing here counts rows.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from replay import traceindex
from replay.errors import ReplayError
from replay.formats import format_names, native, open_trace
from replay.models import Snapshot, Trace, TraceIndex, TraceIndexBuild
from replay.storage import blob_open

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


def trace_queryset(filters: TraceFilters) -> QuerySet[Trace]:
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
        # an exact trace or job id, an uploader's user name, or a part of the file name
        qs = qs.filter(
            Q(trace_id=filters.q.lower())
            | Q(job_id=filters.q)
            | Q(uploaded_by__username=filters.q)
            | Q(filename__icontains=filters.q)
        )
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
    the other columns are indexed too (the id orders the equal values)."""
    sort = sort or SORT_DEFAULT
    column, descending = sort_parse(sort)
    limit = max(1, min(limit or PAGE_SIZE, MAX_PAGE_SIZE))
    # the list never shows the verification report, which is the largest column
    qs = trace_queryset(filters).select_related("uploaded_by").defer("ingest_report")
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
    forward = sort_ordering(sort)
    if direction == "older":
        rows = list(qs.order_by(*forward)[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        has_older, has_newer = more, bool(cursor)
    else:
        backward = [f[1:] if f.startswith("-") else f"-{f}" for f in forward]
        rows = list(qs.order_by(*backward)[: limit + 1])
        more = len(rows) > limit
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


@dataclass
class SnapshotLine:
    kind: str
    snapshot_id: str
    alg: str
    key_id: str
    in_file: bool
    stored: bool
    status: str  # "verified" | "failed" | "not checked" | "not retained"
    detail: str = ""


@dataclass
class Outline:
    header: dict[str, Any]
    events: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    steps_total: int
    snapshots: list[SnapshotLine]
    broke_at: int | None
    break_detail: str
    unreadable: str = ""
    cut_short: str = ""  # the page's read budget ended the outline early


def failed_check(report: dict[str, Any] | None) -> dict[str, Any] | None:
    for check in (report or {}).get("checks", []):
        if not check.get("ok"):
            return check
    return None


def _chain_break(report: dict[str, Any] | None) -> tuple[int | None, str]:
    check = failed_check(report)
    broke_at = (report or {}).get("broke_at")
    if check and check.get("name") == "events" and isinstance(broke_at, int):
        return broke_at, str(check.get("detail", ""))
    return None, ""


def _snapshot_lines(header: dict[str, Any], report: dict[str, Any] | None) -> list[SnapshotLine]:
    snaps = header.get("snapshots", [])
    stored = set(
        Snapshot.objects.filter(snapshot_id__in=[s.get("snapshot_id") for s in snaps]).values_list(
            "snapshot_id", flat=True
        )
    )
    check_names = {c.get("name"): c for c in (report or {}).get("checks", [])}
    failing = failed_check(report)
    bad_index = (
        report.get("broke_at")
        if report and failing and failing.get("name") == "snapshots"
        else None
    )
    verified_all = bool(check_names.get("snapshots", {}).get("ok"))
    lines = []
    for index, snap in enumerate(snaps):
        sig = snap.get("signature") or {}
        in_file = "body" in snap
        is_stored = snap.get("snapshot_id") in stored
        if not in_file and not is_stored:
            status, detail = "not retained", "no body in the file or in the store"
        elif bad_index == index:
            status, detail = "failed", str(failing.get("detail", "")) if failing else ""
        elif verified_all or (isinstance(bad_index, int) and index < bad_index):
            status, detail = "verified", ""
        else:
            status, detail = "not checked", "the verification stopped before this snapshot"
        lines.append(
            SnapshotLine(
                kind=str(snap.get("kind", "")),
                snapshot_id=str(snap.get("snapshot_id", "")),
                alg=str(sig.get("alg", "")),
                key_id=str(sig.get("key_id", "")),
                in_file=in_file,
                stored=is_stored,
                status=status,
                detail=detail,
            )
        )
    return lines


def brief_step(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": step.get("seq"),
        "step_id": step.get("step_id"),
        "kind": step.get("kind"),
        "fn": step.get("fn") or step.get("name") or "",
        "output_ref": step.get("output_ref", ""),
    }


def page_read_limit() -> int:
    return int(getattr(settings, "REPLAY_PAGE_READ_BYTES", 64 * 1024**2))


def _page_limits() -> native.Limits:
    """What a page may read of a stored file: at most REPLAY_PAGE_READ_BYTES (decompressed),
    so no page's cost grows with a stored file's size or padding."""
    budget = page_read_limit()
    return native.Limits(
        max_total_bytes=budget,
        max_document_bytes=min(budget, native.DEFAULT_LIMITS.max_document_bytes),
    )


def _over_page_budget(exc: ReplayError) -> bool:
    return exc.detail.get("limit") in ("max_total_bytes", "max_document_bytes")


def page_budget_message() -> str:
    return (
        f"a page reads at most {page_read_limit()} bytes of a stored file "
        "(REPLAY_PAGE_READ_BYTES); this one is longer, so the outline stops there"
    )


@dataclass
class FormatPanel:
    """What the trace page shows of a file of a format without an event outline (every
    format but the native one): the format's header facts, its stored inputs, what
    re-verifying it does, or why the stored file cannot be read."""

    label: str
    facts: dict[str, str]
    inputs: list[dict[str, Any]]
    replay_note: str
    unreadable: str = ""


def trace_panel(trace: Trace) -> FormatPanel | None:
    """The format panel of a stored file (None for a native trace: the outline shows it)."""
    from replay.formats import formats
    from replay.formats.protocol import VerifyContext

    if trace.format == native.FORMAT:
        return None
    fmt = formats().get(trace.format)
    if fmt is None:
        return FormatPanel(
            trace.format, {}, [], "", f"the format {trace.format!r} is not registered"
        )
    inputs = [r for r in trace.required_snapshot_ids or [] if r.get("path")]
    stored = set(
        Snapshot.objects.filter(snapshot_id__in=[r.get("snapshot_id") for r in inputs]).values_list(
            "snapshot_id", flat=True
        )
    )
    inputs = [{**r, "stored": r.get("snapshot_id") in stored} for r in inputs]
    try:
        with blob_open(trace.blob.storage_name) as fh:
            facts = fmt.panel(fmt.parse(fh, trace.filename, VerifyContext()))
    except (ReplayError, OSError) as exc:
        return FormatPanel(fmt.label, {}, inputs, fmt.replay_note, str(exc))
    from privacy.redaction import mask_texts, trace_personal_texts

    facts = mask_texts(facts, trace_personal_texts(trace.pk))
    return FormatPanel(fmt.label, facts, inputs, fmt.replay_note)


def traces_same_job(trace: Trace, limit: int = 20) -> list[Trace]:
    """Other stored files of the same format and job (AHD runs of one brief, Paxman artifacts
    of one contract), newest first: what the trace page offers to compare with."""
    if not trace.job_id:
        return []
    return list(
        Trace.objects.filter(format=trace.format, job_id=trace.job_id)
        .exclude(pk=trace.pk)
        .select_related("blob")
        .order_by("-created_at", "-id")[:limit]
    )


def traces_same_artifact(trace: Trace, limit: int = 50) -> list[Trace]:
    """The other stored versions of a Paxman artifact: files whose artifact ``id`` (their
    trace id) is this one's, newest first, each to compare with field by field. An artifact
    that records no id is stored under its file's sha256 and has no other versions."""
    from replay.formats import PAXMAN

    if trace.format != PAXMAN or trace.trace_id == trace.blob.sha256:
        return []
    return list(
        Trace.objects.filter(format=PAXMAN, trace_id=trace.trace_id)
        .exclude(pk=trace.pk)
        .select_related("blob")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass
class Comparison:
    """Two stored files of one format, field by field (JSON pointers), or why not. Two
    native traces are compared record by record, a page of changes at a time (``native``)."""

    differences: list[Any]
    unreadable: str = ""
    native: Any = None  # replay.formats.native.compare.Comparison
    stopped: str = ""  # why the native comparison stopped before the end of the files


def _native_compare(a: Trace, b: Trace, offset: int) -> Comparison:
    """Both files read as two streams in step, as far as one page of changes needs (each
    within the page read budget): never both held whole."""
    from replay.formats.native import compare

    with blob_open(a.blob.storage_name) as fa, blob_open(b.blob.storage_name) as fb:
        try:
            left = open_trace(fa, a.filename, limits=_page_limits())
        except ReplayError as exc:
            return Comparison([], f"{a.filename}: {exc}")
        try:
            right = open_trace(fb, b.filename, limits=_page_limits())
        except ReplayError as exc:
            return Comparison([], f"{b.filename}: {exc}")
        found = compare.compare(left, right, offset=offset)
    stopped = ""
    if found.stopped is not None:
        exc = found.stopped
        stopped = page_budget_message() if _over_page_budget(exc) else f"{exc.code}: {exc.message}"
    return Comparison(found.changes, native=found, stopped=stopped)


def trace_compare(a: Trace, b: Trace, *, offset: int = 0) -> Comparison:
    """The format's own comparison of two stored files of that format (``compare``); two
    native traces record by record, the page of changes from ``offset``."""
    from replay.formats import formats
    from replay.formats.protocol import VerifyContext

    if a.format == b.format == native.FORMAT:
        try:
            return _native_compare(a, b, offset)
        except OSError as exc:
            return Comparison([], str(exc))
    fmt = formats().get(a.format)
    if fmt is None or a.format != b.format:
        return Comparison([], f"{a.format} and {b.format} files do not compare")
    parsed = []
    for t in (a, b):
        try:
            with blob_open(t.blob.storage_name) as fh:
                parsed.append(fmt.parse(fh, t.filename, VerifyContext(limits=_page_limits())))
        except (ReplayError, OSError) as exc:
            return Comparison([], f"{t.filename}: {exc}")
    return Comparison(fmt.compare(parsed[0], parsed[1]))


def trace_outline_empty(trace: Trace) -> Outline:
    """No event outline: a format with none (its panel shows the file instead)."""
    return Outline({}, [], [], trace.step_count, [], None, "")


def trace_outline(
    trace: Trace, report: dict[str, Any] | None, opened: OpenedTrace | None = None
) -> Outline:
    """What the trace page shows of the file's header (snapshots with their status) and
    where the chain broke. Only the header is read here; the events and steps are read a
    window at a time through the trace's index (:func:`trace_window`). ``opened``: the
    request's opening of the stored file (else one is made for this call)."""
    broke_at, break_detail = _chain_break(report)
    steps_total = trace.step_count
    try:
        with _borrowed_or_own(trace, opened) as stored:
            header = stored.header()
    except ReplayError as exc:
        message = page_budget_message() if _over_page_budget(exc) else str(exc)
        return Outline({}, [], [], steps_total, [], broke_at, break_detail, message)
    except OSError as exc:
        return Outline({}, [], [], steps_total, [], broke_at, break_detail, unreadable=str(exc))
    header = {k: v for k, v in header.items() if k not in ("events", "steps", "outputs")}
    return Outline(
        header=header,
        events=[],
        steps=[],
        steps_total=steps_total,
        snapshots=_snapshot_lines(header, report),
        broke_at=broke_at,
        break_detail=break_detail,
    )


# --- paging a trace's events and steps through its index -------------------------------------

WINDOW_SIZE = 50
MAX_WINDOW_SIZE = 500


class TraceUnreadable(Exception):
    """The stored file cannot be read (or does not match its index); the message says why."""


class _Borrowed:
    """The request's open stored file lent to a reader that closes what it is given: its
    close leaves the file open (the :class:`OpenedTrace` closes it)."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def close(self) -> None:
        pass

    def __enter__(self) -> _Borrowed:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _decompressed_of(fh: IO[bytes]) -> IO[bytes]:
    """``fh`` (a stored file, opened) decompressed, at its start; seekable when the store's
    file is (a gzip seeks forward by decompressing, which parses nothing)."""
    head = fh.read(2)
    source: IO[bytes]
    if fh.seekable():
        fh.seek(0)
        source = fh
    else:
        source = io.BufferedReader(native._Prefixed(head, fh))
    if head == native.GZIP_MAGIC:
        return gzip.GzipFile(fileobj=source, mode="rb")  # type: ignore[return-value]
    return source


def _decompressed(storage_name: str) -> IO[bytes]:
    """The stored file, decompressed, at its start (opened here; the caller closes it)."""
    return _decompressed_of(blob_open(storage_name))


class OpenedTrace:
    """One stored native file for one request: opened once (so its personal values are
    reassembled once, ``privacy.ingest.reassemble``), its header parsed once, a JSON
    document's records parsed once; the windows of events and steps, the index and the
    privacy policy all read this one opening. Closed with the request (``with``); nothing of
    it outlives the request.

    A file whose store cannot seek is opened again for each reader (a store's files seek:
    the filesystem's and S3's do)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._fh: IO[bytes] | None = None
        self._native: native.NativeTrace | None = None
        self._failed: BaseException | None = None
        self._records: list[tuple[str, dict[str, Any]]] = []
        self._source: Iterator[Any] | None = None
        self._source_error: BaseException | None = None
        self._extra: list[IO[bytes]] = []

    def __enter__(self) -> OpenedTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fh in [self._fh, *self._extra]:
            if fh is not None:
                fh.close()
        self._fh, self._extra = None, []

    def _file(self) -> IO[bytes]:
        """The stored file at its start, lent (its close does nothing)."""
        if self._fh is None:
            self._fh = blob_open(self.trace.blob.storage_name)
        elif self._fh.seekable():
            self._fh.seek(0)
        else:
            fh = blob_open(self.trace.blob.storage_name)
            self._extra.append(fh)
            return _Borrowed(fh)  # type: ignore[return-value]
        return _Borrowed(self._fh)  # type: ignore[return-value]

    def opened(self) -> native.NativeTrace:
        """The file opened as a native trace within the page's read budget (once)."""
        if self._failed is not None:
            raise self._failed
        if self._native is None:
            try:
                self._native = open_trace(self._file(), self.trace.filename, limits=_page_limits())
            except (ReplayError, OSError) as exc:
                self._failed = exc
                raise
            self._source = ((r.kind, r.body) for r in self._native.records())
        return self._native

    def header(self) -> dict[str, Any]:
        return self.opened().header

    def records(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The ``(kind, body)`` records in file order, each parsed once however often this is
        called (what a JSON document's windows read; a JSON Lines file's index reads it by
        offsets through :meth:`decompressed` instead)."""
        self.opened()
        i = 0
        while True:
            if i < len(self._records):
                yield self._records[i]
                i += 1
                continue
            if self._source_error is not None:
                raise self._source_error
            if self._source is None:
                return
            try:
                item = next(self._source)
            except StopIteration:
                self._source = None
                return
            except (ReplayError, OSError, ValueError) as exc:
                self._source_error = exc
                raise
            self._records.append(item)

    def decompressed(self) -> IO[bytes]:
        """The file decompressed at its start, for reading by offsets (lent)."""
        return _decompressed_of(self._file())


@contextmanager
def _borrowed_or_own(trace: Trace, opened: OpenedTrace | None) -> Iterator[OpenedTrace]:
    if opened is not None:
        yield opened
        return
    with OpenedTrace(trace) as own:
        yield own


def _index_build(trace: Trace, opened: OpenedTrace, progress: Any = None) -> dict[str, Any]:
    if trace.encoding.startswith("jsonl"):  # gzipped too: its windows seek by offset
        with opened.decompressed() as stream:
            return traceindex.build_jsonl(stream, page_read_limit(), progress)
    return traceindex.build_records(opened.records())


class IndexPending(TraceUnreadable):
    """A large trace's index is being built in the background; the page says how far (a
    reader that only knows TraceUnreadable says so too)."""

    def __init__(self, events_read: int, events: int) -> None:
        self.events_read = events_read
        self.events = events
        super().__init__(
            f"its index is being built in the background: {events_read} of {events} events read"
        )


#: a build not heard of for this long is queued again (its worker stopped)
INDEX_BUILD_STALE = timedelta(minutes=2)


def index_inline_records() -> int:
    """Up to how many records (events and steps) a page builds a missing index itself: a
    JSON document's records are parsed for its windows anyway; a larger JSON Lines trace's
    index is built in the background (``REPLAY_INDEX_INLINE_RECORDS``)."""
    return int(getattr(settings, "REPLAY_INDEX_INLINE_RECORDS", 5000))


def _builds_inline(trace: Trace) -> bool:
    if not trace.encoding.startswith("jsonl"):
        return True
    return trace.event_count + trace.step_count <= index_inline_records()


def trace_index_queue(trace: Trace) -> TraceIndexBuild | None:
    """Queue the background build of the trace's index (once; again when the last build
    went stale): the row that says how far it is, or None when the index is there."""
    from console.tasks import trace_index_build as task
    from replay.background import enqueue

    if TraceIndex.objects.filter(blob_id=trace.blob_id).exists():
        return None
    now = timezone.now()
    build, created = TraceIndexBuild.objects.get_or_create(blob_id=trace.blob_id)
    if created or (not build.error and build.updated_at < now - INDEX_BUILD_STALE):
        if not created:  # claim it: one request re-queues a stale build
            claimed = TraceIndexBuild.objects.filter(
                blob_id=trace.blob_id, updated_at=build.updated_at
            ).update(events_read=0, updated_at=now)
            if not claimed:
                return build
            build.events_read, build.updated_at = 0, now
        enqueue(task, trace.pk)
    return build


def trace_index_build(trace: Trace) -> dict[str, Any] | None:
    """Build and store the trace's index (the background task's body), saying how far it is
    on its build row as it reads. None when the file cannot be read (the row says why)."""
    row = TraceIndex.objects.filter(blob_id=trace.blob_id).first()
    if row is not None:
        return row.index

    def progress(events: int) -> None:
        TraceIndexBuild.objects.filter(blob_id=trace.blob_id).update(
            events_read=events, updated_at=timezone.now()
        )

    try:
        with OpenedTrace(trace) as opened:
            index = _index_build(trace, opened, progress)
    except (ReplayError, OSError, EOFError, zlib.error, ValueError) as exc:
        TraceIndexBuild.objects.filter(blob_id=trace.blob_id).update(
            error=str(exc)[:2000], updated_at=timezone.now()
        )
        return None
    try:
        with transaction.atomic():
            TraceIndex.objects.create(blob_id=trace.blob_id, index=index)
    except IntegrityError:
        pass  # another build stored the same index first
    TraceIndexBuild.objects.filter(blob_id=trace.blob_id).delete()
    return index


def trace_index(trace: Trace, opened: OpenedTrace | None = None) -> dict[str, Any]:
    """The trace's index, read from its row. A large JSON Lines trace's is built at ingest in
    the background (:func:`trace_index_queue`): until it is there this raises IndexPending
    (and queues the build again if it went stale); a small trace's missing index is built
    here (one pass over at most REPLAY_PAGE_READ_BYTES of the file). ``opened``: the
    request's opening of the stored file.

    Raises TraceUnreadable when the file cannot be read.
    """
    row = TraceIndex.objects.filter(blob_id=trace.blob_id).first()
    if row is not None:
        return row.index
    if not _builds_inline(trace):
        build = trace_index_queue(trace)
        if build is not None and build.error:
            raise TraceUnreadable(f"the stored file cannot be indexed: {build.error}")
        raise IndexPending(build.events_read if build else 0, trace.event_count)
    try:
        with _borrowed_or_own(trace, opened) as stored:
            index = _index_build(trace, stored)
    except ReplayError as exc:
        message = page_budget_message() if _over_page_budget(exc) else str(exc)
        raise TraceUnreadable(message) from None
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise TraceUnreadable(f"the stored file cannot be indexed: {exc}") from None
    try:
        with transaction.atomic():
            TraceIndex.objects.create(blob_id=trace.blob_id, index=index)
    except IntegrityError:
        pass  # another request stored the same index first
    return index


def trace_window(
    trace: Trace,
    kind: str,
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int = WINDOW_SIZE,
    index: dict[str, Any] | None = None,
    opened: OpenedTrace | None = None,
) -> traceindex.Window:
    """A page of the trace's events (``kind="event"``) or steps, by seq (keyset): the ones
    after ``after`` or just before ``before``. Reads the records of the window and at most
    one index stride more, never the ones before it. ``index``: the trace's index when the
    caller has read it already (else it is read here); ``opened``: the request's opening of
    the stored file. Raises TraceUnreadable."""
    limit = max(1, min(limit, MAX_WINDOW_SIZE))
    with _borrowed_or_own(trace, opened) as stored:
        if index is None:
            index = trace_index(trace, stored)
        try:
            return traceindex.read_window(
                index,
                stored.decompressed,
                kind,
                after=after,
                before=before,
                limit=limit,
                max_line=page_read_limit(),
                records=stored.records,
            )
        except traceindex.IndexMismatch as exc:
            raise TraceUnreadable(f"the stored file does not match its index: {exc}") from None
        except ReplayError as exc:
            message = page_budget_message() if _over_page_budget(exc) else str(exc)
            raise TraceUnreadable(message) from None
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceUnreadable(str(exc)) from None


def trace_recorded_outputs(trace: Trace, steps: set[int | str]) -> dict[int | str, Any]:
    """The recorded output of each named step (or "final_answer"), read from the stored file.

    The diff page shows these as the unchanged context around a divergence.
    """
    found: dict[int | str, Any] = {}
    wanted = {s for s in steps if isinstance(s, int)}
    try:
        with blob_open(trace.blob.storage_name) as fh:
            opened = open_trace(fh, trace.filename, limits=_page_limits())
            if "final_answer" in steps:
                found["final_answer"] = opened.header.get("final_answer")
            if wanted:
                for record in opened.records():
                    seq = record.body.get("seq")
                    if record.kind == "step" and seq in wanted:
                        found[seq] = record.body.get("output")
                        wanted.discard(seq)
                        if not wanted:
                            break
    except (ReplayError, OSError):
        return found
    return found


def trace_event(trace: Trace, seq: int, opened: OpenedTrace | None = None) -> dict[str, Any] | None:
    """One event of the stored file, read through the trace's index (its window only)."""
    try:
        window = trace_window(trace, traceindex.EVENT, after=seq - 1, limit=1, opened=opened)
    except TraceUnreadable:
        return None
    if window.records and window.records[0].get("seq") == seq:
        return window.records[0]
    return None


def trace_privacy_policy(trace: Trace, opened: OpenedTrace | None = None) -> Any:
    """The body of the trace's `privacy` snapshot: in the file, else in the store, else None."""
    try:
        with _borrowed_or_own(trace, opened) as stored:
            header = stored.header()
    except (ReplayError, OSError):
        return None
    for snap in header.get("snapshots", []):
        if snap.get("kind") == "privacy":
            if "body" in snap:
                return snap["body"]
            row = Snapshot.objects.filter(snapshot_id=snap.get("snapshot_id")).first()
            return row.body if row is not None else None
    return None
