"""The trace list, filtered as on the page, exported as CSV or JSON.

Streamed: rows are read from the database in chunks and written as they come, so 100,000
traces never sit in memory at once. The columns are the list's, one row per stored file, in
the list's order (``?sort=``, newest first by default); the filters are the page's own
(`TraceFilterForm`), so an export is exactly what the list shows. A CSV cell that a
spreadsheet would run as a formula (it starts with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return) is written with a leading ``'``, as OWASP advises: a file name is chosen by
whoever uploaded it.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from console import roles
from console.forms import TraceFilterForm
from console.selectors import sort_ordering, trace_queryset, traces_mark_replayable
from console.views.common import signed_in

#: the exported columns, in order (the CSV header, and each JSON object's keys)
COLUMNS = (
    "trace_id",
    "job_id",
    "format",
    "verdict",
    "replayable",
    "filename",
    "sha256",
    "size",
    "events",
    "steps",
    "uploaded_at",
    "uploaded_by",
)
CHUNK = 2000
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


def _rows(request: HttpRequest, form: TraceFilterForm) -> Iterator[dict[str, Any]]:
    qs = (
        trace_queryset(form.filters())
        .select_related("blob", "uploaded_by")
        .defer("ingest_report")
        .order_by(*sort_ordering(form.cleaned_data["sort"]))
    )
    chunk: list[Any] = []
    for trace in qs.iterator(chunk_size=CHUNK):
        chunk.append(trace)
        if len(chunk) == CHUNK:
            yield from _chunk_rows(chunk)
            chunk = []
    yield from _chunk_rows(chunk)


def _chunk_rows(traces: list[Any]) -> Iterator[dict[str, Any]]:
    traces_mark_replayable(traces)
    for t in traces:
        yield {
            "trace_id": t.trace_id,
            "job_id": t.job_id or "",
            "format": t.format,
            "verdict": t.last_status,
            "replayable": t.replayable,
            "filename": t.filename,
            "sha256": t.blob.sha256,
            "size": t.blob.size,
            "events": t.event_count,
            "steps": t.step_count,
            "uploaded_at": t.created_at.isoformat(),
            "uploaded_by": t.uploaded_by.get_username() if t.uploaded_by else None,
        }


class _Echo:
    def write(self, value: str) -> str:
        return value


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    if value is None:
        return ""
    return value


def csv_lines(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(COLUMNS)
    for row in rows:
        yield writer.writerow([_cell(row[c]) for c in COLUMNS])


def json_chunks(rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    yield "["
    first = True
    for row in rows:
        yield ("\n" if first else ",\n") + json.dumps(row, ensure_ascii=False)
        first = False
    yield "\n]\n"


@require_GET
@signed_in
def trace_export_view(request: HttpRequest, fmt: str) -> HttpResponseBase:
    roles.require(request.user, roles.BROWSE)
    form = TraceFilterForm(request.GET)
    if not form.is_valid():
        errors = "; ".join(
            f"{name}: {' '.join(str(m) for m in e)}" for name, e in form.errors.items()
        )
        context = {"title": "Export refused", "message": errors, "code": "INVALID_INPUT"}
        return render(request, "console/error_page.html", context, status=400)
    rows = _rows(request, form)
    body = csv_lines(rows) if fmt == "csv" else json_chunks(rows)
    response = StreamingHttpResponse(body, content_type=CONTENT_TYPES[fmt])
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="traces-{stamp}.{fmt}"'
    return response
