"""The legal requests' approvals as kinds of governed request: the release of an access
bundle and the execution of an erasure, each signed four-eyes (``DSR_APPROVAL_BY``: one
admin, or a council quorum), never by who opened the request.

Registered through the entry-point group ``replay_console.request_kinds`` (pyproject.toml),
since governance does not import dsr. "May still sign" is ``dsr.services.approval_refusal``
and then the role check the signing makes (``governance.services._require_role``: the role
held, per the ledger, before the request was opened)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.urls import reverse

from dsr import conf, services
from dsr.models import LegalRequest
from governance import codes, signing
from governance import roles as matrix
from governance import services as gov_services
from governance.requests.protocol import KindCodes, KindRegistry, OpenRequest


class LegalApprovalKind:
    """The approval of one purpose (release or erasure) of legal requests."""

    codes = KindCodes(
        filed=codes.DSR_OPENED, vote=codes.DSR_APPROVAL, ready=codes.DSR_IDENTITY_VERIFIED
    )

    def __init__(self, purpose: str, label: str, summary: str) -> None:
        self.purpose = purpose
        self.name = f"legal-{purpose}"
        self.label = label
        self.summary = summary

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
                url=reverse("dsr-approve", args=[row.id, self.purpose]),
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
