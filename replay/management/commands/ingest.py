from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import ReplayError
from core.formats import ahd, companion_on_disk
from replay import conf
from replay.cli import (
    ProgressBar,
    add_inputs_arguments,
    add_workers_argument,
    read_contract,
    read_inputs,
)
from replay.services import inputs_beside, trace_ingest


class Command(BaseCommand):
    help = (
        "Store files of any format the console reads, verified. One line per file; exit 1 if "
        "any file was refused. An AHD sidecar's token and brief are read from its checkout "
        "(--inputs, else <run>.inputs.tar.gz/.tgz/.zip beside it, else --root, else found "
        "above the sidecar, else REPLAY_AHD_ROOT) and stored with it. A Paxman artifact is "
        "checked against --contract when given. A MACE log's snapshot files "
        "(<snapshot_id>.json) are read from its directory. A ContextOS trace's pack and KG "
        "snapshot (*.pack.json, *.kg.json) come from its directory and the paths given."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--format", dest="declared_format", default=None)
        parser.add_argument(
            "--root", default=None, help="the AHD checkout an AHD sidecar's inputs are read from"
        )
        add_workers_argument(parser)
        add_inputs_arguments(parser)

    def handle(self, *args, paths, declared_format, workers, root, inputs, contract, **options):
        limit = conf.ahd_max_input_bytes()
        try:
            supplied = read_contract(contract, limit)
        except OSError as exc:
            raise CommandError(f"{contract}: cannot read: {exc.strerror}", returncode=2) from None
        refused = 0
        # companions given on the command line (a ContextOS trace's pack and KG snapshot),
        # by the formats' own rules: inputs of the traces given, not traces themselves
        companion_of = {Path(p): companion_on_disk(Path(p).name) for p in paths}
        given = [p for p, fmt in companion_of.items() if fmt is not None]
        for raw in paths:
            path = Path(raw)
            if path in given:
                self.stdout.write(f"{path.name} input of the {companion_of[path]} traces given")
                continue
            try:
                uploaded = (
                    read_inputs(path, inputs, limit, conf.ahd_archive_limits().max_archive_bytes)
                    if _is_sidecar(path) and (inputs or root is None)
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
                            input_root=None if uploaded else _ahd_root(path, root),
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
        if refused:
            raise CommandError(f"{refused} of {len(paths)} files refused", returncode=1)


def _is_sidecar(path: Path) -> bool:
    return path.name.lower().endswith(ahd.SIDECAR_SUFFIX)


def _ahd_root(path: Path, root: str | None) -> Path | None:
    """Where an AHD sidecar's inputs are read: --root, else the checkout above the sidecar
    (as `verify` finds it); None for any other file (the server's REPLAY_AHD_ROOT then)."""
    if not path.name.lower().endswith(ahd.SIDECAR_SUFFIX):
        return None
    if root is not None:
        return Path(root)
    return ahd.find_root(path.parent)
