"""Legal requests (Data Subject Requests); their signed four-eyes approvals are votes on
a governed request of kind ``legal-release`` or ``legal-erasure`` (``governance.models.Vote``).

No personal data is stored here: subjects are opaque refs (``dsr.subjects_port``), and every
transition is a ledger event the row points to (the ledger is the record; these rows are what
the pages query).
"""

from __future__ import annotations

import uuid
from datetime import date

from django.conf import settings
from django.db import models
from django.utils import timezone


class LegalRequest(models.Model):
    class Kind(models.TextChoices):
        ACCESS = "access"
        ERASURE = "erasure"
        BOTH = "both"

    class State(models.TextChoices):
        OPEN = "open"
        IN_PROGRESS = "in_progress", "in progress"
        FULFILLED = "fulfilled"
        REFUSED = "refused"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    subject_refs = models.JSONField(default=list)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    legal_basis = models.TextField()
    due_date = models.DateField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    refusal_reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="legal_requests"
    )
    created_at = models.DateTimeField(default=timezone.now)
    opened_event = models.ForeignKey(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+", null=True
    )
    # how the subject's identity was verified (method, by whom, when): a DSR_IDENTITY_VERIFIED
    identity_method = models.CharField(max_length=200, blank=True)
    identity_verified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        null=True,
        blank=True,
    )
    identity_verified_at = models.DateTimeField(null=True, blank=True)
    identity_event = models.ForeignKey(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+", null=True
    )
    closed_event = models.ForeignKey(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+", null=True
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    # the access bundle, built by a background task (dsr.tasks)
    bundle_state = models.CharField(max_length=16, blank=True)
    bundle_done = models.PositiveIntegerField(default=0)
    bundle_total = models.PositiveIntegerField(default=0)
    bundle_error = models.TextField(blank=True)
    bundle_sha256 = models.CharField(max_length=64, blank=True)
    bundle_name = models.CharField(max_length=255, blank=True)
    export_event = models.ForeignKey(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+", null=True
    )
    # the erasure receipt (no personal data): the DSR_ERASED event's payload
    erasure_event = models.ForeignKey(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+", null=True
    )

    class Meta:
        ordering = ["due_date", "created_at"]

    def __str__(self) -> str:
        return f"legal request {self.id}"

    @property
    def is_closed(self) -> bool:
        return self.state in (self.State.FULFILLED, self.State.REFUSED)

    @property
    def identity_verified(self) -> bool:
        return self.identity_event_id is not None

    @property
    def wants_access(self) -> bool:
        return self.kind in (self.Kind.ACCESS, self.Kind.BOTH)

    @property
    def wants_erasure(self) -> bool:
        return self.kind in (self.Kind.ERASURE, self.Kind.BOTH)

    def days_left(self, today: date | None = None) -> int:
        """Days until the due date (negative once overdue)."""
        return (self.due_date - (today or timezone.localdate())).days


class DsrRelease(models.Model):
    """An admin released one field's value into a request's bundle (a PII_REVEALED event that
    names the request). The value itself is not kept here: the bundle build reads it from the
    privacy store, so an erasure removes it from every later build.

    Append-only in the database; a build reveals a row's value only when its PII_REVEALED
    event says the same and, once a release approval counts, only a value it signed."""

    request = models.ForeignKey(LegalRequest, on_delete=models.PROTECT, related_name="releases")
    subject_ref = models.CharField(max_length=64)
    trace_pk = models.BigIntegerField()
    location = models.CharField(max_length=200)
    path = models.CharField(max_length=2000)
    released_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    event = models.OneToOneField(
        "governance.GovernanceEvent", on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "subject_ref", "trace_pk", "location", "path"],
                name="dsr_release_once_per_field",
            )
        ]

    def __str__(self) -> str:
        return f"release of {self.location} {self.path} for {self.request_id}"
