"""``diffRecords`` of seed 004 (``diff.ts``): a persisted and a replayed DecisionRecord,
equal when their record hashes are, else compared field by field over :data:`RECORD_FIELDS`.

Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.canonical import CanonicalError, contextos
from core.formats.contextos.chain import record_hash
from core.formats.contextos.reader import RECORD_FIELDS
from core.replay.diff import diff


@dataclass
class RecordVerdict:
    ok: bool
    record_hash: str | None = None
    replayed_hash: str | None = None
    diverged_at: str | None = None
    diff: dict[str, list[Any]] = field(default_factory=dict)
    #: differences outside what the rule hashes (the reference rule's allow-list)
    unprotected_differences: list[str] = field(default_factory=list)


def diff_records(persisted: dict[str, Any], replayed: dict[str, Any]) -> RecordVerdict:
    """``diffRecords``: equal record hashes, else every one of the seven fields whose
    canonical bytes differ, the first of them ``diverged_at`` (``"unknown"`` if none).
    ``unprotected_differences``: what differs outside the seed's canonical (JSON pointers)."""
    canon = contextos
    a_hash, b_hash = record_hash(persisted), record_hash(replayed)
    outside = [e.path for e in diff(persisted, replayed)]
    if a_hash == b_hash:
        return RecordVerdict(True, a_hash, b_hash, unprotected_differences=outside)
    verdict = RecordVerdict(False, a_hash, b_hash)
    for name in RECORD_FIELDS:
        before, after = persisted.get(name), replayed.get(name)
        try:
            same = canon(before) == canon(after)
        except CanonicalError:  # a null field: Object.keys(null) throws
            same = before == after
        if not same:
            if verdict.diverged_at is None:
                verdict.diverged_at = name
            verdict.diff[name] = [before, after]
    if verdict.diverged_at is None:
        verdict.diverged_at = "unknown"
    verdict.unprotected_differences = [p for p in outside if p.split("/")[1] not in verdict.diff]
    return verdict
