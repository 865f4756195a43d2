"""The ledger events that concern stored traces, and what verifying them offline needs.

One definition of "an event concerns a trace", used by retention (a trace an event names never
expires: ``governance.retention``) and by evidence bundles (the events a bundle carries:
``dsr.bundle``): the event's payload names, under one of :data:`REFERENCE_KEYS`, the trace's
id, its stored file's sha256 (bare or ``sha256:``-prefixed), one of its runs or one of its
snapshots. An event type that concerns a trace names it under one of these keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from django.db.models.fields.json import KeyTextTransform

from governance import chain, ledger, selectors, signing
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
    runs = ReplayRun.objects.filter(trace__in=[t.pk for t in traces]).values_list("id", "trace")
    for run_id, trace_pk in runs:
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
        pks: set[int] = set()
        for ref in refs:
            if ref is not None and ref in names:
                pks |= names[ref]
        if pks:
            matched[seq] = pks
    seqs = sorted(matched)
    for start in range(0, len(seqs), CHUNK):
        rows = (
            GovernanceEvent.objects.filter(seq__in=seqs[start : start + CHUNK])
            .order_by("seq")
            .values_list(*chain.FIELDS)
        )
        for row in rows:
            yield row, matched[row[_SEQ]]


def ledger_evidence(traces: Sequence[Trace], *, checkpoint: bool = True) -> dict[str, Any]:
    """What a bundle carries about ``traces``' ledger events, as ``dsr.bundle.BundleInputs``
    takes it: ``events`` (in seq order, each once), ``server_keys`` and ``member_keys`` (the
    public halves that verify them) and, with ``checkpoint``, a signed checkpoint of the
    whole ledger (``governance checkpoint``; it verifies the ledger first)."""
    from dsr.bundle import event_record, server_key_record

    rows = {row[_SEQ]: row for row, _ in events_naming(traces)}
    ordered = [rows[seq] for seq in sorted(rows)]
    keys = ledger.server_keys()
    used_server = {row[chain.FIELDS.index("server_key_id")] for row in ordered}
    used_member = {row[chain.FIELDS.index("actor_key_id")] for row in ordered} - {None}
    members = ledger.actor_keys()
    return {
        "events": [event_record(row) for row in ordered],
        "server_keys": [server_key_record(keys[k]) for k in sorted(used_server) if k in keys],
        "member_keys": {k: members[k].hex() for k in sorted(used_member) if k in members},
        "checkpoint": selectors.checkpoint_export() if checkpoint and ordered else None,
        "tlog": tlog_evidence(ordered) if checkpoint and ordered else None,
    }


def tlog_evidence(rows: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
    """A bundle's ``ledger/tlog.json`` for these events: the signed checkpoint (the largest a
    quorum of witnesses cosigned that holds every event, pushed to them first if none does;
    else the whole tree's now) with the witnesses' cosignatures as extra signature lines,
    each event's inclusion proof in it (O(log n) hashes), and a consistency proof from the
    checkpoint signed before it (the one an auditor most likely kept)."""
    from dsr.bundle import tlog_section
    from governance import transparency, witnessing
    from governance.models import TreeCheckpoint

    cp = transparency.checkpoint()
    last = max(r[_SEQ] for r in rows)
    witnessed = witnessing.quorum_checkpoint(last)
    if witnessed is None and witnessing.configured():
        # the witnesses have not cosigned a tree holding these events yet: ask them now (a
        # bundle is built in the background; an unreachable witness costs its timeout)
        witnessing.push_all()
        witnessed = witnessing.quorum_checkpoint(last)
    if witnessed is not None:  # cosigned by a quorum: checkable with --witness ... --quorum K
        cp = witnessed
    inclusion = {r[_SEQ]: transparency.inclusion(r[_SEQ], cp.size).proof for r in rows}
    earlier = (
        TreeCheckpoint.objects.filter(size__lt=cp.size, size__gt=0)
        .order_by("-size")
        .values_list("size", flat=True)
        .first()
    )
    consistency = (
        {} if earlier is None else {earlier: transparency.consistency(earlier, cp.size).proof}
    )
    note = witnessing.cosigned_note(cp)  # each witness's cosignature as an extra line
    return tlog_section(note, transparency.verifier_keys(), inclusion, consistency)


def server_sign(message: bytes) -> tuple[str, str, str]:
    """Sign with the current server key: ``(key_id, public key hex, signature hex)``, the
    ``sign`` that ``dsr.bundle.build_bundle`` takes."""
    key = ledger.server_key_current()
    if key is None:
        raise RuntimeError("no server signing key yet: the ledger makes one at its first event")
    return key.key_id, key.public_key, signing.sign(ledger.private_key_of(key), message)
