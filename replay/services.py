"""Writes: ingesting traces and executing replay runs. Views, API, tasks and commands call
these; they load rows, call the pure core, and store what it says."""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone

from core import errors
from core.errors import ReplayError
from core.formats import default_registry, format_names, formats, native, sniff
from core.formats.protocol import (
    OptionSources,
    SettingError,
    StoredFacts,
    TraceFormat,
    VerifyContext,
    replay_options,
)
from core.replay import verdicts
from core.replay.report import AUDIT, MODES, Check, ReplayReport
from replay import conf
from replay.keys import DatabaseKeyRing
from replay.models import Blob, ReplayRun, Snapshot, Trace
from replay.selectors import run_outcome, runs_finished, trace_ingest_verdict
from replay.signals import trace_stored
from replay.storage import Spooled, blob_erased, blob_name, blob_open, blob_put, spool

#: reads the ledger's active halts: halted trace and snapshot ids -> why (None: no ledger)
Halts = Callable[[], Mapping[str, str] | None]
#: a Paxman contract supplied with an artifact: (its file name, its bytes)
Contract = tuple[str, bytes]


@dataclass
class IngestResult:
    trace: Trace
    created: bool
    report: dict[str, Any]


@dataclass
class CheckedOnly:
    """A file verified without storing it (``POST /api/traces/verify/``): its report."""

    format: str
    report: dict[str, Any]


@dataclass
class BatchOutcome:
    """One file of a batch upload: stored (``result``), refused (``error``), or an input
    another file of the batch named (``input_of``: that file's name; ``input_as``: what it is
    to that file, in the words of the companion rule that grouped it)."""

    filename: str
    result: IngestResult | None = None
    error: ReplayError | None = None
    input_of: str = ""
    input_as: str = ""


def stored_snapshot_body(snapshot_id: str) -> Any:
    row = Snapshot.objects.filter(snapshot_id=snapshot_id).only("body").first()
    return row.body if row is not None else None


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
    if settings.FILE_UPLOAD_TEMP_DIR:  # Django's own setting (None unless set)
        dirs.append(str(settings.FILE_UPLOAD_TEMP_DIR))
    return tuple(dirs)


def _format(name: str) -> TraceFormat:
    fmt = formats().get(name)
    if fmt is None:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"unknown format {name!r}; supported: {', '.join(sorted(format_names()))}",
        )
    return fmt


def _expanded(inputs: Mapping[str, bytes] | None, fmt: TraceFormat) -> dict[str, bytes]:
    """Uploaded inputs of a file of ``fmt``, every archive among them read (bounded by the
    format's archive limits) into the files it holds; raises ReplayError naming the entry
    when an archive is refused."""
    from core.formats import archive

    return archive.expand_inputs(dict(inputs or {}), conf.input_limits(fmt).archive)


def _sources(given: Mapping[str, Any] | None = None) -> OptionSources:
    """What a format builds its options from: the settings, the server's data directories
    and what the request ``given`` (``contract``, ``input_root``; None values left out)."""
    return OptionSources(
        setting=conf.setting,
        server_dirs=_server_data_dirs(),
        given={k: v for k, v in (given or {}).items() if v is not None},
    )


def _unpacker(filename: str) -> TraceFormat | None:
    """The format that reads ``filename`` as a whole run with its inputs (an AHD archive)."""
    for fmt in formats():
        unpacks = getattr(fmt, "unpacks", None)
        if unpacks is not None and unpacks(filename):
            return fmt
    return None


def _unpacked(
    fmt: TraceFormat, source: IO[bytes], filename: str, inputs: Mapping[str, bytes] | None
) -> tuple[IO[bytes], str, dict[str, bytes]]:
    """A whole run given as the file itself (``run.tar.gz``), read by its format
    (``unpack``) into the trace, its name and its inputs; raises ReplayError naming what
    is refused."""
    unpack = getattr(fmt, "unpack")  # noqa: B009 - optional in the protocol
    return unpack(source, filename, dict(inputs or {}), _sources())


def _context(
    fmt: TraceFormat | None = None, given: Mapping[str, Any] | None = None, **kwargs: Any
) -> VerifyContext:
    """What verifying a file of ``fmt`` may use, from settings and the database; the
    format's own options (its ``options``) from its settings and what the request gave."""
    options = getattr(fmt, "options", None) if fmt is not None else None
    if options is not None:
        try:
            kwargs["format_options"] = options(_sources(given))
        except SettingError as exc:
            raise ImproperlyConfigured(str(exc)) from None
    return VerifyContext(
        keys=DatabaseKeyRing(),
        registry=default_registry(),
        stored_snapshot=stored_snapshot_body,
        limits=conf.upload_limits(),
        replay_limits=conf.replay_limits(),
        clock=time.monotonic,
        **kwargs,
    )


def _storable(fmt: TraceFormat, report: ReplayReport) -> bool:
    """Whether a parsed file's report lets it be stored: the format's own ``storable`` when
    it has one, else its code is not one of the format's ``unstorable_codes``."""
    storable = getattr(fmt, "storable", None)
    if storable is not None:
        return bool(storable(report))
    return report.error_code not in fmt.unstorable_codes


def _verify(
    opened: Callable[[], IO[bytes]],
    filename: str,
    *,
    fmt: TraceFormat,
    ctx: VerifyContext,
    replay: bool = False,
) -> tuple[Any, ReplayReport]:
    """Parse and verify (or replay, where the format has one); a file that does not parse
    is the format's refusal report, with no parsed value."""
    with opened() as fh:
        try:
            parsed = fmt.parse(fh, filename, ctx)
        except ReplayError as exc:
            return None, fmt.refused(exc, filename, ctx)
        report = fmt.replay(parsed, filename, ctx) if replay else None
        if report is None:
            report = fmt.verify(parsed, filename, ctx)
        return parsed, report


def _checked(
    fmt: str,
    stream: IO[bytes],
    filename: str,
    *,
    mode: str = AUDIT,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
    halts: Halts | None = None,
    inputs: Mapping[str, bytes] | None = None,
    contract: Contract | None = None,
) -> ReplayReport:
    """The report on a sniffed file, storing nothing. An AHD sidecar's token and brief are
    re-hashed from the files uploaded with it (``inputs``), else from the AHD checkout the
    server keeps (``REPLAY_AHD_ROOT``), and without either the report says so. ``halts``
    reads the ledger's active halts, which refuse a halted native trace as a replay would
    (called for a native trace only); without it, or when it gives None, the halts check
    says they were not checked. An archive among ``inputs`` that is refused is the report
    (the format's refusal naming the entry); ``contract`` is a Paxman artifact's."""
    adapter = _format(fmt)
    try:
        expanded = _expanded(inputs, adapter)
    except ReplayError as exc:
        ctx = _context(adapter, mode=mode)
        return adapter.refused(exc, filename, ctx)
    ctx = _context(
        adapter,
        {"contract": contract},
        mode=mode,
        at=timezone.now(),
        # offline checks read the ledger for a native trace only (as before); a stored file
        # of any format is checked against the halts whenever it is replayed
        halted=halts() if halts is not None and fmt == native.FORMAT else None,
        progress=progress,
        workers=workers,
        inputs=expanded,
    )
    _parsed, report = _verify(lambda: stream, filename, fmt=adapter, ctx=ctx)
    return report


def trace_verify_file(
    *,
    source: IO[bytes],
    filename: str,
    mode: str = AUDIT,
    progress: Callable[[int], None] | None = None,
    path: str | os.PathLike[str] | None = None,
    root: str | os.PathLike[str] | None = None,
    workers: int = 1,
    halts: Halts | None = None,
    inputs: Mapping[str, bytes] | None = None,
    contract: Contract | None = None,
) -> dict[str, Any]:
    """Verify a file without storing anything (the `verify` command).

    ``halts`` reads the ledger's halted trace and snapshot ids -> why (the caller knows how;
    replay never imports governance), for a native trace only: a halted one is refused with
    FORCE_HALT_ACTIVE as a replay would be. Without it, or when it gives None (no ledger),
    the report's halts check says "not checked (offline, no ledger)".

    ``workers`` > 1 reads a JSON Lines trace in that many processes (same report); only
    where the caller may start processes (a command, not a Celery prefork worker).

    The format is detected (`core.formats.detect_format`): a native trace, a Paxman
    artifact, or an AHD sidecar / report. A format that verifies a file where it lies
    (``verify_path``: an AHD sidecar against its checkout on disk, which needs `path` and
    takes `root`; `protocol.RootNotFound` is a usage error) does so when no ``inputs`` came
    with it. With ``inputs`` (the token and brief, or an archive of them: `--inputs`) an AHD
    sidecar is checked against those instead of a checkout. ``contract``: a Paxman
    artifact's. A file a format reads whole (``unpacks``: an AHD ``run.tar.gz``) is the run
    it holds, checked against the inputs it holds.
    """
    whole = _unpacker(filename)
    if whole is not None:
        try:
            source, filename, inputs = _unpacked(whole, source, filename, inputs)
        except ReplayError as exc:
            return whole.refused(exc, filename, _context(whole, mode=mode)).to_json()
        return _checked(whole.name, source, filename, mode=mode, inputs=inputs).to_json()
    fmt, stream = sniff(source, filename)
    on_disk = getattr(_format(fmt), "verify_path", None)
    if on_disk is not None and not inputs:
        ctx = _context(_format(fmt), {"input_root": root}, mode=mode)
        report = on_disk(Path(path) if path is not None else None, filename, ctx)
        if report is not None:
            return report.to_json()
    return _checked(
        fmt,
        stream,
        filename,
        mode=mode,
        progress=progress,
        workers=workers,
        halts=halts,
        inputs=inputs,
        contract=contract,
    ).to_json()


def trace_ingest(
    *,
    source: IO[bytes],
    filename: str,
    uploaded_by: Any = None,
    uploaded_label: str = "",
    declared_format: str | None = None,
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
    inputs: Mapping[str, bytes] | None = None,
    input_root: str | os.PathLike[str] | None = None,
    contract: Contract | None = None,
    detected: str | None = None,
) -> IngestResult:
    """Store one file of any registered format, verified. A refused file stores nothing and
    raises ReplayError.

    ``inputs``: the files uploaded with it, by name (an AHD sidecar's token and brief, matched
    by the sidecar's recorded paths, and stored with the run as its snapshots);
    ``input_root``: a directory holding them instead (the CLI's AHD checkout; the server's
    ``REPLAY_AHD_ROOT`` otherwise). An archive among ``inputs`` (``.tar.gz``, ``.tgz``,
    ``.zip``) stands for the files it holds; one that is refused stores nothing.
    ``contract``: the contract a Paxman artifact is checked against (``INVALID_CONTRACT``
    refuses the artifact). An archive given as the file itself is one AHD run handed over
    whole (its sidecar with the token and brief it names): the sidecar is stored with them.
    ``detected``: the format the caller already sniffed ``source`` as, positioned at its start
    (the upload batch): it is not sniffed again. ``uploaded_label``: what stores it when no
    person does (``"the demo"``), kept on the row for the pages to say.
    """
    whole = _unpacker(filename)
    if whole is not None:
        source, filename, inputs = _unpacked(whole, source, filename, inputs)
        detected = None
    if declared_format is not None:
        _format(declared_format)
    if detected is not None:
        fmt, stream = detected, source
    else:
        fmt, stream = sniff(source, filename)
    if declared_format is not None and declared_format != fmt:
        raise ReplayError(
            errors.MALFORMED_TRACE,
            f"{filename} is {_format(fmt).label} ({fmt}), not {declared_format}",
        )
    return _ingest(
        stream,
        filename,
        fmt=_format(fmt),
        uploaded_by=uploaded_by,
        uploaded_label=uploaded_label,
        progress=progress,
        workers=workers,
        inputs=inputs,
        input_root=Path(input_root) if input_root is not None else None,
        contract=contract,
    )


def _ingest(
    source: IO[bytes],
    filename: str,
    *,
    fmt: TraceFormat,
    uploaded_by: Any,
    uploaded_label: str = "",
    progress: Callable[[int], None] | None = None,
    workers: int = 1,
    inputs: Mapping[str, bytes] | None = None,
    input_root: Path | None = None,
    contract: Contract | None = None,
) -> IngestResult:
    expanded = _expanded(inputs, fmt)  # a refused archive stores nothing
    limit = conf.max_upload_bytes()
    spooled = spool(source, limit=limit, progress=progress)
    try:
        existing = Trace.objects.filter(blob__sha256=spooled.sha256).first()
        if existing is not None:
            return IngestResult(existing, False, existing.ingest_report)
        ctx = _context(
            fmt,
            {"contract": contract, "input_root": input_root},
            mode=AUDIT,
            at=timezone.now(),
            workers=workers,
            file_id=spooled.sha256,
            inputs=expanded,
        )
        parsed, report = _verify(spooled.open, filename, fmt=fmt, ctx=ctx)
        if parsed is None or not _storable(fmt, report):
            raise ReplayError(
                report.error_code or errors.MALFORMED_TRACE,
                report.message,
                broke_at=report.broke_at,
                expected=report.expected,
                observed=report.observed,
            )
        facts = fmt.facts(parsed, report, ctx)
        return _store(
            spooled,
            filename=filename,
            fmt=fmt.name,
            facts=facts,
            report=report,
            uploaded_by=uploaded_by,
            uploaded_label=uploaded_label,
            parsed=parsed,
        )
    finally:
        spooled.discard()


def trace_check(
    *,
    source: IO[bytes],
    filename: str,
    progress: Callable[[int], None] | None = None,
    halts: Halts | None = None,
    inputs: Mapping[str, bytes] | None = None,
    contract: Contract | None = None,
) -> CheckedOnly:
    """Verify one uploaded file of any format the console reads and store nothing: always a
    report, a refusal included (``POST /api/traces/verify/``), against the active halts
    ``halts`` reads from the ledger; an AHD sidecar against the files uploaded with it
    (``inputs``), else ``REPLAY_AHD_ROOT``; an archive, as the AHD run it holds."""
    whole = _unpacker(filename)
    if whole is not None:
        try:
            source, filename, inputs = _unpacked(whole, source, filename, inputs)
        except ReplayError as exc:
            return CheckedOnly(whole.name, whole.refused(exc, filename, _context(whole)).to_json())
    fmt, stream = sniff(source, filename)
    report = _checked(
        fmt, stream, filename, progress=progress, halts=halts, inputs=inputs, contract=contract
    )
    return CheckedOnly(fmt, report.to_json())


def trace_upload(
    *,
    source: IO[bytes],
    filename: str,
    uploaded_by: Any = None,
    inputs: Mapping[str, bytes] | None = None,
    contract: Contract | None = None,
    detected: str | None = None,
) -> IngestResult:
    """What the console's upload page does with one file: stores it, as :func:`trace_ingest`."""
    return trace_ingest(
        source=source,
        filename=filename,
        uploaded_by=uploaded_by,
        inputs=inputs,
        contract=contract,
        detected=detected,
    )


def _input_names(source: IO[bytes], filename: str, fmt: str | None = None) -> list[str]:
    """The files a file names that are uploaded beside it, by its format's ``input_names``
    (an AHD sidecar's token and brief, a MACE log's snapshot files); [] for a format that
    names none. ``fmt``: the format already detected (the file is then not sniffed again)."""
    if fmt is None:
        fmt, source = sniff(source, filename)
    named = getattr(formats().get(fmt), "input_names", None)
    return named(source, filename) if named is not None else []


def trace_upload_batch(
    *,
    files: Sequence[tuple[str, IO[bytes]]],
    uploaded_by: Any = None,
    inputs: Mapping[str, bytes] | None = None,
    contract: Contract | None = None,
) -> list[BatchOutcome]:
    """Several files uploaded at once (the upload page). Each file is sniffed once; its
    companions are grouped by the formats' own rules (:func:`group_companions`, the rules
    ``upload.js`` groups a drop by): an AHD sidecar takes the files of the drop that are not
    traces (its token and brief, or an archive of them), a Paxman artifact ``x.json`` takes
    ``x.contract.json`` (its contract), a ContextOS trace its pinned pack and KG snapshot
    (``*.pack.json``, ``*.kg.json``); and the files a file names (``input_names``: an AHD
    sidecar's recorded paths, a MACE log's snapshot files) are inputs of the batch. A
    companion is stored with its trace, not as a trace of its own; one that needs its trace
    and came without it is refused (a contract without its artifact); every other file is
    stored (or refused) on its own (dropped without a sidecar, an archive is one whole AHD
    run: its sidecar with the token and brief it names).

    ``inputs`` and ``contract``: given explicitly (the API's ``inputs`` and ``contract``
    fields), pinned to every trace of the batch: they win over the companions its rules
    group with it."""
    from core.formats import archive, companion_alone, group_companions, named_input_words

    names = [name for name, _source in files]
    detected: dict[str, str] = {}
    named: dict[str, str] = {}
    for name, source in files:
        fmt, stream = sniff(source, name)
        detected[name] = fmt
        for wanted in _input_names(stream, name, fmt):
            named.setdefault(wanted, name)
        source.seek(0)
    groups = group_companions(names, detected)
    owner_of = {c: (owner, rule) for owner, group in groups.items() for c, rule in group}

    def cap(name: str, owner: str) -> int:
        """How much of a companion is read: up to the limit of its owner's format."""
        limits = conf.input_limits(formats().get(detected[owner]))
        if archive.is_archive(name):
            return int(limits.archive.max_archive_bytes)
        return limits.max_input_bytes

    read: dict[str, bytes] = {}
    named_inputs: dict[str, bytes] = {}
    companions: list[BatchOutcome] = []
    outcomes: list[BatchOutcome] = []
    naming = set(named.values())
    for name, source in files:
        if name in owner_of:
            owner, rule = owner_of[name]
            read[name] = source.read(cap(name, owner) + 1)
            companions.append(BatchOutcome(name, input_of=owner, input_as=rule.describes))
        elif (alone := companion_alone(name)) is not None:
            refusal = getattr(formats().get(alone[0]), "companion_alone", None)
            if refusal is not None:
                outcomes.append(BatchOutcome(name, error=refusal(name)))
        elif name in named and name not in naming:
            named_inputs[name] = source.read(cap(name, named[name]) + 1)
            words = named_input_words(detected[named[name]])
            companions.append(BatchOutcome(name, input_of=named[name], input_as=words))
    taken = {o.filename for o in companions + outcomes}
    stored: list[BatchOutcome] = []
    for name, source in files:
        if name in taken:
            continue
        own = groups.get(name, [])
        given = {**named_inputs, **{c: read[c] for c, rule in own if rule.role == "input"}}
        given.update(inputs or {})
        grouped = next(((c, read[c]) for c, rule in own if rule.role == "contract"), None)
        try:
            result = trace_upload(
                source=source,
                filename=name,
                uploaded_by=uploaded_by,
                inputs=given,
                contract=contract if contract is not None else grouped,
                detected=detected[name],
            )
        except ReplayError as exc:
            stored.append(BatchOutcome(name, error=exc))
        else:
            stored.append(BatchOutcome(name, result=result))
    return stored + outcomes + companions


#: at most this many companion files are read from a directory, of at most this many entries
MAX_BESIDE_FILES = 64
MAX_BESIDE_SCANNED = 10_000


def inputs_beside(path: Path, *, given: Sequence[Path] = ()) -> dict[str, bytes]:
    """The companion files of a file on disk, read from its directory by its format's rules,
    as the upload page groups the files dropped together: the files matching its companion
    rules (``beside``; a ContextOS trace's pinned pack and KG snapshot, plus the ones
    ``given`` on the command line), and the files it names (``input_names``: a MACE log's
    snapshot files). {} for a format whose inputs come from elsewhere (an AHD sidecar's, from
    its checkout). The one grouping ``ingest``, ``replay PATH`` and ``verify`` share."""
    from core.formats import companion_pattern, name_rules

    with path.open("rb") as fh:
        fmt_name, stream = sniff(fh, path.name)
        fmt = formats().get(fmt_name)
        if not getattr(fmt, "inputs_beside", True):
            return {}
        names = [n for n in _input_names(stream, path.name, fmt_name) if "/" not in n]
    limit = conf.input_limits(fmt).max_input_bytes
    found: dict[str, bytes] = {}
    rules = [r for r in name_rules(fmt) if r.beside and r.role == "input"]
    if rules:
        stem = path.name
        patterns = []
        for rule in rules:
            match = re.search(rule.trace, path.name, re.IGNORECASE)
            stem = path.name[: match.start()] + path.name[match.end() :] if match else path.name
            patterns.append(companion_pattern(rule, stem))
        for candidate in sorted(path.parent.iterdir())[:MAX_BESIDE_SCANNED]:
            if len(found) >= MAX_BESIDE_FILES:
                break
            if candidate == path or not any(p.search(candidate.name) for p in patterns):
                continue
            if candidate.is_file():
                with candidate.open("rb") as fh:
                    found[candidate.name] = fh.read(limit + 1)
        found.update({g.name: g.read_bytes() for g in given})
    for name in dict.fromkeys(n for n in names if "\\" not in n):
        candidate = path.parent / name
        if name not in found and candidate.is_file():
            with candidate.open("rb") as fh:
                found[name] = fh.read(limit + 1)
    return found


@transaction.atomic(durable=True)
def _store(
    spooled: Spooled,
    *,
    filename: str,
    fmt: str,
    facts: StoredFacts,
    report: ReplayReport,
    uploaded_by: Any,
    uploaded_label: str = "",
    parsed: Any = None,
) -> IngestResult:
    for snap in facts.snapshots:
        Snapshot.objects.get_or_create(
            snapshot_id=snap.snapshot_id,
            defaults={
                "kind": snap.kind,
                "schema_version": snap.schema_version,
                "body": snap.body,
                "signature": snap.signature,
            },
        )
    # stored after the trace_stored handlers ran: privacy stores the file sealed (its personal
    # values cut out) under this name itself, so the plain bytes never reach a store that
    # cannot replace them (the append-only S3 store, console.blobstore)
    name = blob_name(spooled.sha256)
    try:
        blob, _ = Blob.objects.get_or_create(
            sha256=spooled.sha256, defaults={"size": spooled.size, "storage_name": name}
        )
    except IntegrityError:  # raced with an identical upload
        blob = Blob.objects.get(sha256=spooled.sha256)
    data = report.to_json()
    row = Trace.objects.create(
        trace_id=facts.trace_id[:64],
        format=fmt,
        schema_version=facts.schema_version,
        blob=blob,
        filename=filename[:255],
        encoding=facts.encoding[:16],
        job_id=facts.job_id[:255],
        job_seed=facts.job_seed[:255],
        runtime_name=facts.runtime_name[:255],
        runtime_version=facts.runtime_version[:64],
        started_at=_parse_time(facts.started_at),
        event_count=facts.event_count,
        step_count=facts.step_count,
        required_snapshot_ids=facts.required_snapshot_ids,
        missing_outputs=facts.missing_outputs,
        ingest_report=data,
        # no run yet: the rule's verdict is the upload's (core/replay/verdicts.py)
        last_status=verdicts.trace_verdict(ingest=report.status, runs=()),
        uploaded_by=uploaded_by,
        uploaded_label=uploaded_label[:150],
    )
    trace_stored.send(sender=Trace, trace=row, opened=spooled.open, parsed=parsed)
    if blob_put(spooled) != name:  # pragma: no cover - blob_put names by the digest
        raise OSError(f"the blob store kept {spooled.sha256} under another name")
    return IngestResult(row, True, data)


def _parse_time(value: str | None):
    if not value:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def replay_options_resolve(*, trace: Trace, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The replay options a run of ``trace`` would use: every option its format declares,
    given or default (``{}`` for a format with none). Raises ``OptionError`` (a usage error)
    for an option the format does not take or a value it does not accept."""
    return replay_options(formats().get(trace.format), options)


def replay_options_for_file(*, path: Path, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:func:`replay_options_resolve` for a file not stored yet (its detected format), so a
    command refuses the options before it stores the file."""
    with path.open("rb") as fh:
        return replay_options(formats().get(sniff(fh, path.name)[0]), options)


@transaction.atomic
def replay_run_create(
    *,
    trace: Trace,
    mode: str,
    requested_by: Any = None,
    continue_past: Sequence[int] = (),
    resumed_from: ReplayRun | None = None,
    options: Mapping[str, Any] | None = None,
) -> ReplayRun:
    """The run row, queued, with the options it will use (stored: a queued run is executed
    from its row); the caller enqueues its execution on commit. Raises ``OptionError``."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    return ReplayRun.objects.create(
        trace=trace,
        mode=mode,
        requested_by=requested_by,
        continue_past=list(continue_past),
        resumed_from=resumed_from,
        options=replay_options_resolve(trace=trace, options=options),
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
    fmt = formats().get(trace.format)
    ctx = _context(
        fmt,
        mode=run.mode,
        at=trace.created_at,
        halted=halted,
        continue_past=run.continue_past,
        progress=_Progress(run.id, progress),
        retained_only=True,
        workers=workers,
        file_id=trace.blob.sha256,
        stored_inputs=[r for r in trace.required_snapshot_ids or [] if r.get("path")],
        erased=blob_erased(trace.blob.sha256),
        options=run.options or {},
    )
    if trace.expired_at is not None:  # a tombstone: its content is gone (replay.expiry)
        from replay.expiry import expired_message

        report = ReplayReport(trace_id=trace.trace_id, format=trace.format, mode=run.mode)
        report.checks.append(Check("retention", False, expired_message(trace)))
        report.fail(errors.TRACE_EXPIRED, expired_message(trace))
    elif fmt is None:
        report = ReplayReport(trace_id=trace.trace_id, format=trace.format, mode=run.mode)
        message = (
            f"the format {trace.format!r} is not registered on this server; supported: "
            f"{', '.join(format_names())}"
        )
        report.checks.append(Check("format", False, message))
        report.fail(errors.MALFORMED_TRACE, message)
    else:
        _t, report = _verify(
            lambda: blob_open(trace.blob.storage_name),
            trace.filename,
            fmt=fmt,
            ctx=ctx,
            replay=True,
        )
    if ctx.erased and not report.erased:
        _erasure_noted(report, ctx.erased)
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


def _erasure_noted(report: ReplayReport, erased: Sequence[Mapping[str, str]]) -> None:
    """A format that does not say itself what erased values make impossible: the report
    lists them, is not authoritative, and says every check covering them cannot hold."""
    report.erased = [{"location": e["location"], "path": e["path"]} for e in erased]
    report.authoritative = False
    named = ", ".join(f"{e['location']} {e['path']}" for e in erased)
    report.checks.append(
        Check(
            "erasure",
            True,
            f"{len(erased)} personal values are erased ({named}); a check that covers them "
            "cannot be recomputed",
        )
    )


def _trace_verdict_store(*, trace_pk: int, replayed_at: Any) -> str:
    """Recompute and store a trace's verdict by the one rule (core/replay/verdicts.py), from the
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
