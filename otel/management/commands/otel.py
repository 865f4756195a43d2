"""``manage.py otel``: the OpenTelemetry traces received over OTLP.

* ``otel status``: every trace still open (receiving spans), one line each;
* ``otel sweep``: read the bodies not read yet and seal what is due, now (what the periodic
  job does), and delete the bytes of erased bodies a blob store refused to delete at the
  erasure (``otel.erasure``);
* ``otel seal TRACE_ID`` / ``otel seal --all``: seal a trace's open version at once (every
  open trace with ``--all``), whether or not it has gone quiet;
* ``otel record TRACE_ID [--version N]``: the sealed record (the newest version unless
  ``--version``), exactly the stored bytes (RFC 8785 JSON), on stdout.
* ``otel refacts``: give every stored OTel trace without facts (the services, models,
  operations, conversation ids and agent names the trace list filters by) its facts, reading
  its file: those stored before the facts were kept (otel migration 0003); idempotent.

Exit 1 with the reason on stderr when a trace is unknown or has nothing to seal.
"""

from __future__ import annotations

import re

from django.core.management.base import BaseCommand, CommandError

from core.errors import ReplayError
from otel.models import OtelTrace
from otel.services import FORMAT, SealError, otel_seal, otel_sweep
from replay.models import Trace
from replay.storage import blob_open

TRACE_ID = re.compile(r"\A[0-9a-f]{32}\Z")
NOT_AN_ID = "{given!r} is not an OpenTelemetry trace id (32 lower-case hex digits)"
NOT_SEALED = (
    "OpenTelemetry trace {trace_id} has no sealed version{which}: `manage.py otel seal {trace_id}`"
)


def _trace_id(given: str) -> str:
    if not TRACE_ID.match(given):
        raise CommandError(NOT_AN_ID.format(given=given), returncode=2)
    return given


class Command(BaseCommand):
    help = "OpenTelemetry traces received over OTLP: status, sweep, seal, record, refacts."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("status", help="the traces still open, one a line")
        sub.add_parser("sweep", help="read unread bodies and seal what is due, now")
        seal = sub.add_parser("seal", help="seal a trace's open version now")
        which = seal.add_mutually_exclusive_group(required=True)
        which.add_argument("trace_id", nargs="?")
        which.add_argument("--all", action="store_true", help="every open trace")
        record = sub.add_parser("record", help="print a sealed record (its exact bytes)")
        record.add_argument("trace_id")
        record.add_argument("--version", type=int, default=None)
        sub.add_parser("refacts", help="fill the list's facts of stored traces that have none, now")

    def handle(self, *args, action, **options):
        return getattr(self, f"_{action}")(**options)

    def _status(self, **_options):
        rows = OtelTrace.objects.filter(open=True).order_by("last_span_at")
        for row in rows:
            root = "root ended" if row.root_ended else "no root yet"
            refused = f"\tseal refused: {row.seal_error}" if row.seal_error else ""
            self.stdout.write(
                f"{row.trace_id}\tv{row.version}\t{row.span_count} spans\t{root}\t"
                f"last span {row.last_span_at.isoformat(timespec='seconds')}\t"
                f"{row.service or '-'}\t{row.root_name or '-'}{refused}"
            )
        if not rows.exists():
            self.stdout.write("no open OpenTelemetry trace")

    def _sweep(self, **_options):
        from otel.erasure import otlp_erased_content_sweep

        done = otel_sweep()
        removed = otlp_erased_content_sweep()
        self.stdout.write(
            f"read {done['read']} bodies, sealed {done['sealed']} traces"
            + (f", deleted the bytes of {removed} erased bodies" if removed else "")
        )

    def _seal(self, *, trace_id=None, all=False, **_options):
        ids = (
            list(OtelTrace.objects.filter(open=True).values_list("trace_id", flat=True))
            if all
            else [_trace_id(trace_id)]
        )
        failed = False
        for tid in ids:
            try:
                trace = otel_seal(trace_id=tid)
            except (SealError, ReplayError) as exc:
                self.stderr.write(f"{tid}: {exc}")
                failed = True
                continue
            self.stdout.write(
                f"{tid}\tsealed as {trace.filename}\t{trace.event_count} spans\t{trace.last_status}"
            )
        if all and not ids:
            self.stdout.write("no open OpenTelemetry trace")
        if failed:
            raise CommandError("some traces were not sealed", returncode=1)

    def _record(self, *, trace_id, version=None, **_options):
        tid = _trace_id(trace_id)
        rows = Trace.objects.filter(trace_id=tid, format=FORMAT).select_related("blob")
        if version is not None:
            rows = rows.filter(filename=f"{tid}.v{version}.otel.json")
        row = rows.order_by("-created_at", "-id").first()
        if row is None:
            which = f" {version}" if version is not None else ""
            raise CommandError(NOT_SEALED.format(trace_id=tid, which=which), returncode=1)
        with blob_open(row.blob.storage_name) as fh:
            self.stdout.write(fh.read().decode("utf-8"))

    def _refacts(self, **_options):
        from otel.facts import facts_fill_missing

        done = facts_fill_missing()
        for name, why in done.failed.items():
            self.stderr.write(f"{name}: {why}")
        self.stdout.write(
            f"filled the facts of {done.filled} traces"
            + (
                f"; {done.expired} expired by retention have no file to read"
                if done.expired
                else ""
            )
        )
        if done.failed:
            raise CommandError(f"{len(done.failed)} traces not read", returncode=1)
