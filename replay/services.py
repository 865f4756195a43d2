"""Writes: ingesting traces and executing replay runs. Views, API, tasks and commands call
these; they load rows, call the pure core, and store what it says."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from replay import engine, errors, verdicts
from replay.errors import ReplayError
from replay.formats import AHD, PAXMAN, native, open_trace, sniff
from replay.keys import DatabaseKeyRing
from replay.models import Blob, ReplayRun, Snapshot, Trace
from replay.registry import default_registry
from replay.selectors import run_outcome, runs_finished, trace_ingest_verdict
from replay.storage import Spooled, blob_open, blob_put, spool

#: reads the ledger's active halts: halted trace and snapshot ids -> why (None: no ledger)
Halts = Callable[[], Mapping[str, str] | None]

#: refusals that mean "not a trace we can store"; anything else is stored with its verdict
UNSTORABLE = {errors.MALFORMED_TRACE, errors.UNSUPPORTED_SCHEMA_VERSION}


@dataclass
class IngestResult:
    trace: Trace
    created: bool
    report: dict[str, Any]


@dataclass
class CheckedOnly:
    """An upload of a format the console verifies but does not store (yet): its report."""

    format: str
    report: dict[str, Any]


#: the verify-only formats in words, for messages
FORMAT_NAMES = {PAXMAN: "a Paxman execution artifact", AHD: "an AHD replay sidecar or report"}
NOT_STORED_MESSAGE = (
    "{filename} is {what}: only native replay-trace files are stored; the upload page "
    "verifies it without storing it, and `manage.py verify` checks it offline"
)


def stored_snapshot_body(snapshot_id: str) -> Any:
    row = Snapshot.objects.filter(snapshot_id=snapshot_id).only("body").first()
    return row.body if row is not None else None


def _limits() -> native.Limits:
    """What reading one upload may cost (settings override the format's defaults)."""
    default = native.DEFAULT_LIMITS
    return native.Limits(
        max_total_bytes=getattr(settings, "REPLAY_MAX_DECOMPRESSED_BYTES", 8 * 1024**3),
        max_ratio=getattr(settings, "REPLAY_MAX_GZIP_RATIO", default.max_ratio),
        ratio_floor=getattr(settings, "REPLAY_GZIP_RATIO_FLOOR_BYTES", default.ratio_floor),
        max_blank_lines=getattr(settings, "REPLAY_MAX_BLANK_LINES", default.max_blank_lines),
        max_keys=getattr(settings, "REPLAY_MAX_JSON_KEYS", default.max_keys),
        max_object_keys=getattr(settings, "REPLAY_MAX_OBJECT_KEYS", default.max_object_keys),
    )


def _server_data_dirs() -> tuple[str, ...]:
    """Directories an AHD input path may never lead into, even when the checkout holds them:
    the server's data (its SQLite database and the WAL/SHM files beside it, blobs, spooled
    uploads). Reading the database file through another descriptor would release this
    process's POSIX locks on it."""
    dirs = [str(settings.VAR_DIR), tempfile.gettempdir()]
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3") and str(db["NAME"]) != ":memory:":
        dirs.append(os.path.dirname(os.path.abspath(db["NAME"])))
    location = settings.STORAGES.get("blobs", {}).get("OPTIONS", {}).get("location")
    if location:
        dirs.append(str(location))
    if getattr(settings, "FILE_UPLOAD_TEMP_DIR", None):
        dirs.append(str(settings.FILE_UPLOAD_TEMP_DIR))
    return tuple(dirs)


def _ahd_limits() -> dict[str, Any]:
    from replay.formats import ahd

    return {
        "excluded": _server_data_dirs(),
        "max_input_bytes": getattr(settings, "REPLAY_AHD_MAX_INPUT_BYTES", ahd.MAX_INPUT_BYTES),
    }


def _verify(
    opened: Callable[[], IO[bytes]],
    filename: str,
    *,
    mode: str,
    at: Any,
    halted: Mapping[str, str] | None = None,
    continue_past: Sequence[int] = (),
    progress: Callable[[int], None] | None = None,
    retained_only: bool = False,
    workers: int = 1,
    file_id: str | None = None,
) -> tuple[native.NativeTrace | None, engine.ReplayReport]:
    with opened() as fh:
        try:
            trace = open_trace(fh, filename, limits=_limits())
        except ReplayError as exc:
            report = engine.ReplayReport(trace_id=None, format=native.FORMAT, mode=mode)
            report.checks.append(engine.Check("format", False, exc.message))
            return None, report.fail(exc.code, exc.message)
        if retained_only:
            _use_retained_snapshots(trace)
        report = engine.replay(
            trace,
            mode=mode,
            registry=default_registry(),
            keys=DatabaseKeyRing(),
            stored_snapshot=stored_snapshot_body,
            halted=halted,
            at=at,
            limits=engine.ReplayLimits(
                max_seconds=getattr(settings, "REPLAY_MAX_SECONDS", 3600.0),
                max_iterations=getattr(settings, "REPLAY_MAX_ITERATIONS", None),
            ),
            continue_past=frozenset(continue_past),
            clock=time.monotonic,
            progress=progress,
            workers=workers,
            file_id=file_id,
        )
        return trace, report


def _use_retained_snapshots(trace: native.NativeTrace) -> None:
    """For a stored trace, snapshot bodies come from the retained store, not from the file.

    Retention decides: once a body is removed from the store, every stored trace that needs
    it is MISSING_SNAPSHOT, even one whose original file still carries a copy. A body in the
    file that does not hash to its snapshot_id is kept, so the replay reports the tampering.
    (The seal never covers bodies, so dropping them changes no other check.)
    """
    for snap in trace.header["snapshots"]:
        body = snap.get("body")
        if body is not None and native.snapshot_id_of(body) == snap["snapshot_id"]:
            del snap["body"]


def _checked(
    fmt: str,
    stream: IO[bytes],
    filename: str,
    *,
    mode: str = engine.AUDIT,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
    halts: Halts | None = None,
) -> engine.ReplayReport:
    """The report on a sniffed file, storing nothing. An AHD sidecar here is one that came
    on its own: its token and brief are re-hashed from the AHD checkout the server keeps
    (``REPLAY_AHD_ROOT``), and without one the report says so. ``halts`` reads the ledger's
    active halts, which refuse a native trace as a replay would (called for a native trace
    only); without it, or when it gives None, the halts check says they were not checked."""
    if fmt == native.FORMAT:
        _trace, report = _verify(
            lambda: stream,
            filename,
            mode=mode,
            at=timezone.now(),
            halted=halts() if halts is not None else None,
            progress=progress,
            workers=workers,
        )
        return report
    if fmt == PAXMAN:
        from replay.formats import paxman

        return paxman.verify_stream(stream, mode=mode)
    from replay.formats import ahd

    root = getattr(settings, "REPLAY_AHD_ROOT", None)
    data = stream.read(ahd.MAX_SIDECAR_BYTES + 1)
    return ahd.verify_upload(
        data, filename, root=Path(root) if root else None, mode=mode, **_ahd_limits()
    )


def trace_verify_file(
    *,
    source: IO[bytes],
    filename: str,
    mode: str = engine.AUDIT,
    progress: Callable[[int], None] | None = None,
    path: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    workers: int = 1,
    halts: Halts | None = None,
) -> dict[str, Any]:
    """Verify a file without storing anything (the `verify` command).

    ``halts`` reads the ledger's halted trace and snapshot ids -> why (the caller knows how;
    replay never imports governance), for a native trace only: a halted one is refused with
    FORCE_HALT_ACTIVE as a replay would be. Without it, or when it gives None (no ledger),
    the report's halts check says "not checked (offline, no ledger)".

    ``workers`` > 1 reads a JSON Lines trace in that many processes (same report); only
    where the caller may start processes (a command, not a Celery prefork worker).

    The format is detected (`replay.formats.detect_format`): a native trace, a Paxman
    artifact, or an AHD sidecar / report. AHD inputs are checked against the AHD checkout
    on disk, so they need `path` (and take `root`); `ahd.AhdRootNotFound` is a usage error.
    """
    fmt, stream = sniff(source, filename)
    if fmt == AHD:
        from replay.formats import ahd

        if path is None:
            report = engine.ReplayReport(trace_id=None, format=ahd.FORMAT, mode=mode)
            message = f"{filename}: an AHD sidecar is verified against its checkout on disk"
            report.checks.append(engine.Check("format", False, message))
            return report.fail(errors.MALFORMED_TRACE, message).to_json()
        return ahd.verify_path(
            Path(path), root=Path(root) if root is not None else None, mode=mode, **_ahd_limits()
        ).to_json()
    return _checked(
        fmt, stream, filename, mode=mode, progress=progress, workers=workers, halts=halts
    ).to_json()


def trace_ingest(
    *,
    source: IO[bytes],
    filename: str,
    uploaded_by: Any = None,
    declared_format: str | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> IngestResult:
    """Store one trace file, verified. A refused file stores nothing and raises ReplayError."""
    if declared_format is not None and declared_format != native.FORMAT:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"unknown format {declared_format!r}; supported: {native.FORMAT}",
        )
    fmt, stream = sniff(source, filename)
    if fmt != native.FORMAT:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            NOT_STORED_MESSAGE.format(filename=filename, what=FORMAT_NAMES[fmt]),
        )
    return _ingest(stream, filename, uploaded_by=uploaded_by, progress=progress, workers=workers)


def _ingest(
    source: IO[bytes],
    filename: str,
    *,
    uploaded_by: Any,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> IngestResult:
    limit = getattr(settings, "REPLAY_MAX_UPLOAD_BYTES", 2 * 1024**3)
    spooled = spool(source, limit=limit, progress=progress)
    try:
        existing = Trace.objects.filter(blob__sha256=spooled.sha256).first()
        if existing is not None:
            return IngestResult(existing, False, existing.ingest_report)
        witnessed = timezone.now()
        trace, report = _verify(
            spooled.open, filename, mode=engine.AUDIT, at=witnessed, workers=workers
        )
        if report.error_code in UNSTORABLE or trace is None:
            raise ReplayError(report.error_code or errors.MALFORMED_TRACE, report.message)
        return _store(spooled, filename, trace, report, uploaded_by)
    finally:
        spooled.discard()


def trace_check(
    *,
    source: IO[bytes],
    filename: str,
    progress: Callable[[int], None] | None = None,
    halts: Halts | None = None,
) -> CheckedOnly:
    """Verify one uploaded file of any format the console reads and store nothing: always a
    report, a refusal included (``POST /api/traces/verify/``). A native trace is verified as
    ``manage.py verify`` does, against the active halts ``halts`` reads from the ledger; an
    AHD sidecar against ``REPLAY_AHD_ROOT``."""
    fmt, stream = sniff(source, filename)
    report = _checked(fmt, stream, filename, progress=progress, halts=halts)
    return CheckedOnly(fmt, report.to_json())


def trace_upload(
    *, source: IO[bytes], filename: str, uploaded_by: Any = None
) -> IngestResult | CheckedOnly:
    """What the console's upload page does with one file: a native trace is stored (as
    :func:`trace_ingest`); a Paxman artifact or an AHD sidecar is verified (as
    :func:`trace_check`) and its report returned, nothing stored. A file that is not well
    formed is refused either way."""
    fmt, stream = sniff(source, filename)
    if fmt == native.FORMAT:
        return _ingest(stream, filename, uploaded_by=uploaded_by)
    report = _checked(fmt, stream, filename)
    if report.error_code in UNSTORABLE:  # not a file of that format after all: a refusal
        raise ReplayError(report.error_code, report.message, broke_at=report.broke_at)
    return CheckedOnly(fmt, report.to_json())


@transaction.atomic(durable=True)
def _store(
    spooled: Spooled,
    filename: str,
    trace: native.NativeTrace,
    report: engine.ReplayReport,
    uploaded_by: Any,
) -> IngestResult:
    header = trace.header
    job = header["job"]
    for snap in header["snapshots"]:
        body = snap.get("body")
        # the store is content-addressed: only a body that hashes to its id goes in
        if body is None or native.snapshot_id_of(body) != snap["snapshot_id"]:
            continue
        Snapshot.objects.get_or_create(
            snapshot_id=snap["snapshot_id"],
            defaults={
                "kind": snap["kind"],
                "schema_version": snap["schema_version"],
                "body": body,
                "signature": snap["signature"],
            },
        )
    name = blob_put(spooled)
    try:
        blob, _ = Blob.objects.get_or_create(
            sha256=spooled.sha256, defaults={"size": spooled.size, "storage_name": name}
        )
    except IntegrityError:  # raced with an identical upload
        blob = Blob.objects.get(sha256=spooled.sha256)
    by_kind = {s["kind"]: s["snapshot_id"] for s in header["snapshots"]}
    data = report.to_json()
    row = Trace.objects.create(
        trace_id=header["trace_id"],
        format=native.FORMAT,
        schema_version=header["schema_version"],
        blob=blob,
        filename=filename[:255],
        encoding=trace.encoding + (".gz" if trace.compressed else ""),
        job_id=job["job_id"][:255],
        job_seed=job["job_seed"][:255],
        runtime_name=job["runtime"]["name"][:255],
        runtime_version=job["runtime"]["version"][:64],
        started_at=_parse_time(job.get("started_at")),
        event_count=report.stats.get("events", 0),
        step_count=report.stats.get("steps", 0),
        required_snapshot_ids=[
            {"kind": kind, "snapshot_id": by_kind.get(kind)}
            for kind in header["required_snapshots"]
        ],
        missing_outputs=[
            m.split(" ")[0].removeprefix("output:")
            for m in report.missing
            if m.startswith("output:")
        ],
        ingest_report=data,
        # no run yet: the rule's verdict is the upload's (replay/verdicts.py)
        last_status=verdicts.trace_verdict(ingest=report.status, runs=()),
        uploaded_by=uploaded_by,
    )
    return IngestResult(row, True, data)


def _parse_time(value: str | None):
    if not value:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


@transaction.atomic
def replay_run_create(
    *,
    trace: Trace,
    mode: str,
    requested_by: Any = None,
    continue_past: Sequence[int] = (),
    resumed_from: ReplayRun | None = None,
) -> ReplayRun:
    """The run row, queued; the caller enqueues its execution on commit."""
    if mode not in engine.MODES:
        raise ValueError(f"mode must be one of {', '.join(engine.MODES)}")
    return ReplayRun.objects.create(
        trace=trace,
        mode=mode,
        requested_by=requested_by,
        continue_past=list(continue_past),
        resumed_from=resumed_from,
        progress_total=trace.event_count + trace.step_count + len(trace.missing_outputs),
    )


class _Progress:
    """Writes progress to the run row at most every half second."""

    def __init__(self, run_id: Any, also: Callable[[int], None] | None) -> None:
        self._run_id = run_id
        self._last = 0.0
        self._also = also

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self._last >= 0.5:
            self._last = now
            ReplayRun.objects.filter(id=self._run_id).update(progress_done=done)
        if self._also is not None:
            self._also(done)


def replay_run_execute(
    *,
    run_id: Any,
    halted: Mapping[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
) -> ReplayRun:
    """Execute a queued run and store its report. Idempotent: a finished run is returned as is.

    ``halted`` maps a trace id, a snapshot id or a stored file's sha256 to why it is halted.

    Safe to retry after a crash: the report is written in one transaction at the end.
    """
    run = ReplayRun.objects.select_related("trace__blob").get(id=run_id)
    if run.state == ReplayRun.State.DONE:
        return run
    ReplayRun.objects.filter(id=run.id).update(
        state=ReplayRun.State.RUNNING, started_at=timezone.now()
    )
    trace = run.trace
    _t, report = _verify(
        lambda: blob_open(trace.blob.storage_name),
        trace.filename,
        mode=run.mode,
        at=trace.created_at,
        halted=halted,
        continue_past=run.continue_past,
        progress=_Progress(run.id, progress),
        retained_only=True,
        workers=workers,
        file_id=trace.blob.sha256,
    )
    data = report.to_json()
    with transaction.atomic():
        run = ReplayRun.objects.select_for_update().get(id=run.id)
        if run.state == ReplayRun.State.DONE:  # a duplicate delivery finished first
            return run
        run.report = data
        run.status = report.status
        run.error_code = report.error_code or ""
        run.authoritative = report.authoritative
        run.state = ReplayRun.State.DONE
        run.progress_done = run.progress_total
        run.finished_at = timezone.now()
        run.save()
        _trace_verdict_store(trace_pk=trace.pk, replayed_at=run.finished_at)
    return run


def _trace_verdict_store(*, trace_pk: int, replayed_at: Any) -> str:
    """Recompute and store a trace's verdict by the one rule (replay/verdicts.py), from the
    upload's verdict and every finished run; the row is locked so two runs finishing at once
    store the verdict of both."""
    trace = Trace.objects.select_for_update().get(pk=trace_pk)
    verdict = verdicts.trace_verdict(
        ingest=trace_ingest_verdict(trace),
        runs=[run_outcome(r) for r in runs_finished(trace)],
    )
    Trace.objects.filter(pk=trace_pk).update(last_status=verdict, last_replayed_at=replayed_at)
    return verdict


@transaction.atomic(durable=True)
def snapshot_remove(*, snapshot_id: str) -> int:
    """Retention: drop a stored snapshot body. Traces that need it become MISSING_SNAPSHOT.

    Returns how many stored traces referenced it.
    """
    deleted, _ = Snapshot.objects.filter(snapshot_id=snapshot_id).delete()
    if not deleted:
        raise ReplayError(errors.MISSING_SNAPSHOT, f"no stored snapshot {snapshot_id}")
    return sum(
        1
        for refs in Trace.objects.values_list("required_snapshot_ids", flat=True).iterator()
        if any(r.get("snapshot_id") == snapshot_id for r in refs or [])
    )
