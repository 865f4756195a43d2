from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from core.errors import ReplayError
from replay.models import Snapshot
from replay.services import snapshot_remove


class Command(BaseCommand):
    help = "The content-addressed snapshot store: list, remove (retention)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("list")
        rm = sub.add_parser("remove", help="stop retaining a snapshot body")
        rm.add_argument("snapshot_id")

    def handle(self, *args, action, **options):
        if action == "list":
            for snap in Snapshot.objects.order_by("kind", "snapshot_id"):
                self.stdout.write(f"{snap.snapshot_id}\t{snap.kind}\tv{snap.schema_version}")
            return
        try:
            count = snapshot_remove(snapshot_id=options["snapshot_id"])
        except ReplayError as exc:
            raise CommandError(f"{exc.code}: {exc.message}", returncode=1) from None
        self.stdout.write(f"removed {options['snapshot_id']}; {count} stored traces now miss it")
