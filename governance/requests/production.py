"""A production replay approved by a council quorum (``governance.services.production``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes
from governance import selectors
from governance.models import ProductionReplayRequest
from governance.requests.common import CouncilRequestKind
from governance.services.production import (
    production_replay_approval_record,
    production_replay_payload_for,
    production_replay_queued,
)


class ProductionReplayKind(CouncilRequestKind):
    name = "production-replay"
    label = "Production replay"
    codes = KindCodes(
        filed=codes.PRODUCTION_REPLAY_REQUEST,
        vote=codes.PRODUCTION_REPLAY_APPROVAL,
        approved=codes.PRODUCTION_REPLAY_APPROVED,
        rejected=codes.PRODUCTION_REPLAY_REJECTED,
    )
    summary = "run one production replay of one stored trace: a council quorum signs"
    model = ProductionReplayRequest
    related = ("requested_by", "trace")
    signed_in: ClassVar[Mapping[str, str]] = {
        signing.ROLE_COUNCIL: matrix.REPLAY_PRODUCTION_APPROVE
    }
    tally = staticmethod(selectors.production_tally)
    payload_type = signing.PRODUCTION_REPLAY_APPROVAL_TYPE
    approval_saves = ("run",)
    ballots = staticmethod(selectors.production_ballots)
    title = "Production replay request"
    list_title = "Production replay approvals"
    list_hint = (
        "Requests from people holding auditor or admin (not both) for one production replay"
        " of one stored file; a council quorum approves."
    )
    list_empty = "No production replay requests."
    what = "production replay request"
    summary_partial = "console/requests/production_replay_summary.html"
    page_related = ("trace__blob", "requested_by", "run")
    nav_section = "production"
    own_message = "You asked for this replay: other council members must approve it."
    outcome = ("production-run-link", "Open the production replay")

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return production_replay_payload_for(request=request, decision=decision, reason=reason)

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        return production_replay_approval_record(
            request=request, approver=approver, document=document
        )

    def on_approval(self, request: Any) -> None:
        production_replay_queued(request)

    def page_facts(self, request: Any) -> dict[str, Any]:
        return {"trace": request.trace}

    def outcome_run_id(self, request: Any) -> Any:
        return request.run_id

    def subject(self, request: Any) -> str:
        return f"production replay of trace {request.trace.trace_id}"


KIND = ProductionReplayKind()
