"""What the OTLP receiver keeps: each export body as received (append-only, by digest), each
span it held (append-only), and one mutable row per OTel trace saying how far its assembly
is (open, sealed, which version). The evidence is the first two and the ledger; the third is
bookkeeping that can be rebuilt from them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F
from django.db.models.functions import Upper

from replay.models import AppendOnlyModel, Trace


class OtlpBody(AppendOnlyModel):
    """One ``ExportTraceServiceRequest`` body (gzip already undone), stored once under its
    SHA-256: an exporter's retry of the same body stores nothing new."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    #: "application/x-protobuf" or "application/json"
    content_type = models.CharField(max_length=32)
    storage_name = models.CharField(max_length=255)
    span_count = models.IntegerField()
    rejected_count = models.IntegerField(default=0)
    #: the ledger event (``OTLP_RECEIVED``) that names this body's digest
    event_seq = models.BigIntegerField()
    received_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT
    )
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)
    #: set once when an erasure (``otel.erasure``) deleted the body's bytes from the blob
    #: store (the row, its digest and the ledger event naming it stay): the one update the
    #: database lets through (``replay.dbguards.erasure_only_sql``)
    erased_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"OTLP body {self.sha256[:12]} ({self.span_count} spans)"


class ErasedBodyBytes(models.Model):
    """An erased body whose bytes may still be in the blob store: written with the erasure,
    removed once the bytes are deleted (after the erasure commits, or by the next sweep when
    the store refused). Bookkeeping, not evidence: the erasure is ``OtlpBody.erased_at``."""

    body = models.OneToOneField(OtlpBody, on_delete=models.PROTECT, primary_key=True)
    storage_name = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"bytes of erased body {self.body_id} to delete"


class OtlpBodyDone(AppendOnlyModel):
    """A body whose spans the background runner has read into :class:`OtelSpan` rows: a body
    without one is read (again) by the next sweep, so a worker killed mid-way loses nothing."""

    body = models.OneToOneField(OtlpBody, on_delete=models.PROTECT, primary_key=True)
    new_spans = models.IntegerField()
    duplicate_spans = models.IntegerField()
    conflicting_spans = models.IntegerField()
    done_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"read {self.body_id}"


#: what an erased span's ``record`` holds (the database refuses any other value there)
SPAN_TOMBSTONE = {"erased": True}
#: the same as the JSON text the guard compares the column with
SPAN_TOMBSTONE_JSON = '{"erased": true}'


class OtelSpan(AppendOnlyModel):
    """One span as received, normalised (``core.formats.otel.mapping``); a span id sent again
    with the same content is not stored twice, with other content it is stored beside the
    first (a conflict the sealed record names)."""

    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    #: ``sha256:`` of the record's JCS bytes
    digest = models.CharField(max_length=71)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=255)
    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    record = models.JSONField()
    body = models.ForeignKey(OtlpBody, on_delete=models.PROTECT, related_name="spans")
    received_at = models.DateTimeField(auto_now_add=True)
    #: set once when an erasure replaced ``record`` by :data:`SPAN_TOMBSTONE` (ids, digest,
    #: times and name stay): the one update the database lets through
    #: (``replay.dbguards.erasure_only_sql``)
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trace_id", "span_id", "digest"], name="otel_span_once")
        ]
        indexes = [models.Index(fields=["trace_id", "start_ns"], name="otel_span_trace")]

    def __str__(self) -> str:
        return f"span {self.span_id} of {self.trace_id}"


class OtelTrace(models.Model):
    """How far one OTel trace's assembly is: open (spans still arriving) or sealed, and the
    version being collected. A span arriving after a seal opens the next version."""

    trace_id = models.CharField(max_length=32, unique=True)
    version = models.IntegerField(default=1)
    open = models.BooleanField(default=True, db_index=True)
    #: a span without a parent has arrived (an exporter sends a span once it has ended)
    root_ended = models.BooleanField(default=False)
    span_count = models.IntegerField(default=0)
    service = models.CharField(max_length=255, blank=True)
    root_name = models.CharField(max_length=255, blank=True)
    first_span_at = models.DateTimeField()
    last_span_at = models.DateTimeField()
    #: the time the seal of ``version`` was decided (kept, so a retried seal writes the same
    #: bytes and stores nothing twice)
    sealing_at = models.DateTimeField(null=True, blank=True)
    sealing_reason = models.CharField(max_length=16, blank=True)
    sealed_trace = models.ForeignKey(
        Trace, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    sealed_digest = models.CharField(max_length=71, blank=True)
    #: why the last seal was refused (its code and message: a record larger than the format
    #: reads, say), and when; cleared by a seal that succeeds
    seal_error = models.TextField(blank=True)
    seal_failed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["open", "last_span_at"], name="otel_trace_due")]

    def __str__(self) -> str:
        return f"OTel trace {self.trace_id} v{self.version}"


class OtelTraceFacts(AppendOnlyModel):
    """What the trace list knows of one stored ``otel-genai`` trace without opening its file
    (``core.formats.otel.facts``): written with the trace, in the transaction that stores
    it (``replay.signals.trace_stored``), never changed. The value lists are for showing
    (the list's rows); what the list filters by is :class:`OtelTraceValue`."""

    trace = models.OneToOneField(
        Trace, on_delete=models.PROTECT, primary_key=True, related_name="otel_facts"
    )
    service_names = models.JSONField(default=list)
    #: request and response models, each once
    model_names = models.JSONField(default=list)
    operation_names = models.JSONField(default=list)
    conversation_ids = models.JSONField(default=list)
    agent_names = models.JSONField(default=list)
    provider_names = models.JSONField(default=list)
    span_count = models.IntegerField()
    model_call_count = models.IntegerField()
    tool_call_count = models.IntegerField()
    #: summed over the model calls that record them; null when none does
    input_tokens = models.BigIntegerField(null=True, blank=True)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "OTel trace facts"

    def __str__(self) -> str:
        return f"facts of trace {self.trace_id}"


class OtelFactValue(AppendOnlyModel):
    """One value of one kind the list filters by (a service name, a model, an operation, a
    conversation id, an agent name), once, whichever traces hold it: the values the list's
    filter offers, read from the ``(kind, value)`` index, and what a filter looks up before
    its traces (service and agent names in any case: the ``UPPER(value)`` index)."""

    kind = models.CharField(max_length=16)
    value = models.CharField(max_length=255)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "value"], name="otel_value_once")]
        indexes = [models.Index(F("kind"), Upper("value"), name="otel_value_any_case")]

    def __str__(self) -> str:
        return f"{self.kind} {self.value}"


class OtelTraceValue(AppendOnlyModel):
    """A trace holds a value, with the trace's upload time (``Trace.created_at``, set once,
    copied here in the transaction that stores the trace). Two indexes answer the list:
    ``(value, trace)`` whether a trace holds a value (and a value's traces), and
    ``(value, created_at DESC, trace DESC)`` a value's traces newest first, so a filtered
    page in the list's own order reads its rows and no others, wherever in time they are."""

    trace = models.ForeignKey(
        Trace, on_delete=models.PROTECT, related_name="otel_values", db_index=False
    )
    value = models.ForeignKey(
        OtelFactValue, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["value", "trace"], name="otel_trace_value_once")
        ]
        indexes = [
            models.Index(fields=["value", "-created_at", "-trace"], name="otel_trace_value_newest")
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_id} holds value {self.value_id}"
