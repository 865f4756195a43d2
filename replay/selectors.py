"""Reads about traces and runs."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.replay import verdicts
from replay.models import ReplayRun, Snapshot, Trace
from replay.prepared import Prepared


def trace_missing(trace: Trace, *, stored: Collection[str] | None = None) -> list[str]:
    """What production replay of `trace` lacks now (snapshots can be removed by retention).
    ``stored``: which of its required snapshots are stored, when the caller has asked
    already (:func:`snapshots_stored` of at least :func:`required_snapshot_ids`)."""
    if stored is not None:
        return _missing(trace, stored)
    return traces_missing([trace])[trace.pk]


def required_snapshot_ids(trace: Trace) -> set[str]:
    """The ids of the snapshots production replay of `trace` needs stored."""
    return {r["snapshot_id"] for r in trace.required_snapshot_ids or [] if r.get("snapshot_id")}


def snapshots_stored(ids: Iterable[str]) -> set[str]:
    """Which of these snapshot ids the store holds (one query)."""
    return set(Snapshot.objects.filter(snapshot_id__in=ids).values_list("snapshot_id", flat=True))


def traces_missing(traces: Sequence[Trace]) -> dict[int, list[str]]:
    """:func:`trace_missing` of each of ``traces`` (by pk), with one query for them all."""
    stored = snapshots_stored(set().union(*(required_snapshot_ids(t) for t in traces)))
    return {trace.pk: _missing(trace, stored) for trace in traces}


def _missing(trace: Trace, stored: Collection[str]) -> list[str]:
    missing = []
    for ref in trace.required_snapshot_ids or []:
        sid = ref.get("snapshot_id")
        if sid is None and ref.get("path"):  # an input pinned by the file, never stored
            missing.append(f"snapshot:{ref['kind']} {ref['path']} (not retained)")
        elif sid is None:  # the format may say why the file names none
            why = ref.get("why") or "not referenced by the trace"
            missing.append(f"snapshot:{ref['kind']} ({why})")
        elif sid not in stored:
            missing.append(f"snapshot:{ref['kind']} {sid} (not retained)")
    missing += [f"output:{ref} (not persisted)" for ref in trace.missing_outputs]
    return missing


def trace_replay_options(trace: Trace) -> tuple[Any, ...]:
    """The replay options ``trace``'s format takes (``protocol.ReplayOption``; none: ``()``)."""
    from core.formats import formats

    return tuple(getattr(formats().get(trace.format), "replay_options", ()))


def trace_is_replayable(trace: Trace) -> bool:
    return not trace_missing(trace)


def snapshot_tampered(snapshot_id: str) -> bool:
    """The retained body of this snapshot no longer hashes to its own id (rewritten in the
    store). False when it matches or is not retained."""
    from core.formats import snapshot_tampered as tampered

    row = Snapshot.objects.filter(snapshot_id=snapshot_id).only("body", "kind").first()
    if row is None:
        return False
    return tampered(row.kind, row.body, snapshot_id)  # as the format owning its kind checks


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


def trace_by_sha256(sha256: str) -> Trace | None:
    """The stored file with these bytes."""
    return Trace.objects.filter(blob__sha256=sha256).first()


#: how a stored file is named by its upload id (the Trace row's id): ``upload:42``
UPLOAD_PREFIX = "upload:"
#: the copies an AMBIGUOUS_TRACE_ID refusal names at most (it says how many more there are)
AMBIGUOUS_LISTED = 20
AMBIGUOUS_MESSAGE = (
    "trace id {trace_id} is carried by {count} stored files, so which one to replay is not "
    "said; pick one by its upload id (upload:ID) or its sha256: {copies}"
)
AMBIGUOUS_MORE = "; and {more} more (the trace list, filtered by this trace id, lists them all)"


def trace_by_upload_id(ref: str) -> Trace | None:
    """The stored file whose upload id ``ref`` names (``upload:42``), or None."""
    number = ref.strip().lower().removeprefix(UPLOAD_PREFIX)
    if not number.isdigit() or len(number) > 18:
        return None
    return Trace.objects.select_related("blob").filter(pk=int(number)).first()


def copy_facts(trace: Trace) -> dict[str, Any]:
    """One stored file as a refusal names it."""
    return {
        "upload_id": f"{UPLOAD_PREFIX}{trace.pk}",
        "sha256": trace.blob.sha256,
        "format": trace.format,
        "filename": trace.filename,
        "uploaded_at": trace.created_at.isoformat().replace("+00:00", "Z"),
    }


def trace_to_replay(ref: str) -> Trace | None:
    """The one stored file a replay names: by ``upload:ID``, by the sha256 of its file, or by
    a trace id exactly one stored file carries. None when nothing matches; a trace id several
    files carry is refused (``AMBIGUOUS_TRACE_ID``) naming each copy (upload id, sha256,
    format, file name, uploaded at) and how to pick one, never a guess at the newest."""
    from core import errors
    from core.errors import ReplayError

    given = ref.strip()
    if given.lower().startswith(UPLOAD_PREFIX):
        return trace_by_upload_id(given)
    if len(given) == 64:
        found = Trace.objects.select_related("blob").filter(blob__sha256=given.lower()).first()
        if found is not None:
            return found
    copies = list(
        Trace.objects.select_related("blob")
        .filter(trace_id=given)
        .order_by("-created_at", "-id")[: AMBIGUOUS_LISTED + 1]
    )
    if len(copies) <= 1:
        return copies[0] if copies else None
    count = Trace.objects.filter(trace_id=given).count()
    facts = [copy_facts(t) for t in copies[:AMBIGUOUS_LISTED]]
    listed = "; ".join(
        f"{f['upload_id']} (sha256 {f['sha256']}, {f['format']}, {f['filename']}, uploaded "
        f"{f['uploaded_at']})"
        for f in facts
    )
    if count > AMBIGUOUS_LISTED:
        listed += AMBIGUOUS_MORE.format(more=count - AMBIGUOUS_LISTED)
    raise ReplayError(
        errors.AMBIGUOUS_TRACE_ID,
        AMBIGUOUS_MESSAGE.format(trace_id=given, count=count, copies=listed),
        detail={"trace_id": given, "count": count, "copies": facts},
    )


_RUNS_OF_TRACE: Prepared[ReplayRun] = Prepared(
    lambda pk: ReplayRun.objects.filter(trace_id=pk).order_by("-created_at"), pk=int
)


def runs_for_trace(trace: Trace) -> list[ReplayRun]:
    runs = _RUNS_OF_TRACE(pk=trace.pk)
    for run in runs:  # as trace.runs gives them: each knows its trace
        run.trace = trace
    return runs


def run_outcome(run: ReplayRun) -> verdicts.RunOutcome:
    finished = run.state == ReplayRun.State.DONE
    return verdicts.RunOutcome(
        mode=run.mode,
        status=run.status if finished else "",
        error_code=run.error_code,
        authoritative=run.authoritative,
    )


def runs_finished(trace: Trace) -> list[ReplayRun]:
    """The trace's finished runs in the order they finished (what the verdict rule reads)."""
    return list(trace.runs.filter(state=ReplayRun.State.DONE).order_by("finished_at", "created_at"))


def trace_ingest_verdict(trace: Trace) -> str:
    """The verdict of the verification at upload."""
    return (trace.ingest_report or {}).get("status") or Trace.Status.NEW


@dataclass(frozen=True)
class VerdictBasis:
    """Where a trace's verdict comes from: a run, or (``run`` None) the verification at
    upload; ``ingest_effect`` says what the latter does to the verdict."""

    run: ReplayRun | None
    ingest_effect: str


def trace_verdict_basis(trace: Trace, runs: list[ReplayRun]) -> VerdictBasis:
    """The basis of ``trace``'s verdict (core.replay.verdicts), given its runs in any order; each
    run gets ``verdict_effect``: what it does to the verdict, in words."""
    finished = sorted(
        (r for r in runs if r.state == ReplayRun.State.DONE),
        key=lambda r: (r.finished_at or r.created_at, r.created_at),
    )
    outcomes = [run_outcome(r) for r in finished]
    for run in runs:
        run.verdict_effect = verdicts.NOT_FINISHED  # type: ignore[attr-defined]
    for i, run in enumerate(finished):
        run.verdict_effect = verdicts.run_effect(outcomes, i)  # type: ignore[attr-defined]
    index = verdicts.deciding_index(outcomes)
    return VerdictBasis(
        run=None if index is None else finished[index],
        ingest_effect=verdicts.ingest_effect(outcomes),
    )
