"""``manage.py ingest PATH...``: store files of any format, verified, one line per file.

contracts.md §4: exit 1 if any file was refused (its reason on stderr; a refused file stores
nothing), 0 otherwise; a file stored with another verdict than ``ok`` (``tamper_detected``,
``diverged``, ``refused``: kept as evidence) is named on its line and counted on stderr. With
``--strict`` the exit code tells them apart: :data:`EXIT_NOT_OK` (3) when every file was
stored but at least one with another verdict, for a pipeline that gates on it. 2 is a usage
error (a ``--contract`` that cannot be read).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import ReplayError
from core.formats import companion_on_disk, rooted_format
from core.replay.report import OK
from replay import conf
from replay.cli import (
    ProgressBar,
    add_inputs_arguments,
    add_workers_argument,
    read_contract,
    read_inputs,
)
from replay.services import inputs_beside, trace_ingest

#: every file was stored, but at least one with a verdict other than ``ok``
EXIT_NOT_OK = 3
REFUSED = "{refused} of {given} files refused"
NOT_OK = "{not_ok} of {given} files stored with a verdict other than ok"


class Command(BaseCommand):
    help = (
        "Store files of any format the console reads, verified. One line per file; exit 1 if "
        "any file was refused, else 0 (with --strict: 3 if any was stored with a verdict other "
        "than ok: tamper_detected, diverged, refused). An AHD sidecar's token and brief are "
        "read from its checkout (--inputs, else <run>.inputs.tar.gz/.tgz/.zip beside it, else "
        "--root, else found above the sidecar, else REPLAY_AHD_ROOT) and stored with it. A "
        "Paxman artifact is checked against --contract when given. A MACE log's snapshot "
        "files (<snapshot_id>.json) are read from its directory. A ContextOS trace's pack and "
        "KG snapshot (*.pack.json, *.kg.json) come from its directory and the paths given."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--format", dest="declared_format", default=None)
        parser.add_argument(
            "--root", default=None, help="the AHD checkout an AHD sidecar's inputs are read from"
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="exit 3 when no file was refused but one was stored with a verdict other than "
            "ok (without it such a run exits 0, as contracts.md says)",
        )
        add_workers_argument(parser)
        add_inputs_arguments(parser)

    def handle(
        self, *args, paths, declared_format, workers, root, inputs, contract, strict, **options
    ):
        try:  # read before any file's format is known: up to what any format allows
            supplied = read_contract(contract, conf.largest_input_limits().max_input_bytes)
        except OSError as exc:
            raise CommandError(f"{contract}: cannot read: {exc.strerror}", returncode=2) from None
        refused = not_ok = 0
        # companions given on the command line (a ContextOS trace's pack and KG snapshot),
        # by the formats' own rules: inputs of the traces given, not traces themselves
        companion_of = {Path(p): companion_on_disk(Path(p).name) for p in paths}
        given = [p for p, fmt in companion_of.items() if fmt is not None]
        for raw in paths:
            path = Path(raw)
            if path in given:
                self.stdout.write(f"{path.name} input of the {companion_of[path]} traces given")
                continue
            rooted = rooted_format(path.name)
            try:
                uploaded = (
                    _read_inputs(path, inputs, rooted)
                    if rooted is not None and (inputs or root is None)
                    else {}
                )
                if not uploaded:
                    uploaded = inputs_beside(path, given=given)
                with path.open("rb") as fh:
                    bar = ProgressBar(f"ingest {path.name}", path.stat().st_size)
                    try:
                        result = trace_ingest(
                            source=fh,
                            filename=path.name,
                            declared_format=declared_format,
                            progress=bar,
                            workers=workers,
                            inputs=uploaded,
                            input_root=None if uploaded else _root(path, root, rooted),
                            contract=supplied,
                        )
                    finally:
                        bar.close()
            except OSError as exc:
                refused += 1
                self.stderr.write(f"{exc.filename or raw}: cannot read: {exc.strerror}")
                continue
            except ReplayError as exc:
                refused += 1
                self.stderr.write(f"{raw}: refused {exc.code}: {exc.message}")
                continue
            trace = result.trace
            replayable = (
                "replayable"
                if not trace.missing_outputs and result.report.get("replayable")
                else "not-replayable"
            )
            note = "" if result.created else " (already stored)"
            self.stdout.write(
                f"{trace.trace_id} {trace.format} {replayable} {trace.last_status}{note}"
            )
            if trace.last_status != OK:
                not_ok += 1
        given = len(paths)
        if refused:
            message = REFUSED.format(refused=refused, given=given)
            if not_ok:
                message += "; " + NOT_OK.format(not_ok=not_ok, given=given)
            raise CommandError(message, returncode=1)
        if not_ok and strict:
            raise CommandError(NOT_OK.format(not_ok=not_ok, given=given), returncode=EXIT_NOT_OK)
        if not_ok:
            self.stderr.write(NOT_OK.format(not_ok=not_ok, given=given))


def _read_inputs(path: Path, given: list[str], fmt: object) -> dict[str, bytes]:
    """The --inputs of a file verified against a root (else the archive beside it), read
    with the limits of its format."""
    limits = conf.input_limits(fmt)
    return read_inputs(path, given, limits.max_input_bytes, limits.archive.max_archive_bytes)


def _root(path: Path, root: str | None, fmt: object) -> Path | None:
    """Where a rooted file's inputs are read (its format's ``root_of``: --root, else the root
    found above it, as `verify` finds it); None for any other file (the server's own root
    setting then, REPLAY_AHD_ROOT for an AHD sidecar)."""
    root_of = getattr(fmt, "root_of", None)
    return None if root_of is None else root_of(path, root)
