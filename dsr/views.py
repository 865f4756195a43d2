"""The DSR pages under /dsr/: the list with each due date counting down, the form that opens
a request, the request page (state, identity check, approvals, transitions) and the signing
page of a four-eyes approval (the exact payload; for an erasure, what it will destroy).

Every page checks the roles matrix first (``console.roles``); everything it changes goes
through ``dsr.services``. Signing happens in the browser (static/js/sign.js) or offline.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console import roles
from console.views.common import partial_or_page, signed_in
from console.views.governance import refused
from core.ledger import signing
from core.ledger.codes import GovernanceError
from dsr import access, conf, lookup, services, signed, subjects_port
from dsr.models import DsrRelease, LegalRequest
from dsr.tables import legal_rows_html, list_rows

TRANSITIONS = ("start", "fulfil", "refuse")


#: what a row of the list shows (dsr.tables)
def _require_list(user: Any) -> None:
    if not lookup.may_see_legal_requests(user):
        raise PermissionDenied("your roles do not allow seeing legal requests")


@require_GET
@signed_in
def dsr_list_view(request: HttpRequest) -> HttpResponse:
    _require_list(request.user)
    # what the rows show, as tuples: not 36 fields each, not 1,000 objects a page
    found = list_rows(LegalRequest.objects.order_by("due_date", "created_at")[:500])
    return render(
        request,
        "dsr/list.html",
        {
            "rows": found,
            "legal_rows": legal_rows_html(found, timezone.localdate()),  # the rows, in Python
            "can_open": roles.can(request.user, roles.DSR),
        },
    )


@sensitive_post_parameters("identifiers")
@signed_in
@require_http_methods(["GET", "POST"])
def dsr_open_view(request: HttpRequest) -> HttpResponse:
    roles.require(request.user, roles.DSR)
    context: dict[str, Any] = {
        "kinds": LegalRequest.Kind.choices,
        "kind": LegalRequest.Kind.ACCESS,
        "legal_basis": "",
        "due_date": services.default_due_date().isoformat(),
        "today": timezone.localdate().isoformat(),
    }
    if request.method == "POST":
        identifiers = request.POST.get("identifiers", "").splitlines()
        context.update(
            kind=request.POST.get("kind", ""),
            legal_basis=request.POST.get("legal_basis", ""),
            due_date=request.POST.get("due_date", ""),
        )
        try:
            opened = services.legal_request_open(
                actor=request.user,
                identifiers=identifiers,
                kind=context["kind"],
                legal_basis=context["legal_basis"],
                due_date=context["due_date"] or None,
            )
        except GovernanceError as exc:
            return refused(request, exc, "dsr/open.html", context)
        messages.success(request, "Legal request opened; it is in the ledger.")
        return HttpResponseRedirect(reverse("dsr-detail", args=[opened.id]), status=303)
    return render(request, "dsr/open.html", context)


def _fields(legal: LegalRequest) -> list[dict[str, Any]]:
    """The subjects' indexed fields, values redacted (the page never shows one in clear)."""
    if not subjects_port.privacy_installed():
        return []
    released = access.revealable(legal)
    rows = []
    for hit, value in subjects_port.subject_values(list(legal.subject_refs), reveal=False):
        key = (hit.subject_ref, hit.trace_pk, hit.location, hit.path)
        rows.append({"hit": hit, "value": value, "released": key in released})
    return rows


def _released_since_bundle(legal: LegalRequest) -> int:
    """Fields released after the built bundle's export event: the bundle lacks their values,
    so the page must not offer it as the current one (0 when there is no built bundle)."""
    if legal.bundle_state != access.DONE or legal.export_event_id is None:
        return 0
    return DsrRelease.objects.filter(request=legal, event_id__gt=legal.export_event_id).count()


def _detail_context(request: HttpRequest, legal: LegalRequest) -> dict[str, Any]:
    user = request.user
    approvals = []
    statuses = {}
    for purpose in services.purposes_of(legal):
        status = services.approval_status(request=legal, purpose=purpose)
        statuses[purpose] = status
        approvals.append(
            {
                "purpose": purpose,
                "status": status,
                "signed_by_you": user.get_username() in status.approvers,
            }
        )
    release = statuses.get(signing.DSR_RELEASE)
    erasure = statuses.get(signing.DSR_ERASURE)
    return {
        "privacy": subjects_port.privacy_installed(),
        "fields": _fields(legal),
        "bundle_running": legal.bundle_state in (access.QUEUED, access.RUNNING),
        "bundle_ready": legal.bundle_state == access.DONE,
        "bundle_outdated_by": _released_since_bundle(legal),
        "release_approved": bool(release and release.complete),
        "erasure_approved": bool(erasure and erasure.complete),
        "receipt": access.erasure_receipt(legal),
        "can_release": roles.can(user, roles.PII_REVEAL),
        "release_signed": legal.wants_access and signed.covered(legal)[1] is not None,
        "legal": legal,
        "days_left": legal.days_left(),
        "approvals": approvals,
        "approval_by": conf.approval_by(),
        "can_act": roles.can(user, roles.DSR),
        "can_approve": roles.can(user, roles.DSR_APPROVE),
        "events": [
            e
            for e in (
                legal.opened_event,
                legal.identity_event,
                legal.export_event,
                legal.erasure_event,
                legal.closed_event,
            )
            if e is not None
        ],
    }


@require_GET
@signed_in
def dsr_detail_view(request: HttpRequest, request_id: str) -> HttpResponse:
    _require_list(request.user)
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.BROWSE)
    return partial_or_page(
        request, "dsr/detail.html", "dsr-bundle", _detail_context(request, legal)
    )


@require_POST
@signed_in
def dsr_identity_view(request: HttpRequest, request_id: str) -> HttpResponse:
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
    try:
        services.legal_request_identity_verify(
            request=legal, actor=request.user, method=request.POST.get("method", "")
        )
    except GovernanceError as exc:
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    messages.success(request, "The identity check is recorded in the ledger.")
    return HttpResponseRedirect(reverse("dsr-detail", args=[legal.id]), status=303)


@require_POST
@signed_in
def dsr_transition_view(request: HttpRequest, request_id: str) -> HttpResponse:
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
    action = request.POST.get("action", "")
    try:
        if action == "start":
            services.legal_request_start(request=legal, actor=request.user)
        elif action == "fulfil":
            services.legal_request_fulfil(request=legal, actor=request.user)
        elif action == "refuse":
            services.legal_request_refuse(
                request=legal, actor=request.user, reason=request.POST.get("reason", "")
            )
        else:
            raise Http404("no such transition")
    except GovernanceError as exc:
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    messages.success(request, f"Legal request: {action} recorded in the ledger.")
    return HttpResponseRedirect(reverse("dsr-detail", args=[legal.id]), status=303)


def _back(legal: LegalRequest) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("dsr-detail", args=[legal.id]), status=303)


@require_POST
@signed_in
def dsr_bundle_view(request: HttpRequest, request_id: str) -> HttpResponse:
    """Queue the evidence bundle's build; the request page shows its progress."""
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
    try:
        access.bundle_request(request=legal, actor=request.user)
    except GovernanceError as exc:
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    messages.success(request, "The bundle is being built: audit replays of every trace.")
    return _back(legal)


def _released_bundle(request: HttpRequest, request_id: str) -> tuple[LegalRequest, bytes]:
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
    return legal, access.released_bundle(request=legal)


@require_GET
@signed_in
def dsr_bundle_download_view(request: HttpRequest, request_id: str) -> HttpResponse:
    """The bundle file, once its release is approved (four eyes)."""
    try:
        legal, data = _released_bundle(request, request_id)
    except GovernanceError as exc:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    response = HttpResponse(data, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="evidence-bundle-{legal.id}.json"'
    return response


@require_GET
@signed_in
def dsr_bundle_pdf_view(request: HttpRequest, request_id: str) -> HttpResponse:
    """The bundle's readable summary as a PDF a person can be handed."""
    from core import bundle
    from core.bundle import pdf

    try:
        legal, data = _released_bundle(request, request_id)
    except GovernanceError as exc:
        legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    response = HttpResponse(
        pdf.render_summary(bundle.pdf_summary(data)), content_type="application/pdf"
    )
    response["Content-Disposition"] = f'attachment; filename="evidence-bundle-{legal.id}.pdf"'
    return response


@require_POST
@signed_in
def dsr_release_view(request: HttpRequest, request_id: str) -> HttpResponse:
    """An admin releases one field into the bundle (one PII_REVEALED naming the request)."""
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.PII_REVEAL)
    try:
        trace_pk = int(request.POST.get("trace_pk", ""))
    except ValueError:
        raise Http404("no such field") from None
    try:
        access.field_release(
            request=legal,
            actor=request.user,
            subject_ref=request.POST.get("subject_ref", ""),
            trace_pk=trace_pk,
            location=request.POST.get("location", ""),
            path=request.POST.get("path", ""),
            reason=request.POST.get("reason", ""),
        )
    except GovernanceError as exc:
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    messages.success(
        request, "The field is released into the bundle; build it again to include it."
    )
    return _back(legal)


@require_POST
@signed_in
def dsr_erase_view(request: HttpRequest, request_id: str) -> HttpResponse:
    """Execute an approved erasure; the request page then shows the receipt."""
    legal = lookup.access_legal_request_by_id(request.user, request_id, roles.DSR)
    try:
        access.legal_request_erase(request=legal, actor=request.user)
    except GovernanceError as exc:
        return refused(request, exc, "dsr/detail.html", _detail_context(request, legal))
    messages.success(request, "Erased: the subjects' keys are destroyed. The receipt is below.")
    return _back(legal)
