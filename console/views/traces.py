"""Traces: the list, upload, and the detail page."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from console import roles
from console.forms import TraceFilterForm
from console.selectors import CursorError, trace_formats, trace_page
from console.views.common import partial_or_page, signed_in

MESSAGE_NO_FILE = "Choose at least one trace file to upload."


@require_GET
@signed_in
def trace_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    form = TraceFilterForm(request.GET)
    status = 200
    page = None
    if form.is_valid():
        try:
            page = trace_page(filters=form.filters(), cursor=form.cleaned_data["cursor"] or None)
        except CursorError:
            form.add_error("cursor", "This page link is no longer valid; start from the newest.")
            status = 400
    else:
        status = 400
    base = {k: v for k, v in request.GET.items() if k != "cursor" and v}

    def link(cursor: str | None) -> str | None:
        return None if cursor is None else "?" + urlencode({**base, "cursor": cursor})

    context = {
        "form": form,
        "page": page,
        "formats": trace_formats(),
        "older_url": link(page.next_cursor) if page else None,
        "newer_url": link(page.prev_cursor) if page else None,
    }
    return partial_or_page(request, "console/trace_list.html", "trace-table", context, status)
