"""Traces: the list, upload, and the detail page."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core.files.uploadedfile import UploadedFile
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.functional import SimpleLazyObject
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods

from console import charts, roles
from console.diffview import compare_sections, render_json
from console.forms import TraceFilterForm
from console.jsonview import json_tree
from console.redaction import policy_pointers, redact
from console.selectors import (
    FILENAME_PART_MIN,
    OTEL_FILTERS,
    OTEL_LABELS,
    SORT_DEFAULT,
    CursorError,
    IndexPending,
    OpenedTrace,
    TraceUnreadable,
    artifact_versions,
    brief_step,
    page_budget_message,
    records_format,
    trace_compare,
    trace_copies,
    trace_event,
    trace_formats,
    trace_index,
    trace_outline,
    trace_outline_empty,
    trace_page,
    trace_panel,
    trace_privacy_policy,
    trace_record,
    trace_records,
    trace_window,
    traces_mark_otel,
    traces_mark_replayable,
    traces_same_artifact,
    traces_same_job,
)
from console.tables import (
    compare_sections_html,
    trace_event_items_html,
    trace_record_rows_html,
    trace_rows_html,
    trace_step_rows_html,
)
from console.uploads import UPLOAD_TOO_LARGE, human_bytes, too_large_message, upload_limit
from console.views.common import partial_or_page, signed_in
from core.errors import INTEGRITY_CODES
from core.formats import companion_rules, drop_formats, formats
from core.formats.native.compare import SEAL_ALONE
from core.formats.protocol import NativeCode
from governance.models import GovernanceEvent
from governance.selectors import (
    halts_active_map,
    halts_on_trace,
    production_requests_shown,
    replay_halt_preview,
    trace_notes,
)
from governance.services import pii_access_record
from governance.services.notes import NOTE_MAX_CHARS
from otel.selectors import otel_known_values, otel_traces_open
from privacy.redaction import mark_erased, mask_differences
from replay.models import Trace
from replay.selectors import (
    runs_for_trace,
    trace_missing,
    trace_replay_options,
    trace_verdict_basis,
)
from replay.services import BatchOutcome, trace_upload_batch

MESSAGE_NO_FILE = "Choose at least one trace file to upload."
NO_FILE = "NO_FILE"


#: the list's sortable columns, in the header's order: (label, ``?sort=`` key, first click)
SORT_COLUMNS = (
    ("Trace", "trace_id", "trace_id"),
    ("Format", "format", "format"),
    ("Job", "job", "job"),
    ("Verdict", "verdict", "verdict"),
    ("Uploaded", "created_at", "-created_at"),
)
MESSAGE_CURSOR_STALE = "This page link is no longer valid; start from the newest."


def sort_headers(base: dict[str, str], sort: str) -> dict[str, dict[str, str]]:
    """Per sortable column: its link (the filters kept, the cursor dropped, the sort set;
    the active column's link turns it round) and its ``aria-sort``."""
    headers = {}
    for label, key, first in SORT_COLUMNS:
        if sort.removeprefix("-") == key:
            aria = "descending" if sort.startswith("-") else "ascending"
            target = key if sort.startswith("-") else f"-{key}"
        else:
            aria, target = "none", first
        query = {**{k: v for k, v in base.items() if k != "sort"}, "sort": target}
        headers[key] = {"label": label, "href": "?" + urlencode(query), "aria": aria}
    return headers


def otel_filter_fields(
    form: TraceFilterForm, known: dict[str, list[str] | None]
) -> list[dict[str, Any]]:
    """The OpenTelemetry filters the list's form shows: none when no OTel trace is stored
    and none is asked for; each a choice of its known values when there are few
    (``otel.selectors.KNOWN_MAX``: the value asked for among them, even when no trace
    holds it), else a text field."""
    asked = {name: str(form[name].value() or "") for name in OTEL_FILTERS}
    if not known and not any(asked.values()):
        return []
    fields = []
    for name in OTEL_FILTERS:
        label, title = OTEL_LABELS[name]
        choices = known.get(name) if known else None
        value = asked[name]
        if choices is not None and value and value not in choices:
            choices = sorted([*choices, value])
        fields.append(
            {"name": name, "label": label, "title": title, "value": value, "choices": choices}
        )
    return fields


@require_GET
@signed_in
def trace_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    form = TraceFilterForm(request.GET)
    status = 200
    page = None
    sort = SORT_DEFAULT
    if form.is_valid():
        sort = form.cleaned_data["sort"]
        try:
            page = trace_page(
                filters=form.filters(), cursor=form.cleaned_data["cursor"] or None, sort=sort
            )
        except CursorError:
            form.add_error("cursor", MESSAGE_CURSOR_STALE)
            status = 400
    else:
        status = 400
    base = {k: str(v) for k, v in request.GET.items() if k != "cursor" and v}
    q = form.cleaned_data.get("q", "").strip() if form.is_valid() else ""

    def link(cursor: str | None) -> str | None:
        return None if cursor is None else "?" + urlencode({**base, "cursor": cursor})

    if page is not None:
        traces_mark_otel(page.traces)  # the OTel rows' services and models
    context = {
        "form": form,
        "page": page,
        # the form's OpenTelemetry filters (a query): an htmx request for the table never
        # renders the form, and so never runs it
        "otel_filters": SimpleLazyObject(lambda: otel_filter_fields(form, otel_known_values())),
        # a search too short to be a part of a file name (console.selectors.search_q)
        "q_short": q if 0 < len(q) < FILENAME_PART_MIN else "",
        "filename_part_min": FILENAME_PART_MIN,
        "formats": trace_formats(),
        "export_query": "?" + urlencode(base) if base else "",
        "trace_rows": trace_rows_html(page.traces) if page else "",  # the rows, in Python
        "older_url": link(page.next_cursor) if page else None,
        "newer_url": link(page.prev_cursor) if page else None,
        "sort": sort,
        "sort_headers": sort_headers(base, sort),
        # OpenTelemetry traces still receiving spans (not sealed, so not listed yet)
        "otel_open": otel_traces_open().count(),
    }
    return partial_or_page(request, "console/trace_list.html", "trace-table", context, status)


@dataclass
class UploadOutcome:
    filename: str
    trace: Trace | None = None
    report: dict[str, Any] = field(default_factory=dict)
    created: bool = True
    input_of: str = ""  # an input another file of the upload named (an AHD token or brief)
    input_as: str = ""  # what it is to that file, in its format's words
    halted: dict[str, str] = field(default_factory=dict)  # active halts on the stored trace
    code: str = ""
    message: str = ""
    where: str = ""


def _where(broke_at: int | str | None) -> str:
    if broke_at is None or broke_at == "":
        return ""
    return f"line {broke_at}" if isinstance(broke_at, int) else str(broke_at)


def _outcome(batch: BatchOutcome) -> UploadOutcome:
    if batch.error is not None:
        exc = batch.error
        return UploadOutcome(
            batch.filename, code=exc.code, message=exc.message, where=_where(exc.broke_at)
        )
    if batch.result is None:
        return UploadOutcome(batch.filename, input_of=batch.input_of, input_as=batch.input_as)
    result = batch.result
    return UploadOutcome(
        batch.filename, trace=result.trace, report=result.report, created=result.created
    )


def _ingest_all(request: HttpRequest, uploads: list[UploadedFile]) -> list[UploadOutcome]:
    """Every file of one upload: too-large files refused first, the rest stored together (an
    AHD sidecar with the token and brief it names)."""
    outcomes: list[UploadOutcome] = []
    files = []
    for upload in uploads:
        filename = os.path.basename(upload.name or "upload")
        if upload.size is not None and upload.size > upload_limit():
            outcomes.append(
                UploadOutcome(filename, code=UPLOAD_TOO_LARGE, message=too_large_message())
            )
        else:
            files.append((filename, upload))
    batch = trace_upload_batch(files=files, uploaded_by=request.user)
    return outcomes + [_outcome(b) for b in batch]


@signed_in
@require_http_methods(["GET", "POST"])
def trace_upload_view(request: HttpRequest) -> HttpResponse:
    """Several files per request (the plain form) or one per request (upload.js, via XHR).

    A refusal is per file: one corrupt file does not stop the others, and stores nothing.
    """
    roles.require(request.user, roles.UPLOAD)
    outcomes: list[UploadOutcome] = []
    status = 200
    if request.method == "POST":
        files = request.FILES.getlist("files")
        if not files:
            status = 400
            outcomes.append(UploadOutcome("", code=NO_FILE, message=MESSAGE_NO_FILE))
        outcomes += _ingest_all(request, files) if files else []
        traces_mark_replayable([o.trace for o in outcomes if o.trace is not None])
        # the verification at upload reads no ledger (a halt stops replays, not storage);
        # the page says when the stored trace's replays are halted
        halts = halts_active_map()
        for o in outcomes:
            if o.trace is not None:
                o.halted = halts_on_trace(trace=o.trace, halted=halts)
        if getattr(request, "htmx", False) and len(outcomes) == 1 and outcomes[0].code:
            status = {UPLOAD_TOO_LARGE: 413, NO_FILE: 400}.get(outcomes[0].code, 422)
    context = {
        "outcomes": outcomes,
        "limit": human_bytes(upload_limit()),
        "limit_bytes": upload_limit(),
        # which files of one drop go together, by name: each format's own rules (upload.js)
        "companion_rules": companion_rules(),
        # what the drop zone names: each registered format's label and its companions
        "drop_formats": drop_formats(),
    }
    return partial_or_page(request, "console/trace_upload.html", "upload-results", context, status)


def latest_report(trace: Trace, runs: list[Any]) -> dict[str, Any]:
    """The newest finished replay's report, else the verification done at upload."""
    for run in runs:
        if run.report:
            return run.report
    return trace.ingest_report or {}


def native_code(trace: Trace, report: dict[str, Any]) -> NativeCode | None:
    """The report's code in the words of the system that wrote the file, as its format reads
    them (Verist's ``input_hash_mismatch``), for the panel to show beside the console's."""
    fmt = formats().get(trace.format)
    return fmt.native_code(report) if fmt is not None and report else None


def integrity_report(trace: Trace, runs: list[Any]) -> dict[str, Any]:
    """The newest report in which this trace's integrity check failed (a replay's, else the
    verification at upload), or {}: later refusals (a halt) do not make it whole again."""
    for run in runs:
        if run.report and run.error_code in INTEGRITY_CODES:
            return run.report
    ingested = trace.ingest_report or {}
    return ingested if ingested.get("error_code") in INTEGRITY_CODES else {}


MESSAGE_BAD_SEQ = "{name} must be a whole number (a seq), not {value!r}."


@dataclass
class Pager:
    """One window of a trace's events or steps with its prev/next links (keyset on seq)."""

    records: list[dict[str, Any]]
    prev_url: str | None
    next_url: str | None
    first_url: str | None
    jump: str  # the jump field's current value
    error: str = ""
    bad_query: bool = False  # a parameter was not a seq (the page answers 400)


def _seq_param(request: HttpRequest, name: str) -> tuple[int | None, str]:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None, ""
    try:
        return int(raw), ""
    except ValueError:
        return None, MESSAGE_BAD_SEQ.format(name=name, value=raw[:40])


def _pager(  # noqa: PLR0917 - one call per section, each argument named at the call
    request: HttpRequest,
    trace: Trace,
    kind: str,
    prefix: str,
    anchor: str,
    unreadable: str,
    *,
    index: dict[str, Any] | None = None,
    opened: OpenedTrace | None = None,
) -> Pager:
    """The window the query asks for: ``{prefix}after``, ``{prefix}before`` or the jump
    ``{prefix}seq`` (the window that starts at that seq); other parameters are kept."""
    after, e1 = _seq_param(request, f"{prefix}after")
    before, e2 = _seq_param(request, f"{prefix}before")
    jump, e3 = _seq_param(request, f"{prefix}seq")
    error = e1 or e2 or e3
    if jump is not None:
        after, before = jump - 1, None
    if unreadable:
        return Pager([], None, None, None, "", error or unreadable, bool(error))
    try:
        window = trace_window(trace, kind, after=after, before=before, index=index, opened=opened)
    except TraceUnreadable as exc:
        return Pager([], None, None, None, "", error or str(exc), bool(error))
    own = {f"{prefix}after", f"{prefix}before", f"{prefix}seq"}
    base = {k: v for k, v in request.GET.items() if k not in own and v}

    def link(**params: int) -> str:
        query = {**base, **{f"{prefix}{k}": str(v) for k, v in params.items()}}
        return "?" + urlencode(query) + anchor

    records = window.records
    return Pager(
        records=records,
        prev_url=link(before=records[0]["seq"]) if records and window.has_before else None,
        next_url=link(after=records[-1]["seq"]) if records and window.has_after else None,
        first_url=("?" + urlencode(base) + anchor) if window.has_before else None,
        jump="" if jump is None else str(jump),
        error=error,
        bad_query=bool(error),
    )


MESSAGE_BAD_POSITION = "{name} must be a whole number (a record's position), not {value!r}."


@dataclass
class RecordsPager:
    """One window of a trace's records (every format but the native one) with its links: the
    records from ``?at=`` (a position), a page of :data:`RECORDS_WINDOW` at a time."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    start: int = 0
    total: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    prev_url: str | None = None
    next_url: str | None = None
    first_url: str | None = None
    error: str = ""
    bad_query: bool = False

    @property
    def bars(self) -> bool:
        """Whether the records are placed in time (their facts hold a bar: an OpenTelemetry
        trace's spans), so the records table draws them as a waterfall."""
        return any("width" in row["summary"] for row in self.rows)

    @property
    def end(self) -> int:
        """The position after the window's last record."""
        return self.start + len(self.rows)


#: records a window of the trace page shows
RECORDS_WINDOW = 100


def _records_pager(
    request: HttpRequest, trace: Trace, index: dict[str, Any], unreadable: str
) -> RecordsPager:
    raw = request.GET.get("at", "").strip()
    start = 0
    if raw:
        if not raw.isdigit():
            message = MESSAGE_BAD_POSITION.format(name="at", value=raw[:40])
            return RecordsPager(error=message, bad_query=True)
        start = int(raw)
    if unreadable or not index:
        return RecordsPager(error=unreadable)
    try:
        found = trace_records(trace, start=start, limit=RECORDS_WINDOW, index=index)
    except TraceUnreadable as exc:
        return RecordsPager(error=str(exc))
    base = {k: v for k, v in request.GET.items() if k != "at" and v}

    def link(at: int) -> str:
        return "?" + urlencode({**base, "at": str(at)}) + "#records"

    end = found.start + len(found.rows)
    return RecordsPager(
        rows=found.rows,
        start=found.start,
        total=found.total,
        kinds=dict(index.get("kinds", {})),
        prev_url=link(max(0, found.start - RECORDS_WINDOW)) if found.has_before else None,
        next_url=link(end) if found.has_after else None,
        first_url=("?" + urlencode(base) + "#records") if found.has_before else None,
    )


def _waterfall(page: dict[str, Any] | None, records: RecordsPager) -> dict[str, Any] | None:
    """A format page that draws the window of records itself (an OpenTelemetry trace's
    waterfall, ``page.records`` rows) gets them beside what ``page(parsed)`` gave."""
    if page is None:
        return None
    rows = [
        {**row["summary"], "name": row["label"], "indent": row["indent"], "at": row["position"]}
        for row in records.rows
    ]
    waterfall = {"rows": rows, "total": records.total, "shown": len(rows)}
    return {**page, "waterfall": {**waterfall, "duration": page.get("duration", "")}}


def _brief_event(event: dict[str, Any]) -> dict[str, Any]:
    return {"seq": event.get("seq"), "type": event.get("type", "")}  # payloads stay out


@require_GET
@signed_in
def trace_detail_view(request: HttpRequest, trace_ref: str) -> HttpResponse:
    trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    if trace.expired_at is not None:
        return tombstone_page(request, trace)
    with OpenedTrace(trace) as opened:  # the stored file read once for the whole page
        context, status = _detail_context(request, trace, opened)
    partial = {"events": "events", "steps": "steps", "records": "records"}.get(
        request.headers.get("HX-Target", ""), "trace-runs"
    )
    return partial_or_page(request, "console/trace_detail.html", partial, context, status)


def _detail_context(
    request: HttpRequest, trace: Trace, opened: OpenedTrace
) -> tuple[dict[str, Any], int]:
    runs = runs_for_trace(trace)
    report = latest_report(trace, runs)
    panel = trace_panel(trace)
    outline = trace_outline(trace, report, opened) if panel is None else trace_outline_empty(trace)
    as_records = records_format(trace) is not None
    halted = halts_on_trace(trace=trace)
    modes = roles.replay_modes_for(request.user)
    index: dict[str, Any] = {}
    unreadable = outline.unreadable  # then the file is not read again for its index
    pending: IndexPending | None = None
    if not unreadable:
        try:
            index = trace_index(trace, opened)
        except IndexPending as exc:  # a large trace's, built in the background: say how far
            pending = exc
        except TraceUnreadable as exc:
            unreadable = str(exc)
    # the index read once for both windows (a large trace's index is tens of KB of JSON)
    idx = index or None
    records = RecordsPager()
    if as_records:  # every format but the native one: its records, by position
        if pending is None:
            records = _records_pager(request, trace, index, unreadable)
        if panel is not None and panel.page is not None:
            panel.page = _waterfall(panel.page, records)
        events = Pager([], None, None, None, "")
        steps = Pager([], None, None, None, "")
    elif pending is None:
        events = _pager(
            request, trace, "event", "", "#events", unreadable, index=idx, opened=opened
        )
        steps = _pager(
            request, trace, "step", "steps_", "#steps", unreadable, index=idx, opened=opened
        )
    else:  # nothing to page through yet
        events = Pager([], None, None, None, "")
        steps = Pager([], None, None, None, "")
    events.records = [_brief_event(e) for e in events.records]
    steps.records = [brief_step(st) for st in steps.records]
    status = 400 if events.bad_query or steps.bad_query or records.bad_query else 200
    versions = traces_same_artifact(trace) if panel is not None else []
    same_job = traces_same_job(trace)
    copies = trace_copies(trace)
    timeline = charts.overview(
        index.get("buckets", []),
        total=records.total if as_records else trace.event_count,
        broke_at=outline.broke_at,
        records=as_records,
    )
    context = {
        "trace": trace,
        "panel": panel,
        "native_code": native_code(trace, report) if panel is not None else None,
        "versions": versions,
        "versions_words": artifact_versions(trace) if versions else None,
        "same_job": [t for t in same_job if t not in versions],
        "outline": outline,
        "report": report,
        "events": events,
        "steps": steps,
        "records": records if as_records else None,
        # the window's rows, in Python (console.tables)
        "record_rows": trace_record_rows_html(
            records.rows, sha256=trace.blob.sha256, bars=records.bars
        )
        if as_records and records.rows
        else "",
        # the windows' rows, in Python (console.tables)
        "event_items": trace_event_items_html(
            events.records, sha256=trace.blob.sha256, broke_at=timeline.broke_at
        ),
        "step_rows": trace_step_rows_html(steps.records, report),
        "index_cut_short": page_budget_message() if index.get("cut_short") else "",
        "index_pending": pending,
        "timeline": timeline,
        "missing": trace_missing(trace, stored=outline.stored_snapshots),
        "runs": runs,
        "basis": trace_verdict_basis(trace, runs),
        "halted": halted,
        "modes": modes,
        "replay_options": trace_replay_options(trace) if modes else (),
        "halt_preview": replay_halt_preview(trace=trace, report=integrity_report(trace, runs))
        if modes
        else None,
        "can_ask_production": roles.MODE_PRODUCTION not in modes
        and roles.can(request.user, roles.REPLAY_PRODUCTION_REQUEST),
        "production_requests": production_requests_shown(trace),
        "notes": list(trace_notes(trace)),
        "can_note": roles.can(request.user, roles.TRACE_NOTE_ADD),
        "note_max": NOTE_MAX_CHARS,
        "copies": copies,
        # "compare with…": the other runs of the same job first, then the other copies
        "compare_choices": same_job
        + [c for c in copies if c not in same_job and c.format == trace.format],
    }
    return context, status


MESSAGE_PICK_OTHER = "Choose a trace to compare with, or give its trace id or sha256."
MESSAGE_OTHER_FORMAT = (
    "{other} is {other_format}, not {format}: only two files of the same format compare."
)
MESSAGE_BAD_FROM = "from must be a whole number of changes to skip, not {value!r}."


@require_GET
@signed_in
def trace_compare_pick_view(request: HttpRequest, trace_ref: str) -> HttpResponse:
    """The trace page's "compare with…" form (a plain GET, no JavaScript): the trace chosen
    in the list, or the one whose trace id or sha256 was typed (that wins), then its
    comparison."""
    trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    typed = request.GET.get("other_id", "").strip()
    chosen = typed or request.GET.get("other", "").strip()
    if not chosen:
        context = {"trace": trace, "other": None, "comparison": None, "error": MESSAGE_PICK_OTHER}
        return render(request, "console/trace_compare.html", context, status=400)
    other = roles.access_trace_by_id(request.user, chosen, roles.BROWSE)
    return redirect("trace-compare", trace.blob.sha256, other.blob.sha256)


@require_GET
@signed_in
def trace_compare_view(request: HttpRequest, trace_ref: str, other_ref: str) -> HttpResponse:
    """Two stored files of one format: two native traces record by record (the header, each
    event, step and output, the final answer, the seal last), a page of changes at a time
    (``?from=``); two files of another format field by field (AHD runs of a brief, Paxman
    artifacts of a contract)."""
    trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    other = roles.access_trace_by_id(request.user, other_ref, roles.BROWSE)
    for expired in (trace, other):
        if expired.expired_at is not None:
            return tombstone_page(request, expired, status=410)
    context: dict[str, Any] = {"trace": trace, "other": other, "comparison": None, "error": ""}
    if trace.format != other.format:
        context["error"] = MESSAGE_OTHER_FORMAT.format(
            other=other.filename, other_format=other.format, format=trace.format
        )
        return render(request, "console/trace_compare.html", context, status=400)
    raw = request.GET.get("from", "").strip() or "0"
    if not raw.isdigit():
        context["error"] = MESSAGE_BAD_FROM.format(value=raw[:40])
        return render(request, "console/trace_compare.html", context, status=400)
    # each stored file opened once for the page: the comparison and its privacy policy
    with OpenedTrace(trace) as left, OpenedTrace(other) as right:
        comparison = trace_compare(trace, other, offset=int(raw), opened=(left, right))
        pointers = (
            (policy_pointers(trace_privacy_policy(trace, left)),
             policy_pointers(trace_privacy_policy(other, right)))
            if comparison.native is not None
            else None
        )  # fmt: skip
    if comparison.native is not None and pointers is not None:
        context["sections"] = compare_sections(comparison.native.sections, pointers)
        context["sections_html"] = compare_sections_html(  # in Python (console.tables)
            context["sections"], before=trace.filename, after=other.filename
        )
        context["seal_alone"] = SEAL_ALONE if comparison.native.seal_alone else ""
        found = comparison.native
        if found.next_offset is not None:
            context["next_url"] = "?" + urlencode({"from": found.next_offset})
        if found.offset:
            context["first_url"] = "?"
    else:
        comparison.differences = mask_differences(trace.format, comparison.differences)
    context["comparison"] = comparison
    return partial_or_page(request, "console/trace_compare.html", "comparison", context)


def tombstone_page(request: HttpRequest, trace: Trace, *, status: int = 200) -> HttpResponse:
    """An expired trace: when and by which rule, the event that recorded it, and the hashes
    that stay (its content is gone; a page of it answers 410)."""
    event = (
        GovernanceEvent.objects.filter(idempotency_key=f"trace-expired:{trace.blob.sha256}")
        .only("seq", "payload")
        .first()
    )
    context = {
        "trace": trace,
        "event": event,
        "snapshots": [r for r in trace.required_snapshot_ids or [] if isinstance(r, dict)],
        "runs": runs_for_trace(trace),
        # a note may still be added after the content is gone: the hashes it names stay
        "notes": list(trace_notes(trace)),
        "can_note": roles.can(request.user, roles.TRACE_NOTE_ADD),
        "note_max": NOTE_MAX_CHARS,
    }
    return render(request, "console/trace_tombstone.html", context, status=status)


MESSAGE_REVEAL_REASON = "Say why you need the unredacted values; the reason is kept in the ledger."


@signed_in
@require_http_methods(["GET", "POST"])
def trace_event_view(request: HttpRequest, trace_ref: str, seq: int) -> HttpResponse:
    """One event's payload, personal data redacted; an admin may reveal it, and every reveal
    is appended to the ledger (PII_REVEALED: who, which trace, which fields, why) before the
    values are shown."""
    trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    if request.method == "POST":
        roles.require(request.user, roles.PII_REVEAL)
    if trace.expired_at is not None:
        return tombstone_page(request, trace, status=410)
    with OpenedTrace(trace) as opened:  # one opening for the event and the policy
        event = trace_event(trace, seq, opened)
        policy = trace_privacy_policy(trace, opened) if event is not None else None
    if event is None:
        raise Http404("no such event")
    pointers = policy_pointers(policy)
    redacted, fields = redact(event.get("payload"), pointers)
    shown, revealed, error, status = redacted, False, "", 200
    if request.method == "POST":
        reason = request.POST.get("reason", "").strip()
        if not reason:
            error, status = MESSAGE_REVEAL_REASON, 400
        else:
            pii_access_record(
                actor=request.user,
                trace_id=trace.trace_id,
                fields=fields,
                reason=reason[:500],
                context=f"event {seq} of {trace.blob.sha256}",
            )
            shown, revealed = event.get("payload"), True
    shown = mark_erased(trace.blob.sha256, f"event {seq}", shown)
    context = {
        "trace": trace,
        "event": event,
        "payload": render_json(shown),
        "payload_tree": mark_safe(json_tree(shown)),  # noqa: S308 (json_tree escapes)
        "fields": fields,
        "policy_missing": pointers is None,
        "revealed": revealed,
        "can_reveal": roles.can(request.user, roles.PII_REVEAL),
        "error": error,
    }
    return partial_or_page(request, "console/trace_event.html", "event-payload", context, status)


@require_GET
@signed_in
def trace_record_view(request: HttpRequest, trace_ref: str, position: int) -> HttpResponse:
    """One record of a trace of any format but the native one (an OpenTelemetry span, a
    Paxman field...): its kind, label, location in the file and value, with the personal
    values the subject index holds masked (to every role: an event of a native trace is
    where an admin reveals them)."""
    from privacy.redaction import mask_deep, trace_personal_texts

    trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    if trace.expired_at is not None:
        return tombstone_page(request, trace, status=410)
    try:
        record = trace_record(trace, position)
    except TraceUnreadable as exc:
        failed = {"trace": trace, "record": None, "position": position, "error": str(exc)}
        return render(request, "console/trace_record.html", failed, status=422)
    if record is None:
        raise Http404("no such record")
    texts = trace_personal_texts(trace.pk)
    shown = mask_deep(record.value, texts)
    context: dict[str, Any] = {
        "trace": trace,
        "record": record,
        "position": position,
        "masked": shown != record.value,
        "payload": render_json(shown),
        "payload_tree": mark_safe(json_tree(shown)),  # noqa: S308 (json_tree escapes)
        "error": "",
    }
    return partial_or_page(request, "console/trace_record.html", "record-value", context)
