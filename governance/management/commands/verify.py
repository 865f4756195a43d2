"""``manage.py verify PATH [--json] [--root DIR] [--inputs FILE]... [--contract FILE]``: verify
a file without storing it.

It lives in governance, not replay, because it reads the ledger's active halts (replay never
imports governance): a native trace whose trace id or snapshot is halted is refused with
FORCE_HALT_ACTIVE naming the halt, exactly as a replay would be. Where this database has no
ledger (governance never migrated) the report's halts check says "not checked (offline, no
ledger)" instead of claiming there is no halt.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, transaction

from core.formats import formats
from core.formats.protocol import RootNotFound
from core.replay.report import AUDIT, MODES, OK
from governance.selectors import halts_active_map
from replay import conf as replay_conf
from replay.cli import (
    ProgressBar,
    add_inputs_arguments,
    add_workers_argument,
    read_contract,
    read_inputs,
    summarise,
)
from replay.services import inputs_beside, trace_verify_file


def ledger_halts() -> Mapping[str, str] | None:
    """The active halts, or None when there is no ledger to read them from."""
    try:
        with transaction.atomic():  # a savepoint: a missing table must not poison the rest
            return halts_active_map()
    except DatabaseError:
        return None


class Command(BaseCommand):
    help = (
        "Verify a file offline without storing it (a native trace, a Paxman artifact, an AHD "
        "replay sidecar or report); exit 0 for ok, 1 otherwise, 2 for usage errors."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--mode", choices=MODES, default=AUDIT)
        parser.add_argument("--root", default=None, help="AHD checkout root (AHD sidecars)")
        add_workers_argument(parser)
        add_inputs_arguments(parser)

    def handle(self, *args, path, as_json, mode, root, workers, inputs, contract, **options):
        file = Path(path)
        if not file.exists():
            raise CommandError(f"{path}: no such file", returncode=2)
        if not file.is_file():
            raise CommandError(f"{path}: not a file", returncode=2)
        # the file's format is not known yet: read up to what any format allows, and let
        # the format refuse beyond its own
        limits = replay_conf.largest_input_limits()
        limit = limits.max_input_bytes
        try:
            uploaded = (
                read_inputs(file, inputs, limit, limits.archive.max_archive_bytes)
                if inputs or root is None
                else {}
            )
            supplied = read_contract(contract, limit)
        except OSError as exc:
            raise CommandError(
                f"{exc.filename}: cannot read: {exc.strerror}", returncode=2
            ) from None
        bar = ProgressBar(f"verify {file.name}", None)
        with file.open("rb") as fh:
            try:
                report = trace_verify_file(
                    source=fh,
                    filename=file.name,
                    mode=mode,
                    progress=bar,
                    path=file,
                    root=root,
                    workers=workers,
                    halts=ledger_halts,
                    inputs=uploaded or inputs_beside(file),
                    contract=supplied,
                )
            except RootNotFound as exc:
                raise CommandError(str(exc), returncode=2) from None
            finally:
                bar.close()
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            verdict = getattr(formats().get(report["format"]), "verdict_line", None)
            line = "" if verdict is None else "\n" + verdict(report)
            self.stdout.write(summarise(report) + line)
        if report["status"] != OK:
            sys.exit(1)
