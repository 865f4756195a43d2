"""A grant of admin or council, in effect once a council quorum signed it
(``governance.services.user_roles``); neither the admin who asked nor the grantee signs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from governance import codes, selectors, signing
from governance import roles as matrix
from governance.models import RoleGrantRequest
from governance.requests.common import CouncilRequestKind
from governance.requests.protocol import KindCodes, OpenRequest
from governance.services.user_roles import role_grant_refusal


class RoleGrantKind(CouncilRequestKind):
    name = "role-grant"
    label = "Role grant"
    codes = KindCodes(
        filed=codes.ROLE_GRANT_REQUEST,
        vote=codes.ROLE_GRANT_APPROVAL,
        approved=codes.ROLE_GRANT_APPROVED,
        rejected=codes.ROLE_GRANT_REJECTED,
    )
    summary = "grant someone admin or council: a council quorum signs, never the grantee"
    model = RoleGrantRequest
    related = ("requested_by", "user")
    url_name = "role-grant-detail"
    signed_in: ClassVar[Mapping[str, str]] = {signing.ROLE_COUNCIL: matrix.ROLE_GRANT_APPROVE}
    tally = staticmethod(selectors.role_grant_tally)

    def subject(self, request: Any) -> str:
        return f"grant {', '.join(request.roles)} to {request.user.get_username()}"

    def refusal(
        self,
        open_request: OpenRequest,
        *,
        user: Any,
        role: str,
        now: datetime,
        history: tuple[tuple[int, frozenset[str]], ...],
    ) -> Exception | None:
        return role_grant_refusal(
            open_request.request,
            approver=user,
            now=now,
            ballots=open_request.facts["ballots"],
            expires_at=open_request.expires_at,
            history=history,
        )


KIND = RoleGrantKind()
