"""The ledger events that concern stored traces.

One definition of "an event concerns a trace", used by retention (a trace an event names never
expires: ``governance.retention``) and by evidence bundles (the events a bundle carries:
``dsr.evidence``, which adds the keys and proofs that verify them offline): the event's
payload names, under one of :data:`REFERENCE_KEYS`, the trace's id, its stored file's sha256
(bare or ``sha256:``-prefixed), one of its runs or one of its snapshots. An event type that
concerns a trace names it under one of these keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from django.db.models.fields.json import KeyTextTransform

from governance import chain
from governance.models import GovernanceEvent
from replay.models import ReplayRun, Trace

REFERENCE_KEYS: Final = (
    "trace_id",
    "trace_sha256",
    "file_sha256",
    "target_id",
    "snapshot_id",
    "run_id",
)
CHUNK: Final = 500
_SEQ = chain.FIELDS.index("seq")


def trace_names(traces: Sequence[Trace]) -> dict[str, set[int]]:
    """Every string an event could name each trace by -> the pks of the traces it names."""
    names: dict[str, set[int]] = {}
    for trace in traces:
        sha = trace.blob.sha256
        for name in (trace.trace_id, sha, f"sha256:{sha}"):
            names.setdefault(name, set()).add(trace.pk)
        for ref in trace.required_snapshot_ids or []:
            if isinstance(ref, dict) and ref.get("snapshot_id"):
                names.setdefault(str(ref["snapshot_id"]), set()).add(trace.pk)
    runs = ReplayRun.objects.filter(trace__in=[t.pk for t in traces])
    for run_id, trace_pk in runs.values_list("id", "trace_id"):
        names.setdefault(str(run_id), set()).add(trace_pk)
    return names


def events_naming(
    traces: Sequence[Trace], *, after_seq: int = 0
) -> Iterator[tuple[tuple[Any, ...], set[int]]]:
    """Each event after ``after_seq`` that names one of ``traces`` (a row in ``chain.FIELDS``
    order), with the pks of the traces it names, in seq order.

    One pass over the ledger reading only the :data:`REFERENCE_KEYS` values (whatever the
    number of traces: the cost is the ledger's length plus the traces'), then the full rows
    of the events that matched.
    """
    if not traces:
        return
    names: dict[str, set[int]] = {}
    for start in range(0, len(traces), CHUNK):
        for name, pks in trace_names(traces[start : start + CHUNK]).items():
            names.setdefault(name, set()).update(pks)
    columns = {f"ref_{i}": KeyTextTransform(key, "payload") for i, key in enumerate(REFERENCE_KEYS)}
    values = (
        GovernanceEvent.objects.filter(seq__gt=after_seq)
        .annotate(**columns)
        .order_by("seq")
        .values_list("seq", *columns)
    )
    matched: dict[int, set[int]] = {}
    for seq, *refs in values.iterator(chunk_size=5000):
        named: set[int] = set()
        for ref in refs:
            if ref is not None and ref in names:
                named |= names[ref]
        if named:
            matched[seq] = named
    seqs = sorted(matched)
    for start in range(0, len(seqs), CHUNK):
        rows = (
            GovernanceEvent.objects.filter(seq__in=seqs[start : start + CHUNK])
            .order_by("seq")
            .values_list(*chain.FIELDS)
        )
        for row in rows:
            yield row, matched[row[_SEQ]]
