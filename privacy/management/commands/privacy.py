from __future__ import annotations

from django.core.management.base import BaseCommand

from privacy.services import pending_count, reindex
from replay.cli import ProgressBar


class Command(BaseCommand):
    help = (
        "Personal data held in stored traces. `reindex`: index (and seal at rest) the traces "
        "stored before the subject index existed, with a progress bar; safe to run again."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("reindex", help="index the traces not indexed yet")

    def handle(self, *args, action, **options):
        bar = ProgressBar("reindex", pending_count())
        try:
            done = reindex(progress=bar)
        finally:
            bar.close()
        self.stdout.write(
            f"looked at {done.traces} traces: {done.indexed} hold personal data "
            f"({done.values} values indexed)"
        )
