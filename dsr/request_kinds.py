"""The legal requests' approvals as kinds of governed request: the release of an access
bundle and the execution of an erasure, each signed four-eyes (``DSR_APPROVAL_BY``: one
admin, or a council quorum), never by who opened the request.

Registered through the entry-point group ``replay_console.request_kinds`` (pyproject.toml),
since governance does not import dsr. "May still sign" is ``dsr.services.approval_refusal``
and then the role check the signing makes (``governance.services._require_role``: the role
held, per the ledger, before the request was opened)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.urls import reverse
from django.utils.html import format_html

from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes, KindRegistry, OpenRequest, Vote
from dsr import conf, services, signed, subjects_port
from dsr.models import LegalRequest
from governance import services as gov_services


class LegalApprovalKind:
    """The approval of one purpose (release or erasure) of legal requests."""

    codes = KindCodes(
        filed=codes.DSR_OPENED, vote=codes.DSR_APPROVAL, ready=codes.DSR_IDENTITY_VERIFIED
    )

    # --- its approval page (protocol.KindPages): /requests/legal-<purpose>/<id>/
    has_pages = True
    has_list = False  # the legal requests' list (/dsr/) lists them, with their due dates
    what = "legal request"
    seen_by: tuple[str, ...] = (matrix.DSR_APPROVE,)
    decisions: tuple[str, ...] = ()
    heading_partial = ""
    body_partial = "dsr/requests/approval_body.html"
    sign_heading = "Sign"
    signed_message = "Your signed approval is recorded in the ledger."
    nav_section = "dsr"

    def __init__(self, purpose: str, label: str, summary: str) -> None:
        self.purpose = purpose
        self.name = f"legal-{purpose}"
        self.label = label
        self.summary = summary
        self.title = f"Approve the {purpose} of a legal request"

    @property
    def signed_in(self) -> Mapping[str, str]:
        return self.capacities()

    def page_title(self, request: Any) -> str:
        return format_html("Approve a legal request's {}", self.purpose)

    def detail(self, key: str) -> Any:
        """The legal request ``key`` names, if it has this approval; None otherwise."""
        try:
            pk = uuid.UUID(str(key))
        except ValueError:
            return None
        legal = (
            LegalRequest.objects.select_related("requested_by", "identity_verified_by")
            .filter(id=pk)
            .first()
        )
        if legal is None or self.purpose not in services.purposes_of(legal):
            return None
        return legal

    def page_context(self, request: Any, *, user: Any) -> dict[str, Any]:
        blocker = ""
        try:
            services.approval_refusal(request=request, purpose=self.purpose, approver=user)
        except codes.GovernanceError as exc:
            blocker = f"{exc.code}: {exc.message}"
        release = self.purpose == signing.DSR_RELEASE
        return {
            "legal": request,
            "purpose": self.purpose,
            "status": services.approval_status(request=request, purpose=self.purpose),
            "values": services.release_values_for(request) if release else None,
            "plan": None if release else subjects_port.erasure_plan(request.subject_refs),
            "blocker": blocker,
        }

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return services.approval_payload_for(request=request, purpose=self.purpose, reason=reason)

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        return services.legal_request_approve(
            request=request, purpose=self.purpose, approver=approver, document=document
        )

    def done_url(self, request: Any) -> str:
        return reverse("dsr-detail", args=[request.id])

    def state_of(self, request: Any) -> str:
        """``approved`` once the signed approvals reach the quorum; ``pending`` while the
        request is open; otherwise the request's own state (``refused``, ``fulfilled``)."""
        if services.approval_status(request=request, purpose=self.purpose).complete:
            return "approved"
        return "pending" if not request.is_closed else str(request.state)

    def votes(self, request: Any) -> list[Vote]:
        return [
            Vote(
                seq=a.seq,
                approver=a.approver,
                role=str(a.payload.get("role", "")),
                key_id=a.key_id,
                decision=signing.APPROVE,
                reason=str(a.payload.get("reason", "")),
            )
            for a in signed.approvals(request, self.purpose).counted
        ]

    def capacities(self, open_request: OpenRequest | None = None) -> Mapping[str, str]:
        return {conf.approval_by(): matrix.DSR_APPROVE}

    def signer_roles(self) -> frozenset[str]:
        role = conf.approval_by()
        return frozenset({role}) & matrix.MATRIX[matrix.DSR_APPROVE]

    def quorum(self) -> str:
        return f"{conf.approvals_needed()} {conf.approval_by()} signature(s)"

    def open_requests(self, *, now: datetime) -> list[OpenRequest]:
        """Legal requests not closed that have this approval: one query."""
        rows = (
            LegalRequest.objects.exclude(
                state__in=[LegalRequest.State.FULFILLED, LegalRequest.State.REFUSED]
            )
            .filter(kind__in=services.PURPOSE_KINDS[self.purpose])
            .select_related("requested_by")
            .order_by("created_at")
        )
        return [
            OpenRequest(
                kind=self.name,
                key=str(row.id),
                subject=(
                    f"{self.purpose} for legal request {row.id} ({row.kind}, "
                    f"{len(row.subject_refs)} subject(s))"
                ),
                filed_by=row.requested_by.get_username(),
                filed_at=row.created_at,
                url=reverse("request-detail", args=[self.name, row.id]),
                request=row,
                due_date=row.due_date,
            )
            for row in rows
        ]

    def refusal(
        self,
        open_request: OpenRequest,
        *,
        user: Any,
        role: str,
        now: datetime,
        history: tuple[tuple[int, frozenset[str]], ...],
    ) -> Exception | None:
        request = open_request.request
        try:
            services.approval_refusal(request=request, purpose=self.purpose, approver=user)
            gov_services._require_role(
                user,
                role,
                filed_seq=request.opened_event_id,
                subject=f"legal request {request.id}",
                history=history,
            )
        except codes.GovernanceError as refused:
            return refused
        return None

    def key_of(self, payload: Mapping[str, Any], seq: int) -> str:
        return str(payload.get("request_id"))

    def needed(self, open_request: OpenRequest) -> dict[str, int]:
        status = services.approval_status(request=open_request.request, purpose=self.purpose)
        return {status.role: status.needed - status.have}


RELEASE = LegalApprovalKind(
    signing.DSR_RELEASE,
    "Legal request release",
    "release a legal request's access bundle: four-eyes, never who opened it",
)
ERASURE = LegalApprovalKind(
    signing.DSR_ERASURE,
    "Legal request erasure",
    "execute a legal request's erasure: four-eyes, never who opened it",
)


def register(registry: KindRegistry) -> None:
    registry.register(RELEASE)
    registry.register(ERASURE)
