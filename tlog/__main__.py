"""``python -m tlog check-inclusion|check-consistency``: check a proof document offline with
the console's verifier key (``manage.py governance tlog-vkey``, the ledger page, the API).
Exit 0 and one ``ok:`` line, or exit 1 and ``FAILED: <why>``; 2 for unusable input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tlog import note as notes
from tlog import proof


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tlog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    inc = sub.add_parser("check-inclusion", help="an event is in a signed checkpoint")
    inc.add_argument("file")
    con = sub.add_parser("check-consistency", help="a newer checkpoint extends one you kept")
    con.add_argument("file")
    con.add_argument("--kept", required=True, help="the older checkpoint note you kept")
    for p in (inc, con):
        p.add_argument("--vkey", action="append", required=True, help="a trusted verifier key")
        p.add_argument("--origin", default=None, help="the log's origin line, if known")
    args = parser.parse_args(argv)
    try:
        verifiers = [notes.parse_verifier(v) for v in args.vkey]
        doc = json.loads(Path(args.file).read_text(encoding="utf-8"))
        kept = (
            Path(args.kept).read_text(encoding="utf-8")
            if args.command == "check-consistency"
            else ""
        )
    except (OSError, ValueError) as exc:
        print(f"tlog: {exc}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict):
        print("tlog: the proof document is not a JSON object", file=sys.stderr)
        return 2
    try:
        if args.command == "check-inclusion":
            cp = proof.check_inclusion(doc, verifiers, origin=args.origin)
            print(f"ok: event {doc['seq']} is in {cp.origin} at size {cp.size}")
        else:
            cp = proof.check_consistency(doc, kept, verifiers, origin=args.origin)
            print(f"ok: {cp.origin} at size {cp.size} extends size {doc['old_size']}")
    except proof.ProofCheckError as exc:
        print(f"FAILED: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
