"""The facts the trace list filters OpenTelemetry traces by, written with each stored
``otel-genai`` trace (``core.formats.otel.facts`` computes them from its record).

Whatever stores the trace (a seal, an OTLP JSON export uploaded on the upload page, over the
API or with ``manage.py ingest``) goes through ``replay.services._store``, which sends
``replay.signals.trace_stored`` inside its transaction: :func:`on_trace_stored` writes the
facts there, so a trace is never listed without them (a receiver that raises refuses the
upload, nothing is stored). :func:`facts_fill_missing` (``manage.py otel refacts``) writes
those of traces stored before the facts existed, reading their files.

A field the privacy path rules (``PRIVACY_PATH_RULES["otel-genai"]``) name personal is left
out of the facts: they are kept in plain, append-only rows that erasure does not reach.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import transaction

from core.errors import ReplayError
from core.formats import formats
from core.formats.otel import facts as otel_facts
from core.formats.otel.record import FORMAT, Record
from core.formats.protocol import VerifyContext
from core.privacy import rules
from otel.models import OtelFactValue, OtelTraceFacts, OtelTraceValue
from replay.models import Trace
from replay.storage import blob_open

logger = logging.getLogger(__name__)


def withheld_fields() -> frozenset[str]:
    """The span fields the privacy path rules name personal for this format: not kept."""
    _subject, personal = rules.rule_of(settings.PRIVACY_PATH_RULES, FORMAT)
    return otel_facts.withheld_by(personal)


def record_read(data: bytes, filename: str) -> Record:
    """A stored file's record, read as the format reads it: a sealed record, or an OTLP JSON
    export sealed as it is read. Raises ``ReplayError``."""
    fmt = formats().get(FORMAT)
    if fmt is None:  # pragma: no cover - the format is built in
        raise LookupError(f"no format {FORMAT}")
    parsed = fmt.parse(io.BytesIO(data), filename, VerifyContext())
    assert isinstance(parsed, Record)
    return parsed


def facts_store(trace: Trace, record: Record) -> OtelTraceFacts:
    """Write one trace's facts: its row, the values it holds (each known value once) and
    the trace's link to each. Inside the caller's transaction."""
    facts = otel_facts.facts_of(record, withheld=withheld_fields())
    row = OtelTraceFacts.objects.create(
        trace=trace,
        service_names=list(facts.services),
        model_names=list(facts.models),
        operation_names=list(facts.operations),
        conversation_ids=list(facts.conversations),
        agent_names=list(facts.agents),
        provider_names=list(facts.providers),
        span_count=facts.span_count,
        model_call_count=facts.model_call_count,
        tool_call_count=facts.tool_call_count,
        input_tokens=facts.input_tokens,
        output_tokens=facts.output_tokens,
    )
    pairs = list(facts.values())
    if not pairs:
        return row
    # a value another trace brought already is there; two traces bringing the same new
    # value at once: the second waits for the first's insert (the unique constraint)
    OtelFactValue.objects.bulk_create(
        [OtelFactValue(kind=kind, value=value) for kind, value in pairs], ignore_conflicts=True
    )
    ids: dict[tuple[str, str], int] = {}
    for kind in {kind for kind, _ in pairs}:
        wanted = [value for k, value in pairs if k == kind]
        for pk, value in OtelFactValue.objects.filter(kind=kind, value__in=wanted).values_list(
            "pk", "value"
        ):
            ids[(kind, value)] = pk
    OtelTraceValue.objects.bulk_create(
        [
            OtelTraceValue(trace=trace, value_id=ids[pair], created_at=trace.created_at)
            for pair in pairs
        ]
    )
    return row


def on_trace_stored(
    sender: Any,
    trace: Trace,
    opened: Callable[[], IO[bytes]] | None = None,
    parsed: Any = None,
    **kwargs: Any,
) -> None:
    """``trace_stored``'s receiver: an ``otel-genai`` trace's facts, from the record the
    upload parsed (``parsed``), else from its bytes (``opened``), else its stored file."""
    if trace.format != FORMAT:
        return
    if not isinstance(parsed, Record):
        if opened is not None:
            with opened() as fh:
                data = fh.read()
        else:
            with blob_open(trace.blob.storage_name) as fh:
                data = fh.read()
        parsed = record_read(data, trace.filename)
    facts_store(trace, parsed)


@dataclass
class Filled:
    """What :func:`facts_fill_missing` did: traces given their facts, and those it could not
    read (trace id and file name -> why)."""

    filled: int = 0
    expired: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def facts_missing() -> Any:
    """The stored ``otel-genai`` traces without facts (stored before they were kept)."""
    return Trace.objects.filter(format=FORMAT, otel_facts__isnull=True).order_by("pk")


def facts_fill_missing(*, progress: Callable[[Trace], None] | None = None) -> Filled:
    """Give every stored ``otel-genai`` trace without facts its facts, each in its own
    transaction, reading its file (``blob_open``: personal values put back). A trace whose
    file retention removed has none to read (``expired``); one whose file does not read is
    named in ``failed`` and left without. Idempotent: run it again after a failure."""
    done = Filled()
    for trace in facts_missing().select_related("blob").iterator(chunk_size=200):
        if trace.blob.expired_at is not None or trace.expired_at is not None:
            done.expired += 1
            continue
        try:
            with blob_open(trace.blob.storage_name) as fh:
                data = fh.read()
            record = record_read(data, trace.filename)
            with transaction.atomic():
                if OtelTraceFacts.objects.filter(trace=trace).exists():
                    continue  # another run of this filled it meanwhile
                facts_store(trace, record)
        except (OSError, ReplayError) as exc:
            why = getattr(exc, "message", None) or str(exc)
            done.failed[f"{trace.trace_id} ({trace.filename})"] = why
            logger.warning("otel facts of trace %s not filled: %s", trace.pk, why)
            continue
        done.filled += 1
        if progress is not None:
            progress(trace)
    return done
