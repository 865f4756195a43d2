"""Auditors' notes on a trace (TRACE_NOTE): the list and the form, without JavaScript.

The trace page lists the notes and carries the form; the form posts here. A note added
redirects back to the trace page's notes (303); a refused one renders this page again with
the precise message and the text as typed (400), so nothing is lost and nothing is stored.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console import roles
from console.refusals import governance_status
from console.views.common import signed_in
from core.ledger.codes import GovernanceError
from governance.selectors import trace_notes
from governance.services.notes import NOTE_MAX_CHARS, trace_note_add

MESSAGE_NOTE_ADDED = "Note added to the ledger as event {seq}."


@require_http_methods(["GET", "POST"])
@signed_in
def trace_notes_view(request: HttpRequest, trace_ref: str) -> HttpResponse:
    if request.method == "POST":
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.TRACE_NOTE_ADD)
    else:
        trace = roles.access_trace_by_id(request.user, trace_ref, roles.BROWSE)
    context = {
        "trace": trace,
        "notes": trace_notes(trace).select_related("actor"),
        "can_note": roles.can(request.user, roles.TRACE_NOTE_ADD),
        "note_max": NOTE_MAX_CHARS,
        "note_text": "",
    }
    if request.method == "POST":
        text = request.POST.get("text", "")
        try:
            event = trace_note_add(trace=trace, actor=request.user, text=text)
        except GovernanceError as exc:
            context |= {"note_text": text, "error_code": exc.code, "error_message": exc.message}
            return render(
                request, "console/trace_notes.html", context, status=governance_status(exc.code)
            )
        messages.success(request, MESSAGE_NOTE_ADDED.format(seq=event.seq))
        url = reverse("trace-detail", args=[trace.blob.sha256]) + "#notes"
        return HttpResponseRedirect(url, status=303)
    return render(request, "console/trace_notes.html", context)
