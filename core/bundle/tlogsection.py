"""The transparency-log section of a bundle (``ledger/tlog.json``): write it
(:func:`tlog_section`) and check it: the checkpoint's signature, each event's inclusion proof,
and that the checkpoint extends an older one the auditor kept.

Pure: no Django (see the package docstring).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.bundle.format import MAX_PROOF_HASHES, TLOG, TLOG_TYPE, _Fail, _is_int, _malformed, _need
from core.ledger import chain, codes
from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes
from tlog import proof as proof_docs
from tlog.quorum import QuorumFound, check_quorum


def tlog_section(
    checkpoint_note: str,
    vkeys: Sequence[str],
    inclusion: Mapping[int, Sequence[bytes]],
    consistency: Mapping[int, Sequence[bytes]] | None = None,
) -> dict[str, Any]:
    """``ledger/tlog.json``: the signed checkpoint, its verifier keys, each event's inclusion
    proof (seq -> hashes) and consistency proofs from earlier sizes (old size -> hashes)."""

    def b64(hashes: Sequence[bytes]) -> list[str]:
        return [base64.b64encode(h).decode("ascii") for h in hashes]

    return {
        "type": TLOG_TYPE,
        "checkpoint": checkpoint_note,
        "vkeys": list(vkeys),
        "inclusion": [{"seq": seq, "proof": b64(inclusion[seq])} for seq in sorted(inclusion)],
        "consistency": [
            {"old_size": size, "proof": b64(hashes)}
            for size, hashes in sorted((consistency or {}).items())
        ],
    }


def _proof_hashes(value: Any, where: str) -> list[bytes]:
    _need(
        isinstance(value, list) and len(value) <= MAX_PROOF_HASHES,
        where,
        f"a proof is a list of at most {MAX_PROOF_HASHES} hashes",
    )
    out = []
    for i, item in enumerate(value):
        try:
            raw = base64.b64decode(item, validate=True) if isinstance(item, str) else b""
        except (binascii.Error, ValueError):
            raw = b""
        _need(len(raw) == merkle.HASH_SIZE, f"{where}[{i}]", "not a base64 SHA-256 hash")
        out.append(raw)
    return out


def _verifiers(vkeys: Iterable[str]) -> list[notes.Verifier]:
    """Verifier key strings; ``ValueError`` (the caller's input) for one that does not parse."""
    out = []
    for vkey in vkeys:
        try:
            out.append(notes.parse_verifier(vkey))
        except notes.NoteError as exc:
            raise ValueError(f"the verifier key {vkey!r} does not parse: {exc}") from None
    return out


@dataclass(frozen=True, slots=True)
class _TlogFound:
    size: int
    root: str
    trust: str
    proven: int
    extends: int | None
    quorum: QuorumFound | None = None


def _check_tlog(
    members: dict[str, Any],
    rows: list[tuple[Any, ...]],
    vkeys: Sequence[str] | None,
    older: str | None,
    consistency: Mapping[str, Any] | None,
    *,
    witnesses: Sequence[notes.Verifier] = (),
    quorum: int = 0,
) -> _TlogFound | None:
    if TLOG not in members:
        if vkeys or older is not None or witnesses:
            raise _Fail(
                codes.BUNDLE_CHECKPOINT,
                TLOG,
                "the bundle carries no transparency-log checkpoint (made before proofs were "
                "added), so --vkey, --witness and --older-checkpoint cannot be checked",
            )
        return None
    section = members[TLOG]
    fields_ = {"type", "checkpoint", "vkeys", "inclusion", "consistency"}
    _need(
        isinstance(section, dict) and set(section) == fields_,
        TLOG,
        f"the section has exactly the members {sorted(fields_)}",
    )
    _need(section["type"] == TLOG_TYPE, f"{TLOG}: type", f"the type is not {TLOG_TYPE}")
    _need(isinstance(section["checkpoint"], str), f"{TLOG}: checkpoint", "not a signed note")
    carried = section["vkeys"]
    _need(
        isinstance(carried, list) and all(isinstance(v, str) for v in carried),
        f"{TLOG}: vkeys",
        "not a list of verifier keys",
    )
    if vkeys:
        verifiers, trust = _verifiers(vkeys), "vkey"
    else:
        try:
            verifiers, trust = _verifiers(carried), "bundle vkeys"
        except ValueError as exc:
            raise _malformed(f"{TLOG}: vkeys", str(exc)) from None
    try:
        cp, _ = checkpoints.open_checkpoint(section["checkpoint"].encode("utf-8"), verifiers)
    except (notes.NoteError, checkpoints.CheckpointError) as exc:
        names = ", ".join(v.vkey for v in verifiers) or "none"
        raise _Fail(
            codes.BUNDLE_CHECKPOINT,
            f"{TLOG}: checkpoint",
            f"{exc} (verifier keys: {names})",
        ) from None
    root_b64 = base64.b64encode(cp.root_hash).decode("ascii")
    found_quorum = None
    if witnesses:
        found_quorum = check_quorum(section["checkpoint"].encode("utf-8"), witnesses, quorum)
        if not found_quorum.ok:
            raise _Fail(
                codes.BUNDLE_WITNESS_QUORUM,
                f"{TLOG}: checkpoint",
                f"checkpoint of size {cp.size}: {found_quorum.describe()}",
            )
    proofs: dict[int, list[bytes]] = {}
    _need(isinstance(section["inclusion"], list), f"{TLOG}: inclusion", "not a list")
    for i, entry in enumerate(section["inclusion"]):
        where = f"{TLOG}: inclusion[{i}]"
        _need(
            isinstance(entry, dict) and set(entry) == {"seq", "proof"} and _is_int(entry["seq"]),
            where,
            "an inclusion proof is {seq, proof}",
        )
        _need(entry["seq"] not in proofs, where, f"event {entry['seq']} has two proofs")
        proofs[entry["seq"]] = _proof_hashes(entry["proof"], f"{where}.proof")
    seq_i, hash_i = chain.FIELDS.index("seq"), chain.FIELDS.index("hash")
    for row in rows:
        seq, where = row[seq_i], f"{TLOG}: event seq {row[seq_i]}"
        if seq > cp.size:
            raise _Fail(codes.BUNDLE_INCLUSION, where, f"after the checkpoint (size {cp.size})")
        if seq not in proofs:
            raise _Fail(codes.BUNDLE_INCLUSION, where, "no inclusion proof for this event")
        leaf = merkle.leaf_hash(str(row[hash_i]).encode("utf-8"))
        if not merkle.verify_inclusion(seq - 1, cp.size, leaf, proofs[seq], cp.root_hash):
            raise _Fail(
                codes.BUNDLE_INCLUSION,
                where,
                f"its hash {row[hash_i]} is not leaf {seq - 1} of the checkpoint's tree (size "
                f"{cp.size}, root {root_b64})",
            )
    extends = None
    if older is not None:
        extends = _check_older(section, cp, older, verifiers, consistency)
    return _TlogFound(cp.size, root_b64, trust, len(rows), extends, found_quorum)


def _check_older(
    section: dict[str, Any],
    cp: checkpoints.Checkpoint,
    older: str,
    verifiers: Sequence[notes.Verifier],
    consistency: Mapping[str, Any] | None,
) -> int:
    where = "--older-checkpoint"
    try:
        old, _ = checkpoints.open_checkpoint(older.encode("utf-8"), verifiers)
    except (notes.NoteError, checkpoints.CheckpointError) as exc:
        raise _Fail(codes.BUNDLE_CONSISTENCY, where, f"the older checkpoint: {exc}") from None
    if old.origin != cp.origin:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the checkpoints name two logs: {old.origin!r}, {cp.origin!r}",
        )
    if old.size > cp.size:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the older checkpoint (size {old.size}) is larger than the bundle's (size {cp.size})",
        )
    if old.size == cp.size:
        if old.root_hash != cp.root_hash:
            raise _Fail(
                codes.BUNDLE_CONSISTENCY,
                where,
                f"two different roots at size {cp.size}: the log was forked or rewritten",
            )
        return old.size
    hashes: list[bytes] | None = None
    entries = section["consistency"]
    _need(isinstance(entries, list), f"{TLOG}: consistency", "not a list")
    for i, entry in enumerate(entries):
        at = f"{TLOG}: consistency[{i}]"
        _need(
            isinstance(entry, dict)
            and set(entry) == {"old_size", "proof"}
            and _is_int(entry["old_size"]),
            at,
            "a consistency proof is {old_size, proof}",
        )
        if entry["old_size"] == old.size:
            hashes = _proof_hashes(entry["proof"], f"{at}.proof")
    if hashes is None and consistency is not None:
        hashes = _fetched_consistency(consistency, old, cp)
    if hashes is None:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"no consistency proof from size {old.size} to size {cp.size} in the bundle or the "
            "file given (--consistency)",
        )
    if not merkle.verify_consistency(old.size, cp.size, old.root_hash, cp.root_hash, hashes):
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the bundle's checkpoint (size {cp.size}) does not extend the older checkpoint "
            f"(size {old.size})",
        )
    return old.size


def _fetched_consistency(
    doc: Mapping[str, Any], old: checkpoints.Checkpoint, cp: checkpoints.Checkpoint
) -> list[bytes]:
    """A consistency proof document (``GET /api/governance/tlog/consistency/``) from the older
    checkpoint to the bundle's: its sizes and roots must be the two checkpoints'."""
    where = "--consistency"
    root = base64.b64encode(cp.root_hash).decode("ascii")
    old_root = base64.b64encode(old.root_hash).decode("ascii")
    if (
        doc.get("type") != proof_docs.CONSISTENCY_TYPE
        or (doc.get("old_size"), doc.get("old_root")) != (old.size, old_root)
        or (doc.get("new_size"), doc.get("new_root")) != (cp.size, root)
    ):
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"not a consistency proof from size {old.size} (root {old_root}) to the bundle's "
            f"checkpoint at size {cp.size} (root {root})",
        )
    return _proof_hashes(doc.get("proof"), f"{where}: proof")
