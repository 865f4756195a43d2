from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replay import engine
from replay.cli import ProgressBar, summarise
from replay.services import trace_verify_file


class Command(BaseCommand):
    help = "Verify a trace file offline without storing it; exit 0 for ok, 1 otherwise."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--json", action="store_true", dest="as_json")
        parser.add_argument("--mode", choices=engine.MODES, default=engine.AUDIT)
        parser.add_argument("--root", default=None, help="AHD checkout root (AHD sidecars)")

    def handle(self, *args, path, as_json, mode, root, **options):
        file = Path(path)
        if not file.exists():
            raise CommandError(f"{path}: no such file", returncode=2)
        bar = ProgressBar(f"verify {file.name}", None)
        with file.open("rb") as fh:
            try:
                report = trace_verify_file(source=fh, filename=file.name, mode=mode, progress=bar)
            finally:
                bar.close()
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False))
        else:
            self.stdout.write(summarise(report))
        if report["status"] != engine.OK:
            sys.exit(1)
