"""Council-approved production replay: ask for one, see them all, sign one in the browser.

Who holds auditor and admin together starts a production replay from the trace page; who
holds only one of them asks here, and a council quorum's signatures queue the run for them.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from console import roles
from console.views.common import partial_or_page, signed_in
from console.views.governance import (
    EXPIRY_CHOICES,
    expiry_asked,
    payload_text,
    refused,
    signed_document,
)
from governance import conf, signing
from governance import selectors as gov
from governance import services as gov_services
from governance.codes import GovernanceError
from governance.models import ProductionReplayRequest
from replay.selectors import trace_missing

MESSAGE_OWN_REQUEST = "You asked for this replay: other council members must approve it."


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
        return HttpResponseRedirect(reverse("production-detail", args=[filed.id]), status=303)
    return render(request, template, context)


def _awaits(user: Any, asked: ProductionReplayRequest, signed: set[Any]) -> bool:
    return (
        asked.state == ProductionReplayRequest.State.PENDING
        and asked.expires_at > timezone.now()
        and asked.requested_by_id != user.pk
        and (asked.id, user.pk) not in signed
        and roles.can(user, roles.REPLAY_PRODUCTION_APPROVE)
    )


@require_GET
@signed_in
def production_list_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.BROWSE)
    asked = list(gov.production_requests()[:200])
    signed = set(gov.production_signers(requests=asked))
    rows = [
        {
            "asked": a,
            "tally": gov.production_tally(request=a),
            "expired": gov.request_is_expired(request=a),
            "awaits_me": _awaits(request.user, a, signed),
        }
        for a in asked
    ]
    rows.sort(key=lambda r: not r["awaits_me"])
    return render(request, "console/production_list.html", {"rows": rows})


def _detail_context(request: HttpRequest, asked: ProductionReplayRequest) -> dict[str, Any]:
    user = request.user
    decision = request.GET.get("decision") or request.POST.get("decision") or signing.APPROVE
    if decision not in signing.DECISIONS:
        decision = signing.APPROVE
    reason = request.GET.get("reason", request.POST.get("reason_text", ""))
    approvals = gov.production_ballots(request=asked)  # the ledger's votes, not the rows
    expired = gov.request_is_expired(request=asked)
    blocker = ""
    if asked.state != ProductionReplayRequest.State.PENDING:
        blocker = f"This request is {asked.state}: it can no longer be signed."
    elif expired:
        blocker = f"This request expired at {signing.format_time(asked.expires_at)}."
    elif asked.requested_by_id == user.pk:
        blocker = MESSAGE_OWN_REQUEST
    elif any(a.approver_id == user.pk for a in approvals):
        blocker = "You have already signed this request."
    payload = gov_services.production_replay_payload_for(
        request=asked, decision=decision, reason=reason
    )
    return {
        "asked": asked,
        "trace": asked.trace,
        "tally": gov.production_tally(request=asked),
        "approvals": approvals,
        "expired": expired,
        "can_sign": roles.can(user, roles.REPLAY_PRODUCTION_APPROVE),
        "blocker": blocker,
        "decision": decision,
        "decisions": signing.DECISIONS,
        "reason": reason,
        "payload_text": payload_text(payload),
        "keys": list(gov.member_keys(user=user, usable=True)),
    }


@signed_in
@require_http_methods(["GET", "POST"])
def production_detail_view(request: HttpRequest, request_id: str) -> HttpResponse:
    asked = roles.access_production_request_by_id(request.user, request_id, roles.BROWSE)
    template = "console/production_approve.html"
    if request.method == "POST":
        roles.require(request.user, roles.REPLAY_PRODUCTION_APPROVE)
        context = _detail_context(request, asked)
        try:
            gov_services.production_replay_approval_record(
                request=asked, approver=request.user, document=signed_document(request)
            )
        except GovernanceError as exc:
            return refused(request, exc, template, context)
        messages.success(request, "Your signed decision is recorded in the ledger.")
        return HttpResponseRedirect(reverse("production-detail", args=[asked.id]), status=303)
    return partial_or_page(request, template, "signing-payload", _detail_context(request, asked))
