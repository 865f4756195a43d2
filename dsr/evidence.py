"""What an evidence bundle carries about the ledger: the events naming its traces, the keys
and the signed checkpoint that verify them, the transparency log's proofs, and the server's
signature over the bundle.

The events come from ``governance.evidence`` (one definition of "an event concerns a trace",
shared with retention); their records and sections are in ``core.bundle``'s format. This sits in
``dsr`` because only a bundle needs it: governance imports nothing of ``dsr``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.bundle import event_record, server_key_record, tlog_section
from core.ledger import chain, signing
from governance import ledger, selectors, transparency, witnessing
from governance.evidence import events_naming
from governance.models import TreeCheckpoint
from replay.models import Trace

_SEQ = chain.FIELDS.index("seq")


def ledger_evidence(traces: Sequence[Trace], *, checkpoint: bool = True) -> dict[str, Any]:
    """What a bundle carries about ``traces``' ledger events, as ``core.bundle.BundleInputs``
    takes it: ``events`` (in seq order, each once), ``server_keys`` and ``member_keys`` (the
    public halves that verify them) and, with ``checkpoint``, a signed checkpoint of the
    whole ledger (``governance checkpoint``; it verifies the ledger first)."""
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
    ``sign`` that ``core.bundle.build_bundle`` takes."""
    key = ledger.server_key_current()
    if key is None:
        raise RuntimeError("no server signing key yet: the ledger makes one at its first event")
    return key.key_id, key.public_key, signing.sign(ledger.private_key_of(key), message)
