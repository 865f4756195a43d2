from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replay import engine
from replay.cli import ProgressBar, summarise
from replay.errors import ReplayError
from replay.selectors import trace_by_trace_id
from replay.services import replay_run_create, replay_run_execute, trace_ingest


class Command(BaseCommand):
    help = (
        "Replay a stored trace (by trace id) or a file (ingested first). Exit 0 for ok, "
        "1 for any other status, 2 for usage errors."
    )

    def add_arguments(self, parser):
        parser.add_argument("target", help="a stored trace id, or a path to a trace file")
        parser.add_argument("--mode", choices=engine.MODES, default=engine.AUDIT)
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, target, mode, as_json, **options):
        trace = None
        if re.fullmatch(r"[0-9a-f]{32}", target):
            trace = trace_by_trace_id(target)
        if trace is None:
            path = Path(target)
            if not path.is_file():
                raise CommandError(f"{target}: neither a stored trace id nor a file", returncode=2)
            try:
                with path.open("rb") as fh:
                    trace = trace_ingest(source=fh, filename=path.name).trace
            except ReplayError as exc:
                report = {
                    "trace_id": None,
                    "format": None,
                    "mode": mode,
                    "status": "refused",
                    "error_code": exc.code,
                    "authoritative": True,
                    "checks": [],
                    "divergences": [],
                    "broke_at": None,
                    "expected": None,
                    "observed": None,
                    "message": exc.message,
                }
                self._emit(report, as_json)
                sys.exit(1)
        run = replay_run_create(trace=trace, mode=mode)
        bar = ProgressBar(f"replay {trace.trace_id[:12]}", run.progress_total)
        try:
            run = replay_run_execute(run_id=run.id, progress=bar)
        finally:
            bar.close()
        self._emit(run.report, as_json)
        if run.status != engine.OK:
            sys.exit(1)

    def _emit(self, report, as_json):
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            self.stdout.write(summarise(report))
