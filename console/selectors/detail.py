"""One trace, for its page: the outline of its header and snapshots, the format panel, the
traces of the same job or artifact, and comparing two traces."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from console import conf
from console.selectors.budget import (
    _over_page_budget,
    _page_limits,
    page_budget_message,
)
from console.selectors.opened import OpenedTrace, _borrowed_or_own
from console.template_loaders import page_template
from core.errors import ReplayError
from core.formats import native
from core.formats.protocol import ArtifactVersions
from replay.models import Snapshot, Trace
from replay.prepared import Prepared
from replay.selectors import required_snapshot_ids, snapshots_stored
from replay.storage import blob_open


@dataclass
class SnapshotLine:
    kind: str
    snapshot_id: str
    alg: str
    key_id: str
    in_file: bool
    stored: bool
    status: str  # "verified" | "failed" | "not checked" | "not retained"
    detail: str = ""


@dataclass
class Outline:
    header: dict[str, Any]
    events: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    steps_total: int
    snapshots: list[SnapshotLine]
    broke_at: int | None
    break_detail: str
    unreadable: str = ""
    cut_short: str = ""  # the page's read budget ended the outline early
    #: which of the header's and the trace's required snapshots are stored (None: not asked;
    #: the page's "missing for production replay" reads it instead of asking again)
    stored_snapshots: set[str] | None = None


def failed_check(report: dict[str, Any] | None) -> dict[str, Any] | None:
    for check in (report or {}).get("checks", []):
        if not check.get("ok"):
            return check
    return None


def _chain_break(report: dict[str, Any] | None) -> tuple[int | None, str]:
    check = failed_check(report)
    broke_at = (report or {}).get("broke_at")
    if check and check.get("name") == "events" and isinstance(broke_at, int):
        return broke_at, str(check.get("detail", ""))
    return None, ""


def _snapshot_lines(
    header: dict[str, Any], report: dict[str, Any] | None, stored: set[str]
) -> list[SnapshotLine]:
    snaps = header.get("snapshots", [])
    check_names = {c.get("name"): c for c in (report or {}).get("checks", [])}
    failing = failed_check(report)
    bad_index = (
        report.get("broke_at")
        if report and failing and failing.get("name") == "snapshots"
        else None
    )
    verified_all = bool(check_names.get("snapshots", {}).get("ok"))
    lines = []
    for index, snap in enumerate(snaps):
        sig = snap.get("signature") or {}
        in_file = "body" in snap
        is_stored = snap.get("snapshot_id") in stored
        if not in_file and not is_stored:
            status, detail = "not retained", "no body in the file or in the store"
        elif bad_index == index:
            status, detail = "failed", str(failing.get("detail", "")) if failing else ""
        elif verified_all or (isinstance(bad_index, int) and index < bad_index):
            status, detail = "verified", ""
        else:
            status, detail = "not checked", "the verification stopped before this snapshot"
        lines.append(
            SnapshotLine(
                kind=str(snap.get("kind", "")),
                snapshot_id=str(snap.get("snapshot_id", "")),
                alg=str(sig.get("alg", "")),
                key_id=str(sig.get("key_id", "")),
                in_file=in_file,
                stored=is_stored,
                status=status,
                detail=detail,
            )
        )
    return lines


def brief_step(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "seq": step.get("seq"),
        "step_id": step.get("step_id"),
        "kind": step.get("kind"),
        "fn": step.get("fn") or step.get("name") or "",
        "output_ref": step.get("output_ref", ""),
    }


@dataclass
class FormatPanel:
    """What the trace page shows of a file of a format without an event outline (every
    format but the native one): the format's header facts, its stored inputs, what
    re-verifying it does, or why the stored file cannot be read."""

    label: str
    facts: dict[str, str]
    inputs: list[dict[str, Any]]
    replay_note: str
    unreadable: str = ""
    #: the format's own section of the page (``TraceFormat.page_template``) and what it
    #: shows (``page(parsed)``), personal values masked; None for a format without one
    page_template: str | None = None
    page: dict[str, Any] | None = None
    #: a file too large to parse in a request (REPLAY_PAGE_PARSE_BYTES): what the page shows
    #: instead of the format's section, in words ("" for any other)
    large: str = ""


MESSAGE_LARGE = (
    "This file is {size} bytes, more than a page parses whole (REPLAY_PAGE_PARSE_BYTES, "
    "{limit} bytes): its facts and records come from its index, and its own section (an "
    "OpenTelemetry trace's conversation) is not drawn; each record's value is one click away."
)


def _indexed_panel(trace: Trace, fmt: Any, inputs: list[dict[str, Any]]) -> FormatPanel:
    """The panel of a file too large to parse in a request: the facts its index keeps."""
    from console.selectors.opened import IndexPending, TraceUnreadable, trace_index

    large = MESSAGE_LARGE.format(size=trace.blob.size, limit=conf.page_parse_bytes())
    try:
        facts = dict(trace_index(trace).get("facts") or {})
    except IndexPending:
        facts = {}
    except TraceUnreadable as exc:
        return FormatPanel(fmt.label, {}, inputs, fmt.replay_note, str(exc))
    return FormatPanel(fmt.label, facts, inputs, fmt.replay_note, large=large)


#: what the format panel derives from a stored file (its facts, its page), unmasked, kept
#: by this process for the last files shown: a large file (an OpenTelemetry trace of 50,000
#: spans) is parsed once per process, not on every view. Keyed by the file's content (its
#: sha256) and how many of its values were erased (an erasure changes what the file reads);
#: masked on every view.
_PANELS: OrderedDict[tuple[str, int], tuple[dict[str, str], Any]] = OrderedDict()
_PANELS_KEPT = 8
_PANELS_LOCK = threading.Lock()


def _erased_values(trace: Trace) -> int:
    from privacy.models import values_of_file

    return values_of_file(trace.blob.sha256).filter(subject__erased_at__isnull=False).count()


def trace_panel(trace: Trace) -> FormatPanel | None:
    """The format panel of a stored file (None for a native trace: the outline shows it)."""
    from core.formats import formats
    from core.formats.protocol import VerifyContext

    if trace.format == native.FORMAT:
        return None
    fmt = formats().get(trace.format)
    if fmt is None:
        return FormatPanel(
            trace.format, {}, [], "", f"the format {trace.format!r} is not registered"
        )
    inputs = [r for r in trace.required_snapshot_ids or [] if r.get("path")]
    stored = set(
        Snapshot.objects.filter(snapshot_id__in=[r.get("snapshot_id") for r in inputs]).values_list(
            "snapshot_id", flat=True
        )
    )
    inputs = [{**r, "stored": r.get("snapshot_id") in stored} for r in inputs]
    if trace.blob.size > conf.page_parse_bytes() and getattr(fmt, "records", None) is not None:
        panel = _indexed_panel(trace, fmt, inputs)
        if not panel.unreadable:
            from privacy.redaction import mask_texts, trace_personal_texts

            panel.facts = mask_texts(panel.facts, trace_personal_texts(trace.pk))
        return panel
    page_of = getattr(fmt, "page", None)
    template = page_template(fmt) if page_of is not None else None
    key = (trace.blob.sha256, _erased_values(trace))
    with _PANELS_LOCK:
        kept = _PANELS.get(key)
        if kept is not None:
            _PANELS.move_to_end(key)
    if kept is None:
        try:
            with blob_open(trace.blob.storage_name) as fh:
                parsed = fmt.parse(fh, trace.filename, VerifyContext())
            kept = (fmt.panel(parsed), page_of(parsed) if template and page_of else None)
        except (ReplayError, OSError) as exc:
            return FormatPanel(fmt.label, {}, inputs, fmt.replay_note, str(exc))
        with _PANELS_LOCK:
            _PANELS[key] = kept
            while len(_PANELS) > _PANELS_KEPT:
                _PANELS.popitem(last=False)
    facts, page = kept
    from privacy.redaction import mask_deep, mask_texts, trace_personal_texts

    texts = trace_personal_texts(trace.pk)
    facts = mask_texts(facts, texts)
    if page is not None:
        page = mask_deep(page, texts)
    return FormatPanel(fmt.label, facts, inputs, fmt.replay_note, "", template, page)


def traces_same_job(trace: Trace, limit: int = 20) -> list[Trace]:
    """Other stored files of the same format and job (AHD runs of one brief, Paxman artifacts
    of one contract), newest first: what the trace page offers to compare with."""
    if not trace.job_id:
        return []
    return SAME_JOB(format=trace.format, job_id=trace.job_id, pk=trace.pk)[:limit]


#: see traces_same_job and trace_copies (20: what the trace page lists)
SAME_JOB: Prepared[Trace] = Prepared(
    lambda format, job_id, pk: (
        Trace.objects.filter(format=format, job_id=job_id)
        .exclude(pk=pk)
        .select_related("blob")
        .order_by("-created_at", "-id")[:20]
    ),
    format=str,
    job_id=str,
    pk=int,
)
COPIES: Prepared[Trace] = Prepared(
    lambda trace_id, pk: (
        Trace.objects.filter(trace_id=trace_id)
        .exclude(pk=pk)
        .select_related("blob")
        .order_by("-created_at")[:20]
    ),
    trace_id=str,
    pk=int,
)


def trace_copies(trace: Trace) -> list[Trace]:
    """Other stored files that carry this trace's id (a tampered copy among them), newest
    first, at most 20."""
    return COPIES(trace_id=trace.trace_id, pk=trace.pk)


def artifact_versions(trace: Trace) -> ArtifactVersions | None:
    """The words of the versions table of a file whose format has versions of one artifact
    (its ``versions``, a Paxman artifact's), or None."""
    from core.formats import formats

    found = getattr(formats().get(trace.format), "versions", None)
    return found if isinstance(found, ArtifactVersions) else None


def traces_same_artifact(trace: Trace, limit: int = 50) -> list[Trace]:
    """The other stored versions of the artifact this file is a version of, for a format that
    has them (`artifact_versions`): files of its format whose trace id (the artifact's
    ``id``) is this one's, newest first, each to compare with field by field. An artifact
    that records no id is stored under its file's sha256 and has no other versions."""
    if artifact_versions(trace) is None or trace.trace_id == trace.blob.sha256:
        return []
    return list(
        Trace.objects.filter(format=trace.format, trace_id=trace.trace_id)
        .exclude(pk=trace.pk)
        .select_related("blob")
        .order_by("-created_at", "-id")[:limit]
    )


@dataclass
class Comparison:
    """Two stored files of one format, field by field (JSON pointers), or why not. Two
    native traces are compared record by record, a page of changes at a time (``native``)."""

    differences: list[Any]
    unreadable: str = ""
    native: Any = None  # core.formats.native.compare.Comparison
    stopped: str = ""  # why the native comparison stopped before the end of the files


def _native_compare(
    a: Trace, b: Trace, offset: int, opened: tuple[OpenedTrace | None, OpenedTrace | None]
) -> Comparison:
    """Both files read as two streams in step, as far as one page of changes needs (each
    within the page read budget): never both held whole. ``opened``: the request's openings
    of the two files (else one is made for this call), so the page reassembles each file's
    personal values once."""
    from core.formats.native import compare

    with _borrowed_or_own(a, opened[0]) as sa, _borrowed_or_own(b, opened[1]) as sb:
        try:
            left = sa.opened()
        except ReplayError as exc:
            return Comparison([], f"{a.filename}: {exc}")
        try:
            right = sb.opened()
        except ReplayError as exc:
            return Comparison([], f"{b.filename}: {exc}")
        found = compare.compare(left, right, offset=offset)
    stopped = ""
    if found.stopped is not None:
        cause = found.stopped
        stopped = (
            page_budget_message() if _over_page_budget(cause) else f"{cause.code}: {cause.message}"
        )
    return Comparison(found.changes, native=found, stopped=stopped)


def trace_compare(
    a: Trace,
    b: Trace,
    *,
    offset: int = 0,
    opened: tuple[OpenedTrace | None, OpenedTrace | None] = (None, None),
) -> Comparison:
    """The format's own comparison of two stored files of that format (``compare``); two
    native traces record by record, the page of changes from ``offset`` (through the
    request's ``opened`` files, when given)."""
    from core.formats import formats
    from core.formats.protocol import VerifyContext

    if a.format == b.format == native.FORMAT:
        try:
            return _native_compare(a, b, offset, opened)
        except OSError as exc:
            return Comparison([], str(exc))
    fmt = formats().get(a.format)
    if fmt is None or a.format != b.format:
        return Comparison([], f"{a.format} and {b.format} files do not compare")
    parsed = []
    for t in (a, b):
        try:
            with blob_open(t.blob.storage_name) as fh:
                parsed.append(fmt.parse(fh, t.filename, VerifyContext(limits=_page_limits())))
        except (ReplayError, OSError) as exc:
            return Comparison([], f"{t.filename}: {exc}")
    return Comparison(fmt.compare(parsed[0], parsed[1]))


def trace_outline_empty(trace: Trace) -> Outline:
    """No event outline: a format with none (its panel shows the file instead)."""
    return Outline({}, [], [], trace.step_count, [], None, "")


def trace_outline(
    trace: Trace, report: dict[str, Any] | None, opened: OpenedTrace | None = None
) -> Outline:
    """What the trace page shows of the file's header (snapshots with their status) and
    where the chain broke. Only the header is read here; the events and steps are read a
    window at a time through the trace's index (:func:`trace_window`). ``opened``: the
    request's opening of the stored file (else one is made for this call)."""
    broke_at, break_detail = _chain_break(report)
    steps_total = trace.step_count
    try:
        with _borrowed_or_own(trace, opened) as stored:
            header = stored.header()
    except ReplayError as exc:
        message = page_budget_message() if _over_page_budget(exc) else str(exc)
        return Outline({}, [], [], steps_total, [], broke_at, break_detail, message)
    except OSError as exc:
        return Outline({}, [], [], steps_total, [], broke_at, break_detail, unreadable=str(exc))
    header = {k: v for k, v in header.items() if k not in ("events", "steps", "outputs")}
    ids = {s["snapshot_id"] for s in header.get("snapshots", []) if s.get("snapshot_id")}
    in_store = snapshots_stored(ids | required_snapshot_ids(trace))  # one query for both
    return Outline(
        header=header,
        events=[],
        steps=[],
        steps_total=steps_total,
        snapshots=_snapshot_lines(header, report, in_store),
        broke_at=broke_at,
        break_detail=break_detail,
        stored_snapshots=in_store,
    )
