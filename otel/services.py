"""Writes of the OTLP receiver: a body received and stored with its ledger event, a body's
spans read into rows, a trace version sealed into a stored ``otel-genai`` trace.

The request path does as little as keeps the promise of the response: it decodes the body
once (so a body that does not parse is 400 and one with refused spans says how many), then
stores the body under its digest and appends ``OTLP_RECEIVED`` naming that digest in one
transaction, and queues the rest. Grouping, mapping and sealing run in the background runner
(``replay.background``), each step idempotent: a body read twice stores no span twice, and a
seal retried writes the same bytes (its time is decided once, on the trace's row).
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Min
from django.utils import timezone

from core.canonical import jcs
from core.errors import ReplayError
from core.formats.otel import mapping, otlp, record
from core.ledger import codes
from governance import ledger
from otel import conf
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
    """Decode one export body (``otlp.OtlpError`` when it does not parse: nothing is
    stored), then store it and its ``OTLP_RECEIVED`` event together and queue reading it
    (``enqueue=False``: the caller reads it, as the demo does)."""
    decoded = otlp.decode(body, content_type, limits=limits())
    sha256 = hashlib.sha256(body).hexdigest()
    received = Received(
        spans=len(decoded.spans),
        rejected=len(decoded.rejected),
        reasons=[rejection.reason for rejection in decoded.rejected],
        sha256=sha256,
        trace_ids=sorted({s["trace_id"] for s in decoded.spans}),
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
    with blob_storage().open(body.storage_name, "rb") as fh:
        data = fh.read()
    return otlp.decode(data, body.content_type, limits=limits()).spans


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(jcs(value)).hexdigest()


def _int(text: str) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


def otlp_read(*, body_pk: int) -> OtlpBodyDone | None:
    """Read one stored body's spans into :class:`OtelSpan` rows and bring each of its
    traces' rows up to date (a span after a seal opens the next version). Idempotent."""
    body = OtlpBody.objects.filter(pk=body_pk).first()
    if body is None:
        return None
    done = OtlpBodyDone.objects.filter(body=body).first()
    if done is not None:
        return done
    rows: list[OtelSpan] = []
    for plain in _spans_of(body):
        rec = mapping.span_record(plain)
        rows.append(
            OtelSpan(
                trace_id=plain["trace_id"],
                span_id=rec["span_id"],
                digest=_digest(rec),
                parent_span_id=rec.get("parent_span_id") or "",
                name=str(rec.get("name", ""))[:255],
                start_ns=_int(rec.get("start_time_unix_nano", "0")),
                end_ns=_int(rec.get("end_time_unix_nano", "0")),
                record=rec,
                body=body,
            )
        )
    with transaction.atomic():
        # one reader a body: the sweep and a queued task may both pick it up; the second
        # waits here for the first and finds it read
        OtlpBody.objects.select_for_update().only("pk").get(pk=body.pk)
        done = OtlpBodyDone.objects.filter(body=body).first()
        if done is not None:
            return done
        new = dup = conflicting = 0
        by_trace: dict[str, list[OtelSpan]] = {}
        for row in rows:
            by_trace.setdefault(row.trace_id, []).append(row)
        for trace_id in sorted(by_trace):
            state = _state_for_update(trace_id)
            known = dict(
                OtelSpan.objects.filter(
                    trace_id=trace_id, span_id__in=[s.span_id for s in by_trace[trace_id]]
                ).values_list("span_id", "digest")
            )
            fresh: list[OtelSpan] = []
            for row in by_trace[trace_id]:
                seen = known.get(row.span_id)
                if seen == row.digest:
                    dup += 1
                    continue
                if seen is not None:
                    conflicting += 1
                known.setdefault(row.span_id, row.digest)
                fresh.append(row)
            if not fresh:
                continue
            OtelSpan.objects.bulk_create(fresh, ignore_conflicts=True)
            new += len(fresh)
            _advance(state, fresh)
        return OtlpBodyDone.objects.create(
            body=body, new_spans=new, duplicate_spans=dup, conflicting_spans=conflicting
        )


def _state_for_update(trace_id: str) -> OtelTrace:
    now = timezone.now()
    state, _ = OtelTrace.objects.get_or_create(
        trace_id=trace_id, defaults={"first_span_at": now, "last_span_at": now}
    )
    return OtelTrace.objects.select_for_update().get(pk=state.pk)


def _advance(state: OtelTrace, fresh: Iterable[OtelSpan]) -> None:
    """A trace's row after new spans: open again (the next version) if it was sealed, its
    root seen, its counts and times."""
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
    state.span_count = OtelSpan.objects.filter(trace_id=state.trace_id).count()
    state.last_span_at = timezone.now()
    state.save()


def otlp_read_pending(*, limit: int = 100) -> int:
    """Read the bodies no runner has read yet (a worker killed mid-way, a queue lost with a
    process): the sweep's first half. Returns how many were read."""
    pending = list(
        OtlpBody.objects.filter(otlpbodydone__isnull=True)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    for pk in pending:
        otlp_read(body_pk=pk)
    return len(pending)


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
        OtelSpan.objects.filter(trace_id=trace_id, pk__lte=cutoff)
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
