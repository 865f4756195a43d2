"""The console's own rows: failed sign-ins (for throttling) and drift samples."""

from __future__ import annotations

import uuid

from django.db import models


class LoginFailure(models.Model):
    """One failed sign-in, keyed by the username tried and the client address.

    Kept in the database rather than a per-process cache so the throttle holds across every
    worker process of a deployment with no extra service.
    """

    username = models.CharField(max_length=150)
    ip = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["username", "ip", "created_at"], name="login_failure_key")]

    def __str__(self) -> str:
        return f"failed sign-in as {self.username} from {self.ip}"


class DriftSample(models.Model):
    """One trace replayed by the periodic drift sampling, and whether its verdict moved."""

    sweep = models.UUIDField(default=uuid.uuid4, db_index=True)
    trace = models.ForeignKey("replay.Trace", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(
        "replay.ReplayRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    previous_status = models.CharField(max_length=20)
    status = models.CharField(max_length=20, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    drifted = models.BooleanField(default=False)
    runtime = models.CharField(max_length=128, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"drift sample of {self.trace_id}: {self.previous_status} -> {self.status}"
