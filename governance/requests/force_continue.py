"""Force-continue past a divergence: one admin and a council quorum sign it
(``governance.services.force_continue``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from governance import codes, selectors, signing
from governance import roles as matrix
from governance.models import ForceContinueRequest
from governance.requests.common import CouncilRequestKind
from governance.requests.protocol import KindCodes


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
    url_name = "force-continue-detail"
    signed_in: ClassVar[Mapping[str, str]] = {
        signing.ROLE_ADMIN: matrix.FORCE_CONTINUE_APPROVE_ADMIN,
        signing.ROLE_COUNCIL: matrix.FORCE_CONTINUE_APPROVE_COUNCIL,
    }
    admins_required = 1
    tally = staticmethod(selectors.force_continue_tally)

    def subject(self, request: Any) -> str:
        trace_id = request.run.trace.trace_id
        return f"replay {request.run_id} of trace {trace_id}, past step {request.step}"


KIND = ForceContinueKind()
