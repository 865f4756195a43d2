"""``python -m witness keygen|vkey|serve``; see the package's docstring."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tlog import note as notes
from witness.core import Witness
from witness.server import make_server
from witness.state import FILE_MODE, FileStore


def read_signer(path: str) -> notes.Signer:
    text = Path(path).read_text(encoding="ascii").strip()
    return notes.parse_signer(text).as_cosigner()


def keygen(name: str, out: str) -> str:
    signer = notes.Signer.from_seed(name, os.urandom(32))
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        file.write(signer.skey + "\n")
    return signer.as_cosigner().verifier.vkey


def log_keys(vkeys: Sequence[str]) -> dict[str, list[notes.Verifier]]:
    """Each ``--log`` vkey, under its key name as the log's origin (the spec's SHOULD)."""
    logs: dict[str, list[notes.Verifier]] = {}
    for vkey in vkeys:
        verifier = notes.parse_verifier(vkey)
        logs.setdefault(verifier.name, []).append(verifier)
    return logs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m witness", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("keygen", help="make a key file and print its cosigner verifier key")
    gen.add_argument("--name", required=True, help="the witness's key name, e.g. host/w1")
    gen.add_argument("--out", required=True, help="key file to create (owner-only)")
    show = sub.add_parser("vkey", help="print the cosigner verifier key of a key file")
    show.add_argument("--key", required=True)
    serve = sub.add_parser("serve", help="serve add-checkpoint")
    serve.add_argument("--key", required=True)
    serve.add_argument("--state", required=True, help="directory of the per-log records")
    serve.add_argument("--log", action="append", required=True, help="a log's verifier key")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--quiet", action="store_true", help="no access log")
    args = parser.parse_args(argv)

    try:
        if args.command == "keygen":
            print(keygen(args.name, args.out))
            return 0
        if args.command == "vkey":
            print(read_signer(args.key).verifier.vkey)
            return 0
        witness = Witness(
            read_signer(args.key), log_keys(args.log), FileStore(args.state), time.time
        )
    except (OSError, ValueError) as exc:
        print(f"witness: {exc}", file=sys.stderr)
        return 2
    server = make_server(witness, args.host, args.port, quiet=args.quiet)
    host, port = server.server_address[:2]
    print(f"witness {witness.vkey} on http://{host!s}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
