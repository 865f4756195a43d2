"""Check an evidence bundle offline: ``python -m dsr.bundle_cli FILE [--trust-key HEX]
[--checkpoint FILE] [--vkey VKEY] [--witness VKEY]... [--quorum K]
[--older-checkpoint FILE [--consistency FILE]] [--json]``,
or ``manage.py dsr verify-bundle FILE`` (which calls :func:`verify_bundle_file`).

Pure: no Django (this runs on a machine with only this package and ``cryptography``). Exit
status 0 when the bundle verifies, 1 when it does not (the first failure is named), 2 for a
usage problem (no such file, an unreadable trusted key or checkpoint).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.bundle import DEFAULT_MAX_BYTES, BundleCheck, verify_bundle
from core.ledger import codes

if TYPE_CHECKING:  # anything with write(str): a file, or a management command's stdout
    from _typeshed import SupportsWrite

OK, FAILED, USAGE = 0, 1, 2


def _load_checkpoint(path: str) -> dict[str, Any]:
    with open(path, "rb") as handle:
        raw = handle.read(1024 * 1024 + 1)
    if len(raw) > 1024 * 1024:
        raise ValueError(f"{path}: larger than a checkpoint (1 MiB)")
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a checkpoint document")
    return document


def _load_older(path: str) -> str:
    """A checkpoint note the auditor kept: the note's text, or a JSON document with it under
    ``checkpoint`` (a proof document, a bundle's tlog section) or ``tlog.checkpoint`` (the
    ledger page's exported checkpoint)."""
    with open(path, "rb") as handle:
        raw = handle.read(1024 * 1024 + 1)
    if len(raw) > 1024 * 1024:
        raise ValueError(f"{path}: larger than a checkpoint (1 MiB)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8") from None
    if text.lstrip().startswith("{"):
        document = _load_checkpoint(path)
        tlog = document.get("tlog")  # an exported ledger checkpoint carries its note here
        note = tlog.get("checkpoint") if isinstance(tlog, dict) else document.get("checkpoint")
        if not isinstance(note, str):
            raise ValueError(f"{path}: no checkpoint note in this JSON document")
        return note
    return text


def _report(
    check: BundleCheck, path: str, checkpoint_path: str | None, out: SupportsWrite[str]
) -> None:
    out.write(f"bundle {path}\n")
    if check.key_id is not None:
        out.write(f"signed by server key {check.key_id} (public key {check.public_key})\n")
    if check.trust == "trusted key":
        out.write("trust: the signing key was checked against the trusted key given\n")
    elif check.trust == "checkpoint":
        out.write(f"trust: the signing key signed the trusted checkpoint {checkpoint_path}\n")
    elif check.key_id is not None:
        out.write(
            "trust: NOT CHECKED - no --trust-key or --checkpoint was given, so this says only "
            "that the bundle is intact and signed by the key it names\n"
        )
    if check.request_ref is not None:
        subjects = ", ".join(check.subject_refs)
        out.write(f"request {check.request_ref}; subjects {subjects}\n")
        out.write(f"manifest {check.manifest_sha256}\n")
    if check.tlog_size is not None:
        signed = (
            "signed by the verifier key given"
            if check.tlog_trust == "vkey"
            else "signed by the vkeys the bundle carries (NOT CHECKED: give --vkey)"
        )
        out.write(
            f"checkpoint: size {check.tlog_size}, root {check.tlog_root}, {signed}; "
            f"{check.proven} event(s) proven in it\n"
        )
        if check.quorum is not None:
            out.write(
                f"witnessed: {len(check.witnesses_signed)} of the {check.quorum} cosignatures "
                f"required; signed: {', '.join(check.witnesses_signed) or 'none'}; not signed: "
                f"{', '.join(check.witnesses_missing) or 'none'}\n"
            )
        if check.extends is not None:
            out.write(f"it extends the older checkpoint (size {check.extends})\n")
    if check.ok:
        held = (
            "nothing held for these subjects"
            if check.nothing_held
            else (f"{check.traces} trace(s)")
        )
        out.write(
            f"OK: the bundle verifies ({held}, {check.events} ledger event(s), "
            f"{check.members} member(s))\n"
        )
    else:
        out.write(f"FAIL {check.code} at {check.where}: {check.message}\n")
        out.write(f"  ({codes.BUNDLE_FAILURES[check.code or '']})\n")


def verify_bundle_file(
    path: str,
    out: SupportsWrite[str],
    *,
    trust_keys: Sequence[str] = (),
    checkpoint_path: str | None = None,
    as_json: bool = False,
    vkeys: Sequence[str] = (),
    older_path: str | None = None,
    consistency_path: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    err: SupportsWrite[str] | None = None,
    witnesses: Sequence[str] = (),
    quorum: int | None = None,
) -> int:
    """Check the bundle at ``path``, write what was found to ``out``; the exit status."""
    err = err if err is not None else out
    try:
        size = os.stat(path).st_size
        checkpoint = _load_checkpoint(checkpoint_path) if checkpoint_path else None
        older = _load_older(older_path) if older_path else None
        consistency = _load_checkpoint(consistency_path) if consistency_path else None
    except (OSError, ValueError) as exc:
        err.write(f"error: {exc}\n")
        return USAGE
    if size > max_bytes:
        check = BundleCheck(
            ok=False,
            code=codes.BUNDLE_MALFORMED,
            where="file",
            message=f"{size} bytes, more than the limit of {max_bytes}",
        )
    else:
        try:
            with open(path, "rb") as handle:
                data = handle.read(max_bytes + 1)
        except OSError as exc:
            err.write(f"error: {exc}\n")
            return USAGE
        try:
            check = verify_bundle(
                data,
                list(trust_keys) or None,
                checkpoint=checkpoint,
                max_bytes=max_bytes,
                vkeys=list(vkeys) or None,
                older_checkpoint=older,
                consistency=consistency,
                witnesses=list(witnesses) or None,
                quorum=quorum,
            )
        except ValueError as exc:  # a bad anchor, witness key or quorum: the caller's input
            err.write(f"error: {exc}\n")
            return USAGE
    if as_json:
        out.write(json.dumps(check.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        _report(check, path, checkpoint_path, out)
    return OK if check.ok else FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dsr.bundle_cli",
        description="Check a Data Subject Request evidence bundle offline; the first failure "
        "is named.",
    )
    parser.add_argument("file", help="the bundle file")
    parser.add_argument(
        "--trust-key",
        action="append",
        default=[],
        metavar="HEX",
        help="the server's public key (64 hex digits, PEM or base64); may be repeated",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="a checkpoint exported by `manage.py governance checkpoint`: trust the key that "
        "signed it",
    )
    parser.add_argument(
        "--vkey",
        action="append",
        default=[],
        metavar="VKEY",
        help="the ledger's verifier key (`manage.py governance tlog-vkey`): the bundle's "
        "checkpoint must be signed by it; may be repeated",
    )
    parser.add_argument(
        "--older-checkpoint",
        metavar="FILE",
        help="a checkpoint you kept (the note, or JSON with it under `checkpoint`): the "
        "bundle's checkpoint must extend it",
    )
    parser.add_argument(
        "--consistency",
        metavar="FILE",
        help="a consistency proof (GET /api/governance/tlog/consistency/?old=N&size=M) from "
        "the older checkpoint to the bundle's, when the bundle holds none",
    )
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a witness's verifier key (`python -m witness vkey`): count its cosignature on "
        "the bundle's checkpoint; may be repeated",
    )
    parser.add_argument(
        "--quorum",
        type=int,
        metavar="K",
        help="refuse the bundle unless at least K of the --witness keys cosigned its "
        "checkpoint (default: all of them)",
    )
    parser.add_argument("--json", action="store_true", help="print the finding as JSON")
    args = parser.parse_args(argv)
    return verify_bundle_file(
        args.file,
        sys.stdout,
        trust_keys=args.trust_key,
        checkpoint_path=args.checkpoint,
        as_json=args.json,
        vkeys=args.vkey,
        older_path=args.older_checkpoint,
        consistency_path=args.consistency,
        err=sys.stderr,
        witnesses=args.witness,
        quorum=args.quorum,
    )


if __name__ == "__main__":
    sys.exit(main())
