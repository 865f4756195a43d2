"""``manage.py retention run [--dry-run] [--limit N] [--json]``: expire the traces retention
says are due (``REPLAY_RETENTION``); each expiry is a ``TRACE_EXPIRED`` ledger event."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.retention import retention_run


class Command(BaseCommand):
    help = "Retention: expire stored traces that are due (content removed, hashes kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        p = sub.add_parser("run", help="expire what is due (or only list it with --dry-run)")
        p.add_argument("--dry-run", action="store_true", help="list what would expire")
        p.add_argument("--limit", type=int, default=None, help="expire at most N traces")
        p.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        outcome = retention_run(dry_run=options["dry_run"], limit=options["limit"])
        if options["as_json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "dry_run": outcome.dry_run,
                        "due": [
                            {
                                "trace_id": d.facts.trace_id,
                                "trace_pk": d.facts.pk,
                                "rule": d.rule.label,
                                "expires_at": d.expires_at.isoformat(),
                            }
                            for d in outcome.due
                        ],
                        "expired": [
                            {**e.tombstone.as_dict(), "rule": e.rule, "seq": e.event.seq}
                            for e in outcome.expired
                        ],
                        "skipped": [
                            {"trace_pk": d.facts.pk, "why": why} for d, why in outcome.skipped
                        ],
                        "protected": outcome.protected,
                    },
                    indent=2,
                )
            )
            return
        verb = "would expire" if outcome.dry_run else "expired"
        if outcome.dry_run:
            for d in outcome.due:
                self.stdout.write(
                    f"{verb} {d.facts.trace_id} ({d.facts.format}, trace #{d.facts.pk}): due "
                    f"{d.expires_at.isoformat()} by {d.rule.label}"
                )
        for e in outcome.expired:
            t = e.tombstone
            self.stdout.write(
                f"{verb} {t.trace_id} (file sha256:{t.sha256}) by {e.rule}: {t.size} bytes "
                f"and {len(t.snapshots_removed)} snapshot bodies removed; ledger event "
                f"{e.event.seq}"
            )
        for d, why in outcome.skipped:
            self.stdout.write(f"skipped {d.facts.trace_id} (trace #{d.facts.pk}): {why}")
        count = len(outcome.due) if outcome.dry_run else len(outcome.expired)
        self.stdout.write(
            f"{count} trace(s) {verb}; {outcome.protected} due but protected (named by the "
            "ledger or held)"
        )
