"""Proof documents as the console hands them out (API, ``manage.py governance proof``), and
their offline check: the checkpoint's signature with a verifier key the auditor trusts, then
O(log n) hashes. Pure: no Django, no I/O.

Inclusion (``type`` :data:`INCLUSION_TYPE`)::

    {"type", "checkpoint": "<signed note>", "seq", "leaf_index", "tree_size",
     "leaf": "<the event's hash string>", "leaf_hash", "proof": [base64...], "root_hash"}

Consistency (``type`` :data:`CONSISTENCY_TYPE`)::

    {"type", "checkpoint": "<signed note at new_size>", "old_size", "new_size", "old_root",
     "new_root", "proof": [base64...]}

A consistency document proves that the checkpoint an auditor kept (``old_size``, its root)
is a prefix of the newer one: :func:`check_consistency` takes the kept checkpoint note too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes

INCLUSION_TYPE: Final = "replay-audit-console/inclusion-proof/v1"
CONSISTENCY_TYPE: Final = "replay-audit-console/consistency-proof/v1"


class ProofCheckError(ValueError):
    """``str(error)`` says what did not hold."""


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise ProofCheckError(f"{what} is not a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ProofCheckError(f"{what} is not base64") from None
    return raw


def _hashes(value: Any) -> list[bytes]:
    if not isinstance(value, list):
        raise ProofCheckError("proof is not a list")
    return [_b64(item, f"proof[{i}]") for i, item in enumerate(value)]


def _int(doc: Mapping[str, Any], key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProofCheckError(f"{key} is not a non-negative integer")
    return value


def _open(
    note: Any, verifiers: Sequence[notes.Verifier], origin: str | None
) -> checkpoints.Checkpoint:
    if not isinstance(note, str):
        raise ProofCheckError("checkpoint is not a signed note")
    try:
        cp, _ = checkpoints.open_checkpoint(note.encode("utf-8"), verifiers, origin=origin)
    except (notes.NoteError, checkpoints.CheckpointError) as exc:
        raise ProofCheckError(f"checkpoint: {exc}") from None
    return cp


def check_inclusion(
    doc: Mapping[str, Any], verifiers: Sequence[notes.Verifier], *, origin: str | None = None
) -> checkpoints.Checkpoint:
    """The checkpoint the event is proven in; raises :class:`ProofCheckError`."""
    if doc.get("type") != INCLUSION_TYPE:
        raise ProofCheckError(f"not an inclusion proof (type {doc.get('type')!r})")
    cp = _open(doc.get("checkpoint"), verifiers, origin)
    seq, size = _int(doc, "seq"), _int(doc, "tree_size")
    if size != cp.size:
        raise ProofCheckError(f"the proof is for size {size}, the checkpoint for {cp.size}")
    leaf = doc.get("leaf")
    if not isinstance(leaf, str):
        raise ProofCheckError("leaf is not a string")
    leaf_hash = merkle.leaf_hash(leaf.encode("utf-8"))
    if not merkle.verify_inclusion(
        seq - 1, size, leaf_hash, _hashes(doc.get("proof")), cp.root_hash
    ):
        raise ProofCheckError(f"event {seq} is not in the checkpoint's tree of size {size}")
    return cp


def check_consistency(
    doc: Mapping[str, Any],
    kept: str,
    verifiers: Sequence[notes.Verifier],
    *,
    origin: str | None = None,
) -> checkpoints.Checkpoint:
    """The newer checkpoint, proven to extend ``kept`` (an older checkpoint note)."""
    if doc.get("type") != CONSISTENCY_TYPE:
        raise ProofCheckError(f"not a consistency proof (type {doc.get('type')!r})")
    old = _open(kept, verifiers, origin)
    new = _open(doc.get("checkpoint"), verifiers, origin or old.origin)
    if new.origin != old.origin:
        raise ProofCheckError(f"the checkpoints name two logs: {old.origin!r}, {new.origin!r}")
    old_size, new_size = _int(doc, "old_size"), _int(doc, "new_size")
    if (old_size, new_size) != (old.size, new.size):
        raise ProofCheckError(
            f"the proof is from size {old_size} to {new_size}, the checkpoints are at "
            f"{old.size} and {new.size}"
        )
    if not merkle.verify_consistency(
        old.size, new.size, old.root_hash, new.root_hash, _hashes(doc.get("proof"))
    ):
        raise ProofCheckError(
            f"the checkpoint at size {new.size} does not extend the one at size {old.size}"
        )
    return new
