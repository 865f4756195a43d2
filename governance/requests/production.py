"""A production replay approved by a council quorum (``governance.services.production``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from governance import codes, selectors, signing
from governance import roles as matrix
from governance.models import ProductionReplayRequest
from governance.requests.common import CouncilRequestKind
from governance.requests.protocol import KindCodes


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
    url_name = "production-detail"
    signed_in: ClassVar[Mapping[str, str]] = {
        signing.ROLE_COUNCIL: matrix.REPLAY_PRODUCTION_APPROVE
    }
    tally = staticmethod(selectors.production_tally)

    def subject(self, request: Any) -> str:
        return f"production replay of trace {request.trace.trace_id}"


KIND = ProductionReplayKind()
