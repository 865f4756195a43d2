"""OpenTelemetry traces still being received: the list of open traces, one open trace's
live waterfall and conversation (from the spans received so far), and the button that seals
it now. A sealed trace is a stored trace like any other (``/traces/<sha256>/``)."""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console import roles
from console.views.common import signed_in
from core.errors import ReplayError
from core.formats.otel.page import AXIS, conversation, waterfall
from otel.selectors import otel_span_records, otel_spans_erased, otel_trace, otel_traces_open
from otel.services import SealError, otel_seal

TRACE_ID = re.compile(r"\A[0-9a-f]{32}\Z")
SEALED = "Sealed as version {version}: {filename}, verdict {verdict}."


@require_GET
@signed_in
def otel_open_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    rows = list(otel_traces_open()[:200])
    return render(request, "console/otel_open_list.html", {"rows": rows})


def _state(request: HttpRequest, trace_id: str, action: str):
    roles.require(request.user, action)  # the role first: a 403 says nothing of existence
    state = otel_trace(trace_id) if TRACE_ID.match(trace_id) else None
    if state is None:
        raise Http404("no OpenTelemetry trace with this id has been received")
    return state


@require_GET
@signed_in
def otel_open_detail_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    state = _state(request, trace_id, roles.BROWSE)
    if not state.open and state.sealed_trace is not None:
        return HttpResponseRedirect(reverse("trace-detail", args=[state.sealed_trace.blob.sha256]))
    spans = otel_span_records(trace_id)
    page = {"waterfall": waterfall(spans), "conversation": conversation(spans), "axis": AXIS}
    context = {
        "state": state,
        "page": page,
        "can_seal": roles.can(request.user, roles.UPLOAD),
        "spans_erased": otel_spans_erased(trace_id),
    }
    return render(request, "console/otel_open_detail.html", context)


@require_POST
@signed_in
def otel_seal_view(request: HttpRequest, trace_id: str) -> HttpResponse:
    _state(request, trace_id, roles.UPLOAD)
    try:
        trace = otel_seal(trace_id=trace_id)
    except (SealError, ReplayError) as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("otel-open-detail", args=[trace_id]), status=303)
    messages.success(
        request,
        SEALED.format(
            version=trace.filename.split(".v")[-1].split(".")[0],
            filename=trace.filename,
            verdict=trace.last_status,
        ),
    )
    return HttpResponseRedirect(reverse("trace-detail", args=[trace.blob.sha256]), status=303)
