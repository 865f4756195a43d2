"""One approval page and one list for every kind of governed request (issue 19), driven by
the kind from the registry (``governance.requests``): the payload that will be signed, the
tally, who may still sign, and the browser signing (static/js/sign.js). The council kinds
list all their rows, the others their open requests. Each view checks the roles matrix: who
may see a kind's requests (``kind.seen_by``) and sign in which capacity (``kind.signed_in``).
The kinds' old URLs redirect here (``legacy_list_view``, ``legacy_detail_view``,
``legacy_legal_approval_view``); a POST to an old approval URL is still taken."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from console import roles
from console.views.common import partial_or_page, signed_in
from console.views.governance import payload_text, refused, signed_document
from core.ledger import signing
from core.ledger.codes import GovernanceError
from core.ledger.requests import needs_in_words
from governance import selectors as gov
from governance.requests import inbox
from governance.requests.builtin import kinds

LIST_TEMPLATE = "console/request_list.html"
APPROVE_TEMPLATE = "console/request_approve.html"
OPEN_LIST_TEMPLATE = "console/request_open_list.html"
LIST_LIMIT = 200


def kind_with_pages(name: str) -> Any:
    """The registered kind ``name`` if it has the shared approval page; 404 otherwise."""
    kind = kinds().get(name)
    if not getattr(kind, "has_pages", False):
        raise Http404("no such kind of request")
    return kind


signer_roles = roles.kind_capacities
require_sight = roles.require_kind_sight
require_signing = roles.require_kind_signing
access_request = roles.access_governed_request


def _open_list(request: HttpRequest, kind: Any) -> HttpResponse:
    """The open requests of a kind without a list of its own rows (halt clear, the legal
    approvals), oldest first: what each still needs, and which wait for this person."""
    in_effect = roles.roles(request.user)
    waiting = {w.key for w in inbox.waiting_for(request.user, roles=in_effect, registry=[kind])}
    rows = [
        {
            "open": o,
            "needs": needs_in_words(kind.needed(o)),
            "awaits_me": o.key in waiting,
        }
        for o in kind.open_requests(now=timezone.now())[:LIST_LIMIT]
    ]
    rows.sort(key=lambda r: not r["awaits_me"])
    return render(request, OPEN_LIST_TEMPLATE, {"kind": kind, "rows": rows})


@require_GET
@signed_in
def request_list_view(request: HttpRequest, kind: str) -> HttpResponse:
    the_kind = kind_with_pages(kind)
    require_sight(request.user, the_kind)
    if not getattr(the_kind, "has_list", False):
        return _open_list(request, the_kind)
    may_sign = bool(signer_roles(request.user, the_kind))
    rows = []
    listed = list(the_kind.rows()[:LIST_LIMIT])
    # the signed filings and votes (the ledger's, not the rows): a fixed number of queries
    filings = gov.request_filings(requests=listed)
    votes = the_kind.ballots_of_rows(listed, filings=filings)
    now = timezone.now()
    for asked in listed:
        ballots = votes[str(asked.id)]
        expired = asked.state == asked.State.PENDING and now >= gov.request_expiry(
            request=asked, filing=filings[asked.id]
        )
        rows.append(
            {
                "asked": asked,
                "subject": the_kind.subject(asked),
                "tally": the_kind.tally(request=asked, ballots=ballots),
                "expired": expired,
                "outcome_run_id": the_kind.outcome_run_id(asked),
                "awaits_me": may_sign
                and not the_kind.page_blocker(
                    asked, user=request.user, approvals=ballots, expired=expired
                ),
            }
        )
    rows.sort(key=lambda r: not r["awaits_me"])
    return render(request, LIST_TEMPLATE, {"kind": the_kind, "rows": rows})


def _approval_context(request: HttpRequest, kind: Any, asked: Any, key: str) -> dict[str, Any]:
    user = request.user
    capacities = signer_roles(user, kind)
    decisions = kind.decisions
    decision = request.GET.get("decision") or request.POST.get("decision") or signing.APPROVE
    if decision not in (decisions or (signing.APPROVE,)):
        decision = signing.APPROVE
    role = request.GET.get("role") or request.POST.get("role") or ""
    if role not in capacities:
        role = capacities[0] if capacities else signing.ROLE_COUNCIL
    reason = request.GET.get("reason", request.POST.get("reason_text", ""))
    payload = kind.payload_for(asked, decision=decision, role=role, reason=reason)
    return {
        "kind": kind,
        "asked": asked,
        **kind.page_context(asked, user=user),
        "page_title": kind.page_title(asked),
        "sign_url": reverse("request-detail", args=[kind.name, key]),
        "signer_roles": capacities,
        "choose_role": len(kind.signed_in) > 1,
        "decision": decision,
        "decisions": decisions,
        "role": role,
        "reason": reason,
        "payload_text": payload_text(payload),
        "keys": list(gov.member_keys(user=user, usable=True)),
    }


@signed_in
@require_http_methods(["GET", "POST"])
def request_detail_view(request: HttpRequest, kind: str, request_id: str) -> HttpResponse:
    the_kind = kind_with_pages(kind)
    asked = access_request(request.user, the_kind, request_id)
    if request.method == "POST":
        require_signing(request.user, the_kind)
        context = _approval_context(request, the_kind, asked, request_id)
        try:
            document = signed_document(request)
            payload = document.get("payload")
            require_signing(
                request.user, the_kind, payload.get("role") if isinstance(payload, dict) else None
            )
            the_kind.record(asked, approver=request.user, document=document)
        except GovernanceError as exc:
            return refused(request, exc, APPROVE_TEMPLATE, context)
        messages.success(request, the_kind.signed_message)
        return HttpResponseRedirect(the_kind.done_url(asked), status=303)
    context = _approval_context(request, the_kind, asked, request_id)
    return partial_or_page(request, APPROVE_TEMPLATE, "signing-payload", context)


# --- the old URLs, one copy per kind, now only redirect ----------------------------------


@require_GET
def legacy_list_view(request: HttpRequest, kind: str) -> HttpResponse:
    return HttpResponseRedirect(reverse("request-list", args=[kind]), status=301)


@require_http_methods(["GET", "POST"])
def legacy_detail_view(request: HttpRequest, kind: str, request_id: str) -> HttpResponseBase:
    """GET moves permanently; a POST (a form or script still posting here) is taken as is."""
    if request.method == "POST":
        return request_detail_view(request, kind=kind, request_id=request_id)
    kind_with_pages(kind)
    url = reverse("request-detail", args=[kind, request_id])
    if request.META.get("QUERY_STRING"):
        url += "?" + request.META["QUERY_STRING"]
    return HttpResponseRedirect(url, status=301)


@require_http_methods(["GET", "POST"])
def legacy_legal_approval_view(
    request: HttpRequest, request_id: str, purpose: str
) -> HttpResponseBase:
    """``/dsr/<id>/approve/<purpose>/``, a legal approval's old page."""
    if purpose not in signing.DSR_PURPOSES:
        raise Http404("no such approval")
    return legacy_detail_view(request, kind=f"legal-{purpose}", request_id=request_id)
