"""Retention's write side in replay: turn a stored trace into a tombstone.

A tombstone keeps every row and every hash (the Trace row with its trace id, format, file
sha256 and size, snapshot ids; the Blob row with its sha256), so the ledger's references
still resolve, and loses the content: the stored file's bytes, the snapshot bodies no other
live trace needs, the replay reports' bodies and the detail of the upload's verification.
Which traces expire, and the ledger event that records it, are governance's
(``governance.retention``); this module only does what it is told, inside the caller's
transaction, and removes the file's bytes once that transaction has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings
from django.core.files.storage import storages
from django.db import transaction

from core import errors
from replay.models import Blob, ReplayRun, Snapshot, Trace
from replay.signals import trace_expired
from replay.storage import blob_storage

log = logging.getLogger(__name__)

EXPIRED_MESSAGE = (
    "the stored file {sha256} expired on {at} by the retention rule {rule}: its content is "
    "gone, its hashes stay"
)


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What expiring one trace removed (no content: ids, sizes and counts only)."""

    trace_pk: int
    trace_id: str
    sha256: str
    size: int
    snapshots_removed: tuple[str, ...]
    reports_cleared: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "trace_sha256": self.sha256,
            "bytes_removed": self.size,
            "snapshots_removed": list(self.snapshots_removed),
            "reports_cleared": self.reports_cleared,
        }


def expired_message(trace: Trace) -> str:
    """Why a replay of an expired trace cannot run (the TRACE_EXPIRED refusal's message)."""
    at = trace.expired_at.isoformat() if trace.expired_at else "?"
    return EXPIRED_MESSAGE.format(sha256=trace.blob.sha256, at=at, rule=trace.expiry_rule)


def _ingest_summary(report: Any) -> dict[str, Any]:
    """The upload's verdict without its detail (details and diffs can quote content)."""
    report = report if isinstance(report, dict) else {}
    return {
        "status": report.get("status"),
        "error_code": report.get("error_code"),
        "authoritative": report.get("authoritative"),
        "broke_at": report.get("broke_at"),
        "checks": [
            {"name": c.get("name"), "ok": c.get("ok")}
            for c in report.get("checks") or []
            if isinstance(c, dict)
        ],
        "expired": True,
    }


def trace_tombstone(
    *, trace: Trace, at: datetime, rule: str, snapshots_unneeded: Iterable[str]
) -> Tombstone:
    """Expire ``trace`` (locked by the caller) at ``at`` by ``rule``; ``snapshots_unneeded``:
    the snapshot ids it needs that no other live trace needs (their bodies are removed).

    Must run inside a transaction; the file's bytes are deleted when it commits (a failure
    then leaves bytes that :func:`expired_content_sweep` removes later, never the reverse).
    """
    blob = trace.blob
    removed = tuple(sorted(snapshots_unneeded))
    Snapshot.objects.filter(snapshot_id__in=removed).delete()
    cleared = ReplayRun.objects.filter(trace=trace, report__isnull=False).update(report=None)
    Trace.objects.filter(pk=trace.pk).update(
        expired_at=at, expiry_rule=rule, ingest_report=_ingest_summary(trace.ingest_report)
    )
    # the one update the blob guard allows: expired_at, once
    Blob.objects.filter(pk=blob.pk, expired_at__isnull=True).update(expired_at=at)
    trace_expired.send(sender=Trace, trace=trace)
    storage_name = blob.storage_name
    transaction.on_commit(lambda: blob_content_remove(storage_name))
    return Tombstone(trace.pk, trace.trace_id, blob.sha256, blob.size, removed, cleared)


def blob_content_remove(storage_name: str) -> bool:
    """Delete an expired file's bytes from the blob store; True when there were any.

    Deletes through ``blobs_retention`` when it is configured (an S3 identity that may
    delete, which only the worker and beat have: the application's may not). A store that
    refuses the deletion leaves the bytes for :func:`expired_content_sweep` (logged)."""
    storage = (
        storages["blobs_retention"] if "blobs_retention" in settings.STORAGES else blob_storage()
    )
    try:
        if not storage.exists(storage_name):
            return False
        storage.delete(storage_name)
    except (OSError, ClientError, BotoCoreError):  # refused here, or unreachable
        log.warning("expired blob %s not deleted: the retention sweep retries", storage_name)
        return False
    return True


def expired_content_sweep() -> int:
    """Delete the bytes of every expired file still in the store (after a crash between the
    commit and the deletion); how many were deleted."""
    return sum(
        blob_content_remove(name)
        for name in Blob.objects.filter(expired_at__isnull=False)
        .values_list("storage_name", flat=True)
        .iterator()
    )


def expired_refusal(trace: Trace) -> errors.ReplayError:
    return errors.ReplayError(errors.TRACE_EXPIRED, expired_message(trace))
