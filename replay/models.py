"""Stored traces, content-addressed blobs and snapshots, replay runs and verification keys.

Trace blobs are append-only: the model refuses to update or delete them, and a database
trigger (migration 0002) refuses it too, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.db import models

from replay.fields import JSONTextField


class AppendOnlyError(Exception):
    """Raised by the model layer when code tries to rewrite an append-only row."""


class AppendOnlyModel(models.Model):
    """A row that may be inserted once and never updated or deleted through the ORM."""

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError(f"{type(self).__name__} rows are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnlyError(f"{type(self).__name__} rows are append-only")


class Blob(AppendOnlyModel):
    """The exact bytes of an uploaded file, stored once under their SHA-256."""

    sha256 = models.CharField(max_length=64, unique=True)
    size = models.BigIntegerField()
    storage_name = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    # set once when retention removes the bytes (the row, its sha256 and size stay): the one
    # update the database lets through (replay.dbguards.expiry_only_sql)
    expired_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"blob {self.sha256[:12]} ({self.size} bytes)"


class Snapshot(models.Model):
    """A snapshot body stored by its content address and shared between traces.

    Not append-only: retention may remove a body, which turns every trace that needs it
    into MISSING_SNAPSHOT (the trace keeps only the snapshot_id it references).
    """

    snapshot_id = models.CharField(max_length=71, unique=True)  # "sha256:" + 64 hex
    kind = models.CharField(max_length=64)
    schema_version = models.IntegerField()
    body = models.JSONField()
    signature = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.snapshot_id[:19]}"


class Trace(models.Model):
    class Status(models.TextChoices):
        NEW = "new", "not replayed"
        OK = "ok", "ok"
        DIVERGED = "diverged", "diverged"
        TAMPER_DETECTED = "tamper_detected", "tamper detected"
        REFUSED = "refused", "refused"

    # not unique: a tampered or re-encoded copy of a trace is stored too (as evidence);
    # one stored file is one Trace, so the blob is unique
    trace_id = models.CharField(max_length=64, db_index=True)
    format = models.CharField(max_length=32, db_index=True)
    schema_version = models.IntegerField()
    blob = models.OneToOneField(Blob, on_delete=models.PROTECT, related_name="trace")
    filename = models.CharField(max_length=255)
    encoding = models.CharField(max_length=16)  # "json" | "jsonl" (+ ".gz" on the blob)
    job_id = models.CharField(max_length=255, blank=True, db_index=True)
    job_seed = models.CharField(max_length=255, blank=True)
    runtime_name = models.CharField(max_length=255, blank=True)
    runtime_version = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    event_count = models.IntegerField(default=0)
    step_count = models.IntegerField(default=0)
    # what the trace needs besides its own blob; `missing` is recomputed by selectors
    required_snapshot_ids = models.JSONField(default=list)
    missing_outputs = models.JSONField(default=list)
    # the signature verdict at ingest, witnessed by the console (key revocation later
    # does not un-sign what was verified while the key was valid)
    ingest_report = JSONTextField(default=dict)
    # The trace's verdict, by the one rule of core/replay/verdicts.py (the upload's verdict, then
    # the latest authoritative audit or production replay's), not merely the last run's:
    # recomputed by replay.services at upload and whenever a run finishes.
    last_status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.NEW, db_index=True
    )
    last_replayed_at = models.DateTimeField(null=True, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    # what stored the file when no person did (``"the demo"``), as a ledger event's
    # actor_label: the pages say "loaded by the demo", not "uploaded by nobody on record"
    uploaded_label = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # retention (governance.retention): once expired the trace is a tombstone, its content
    # removed and its hashes kept; when, and by which rule (e.g. "verdict:ok (30 days)")
    expired_at = models.DateTimeField(null=True, blank=True, db_index=True)
    expiry_rule = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["-created_at", "-id"], name="trace_newest")]

    def __str__(self) -> str:
        return f"{self.format} {self.trace_id}"


class ReplayRun(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    class Mode(models.TextChoices):
        AUDIT = "audit", "audit"
        SANDBOX = "sandbox", "sandbox"
        PRODUCTION = "production", "production"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    trace = models.ForeignKey(Trace, on_delete=models.PROTECT, related_name="runs")
    mode = models.CharField(max_length=16, choices=Mode.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    progress_done = models.BigIntegerField(default=0)
    progress_total = models.BigIntegerField(default=0)
    status = models.CharField(max_length=20, blank=True)  # the report's verdict
    error_code = models.CharField(max_length=64, blank=True)
    authoritative = models.BooleanField(default=True)
    # step seqs past which a governed force-continue allows the replay to go on
    continue_past = models.JSONField(default=list)
    # the format's replay options this run used, each one (Verist's recompute options); {}
    # for a format that takes none (core.formats.protocol.replay_options)
    options = models.JSONField(default=dict, blank=True)
    resumed_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="resumptions"
    )
    report = JSONTextField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # when someone last queued it again, its first queuing lost (governance.services
    # .replay_run_requeue): a queued run is stale REPLAY_STALE_SECONDS after the later of the two
    requeued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.mode} replay of {self.trace.trace_id}"

    @property
    def queued_since(self) -> datetime:
        return self.requeued_at or self.created_at


class VerificationKey(models.Model):
    """A key that verifies trace signatures: an HMAC secret (encrypted) or an Ed25519 key.

    A key verifies signatures made inside [valid_from, valid_until); revocation ends the
    window at revoked_at, and signatures the console witnessed before then keep verifying.
    """

    class Alg(models.TextChoices):
        HMAC_SHA256 = "hmac-sha256", "HMAC-SHA256"
        ED25519 = "ed25519", "Ed25519"

    key_id = models.CharField(max_length=128, unique=True)
    alg = models.CharField(max_length=16, choices=Alg.choices)
    public_key = models.BinaryField(null=True, blank=True)  # raw 32 bytes for ed25519
    encrypted_secret = models.BinaryField(null=True, blank=True)  # Fernet token for HMAC
    valid_from = models.DateTimeField()
    valid_until = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["key_id"]

    def __str__(self) -> str:
        return f"{self.alg} key {self.key_id}"


class TraceIndex(AppendOnlyModel):
    """Where each stretch of a stored file's events and steps starts, and its events in
    buckets (``core.replay.traceindex``): built once, at ingest in the background (a small trace's
    by the first page that needs it), so no page parses the records before the ones it
    shows. One per blob (the bytes never change)."""

    blob = models.OneToOneField(Blob, on_delete=models.PROTECT, primary_key=True)
    index = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"index of {self.blob}"


class TraceIndexBuild(models.Model):
    """A background build of a stored file's index under way (``console.tasks``): how many of
    its events it has read, so the trace page says how far it is instead of building it in
    the request. ``updated_at`` ages: a build not heard of for a while is queued again."""

    blob = models.OneToOneField(Blob, on_delete=models.CASCADE, primary_key=True)
    events_read = models.BigIntegerField(default=0)
    queued_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"index build of {self.blob}"
