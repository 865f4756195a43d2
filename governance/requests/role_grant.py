"""A grant of admin or council, in effect once a council quorum signed it
(``governance.services.user_roles``); neither the admin who asked nor the grantee signs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes, OpenRequest
from governance import selectors
from governance.models import RoleGrantRequest
from governance.requests.common import CouncilRequestKind
from governance.services.user_roles import (
    role_grant_approval_record,
    role_grant_granted,
    role_grant_payload_for,
    role_grant_refusal,
)


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
    signed_in: ClassVar[Mapping[str, str]] = {signing.ROLE_COUNCIL: matrix.ROLE_GRANT_APPROVE}
    tally = staticmethod(selectors.role_grant_tally)
    payload_type = signing.ROLE_GRANT_APPROVAL_TYPE
    ballots = staticmethod(selectors.role_grant_ballots)
    title = "Role grant"
    list_title = "Role grants"
    list_hint = (
        "An admin asked for someone to be granted admin or council; it takes effect once a"
        " council quorum has signed it."
    )
    list_empty = "No role grant yet."
    noun = "grant"
    what = "role grant"
    summary_partial = "console/requests/role_grant_summary.html"
    #: admins file them and the council signs them: both see them
    seen_by = (matrix.MANAGE, matrix.ROLE_GRANT_APPROVE)
    page_related = ("user", "requested_by")
    nav_section = "role-grants"

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return role_grant_payload_for(request=request, decision=decision, reason=reason)

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        return role_grant_approval_record(request=request, approver=approver, document=document)

    def on_approval(self, request: Any) -> None:
        role_grant_granted(request)

    def blocker_of(self, request: Any, *, user: Any) -> str:
        if request.user_id == user.pk:
            return "This grant gives you roles: someone else must sign it."
        return ""

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
