"""One stored trace opened for one request; its events and steps paged through its index,
and the index's building (inline for small traces, queued in the background otherwise)."""

from __future__ import annotations

import gzip
import io
import json
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import IO, Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from console import conf
from console.selectors.budget import (
    _over_page_budget,
    _page_limits,
    page_budget_message,
    page_read_limit,
)
from core.errors import ReplayError
from core.formats import formats, native
from core.formats.protocol import VerifyContext
from core.replay import recordview, traceindex
from replay.models import Snapshot, Trace, TraceIndex, TraceIndexBuild
from replay.prepared import Prepared
from replay.storage import blob_open

# --- paging a trace's events and steps through its index -------------------------------------

WINDOW_SIZE = 50
#: what a page reads ahead of the header it parses: a JSON Lines file's windows are read by
#: offsets through their own opening (OpenedTrace.decompressed), so the reader's 1 MiB
#: read-ahead was a megabyte read, spliced (core.privacy.splice) and hashed per page for a header
#: line of a few hundred bytes
PAGE_READ_AHEAD = 1 << 16
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
                self._native = native.open_native(
                    self._file(),
                    self.trace.filename,
                    limits=_page_limits(),
                    read_ahead=PAGE_READ_AHEAD,
                )
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


def records_format(trace: Trace) -> Any:
    """The format of a stored file whose page reads it as records (``TraceFormat.records``,
    :mod:`core.replay.recordview`): every registered format but the native one, whose
    events and steps the page pages through by seq; None for a native trace or a format
    without records."""
    if trace.format == native.FORMAT:
        return None
    fmt = formats().get(trace.format)
    return fmt if fmt is not None and getattr(fmt, "records", None) is not None else None


def parsed_file(trace: Trace, fmt: Any) -> Any:
    """The stored file parsed by its format (raises ReplayError, OSError)."""
    with blob_open(trace.blob.storage_name) as fh:
        return fmt.parse(fh, trace.filename, VerifyContext())


def _index_build(trace: Trace, opened: OpenedTrace, progress: Any = None) -> dict[str, Any]:
    fmt = records_format(trace)
    if fmt is not None:
        parsed = parsed_file(trace, fmt)
        facts_of = getattr(fmt, "index_facts", None)
        facts = facts_of(parsed) if facts_of is not None else None
        return recordview.build(fmt.records(parsed), progress, facts)
    if trace.encoding.startswith("jsonl"):  # gzipped too: its windows seek by offset
        with opened.decompressed() as stream:
            return traceindex.build_jsonl(stream, page_read_limit(), progress)
    return traceindex.build_records(opened.records())


class IndexPending(TraceUnreadable):
    """A large trace's index is being built in the background; the page says how far (a
    reader that only knows TraceUnreadable says so too)."""

    def __init__(self, events_read: int, events: int, noun: str = "events") -> None:
        self.events_read = events_read
        self.events = events
        self.noun = noun
        super().__init__(
            f"its index is being built in the background: {events_read} of {events} {noun} read"
        )


#: a build not heard of for this long is queued again (its worker stopped)
INDEX_BUILD_STALE = timedelta(minutes=2)


def index_inline_records() -> int:
    """Up to how many records (events and steps) a page builds a missing index itself: a
    JSON document's records are parsed for its windows anyway; a larger JSON Lines trace's
    index is built in the background (``REPLAY_INDEX_INLINE_RECORDS``)."""
    return conf.index_inline_records()


def _builds_inline(trace: Trace) -> bool:
    if trace.format == native.FORMAT and not trace.encoding.startswith("jsonl"):
        return True  # a native JSON document's records are parsed for its windows anyway
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
    found = _stored_index(trace.blob_id)
    if found is not None:
        return found

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


#: parsed indexes kept by each process, most recently used last (a large trace's is tens of
#: KB of JSON, parsed on every page that shows it otherwise)
_INDEXES: OrderedDict[tuple[str, int, datetime], dict[str, Any]] = OrderedDict()
_INDEXES_KEPT = 32
_INDEXES_LOCK = threading.Lock()


_INDEX_STAMP: Prepared[datetime] = Prepared(
    lambda blob_id: TraceIndex.objects.filter(blob_id=blob_id).values_list("created_at", flat=True)[
        :1
    ],
    blob_id=int,
)


def _stored_index(blob_id: int) -> dict[str, Any] | None:
    """The stored index of the blob, or None. A row never changes (append-only, one per blob:
    the database refuses an UPDATE), so its parsed value is kept by this process, under the
    row's key and creation time (a blob id the database reused after a rollback has another
    row); a page asks the database only whether the row is there, not for its JSON again.
    Callers must not change the dict they get."""
    stamp = next(iter(_INDEX_STAMP(blob_id=blob_id)), None)
    if stamp is None:
        return None
    key = (connection.settings_dict["NAME"], blob_id, stamp)
    with _INDEXES_LOCK:
        kept = _INDEXES.get(key)
        if kept is not None:
            _INDEXES.move_to_end(key)
            return kept
    index = TraceIndex.objects.filter(blob_id=blob_id).values_list("index", flat=True).first()
    if index is not None:
        _keep_index(blob_id, stamp, index)
    return index


def _keep_index(blob_id: int, stamp: datetime, index: dict[str, Any]) -> None:
    key = (connection.settings_dict["NAME"], blob_id, stamp)
    with _INDEXES_LOCK:
        _INDEXES[key] = index
        while len(_INDEXES) > _INDEXES_KEPT:
            _INDEXES.popitem(last=False)


def trace_index(trace: Trace, opened: OpenedTrace | None = None) -> dict[str, Any]:
    """The trace's index, read from its row. A large JSON Lines trace's is built at ingest in
    the background (:func:`trace_index_queue`): until it is there this raises IndexPending
    (and queues the build again if it went stale); a small trace's missing index is built
    here (one pass over at most REPLAY_PAGE_READ_BYTES of the file). ``opened``: the
    request's opening of the stored file.

    Raises TraceUnreadable when the file cannot be read.
    """
    found = _stored_index(trace.blob_id)
    if found is not None:
        return found
    if not _builds_inline(trace):
        build = trace_index_queue(trace)
        if build is not None and build.error:
            raise TraceUnreadable(f"the stored file cannot be indexed: {build.error}")
        if records_format(trace) is not None:
            raise IndexPending(build.events_read if build else 0, trace.event_count, "records")
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
            row = TraceIndex.objects.create(blob_id=trace.blob_id, index=index)
    except IntegrityError:
        pass  # another request stored the same index first
    else:
        _keep_index(trace.blob_id, row.created_at, index)
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


def trace_records(
    trace: Trace, *, start: int = 0, limit: int = WINDOW_SIZE, index: dict[str, Any] | None = None
) -> recordview.RecordWindow:
    """A page of the trace's records (every format but the native one) from position
    ``start``, read from its index alone: no file is opened. Raises TraceUnreadable,
    IndexPending."""
    limit = max(1, min(limit, MAX_WINDOW_SIZE))
    if index is None:
        index = trace_index(trace)
    if not recordview.is_view(index):
        raise TraceUnreadable("its index does not list records")
    return recordview.window(index, start=start, limit=limit)


MESSAGE_TOO_LARGE_TO_PARSE = (
    "the stored file is {size} bytes, more than a page parses whole (REPLAY_PAGE_PARSE_BYTES, "
    "{limit} bytes), and its index does not say where this record lies"
)


def _read_extent(trace: Trace, offset: int, length: int) -> Any:
    with blob_open(trace.blob.storage_name) as fh:
        traceindex._skip(fh, offset)
        data = fh.read(length)
    if len(data) != length:
        raise TraceUnreadable("the stored file is shorter than its index says")
    try:
        return json.loads(data)
    except ValueError as exc:
        raise TraceUnreadable(f"the stored file does not match its index: {exc}") from None


def trace_record(trace: Trace, position: int) -> recordview.ViewRecord | None:
    """One record of the stored file with its value (the record viewer): read from the
    bytes its index names when it names them (an OpenTelemetry span), else from the file
    parsed again by its format (at most REPLAY_PAGE_PARSE_BYTES); None when there is no such
    record. Raises TraceUnreadable, IndexPending."""
    fmt = records_format(trace)
    if fmt is None:
        return None
    try:
        index = trace_index(trace)
        if not recordview.is_view(index) or not 0 <= position < int(index.get("count", 0)):
            return None
        extent = recordview.extent_of(index, position)
        if extent is not None:
            row = recordview.row(index, position)
            value = _read_extent(trace, *extent)
            return recordview.ViewRecord(
                row["kind"], row["label"], row["location"], value, row["parent"], row["summary"]
            )
        if trace.blob.size > conf.page_parse_bytes():
            raise TraceUnreadable(
                MESSAGE_TOO_LARGE_TO_PARSE.format(
                    size=trace.blob.size, limit=conf.page_parse_bytes()
                )
            )
        return recordview.value_at(fmt.records(parsed_file(trace, fmt)), position)
    except (ReplayError, OSError, EOFError, zlib.error) as exc:
        raise TraceUnreadable(str(exc)) from None


def trace_recorded_outputs(trace: Trace, steps: set[int | str]) -> dict[int | str, Any]:
    """The recorded output of each named step (or "final_answer"), read from the stored file.

    The diff page shows these as the unchanged context around a divergence.
    """
    found: dict[int | str, Any] = {}
    wanted = {s for s in steps if isinstance(s, int)}
    try:
        with blob_open(trace.blob.storage_name) as fh:
            opened = native.open_native(fh, trace.filename, limits=_page_limits())
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
