"""Reads about traces and runs."""

from __future__ import annotations

from replay.models import ReplayRun, Snapshot, Trace


def trace_missing(trace: Trace) -> list[str]:
    """What production replay of `trace` lacks now (snapshots can be removed by retention)."""
    refs = trace.required_snapshot_ids or []
    ids = [r["snapshot_id"] for r in refs if r.get("snapshot_id")]
    stored = set(Snapshot.objects.filter(snapshot_id__in=ids).values_list("snapshot_id", flat=True))
    missing = []
    for ref in refs:
        sid = ref.get("snapshot_id")
        if sid is None:
            missing.append(f"snapshot:{ref['kind']} (not referenced by the trace)")
        elif sid not in stored:
            missing.append(f"snapshot:{ref['kind']} {sid} (not retained)")
    missing += [f"output:{ref} (not persisted)" for ref in trace.missing_outputs]
    return missing


def trace_is_replayable(trace: Trace) -> bool:
    return not trace_missing(trace)


def snapshot_tampered(snapshot_id: str) -> bool:
    """The retained body of this snapshot no longer hashes to its own id (rewritten in the
    store). False when it matches or is not retained."""
    from replay.errors import ReplayError
    from replay.formats import native

    row = Snapshot.objects.filter(snapshot_id=snapshot_id).only("body").first()
    if row is None:
        return False
    try:
        return native.snapshot_id_of(row.body) != snapshot_id
    except ReplayError:  # a body that cannot even be canonicalised no longer matches its id
        return True


def snapshot_referenced(snapshot_id: str) -> bool:
    """The console stores this snapshot's body or a stored trace needs it."""
    if Snapshot.objects.filter(snapshot_id=snapshot_id).exists():
        return True
    return any(
        any(r.get("snapshot_id") == snapshot_id for r in refs or [])
        for refs in Trace.objects.values_list("required_snapshot_ids", flat=True).iterator()
    )


def trace_by_trace_id(trace_id: str) -> Trace | None:
    """The newest stored file carrying this trace id."""
    return Trace.objects.filter(trace_id=trace_id).order_by("-created_at", "-id").first()


def runs_for_trace(trace: Trace) -> list[ReplayRun]:
    return list(trace.runs.order_by("-created_at"))
