"""Writes of the OTLP receiver: a body received and stored with its ledger event, a body's
spans read into rows, a trace version sealed into a stored ``otel-genai`` trace.

The request path does as little as keeps the promise of the response: it checks the body
once (``otlp.validate``, on the parsed protobuf message, building no span dict: a body that
does not parse is 400 and one with refused spans says how many), then stores the body under
its digest and appends ``OTLP_RECEIVED`` naming that digest in one transaction, and queues
the rest. Decoding, mapping, grouping and sealing run in the background runner
(``replay.background``), each step idempotent: a body read twice stores no span twice, and a
seal retried writes the same bytes (its time is decided once, on the trace's row). On
PostgreSQL the span rows go in with one COPY.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django.core.files.base import ContentFile
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, Min
from django.utils import timezone

from core.canonical import jcs
from core.errors import ReplayError
from core.formats.otel import mapping, otlp, record
from core.ledger import codes
from governance import ledger
from otel import conf
from otel.erasure import body_refusal, live_spans
from otel.models import OtelSpan, OtelTrace, OtlpBody, OtlpBodyDone
from replay.models import Trace
from replay.services import trace_ingest
from replay.storage import blob_storage

logger = logging.getLogger(__name__)

FORMAT = "otel-genai"
SEAL_QUIET = "quiet"
SEAL_MANUAL = "manual"
SEAL_ORPHAN = "orphan"
#: where a body is kept in the blob store: beside the traces, under its own prefix
BODY_PREFIX = "otlp"


@dataclass
class Received:
    """What one export request got: its spans, those refused (with why), whether its body
    was new (an exporter's retry of the same body stores nothing)."""

    spans: int
    rejected: int
    reasons: list[str] = field(default_factory=list)
    stored: bool = False
    sha256: str = ""
    trace_ids: list[str] = field(default_factory=list)


def limits() -> otlp.Limits:
    """What decoding one body may cost: the decoder's defaults, the body's size from the
    settings (``REPLAY_OTLP_MAX_DECODED_BYTES``)."""
    return otlp.Limits(max_body_bytes=conf.max_decoded_bytes())


def body_name(sha256: str) -> str:
    return f"{BODY_PREFIX}/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def _put(name: str, data: bytes) -> None:
    """The body's bytes under their digest's name, once (content-addressed: a second writer
    of the same name writes the same bytes)."""
    storage = blob_storage()
    if storage.exists(name):
        return
    saved = storage.save(name, ContentFile(data))
    if saved != name:  # a concurrent writer stored the same bytes first
        storage.delete(saved)


def otlp_receive(*, body: bytes, content_type: str, user: Any, enqueue: bool = True) -> Received:
    """Check one export body (``otlp.OtlpError`` when it does not parse or a limit refuses
    it: nothing is stored), then store it and its ``OTLP_RECEIVED`` event together and
    queue reading it (``enqueue=False``: the caller reads it, as the demo does)."""
    # checked on the parsed protobuf message, building no dict: the reader decodes it
    checked = otlp.validate(body, content_type, limits=limits())
    sha256 = hashlib.sha256(body).hexdigest()
    received = Received(
        spans=checked.spans,
        rejected=len(checked.rejected),
        reasons=[rejection.reason for rejection in checked.rejected],
        sha256=sha256,
        trace_ids=checked.trace_ids,
    )
    if OtlpBody.objects.filter(sha256=sha256).exists():
        return received
    name = body_name(sha256)
    # the bytes first: a row is never written that points at bytes the store does not hold
    _put(name, body)
    try:
        with transaction.atomic():
            (event,) = ledger.append_many(
                [
                    {
                        "event_type": codes.OTLP_RECEIVED,
                        "payload": {
                            "body_sha256": sha256,
                            "size": len(body),
                            "content_type": content_type,
                            "spans": received.spans,
                            "rejected": received.rejected,
                            "trace_ids": received.trace_ids[:100],
                        },
                        "actor": user,
                        "idempotency_key": f"otlp:{sha256}",
                    }
                ]
            )
            row = OtlpBody.objects.create(
                sha256=sha256,
                size=len(body),
                content_type=content_type,
                storage_name=name,
                span_count=received.spans,
                rejected_count=received.rejected,
                event_seq=event.seq,
                received_by=user if getattr(user, "pk", None) else None,
            )
            if enqueue:
                from otel import tasks

                tasks.enqueue_read(row.pk)
    except IntegrityError:  # the same body, received at the same moment by another request
        return received
    received.stored = True
    return received


def _spans_of(body: OtlpBody) -> list[dict[str, Any]]:
    refused = body_refusal(body)  # an erased body's bytes are gone (otel.erasure)
    if refused is not None:
        raise refused
    with blob_storage().open(body.storage_name, "rb") as fh:
        data = fh.read()
    return otlp.decode(data, body.content_type, limits=limits()).spans


class _Row(NamedTuple):
    """One span read from a body, as its :class:`OtelSpan` row will hold it (``text``: its
    record as JSON, for PostgreSQL's COPY)."""

    trace_id: str
    span_id: str
    digest: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    record: dict[str, Any]
    text: str


def _canonical(value: Any) -> tuple[bytes, str | None]:
    """``value``'s RFC 8785 bytes, and the same as text when it may also be the record
    column's JSON (the fast path's: its floats are written as Python reads them back),
    else None."""
    data = otlp.jcs_bytes(value)
    if data is None:
        return jcs(value), None
    return data, data.decode()


def _digest(value: Any) -> str:
    """``sha256:`` over ``value``'s RFC 8785 (JCS) bytes: a span row's digest."""
    return "sha256:" + hashlib.sha256(_canonical(value)[0]).hexdigest()


def _int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


@contextmanager
def _cycles_uncollected() -> Iterator[None]:
    """The cycle collector held off: reading a 512-span body allocates about half a million
    dicts, lists and strings, trees that reference counting frees, and each full collection
    their survivors trigger walks the worker's whole heap (measured: a third of the read's
    CPU in a worker-sized process). Left as it was found (another thread's reader may hold
    it off too)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _rows_of(body: OtlpBody) -> list[_Row]:
    """The body's spans mapped to their records, each with its digest."""
    rows = []
    for plain in _spans_of(body):
        rec = mapping.span_record(plain)
        data, text = _canonical(rec)
        rows.append(
            _Row(
                trace_id=plain["trace_id"],
                span_id=rec["span_id"],
                digest="sha256:" + hashlib.sha256(data).hexdigest(),
                parent_span_id=rec.get("parent_span_id") or "",
                name=str(rec.get("name", ""))[:255],
                start_ns=_int(rec.get("start_time_unix_nano", "0")),
                end_ns=_int(rec.get("end_time_unix_nano", "0")),
                record=rec,
                # the canonical text when it is json's, else json's own (a float such as
                # 1.0 stays 1.0 in the column, as the ORM writes it)
                text=text if text is not None else json.dumps(rec),
            )
        )
    return rows


def otlp_read(*, body_pk: int, wait: bool = True) -> OtlpBodyDone | None:
    """Read one stored body's spans into :class:`OtelSpan` rows and bring each of its
    traces' rows up to date (a span after a seal opens the next version). Idempotent.

    A span id seen before with the same digest (in the database or earlier in the body) is
    skipped, with another digest it is stored beside the first and counted as a conflict.
    One transaction: the body's row claimed, its spans mapped, the traces' rows locked in
    trace id order, the spans written (COPY on PostgreSQL), the traces advanced and the body
    marked read (:class:`OtlpBodyDone`). None for an unknown body, or (``wait=False``: the
    queued task and the sweep) for one another runner is reading, which that runner
    finishes (or, should it fail, the next sweep reads)."""
    done = OtlpBodyDone.objects.filter(body_id=body_pk).first()
    if done is not None:
        return done
    with _cycles_uncollected():  # and the body's records freed before it collects again
        return _read(body_pk, wait=wait)


def _read(body_pk: int, *, wait: bool) -> OtlpBodyDone | None:
    with transaction.atomic():
        # one reader a body, and its work done once: the reader claims the body's row before
        # decoding it, and (wait=False) passes over one another runner has claimed
        body = OtlpBody.objects.select_for_update(skip_locked=not wait).filter(pk=body_pk).first()
        if body is None:
            return None
        done = OtlpBodyDone.objects.filter(body=body).first()
        if done is not None:
            return done
        rows = _rows_of(body)
        by_trace: dict[str, list[_Row]] = {}
        for row in rows:
            by_trace.setdefault(row.trace_id, []).append(row)
        states = _states_for_update(sorted(by_trace))
        known = _known(by_trace)
        dup = conflicting = 0
        fresh: dict[str, list[_Row]] = {}
        for trace_id in sorted(by_trace):
            present = known.get(trace_id, set())
            ids = {span_id for span_id, _digest in present}
            for row in by_trace[trace_id]:
                if (row.span_id, row.digest) in present:
                    dup += 1
                    continue
                if row.span_id in ids:
                    conflicting += 1
                present.add((row.span_id, row.digest))
                ids.add(row.span_id)
                fresh.setdefault(trace_id, []).append(row)
        written = [row for trace_id in sorted(fresh) for row in fresh[trace_id]]
        _spans_write(written, body)
        counts = _span_counts(sorted(fresh))
        for trace_id in sorted(fresh):
            _advance(states[trace_id], fresh[trace_id], span_count=counts[trace_id])
        return OtlpBodyDone.objects.create(
            body=body, new_spans=len(written), duplicate_spans=dup, conflicting_spans=conflicting
        )


def _states_for_update(trace_ids: list[str]) -> dict[str, OtelTrace]:
    """The rows of these traces (made for those new), locked, in trace id order (as every
    reader takes them: no two readers wait on each other in a cycle)."""
    now = timezone.now()
    existing = set(
        OtelTrace.objects.filter(trace_id__in=trace_ids).values_list("trace_id", flat=True)
    )
    OtelTrace.objects.bulk_create(
        [
            OtelTrace(trace_id=trace_id, first_span_at=now, last_span_at=now)
            for trace_id in trace_ids
            if trace_id not in existing
        ],
        ignore_conflicts=True,  # made meanwhile by another reader
    )
    return {
        state.trace_id: state
        for state in OtelTrace.objects.select_for_update()
        .filter(trace_id__in=trace_ids)
        .order_by("trace_id")
    }


#: span ids asked about in one query (SQLite's bound on a statement's variables is 32,766)
_KNOWN_CHUNK = 2000


def _known(by_trace: dict[str, list[_Row]]) -> dict[str, set[tuple[str, str]]]:
    """The (span id, digest) pairs already stored of these traces' span ids."""
    known: dict[str, set[tuple[str, str]]] = {}
    pairs = sorted({(row.trace_id, row.span_id) for rows in by_trace.values() for row in rows})
    for start in range(0, len(pairs), _KNOWN_CHUNK):
        chunk = pairs[start : start + _KNOWN_CHUNK]
        found = OtelSpan.objects.filter(
            trace_id__in={trace_id for trace_id, _ in chunk},
            span_id__in={span_id for _, span_id in chunk},
        ).values_list("trace_id", "span_id", "digest")
        for trace_id, span_id, digest in found:
            known.setdefault(trace_id, set()).add((span_id, digest))
    return known


def _span_counts(trace_ids: list[str]) -> dict[str, int]:
    counts = dict.fromkeys(trace_ids, 0)
    if trace_ids:
        counts.update(
            OtelSpan.objects.filter(trace_id__in=trace_ids)
            .values("trace_id")
            .annotate(n=Count("pk"))
            .values_list("trace_id", "n")
        )
    return counts


def _spans_write(rows: list[_Row], body: OtlpBody) -> None:
    """Insert the rows, in order (a trace's first copy of a span id has the lowest pk).
    PostgreSQL: one COPY (the ORM's insert has psycopg quote every JSON record into an
    array literal, ten times the cost); a row already stored (none is: the traces are
    locked and their spans read) makes it fall back to the ORM's insert, which skips it.
    Elsewhere (SQLite): the ORM's insert, skipping a row already stored."""
    if not rows:
        return
    if connection.vendor == "postgresql":
        try:
            with transaction.atomic():  # a savepoint: a refused COPY leaves nothing
                _spans_copy(rows, body)
            return
        except IntegrityError:
            logger.warning("OTLP body %s: a span row was already stored; inserting again", body.pk)
    OtelSpan.objects.bulk_create(
        [
            OtelSpan(
                trace_id=row.trace_id,
                span_id=row.span_id,
                digest=row.digest,
                parent_span_id=row.parent_span_id,
                name=row.name,
                start_ns=row.start_ns,
                end_ns=row.end_ns,
                record=row.record,
                body=body,
            )
            for row in rows
        ],
        ignore_conflicts=True,
    )


_COPY_FIELDS = (
    "trace_id",
    "span_id",
    "digest",
    "parent_span_id",
    "name",
    "start_ns",
    "end_ns",
    "record",
    "body",
    "received_at",
)


def _spans_copy(rows: list[_Row], body: OtlpBody) -> None:
    """The rows through ``COPY ... FROM STDIN`` (psycopg 3), in this transaction: the same
    columns the ORM writes, the record as its JSON text (PostgreSQL parses it into jsonb
    once), one time of receipt for the body's spans."""
    meta = OtelSpan._meta
    column = {f.name: f.column for f in meta.concrete_fields}
    columns = ", ".join(connection.ops.quote_name(column[name]) for name in _COPY_FIELDS)
    now = timezone.now()
    statement = f"COPY {connection.ops.quote_name(meta.db_table)} ({columns}) FROM STDIN"
    with (
        connection.cursor() as cursor,
        connection.wrap_database_errors,
        cursor.cursor.copy(statement) as copy,
    ):
        for row in rows:
            copy.write_row(
                (
                    row.trace_id,
                    row.span_id,
                    row.digest,
                    row.parent_span_id,
                    row.name,
                    row.start_ns,
                    row.end_ns,
                    row.text,
                    body.pk,
                    now,
                )
            )


def _advance(state: OtelTrace, fresh: Iterable[Any], *, span_count: int | None = None) -> None:
    """A trace's row after new spans (rows of :class:`OtelSpan`, or as read): open again
    (the next version) if it was sealed, its root seen, its counts and times
    (``span_count``: its stored spans, counted now when not given)."""
    fresh = list(fresh)
    if not state.open:
        state.open = True
        state.version += 1
        state.sealing_at = None
        state.sealing_reason = ""
    for span in fresh:
        if not span.parent_span_id:
            state.root_ended = True
            state.root_name = span.name
            state.service = str(span.record.get("service") or "")[:255]
        elif not state.service:
            state.service = str(span.record.get("service") or "")[:255]
    if span_count is None:
        span_count = OtelSpan.objects.filter(trace_id=state.trace_id).count()
    state.span_count = span_count
    state.last_span_at = timezone.now()
    state.save()


def otlp_read_pending(*, limit: int = 100) -> int:
    """Read the bodies no runner has read yet (a worker killed mid-way, a queue lost with a
    process), passing over those another runner is reading: the sweep's first half. Returns
    how many were read (or found read meanwhile)."""
    pending = list(
        OtlpBody.objects.filter(otlpbodydone__isnull=True)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    read = 0
    for pk in pending:
        # a body another runner is reading (its queued task, say) is left to it
        read += otlp_read(body_pk=pk, wait=False) is not None
    return read


class SealError(Exception):
    """A trace that cannot be sealed now (unknown, or already sealed with nothing new)."""


NOT_FOUND = "no OpenTelemetry trace {trace_id} has been received"
NOTHING_NEW = (
    "OpenTelemetry trace {trace_id} is sealed (version {version}) and nothing arrived since"
)


def otel_seal(*, trace_id: str, reason: str = SEAL_MANUAL) -> Trace:
    """Seal the open version of one trace: its spans (every span received for the trace so
    far, the first copy of each span id kept, the others named as conflicts) written as the
    record, stored as an ``otel-genai`` trace, its digest in the ledger
    (``OTEL_TRACE_SEALED``). Retried after a crash, it writes the same bytes."""
    with transaction.atomic():
        state = OtelTrace.objects.select_for_update().filter(trace_id=trace_id).first()
        if state is None:
            raise SealError(NOT_FOUND.format(trace_id=trace_id))
        if not state.open:
            raise SealError(NOTHING_NEW.format(trace_id=trace_id, version=state.version))
        if state.sealing_at is None:
            state.sealing_at = timezone.now()
            state.sealing_reason = reason
            state.save(update_fields=["sealing_at", "sealing_reason"])
        version, sealing_at, reason = state.version, state.sealing_at, state.sealing_reason
        previous = state.sealed_digest or None
        cutoff = OtelSpan.objects.filter(trace_id=trace_id).aggregate(Max("pk"))["pk__max"]
    kept: dict[str, dict[str, Any]] = {}
    conflicts = []
    first_digest: dict[str, str] = {}
    for span_id, digest, rec in (
        live_spans(trace_id)  # an erased span's tombstone cannot be sealed (otel.erasure)
        .filter(pk__lte=cutoff)
        .order_by("pk")
        .values_list("span_id", "digest", "record")
        .iterator()
    ):
        if span_id in kept:
            conflicts.append({"span_id": span_id, "kept": first_digest[span_id], "other": digest})
            continue
        kept[span_id] = rec
        first_digest[span_id] = digest
    try:
        _record, data, digest = record.seal(
            trace_id,
            list(kept.values()),
            version=version,
            previous=previous,
            conflicts=conflicts,
            sealed_at=_iso(sealing_at),
            reason=reason,
        )
        result = trace_ingest(
            source=io.BytesIO(data),
            filename=f"{trace_id}.v{version}.otel.json",
            declared_format=FORMAT,
            # whose exporter sent the trace's first span (its token's owner)
            uploaded_by=_sender(trace_id),
            uploaded_label=RECEIVED_LABEL,
        )
    except ReplayError as exc:
        # said where a person looks (the open trace's page, `otel status`), and not tried
        # again by the sweep until another span arrives
        OtelTrace.objects.filter(trace_id=trace_id).update(
            seal_error=f"{exc.code}: {exc.message}"[:2000], seal_failed_at=timezone.now()
        )
        raise
    with transaction.atomic():
        ledger.append_many(
            [
                {
                    "event_type": codes.OTEL_TRACE_SEALED,
                    "payload": {
                        "trace_id": trace_id,
                        "version": version,
                        "digest": digest,
                        "previous": previous,
                        "file_sha256": result.trace.blob.sha256,
                        "spans": len(kept),
                        "conflicts": len(conflicts),
                        "reason": reason,
                    },
                    "idempotency_key": f"otel-seal:{trace_id}:{version}",
                }
            ]
        )
        state = OtelTrace.objects.select_for_update().get(trace_id=trace_id)
        newer = OtelSpan.objects.filter(trace_id=trace_id, pk__gt=cutoff).exists()
        state.sealed_trace = result.trace
        state.sealed_digest = digest
        state.seal_error = ""
        state.seal_failed_at = None
        if newer:  # spans arrived while sealing: they open the next version at once
            state.version = version + 1
            state.sealing_at = None
            state.sealing_reason = ""
        else:
            state.open = False
        state.save()
    return result.trace


#: what the pages say stored a sealed trace when no person's token sent it (the demo)
RECEIVED_LABEL = "the OTLP receiver"


def _sender(trace_id: str) -> Any:
    """The person whose token sent the trace's first span, or None."""
    first = (
        OtelSpan.objects.filter(trace_id=trace_id)
        .order_by("pk")
        .select_related("body__received_by")
        .first()
    )
    return first.body.received_by if first is not None else None


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def otel_seal_due(*, now: datetime | None = None) -> list[str]:
    """Seal every open trace whose root has arrived and that has been quiet for
    ``REPLAY_OTEL_SEAL_AFTER_S``, and every one whose root never came after
    ``REPLAY_OTEL_SEAL_ORPHAN_AFTER_S``: the sweep's second half. Returns their ids."""
    now = now or timezone.now()
    quiet = now - timedelta(seconds=conf.seal_after_s())
    orphan = now - timedelta(seconds=conf.seal_orphan_after_s())
    sealed = []
    due = (
        OtelTrace.objects.filter(open=True, last_span_at__lte=quiet)
        # a seal refused is tried again once another span has arrived, not at every sweep
        .exclude(seal_failed_at__gte=F("last_span_at"))
        .order_by("last_span_at")
        .values_list("trace_id", "root_ended", "last_span_at")
    )
    for trace_id, root_ended, last_span_at in due[:200]:
        if not root_ended and last_span_at > orphan:
            continue
        try:
            otel_seal(trace_id=trace_id, reason=SEAL_QUIET if root_ended else SEAL_ORPHAN)
        except (SealError, ReplayError) as exc:
            logger.warning("OTel trace %s not sealed: %s", trace_id, exc)
            continue
        sealed.append(trace_id)
    return sealed


def otel_sweep() -> dict[str, int]:
    """The periodic job: read what is unread, seal what is due."""
    read = otlp_read_pending()
    sealed = otel_seal_due()
    return {"read": read, "sealed": len(sealed)}


def otel_trace_window(trace_id: str) -> tuple[int, int] | None:
    """The earliest start and latest end of a trace's received spans (ns), or None."""
    found = OtelSpan.objects.filter(trace_id=trace_id).aggregate(Min("start_ns"), Max("end_ns"))
    if found["start_ns__min"] is None:
        return None
    return found["start_ns__min"], found["end_ns__max"]
