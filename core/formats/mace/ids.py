"""Snapshot ids and their provenance (seed 003 §5), event ids and memory ids (§5).

``config_hash = sha256(mace-v1(body))``, ``snapshot_id = sha256(config_hash:schema_version:
seed_namespace)``, ``event_id = sha256(job_seed:sequence_index:event_type)``; why a snapshot
file's id does not recompute (:func:`_snapshot_provenance`), the snapshot a failed report is
about (:func:`failed_snapshot_id`), and whether a stored snapshot was rewritten
(:func:`stored_snapshot_tampered`); the ``wm_id`` and ``episodic_id`` a log's memory writes
record (``memory_writes`` and ``event_refs`` entries that are objects), each
``sha256(job_seed:counter)`` with its own counter (:func:`memory_id_failure`, the rule in
:mod:`core.formats.memory_ids`).

Pure: no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from core import errors
from core.canonical import CanonicalError, mace_v1
from core.errors import ReplayError
from core.formats.mace.reader import SNAPSHOT_FIELDS, SNAPSHOT_KINDS, _malformed, check_snapshot
from core.formats.memory_ids import GENERATORS, carries_memory_ids, memory_id_problem

SNAPSHOT_GENERATOR = "sha256(config_hash:schema_version:seed_namespace)"
EVENT_ID_GENERATOR = "sha256(job_seed:sequence_index:event_type)"


def _canonical(value: Any, where: str) -> bytes:
    try:
        return mace_v1(value)
    except CanonicalError as exc:
        raise _malformed(f"{where}: {exc}") from None


def config_hash_of(body: Any) -> str:
    return hashlib.sha256(_canonical(body, "body")).hexdigest()


def snapshot_id_of(config_hash: str, schema_version: int, seed_namespace: str) -> str:
    text = f"{config_hash}:{schema_version}:{seed_namespace}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def event_id_of(job_seed: str, sequence_index: int, event_type: str) -> str:
    return hashlib.sha256(f"{job_seed}:{sequence_index}:{event_type}".encode()).hexdigest()


#: the lists of a log whose object entries may record a memory write's ids
MEMORY_LISTS = ("memory_writes", "event_refs")


def memory_id_failure(
    doc: Mapping[str, Any],
) -> tuple[int, tuple[str, str, str | None, str] | None]:
    """How many memory writes of the log record a ``wm_id`` or an ``episodic_id``, and the
    first whose id does not recompute from ``job_seed`` and its counter as
    ``(message, broke_at, expected, observed)`` (worded as the event-id check words its
    own), or None."""
    seen = 0
    job_seed = doc.get("job_seed")
    for name in MEMORY_LISTS:
        entries = doc.get(name)
        if type(entries) is not list:
            continue
        for i, entry in enumerate(entries):
            if type(entry) is not dict or not carries_memory_ids(entry):
                continue
            seen += 1
            problem = memory_id_problem(entry, job_seed)
            if problem is None:
                continue
            where = f"{name}[{i}].{problem.field}"
            how = f" ({problem.counter_field} {problem.counter})" if problem.expected else ""
            message = (
                f"{where}: {problem.observed_text} does not recompute as "
                f"{GENERATORS[problem.field]}{how or problem.why_not}"
            )
            return seen, (message, where, problem.expected, problem.observed_text)
    return seen, None


def _snapshot_provenance(
    kind: str, sid: str, snap: Mapping[str, Any], body_bytes: bytes
) -> tuple[str, str, str, str | None, str | None] | None:
    """Why a snapshot file's id does not recompute (seed 003 §5), or None; ``body_bytes``
    is mace-v1 of its body."""
    prefix = f"{kind}_snapshot"
    if snap["kind"] != kind:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.kind: the file named by {SNAPSHOT_FIELDS[kind]} is a "
            f"{snap['kind']} snapshot",
            f"{prefix}.kind",
            kind,
            snap["kind"],
        )
    config_hash = hashlib.sha256(body_bytes).hexdigest()
    if snap["config_hash"] != config_hash:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.config_hash: the body does not hash to the recorded config_hash",
            f"{prefix}.config_hash",
            config_hash,
            snap["config_hash"],
        )
    computed = snapshot_id_of(config_hash, snap["schema_version"], snap["seed_namespace"])
    if snap["snapshot_id"] != computed:
        return (
            errors.INTEGRITY_FAILURE,
            f"{prefix}.snapshot_id: does not recompute as {SNAPSHOT_GENERATOR}",
            f"{prefix}.snapshot_id",
            computed,
            snap["snapshot_id"],
        )
    if sid != computed:
        return (
            errors.INTEGRITY_FAILURE,
            f"{SNAPSHOT_FIELDS[kind]}: the log names {sid}, the snapshot file is {computed}",
            SNAPSHOT_FIELDS[kind],
            computed,
            sid,
        )
    return None


def failed_snapshot_id(report: Mapping[str, Any]) -> str | None:
    """The snapshot id a report's failed ``snapshots`` check is about (its ``broke_at`` names
    the kind: ``router_snapshot.config_hash``), or None."""
    failed = [c for c in report.get("checks", []) if not c.get("ok")]
    where = report.get("broke_at")
    ids = report.get("snapshot_ids") or []
    if not failed or failed[-1].get("name") != "snapshots" or not isinstance(where, str):
        return None
    kind = where.split("_snapshot", 1)[0]
    if kind not in SNAPSHOT_KINDS or len(ids) != len(SNAPSHOT_KINDS):
        return None
    return str(ids[SNAPSHOT_KINDS.index(kind)])


def stored_snapshot_tampered(body: Any, snapshot_id: str) -> bool:
    """A stored snapshot file no longer is one whose id recomputes as ``snapshot_id`` (it
    was rewritten in the store)."""
    try:
        snap = check_snapshot(body, where="stored snapshot")
    except ReplayError:
        return True
    kind = snap["kind"]
    return _snapshot_provenance(kind, snapshot_id, snap, _canonical(snap["body"], kind)) is not None
