"""The console's own rows: failed sign-ins (for throttling), drift samples, and the TOTP
device whose seed is encrypted at rest."""

from __future__ import annotations

import uuid

from django.db import models
from django_otp.plugins.otp_totp.models import TOTPDevice

from console.otp import is_sealed, seal_totp_key, unseal_totp_key


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


class EncryptedTOTPDevice(TOTPDevice):
    """django-otp's TOTP device with its seed sealed in the same column (console.otp).

    A proxy: same table, same django-otp verification, throttling and session handling (the
    session names this model, `console.encryptedtotpdevice/<id>`); only the seed is sealed on
    save and opened in `bin_key`, which is all django-otp reads it through. The console
    creates and looks devices up through this model only; migration
    0002_totp_seeds_encrypted sealed the seeds stored before it.
    """

    class Meta:
        proxy = True
        verbose_name = "TOTP device (seed encrypted)"

    def save(self, *args, **kwargs):
        if self.key and not is_sealed(self.key):
            self.key = seal_totp_key(self.key, user_id=self.user_id)
            fields = kwargs.get("update_fields")
            if fields is not None and "key" not in fields:
                kwargs["update_fields"] = [*fields, "key"]
        super().save(*args, **kwargs)

    @property
    def bin_key(self) -> bytes:
        if is_sealed(self.key):
            return unseal_totp_key(self.key, user_id=self.user_id)
        return super().bin_key  # a seed stored before the migration sealed it
