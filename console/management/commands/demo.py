from __future__ import annotations

import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.demo import (
    demo_otel_ensure,
    demo_traces_ensure,
    demo_upload_files_write,
    demo_users_ensure,
)


class Command(BaseCommand):
    help = (
        "Create one demo user per role (printing passwords and TOTP secrets) and ingest demo "
        "traces covering every verdict. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-traces", action="store_true", help="only the users")
        parser.add_argument(
            "--no-replays", action="store_true", help="ingest traces but do not replay them"
        )
        parser.add_argument(
            "--credentials",
            metavar="FILE",
            help="also write the users' passwords and TOTP secrets to FILE as JSON (mode 0600)",
        )
        parser.add_argument(
            "--allow-production",
            action="store_true",
            help="run even with DEBUG off (the users get working passwords!)",
        )

    def handle(self, *args, no_traces, no_replays, allow_production, credentials, **options):
        if not settings.DEBUG and not allow_production:
            raise CommandError("refusing to create demo users with DEBUG off (--allow-production)")
        self.stdout.write("Demo users (the same passwords every run, derived from SECRET_KEY):")
        users = demo_users_ensure()
        if credentials:
            _write_private(Path(credentials), users)
        for user in users:
            line = f"  {user.username:<6} {', '.join(user.roles):<16} password: {user.password}"
            self.stdout.write(line)
            if user.totp_secret:
                self.stdout.write(f"         TOTP secret: {user.totp_secret}  ({user.totp_uri})")
        if no_traces:
            return
        self.stdout.write("Demo traces:")
        for trace in demo_traces_ensure(replay=not no_replays):
            if trace.refused:
                self.stdout.write(f"  {trace.filename:<34} refused {trace.refused}")
            else:
                code = f" {trace.error_code}" if trace.error_code else ""
                self.stdout.write(f"  {trace.filename:<34} {trace.trace_id} {trace.verdict}{code}")
        self.stdout.write("OpenTelemetry runs received over OTLP and sealed:")
        for trace in demo_otel_ensure():
            code = f" {trace.error_code}" if trace.error_code else ""
            self.stdout.write(f"  {trace.filename:<34} {trace.trace_id} {trace.verdict}{code}")
        directory = demo_upload_files_write()
        self.stdout.write(f"Files to try the upload page with (drag them together): {directory}/")


def _write_private(path: Path, users) -> None:
    body = {u.username: {"password": u.password, "totp_secret": u.totp_secret} for u in users}
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(body, fh, indent=2)
