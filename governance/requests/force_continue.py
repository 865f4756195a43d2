"""Force-continue past a divergence: one admin and a council quorum sign it
(``governance.services.force_continue``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes
from governance import selectors
from governance.models import ForceContinueRequest
from governance.requests.common import CouncilRequestKind
from governance.services.force_continue import (
    approval_record,
    force_continue_payload_for,
    force_continue_resumed,
)


class ForceContinueKind(CouncilRequestKind):
    name = "force-continue"
    label = "Force-continue"
    codes = KindCodes(
        filed=codes.FORCE_CONTINUE_REQUEST,
        vote=codes.FORCE_CONTINUE_APPROVAL,
        approved=codes.FORCE_CONTINUE_APPROVED,
        rejected=codes.FORCE_CONTINUE_REJECTED,
    )
    summary = "continue a diverged replay past its step: one admin and a council quorum sign"
    model = ForceContinueRequest
    related = ("requested_by", "run__trace")
    signed_in: ClassVar[Mapping[str, str]] = {
        signing.ROLE_ADMIN: matrix.FORCE_CONTINUE_APPROVE_ADMIN,
        signing.ROLE_COUNCIL: matrix.FORCE_CONTINUE_APPROVE_COUNCIL,
    }
    admins_required = 1
    payload_type = signing.FORCE_CONTINUE_APPROVAL_TYPE
    vote_role = None  # one admin and the council: the signer names their role
    approval_saves = ("resumed_run",)
    tally = staticmethod(selectors.force_continue_tally)
    ballots = staticmethod(selectors.force_continue_ballots)
    title = "Force-continue request"
    list_title = "Force-continue requests"
    list_empty = "No force-continue requests."
    what = "force-continue request"
    summary_partial = "console/requests/force_continue_summary.html"
    page_related = ("run__trace", "requested_by", "resumed_run")
    nav_section = "force-continue"
    outcome = ("resumed-run-link", "Open the resumed replay")

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return force_continue_payload_for(
            request=request, decision=decision, role=role, reason=reason
        )

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        return approval_record(request=request, approver=approver, document=document)

    def on_approval(self, request: Any) -> None:
        force_continue_resumed(request)

    def page_facts(self, request: Any) -> dict[str, Any]:
        report = request.run.report or {}
        divergences = report.get("divergences", [])
        return {
            "run": request.run,
            "trace": request.run.trace,
            "first_divergence": next(
                (d for d in divergences if d.get("step") == request.step), None
            ),
            "divergence_count": len(divergences),
        }

    def outcome_run_id(self, request: Any) -> Any:
        return request.resumed_run_id

    def subject(self, request: Any) -> str:
        trace_id = request.run.trace.trace_id
        return f"replay {request.run_id} of trace {trace_id}, past step {request.step}"


KIND = ForceContinueKind()
