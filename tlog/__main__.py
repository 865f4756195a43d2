"""``python -m tlog check-inclusion|check-consistency|check-checkpoint``: check a proof
document, or a checkpoint (a note, or an exported ledger checkpoint), offline with the
console's verifier key (``manage.py governance tlog-vkey``, the ledger page, the API) and,
with ``--witness VKEY ... [--quorum K]``, that at least K of those witnesses cosigned it.
Exit 0 and one ``ok:`` line, or exit 1 and ``FAILED: <why>``; 2 for unusable input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tlog import checkpoint as checkpoints
from tlog import note as notes
from tlog import proof
from tlog import quorum as quorums


def _note_of(text: str) -> str:
    """A checkpoint note: the file's text, or a JSON document with it under ``checkpoint`` (a
    proof document, a bundle's tlog section) or ``tlog.checkpoint`` (an exported checkpoint)."""
    if not text.lstrip().startswith("{"):
        return text
    doc: Any = json.loads(text)
    tlog = doc.get("tlog") if isinstance(doc, dict) else None
    note = tlog.get("checkpoint") if isinstance(tlog, dict) else None
    if note is None and isinstance(doc, dict):
        note = doc.get("checkpoint")
    if not isinstance(note, str):
        raise ValueError("no checkpoint note in this JSON document")
    return note


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tlog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    inc = sub.add_parser("check-inclusion", help="an event is in a signed checkpoint")
    inc.add_argument("file")
    con = sub.add_parser("check-consistency", help="a newer checkpoint extends one you kept")
    con.add_argument("file")
    con.add_argument("--kept", required=True, help="the older checkpoint note you kept")
    chk = sub.add_parser(
        "check-checkpoint", help="a checkpoint (note or exported JSON) is signed and witnessed"
    )
    chk.add_argument("file")
    for p in (inc, con, chk):
        p.add_argument("--vkey", action="append", required=True, help="a trusted verifier key")
        p.add_argument("--origin", default=None, help="the log's origin line, if known")
        p.add_argument(
            "--witness",
            action="append",
            default=[],
            metavar="VKEY",
            help="a witness's verifier key whose cosignature counts; may be repeated",
        )
        p.add_argument(
            "--quorum",
            type=int,
            metavar="K",
            help="require K of the --witness cosignatures (default: all of them)",
        )
    args = parser.parse_args(argv)
    try:
        verifiers = [notes.parse_verifier(v) for v in args.vkey]
        witnesses = quorums.witness_verifiers(args.witness)
        needed = quorums.required(witnesses, args.quorum)
        text = Path(args.file).read_text(encoding="utf-8")
        doc: Any = _note_of(text) if args.command == "check-checkpoint" else json.loads(text)
        kept = (
            Path(args.kept).read_text(encoding="utf-8")
            if args.command == "check-consistency"
            else ""
        )
    except (OSError, ValueError) as exc:
        print(f"tlog: {exc}", file=sys.stderr)
        return 2
    if args.command != "check-checkpoint" and not isinstance(doc, dict):
        print("tlog: the proof document is not a JSON object", file=sys.stderr)
        return 2
    try:
        if args.command == "check-inclusion":
            cp = proof.check_inclusion(doc, verifiers, origin=args.origin)
            print(f"ok: event {doc['seq']} is in {cp.origin} at size {cp.size}")
        elif args.command == "check-consistency":
            cp = proof.check_consistency(doc, kept, verifiers, origin=args.origin)
            print(f"ok: {cp.origin} at size {cp.size} extends size {doc['old_size']}")
        else:
            try:
                cp, _ = checkpoints.open_checkpoint(
                    doc.encode("utf-8"), verifiers, origin=args.origin
                )
            except (notes.NoteError, checkpoints.CheckpointError) as exc:
                raise proof.ProofCheckError(f"checkpoint: {exc}") from None
            print(f"ok: {cp.origin} at size {cp.size} is signed by the verifier key given")
    except proof.ProofCheckError as exc:
        print(f"FAILED: {exc}")
        return 1
    if witnesses:
        note = doc if isinstance(doc, str) else doc.get("checkpoint")
        found = quorums.check_quorum(str(note).encode("utf-8"), witnesses, needed)
        if not found.ok:
            print(f"FAILED: {quorums.CODE}: checkpoint of size {cp.size}: {found.describe()}")
            return 1
        print(f"witnessed: {found.describe()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
