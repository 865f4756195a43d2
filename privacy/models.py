"""Subjects, their keys (a table of their own), and the personal values held under them.

A subject's identifier and every personal value of a stored file are kept only as
AES-256-GCM ciphertexts under the subject's key; the key itself is kept wrapped under the
server's master key. Erasure nulls the key (and the ciphertexts): nothing left opens.
"""

from __future__ import annotations

from django.db import models


class SubjectKey(models.Model):
    """One subject's AES-256-GCM key, wrapped under the master key; null once destroyed."""

    wrapped = models.BinaryField(null=True)  # nonce (12) + ciphertext of the 32-byte key
    created_at = models.DateTimeField(auto_now_add=True)
    destroyed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"subject key {self.pk}{' (destroyed)' if self.destroyed_at else ''}"


class Subject(models.Model):
    """A person (or other data subject) named in stored traces, by an opaque ref."""

    ref = models.CharField(max_length=40, unique=True)
    # HMAC-SHA256 of the normalised identifier under the server's secret: lookup without a
    # scan; null once erased
    lookup_digest = models.CharField(max_length=64, unique=True, null=True)  # noqa: DJ001
    key = models.OneToOneField(SubjectKey, on_delete=models.PROTECT, related_name="subject")
    identifier_nonce = models.BinaryField(null=True)
    identifier_ciphertext = models.BinaryField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    erased_at = models.DateTimeField(null=True, blank=True)
    erasure = models.ForeignKey(
        "ErasureReceipt", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    def __str__(self) -> str:
        return self.ref


class PersonalValue(models.Model):
    """One personal value of one stored file (the subject index): whose, where, encrypted.

    ``start``/``end``: the byte span of the value's contents in the stored file (after
    decompression); the stored blob holds those bytes cut out (``SealedBlob``)."""

    subject = models.ForeignKey(Subject, on_delete=models.PROTECT, related_name="values")
    trace = models.ForeignKey("replay.Trace", on_delete=models.PROTECT, related_name="+")
    location = models.CharField(max_length=64)
    path = models.CharField(max_length=512)
    start = models.BigIntegerField()
    end = models.BigIntegerField()
    nonce = models.BinaryField(null=True)
    ciphertext = models.BinaryField(null=True)

    class Meta:
        ordering = ["trace_id", "start"]
        indexes = [models.Index(fields=["subject", "trace"], name="privacy_value_subject")]
        constraints = [
            models.UniqueConstraint(fields=["trace", "start"], name="privacy_value_once")
        ]

    def __str__(self) -> str:
        return f"{self.location} {self.path}"


def values_of_file(sha256: str) -> models.QuerySet[PersonalValue]:
    """The personal values of the stored file ``sha256``: its trace found by the blob's
    unique index first (a subquery), never a join of every trace the planner may choose to
    run as a scan of the trace table (580 ms with 100,000 traces, issue 23)."""
    from django.apps import apps

    traces = apps.get_model("replay", "Trace").objects.filter(blob__sha256=sha256)
    return PersonalValue.objects.filter(trace_id__in=traces.values("pk"))


class SealedBlob(models.Model):
    """A stored blob whose personal values are cut out of the bytes at rest.

    ``sha256`` is the blob's (the original file's) digest; ``gzip``: the stored bytes are
    the decompressed file with the spans cut out (the original gzip stream is not kept)."""

    sha256 = models.CharField(max_length=64, unique=True)
    gzip = models.BooleanField(default=False)
    plain_sha256 = models.CharField(max_length=64)  # of the decompressed original
    plain_size = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"sealed blob {self.sha256[:12]}"


class ErasureReceipt(models.Model):
    """What one erasure destroyed (no personal data), kept to answer a repeated erasure."""

    refs = models.JSONField()
    outcome = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"erasure {self.pk}"
