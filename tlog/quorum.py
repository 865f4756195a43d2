"""A quorum of named witnesses on a signed checkpoint (C2SP ``tlog-cosignature``), checked
offline: which of the witnesses the auditor names cosigned it, which did not, and which carry
a line that does not verify. Pure: no Django, no clock, no I/O.

Used by ``python -m dsr.bundle_cli --witness VKEY ... --quorum K`` (evidence bundles, and
bundles of trace evidence) and ``python -m tlog check-checkpoint`` (an exported ledger
checkpoint or a cosigned note).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tlog import note as notes

#: the refusal ``python -m tlog`` names (``core.ledger.codes.WITNESS_QUORUM``, the same text);
#: an evidence bundle's is ``BUNDLE_WITNESS_QUORUM``
CODE = "WITNESS_QUORUM"


def witness_verifiers(vkeys: Iterable[str]) -> list[notes.Verifier]:
    """Witnesses' verifier keys as cosignature/v1 verifiers (a key given as Ed25519 is read as
    the cosigner of the same key, as ``governance.witnessing`` reads its settings).
    ``ValueError`` (the caller's input) for a key that does not parse or is given twice."""
    out: list[notes.Verifier] = []
    for vkey in vkeys:
        try:
            parsed = notes.parse_verifier(vkey)
        except notes.NoteError as exc:
            raise ValueError(f"the verifier key {vkey!r} does not parse: {exc}") from None
        verifier = parsed if parsed.alg == notes.ALG_COSIGNATURE_V1 else parsed.as_cosigner()
        if any((v.name, v.key_id) == (verifier.name, verifier.key_id) for v in out):
            raise ValueError(f"the witness {verifier.vkey!r} is given twice")
        out.append(verifier)
    return out


def required(witnesses: Sequence[notes.Verifier], quorum: int | None) -> int:
    """The number of cosignatures to require: ``quorum``, or all of ``witnesses`` when None;
    ``ValueError`` for a quorum without witnesses or outside 1..len(witnesses)."""
    if quorum is not None and not witnesses:
        raise ValueError("a quorum needs the witnesses it counts (--witness)")
    needed = len(witnesses) if quorum is None else quorum
    if witnesses and not 1 <= needed <= len(witnesses):
        raise ValueError(f"the quorum {needed} is not between 1 and the {len(witnesses)} witnesses")
    return needed


def label(verifier: notes.Verifier) -> str:
    """A witness as reports name it: ``<name>+<hex key id>``."""
    return f"{verifier.name}+{verifier.key_id:08x}"


@dataclass(frozen=True, slots=True)
class QuorumFound:
    """Which of the named witnesses cosigned the note: ``signed`` (a cosignature/v1 line that
    verifies), ``unsigned`` (no line of that key), ``forged`` (a line of that key that does not
    verify over this note); each witness as :func:`label` names it."""

    quorum: int
    signed: tuple[str, ...]
    unsigned: tuple[str, ...]
    forged: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return len(self.signed) >= self.quorum

    def missing(self) -> tuple[str, ...]:
        return self.unsigned + tuple(f"{w} (its cosignature does not verify)" for w in self.forged)

    def describe(self) -> str:
        signed = ", ".join(self.signed) or "none"
        missing = ", ".join(self.missing()) or "none"
        return (
            f"{len(self.signed)} of the {self.quorum} witness cosignatures required; "
            f"signed: {signed}; not signed: {missing}"
        )


def check_quorum(note: bytes, witnesses: Sequence[notes.Verifier], quorum: int) -> QuorumFound:
    """Count the valid cosignatures of ``witnesses`` on a signed note, one witness at a time
    (a forged line of one does not hide the others)."""
    signed: list[str] = []
    unsigned: list[str] = []
    forged: list[str] = []
    for witness in witnesses:
        try:
            notes.open_note(note, [witness])
        except notes.InvalidNoteSignature:
            forged.append(label(witness))
        except notes.NoteError:
            unsigned.append(label(witness))
        else:
            signed.append(label(witness))
    return QuorumFound(quorum, tuple(signed), tuple(unsigned), tuple(forged))
