"""Council-approved production replay: ask for one. Its list and approval page are the
request pages every council kind shares (``console/views/requests.py``).

Who holds auditor and admin together starts a production replay from the trace page; who
holds only one of them asks here, and a council quorum's signatures queue the run for them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from console import roles
from console.views.common import signed_in
from console.views.governance import (
    EXPIRY_CHOICES,
    expiry_asked,
    refused,
)
from core.ledger.codes import GovernanceError
from governance import conf
from governance import services as gov_services
from replay.selectors import trace_missing


@signed_in
@require_http_methods(["GET", "POST"])
def production_request_view(request: HttpRequest, trace_ref: str) -> HttpResponse:
    trace = roles.access_trace_by_id(request.user, trace_ref, roles.REPLAY_PRODUCTION_REQUEST)
    context: dict[str, Any] = {
        "trace": trace,
        "missing": trace_missing(trace),
        "expiry_choices": EXPIRY_CHOICES,
        "default_hours": conf.force_continue_hours(),
        "quorum": conf.council_quorum(),
        "reason": "",
    }
    template = "console/production_request.html"
    if request.method == "POST":
        reason = request.POST.get("reason", "")
        context["reason"] = reason
        try:
            filed = gov_services.production_replay_request_file(
                trace=trace, actor=request.user, reason=reason, expires_at=expiry_asked(request)
            )
        except GovernanceError as exc:
            return refused(request, exc, template, context)
        messages.success(request, "Production replay requested. Council members can now sign.")
        return HttpResponseRedirect(
            reverse("request-detail", args=["production-replay", filed.id]), status=303
        )
    return render(request, template, context)
