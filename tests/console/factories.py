"""Rows for tests that only need something to list or to look at (no real trace bytes)."""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime

from replay.models import Blob, Snapshot, Trace

_counter = itertools.count(1)


def trace_row(
    *,
    format: str = "replay-trace",
    status: str = Trace.Status.NEW,
    job_id: str = "",
    created_at: datetime | None = None,
    required_snapshot_ids: list[str] | None = None,
    missing_outputs: list[str] | None = None,
    size: int = 10,
) -> Trace:
    n = next(_counter)
    digest = hashlib.sha256(f"blob {n}".encode()).hexdigest()
    blob = Blob.objects.create(sha256=digest, size=size, storage_name=f"{digest[:2]}/{digest}")
    trace = Trace.objects.create(
        trace_id=hashlib.md5(f"trace {n}".encode()).hexdigest(),  # noqa: S324 (an id, not a hash)
        format=format,
        schema_version=1,
        blob=blob,
        filename=f"t{n}.trace.json",
        encoding="json",
        job_id=job_id or f"job-{n}",
        last_status=status,
        required_snapshot_ids=required_snapshot_ids or [],
        missing_outputs=missing_outputs or [],
    )
    if created_at is not None:
        Trace.objects.filter(pk=trace.pk).update(created_at=created_at)
        trace.refresh_from_db()
    return trace


def snapshot_row(snapshot_id: str, kind: str = "selfrep") -> Snapshot:
    return Snapshot.objects.create(
        snapshot_id=snapshot_id, kind=kind, schema_version=1, body={}, signature={}
    )
