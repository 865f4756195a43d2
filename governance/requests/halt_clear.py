"""Clearing a halt: a council quorum signs (``governance.services.halts``). A halt is filed
by nobody (an integrity failure or an admin's incident set it) and never expires; the admin
who declared the incident that set it does not sign its clear (four eyes)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from django.urls import reverse

from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes, OpenRequest, Vote, vote_of_ballot
from governance import conf, selectors
from governance.models import Halt
from governance.requests.common import signer_roles_of
from governance.services.halts import (
    halt_clear_approval_record,
    halt_clear_payload_for,
    halt_clear_refusal,
)


class HaltClearKind:
    name = "halt-clear"
    label = "Halt clear"
    codes = KindCodes(
        filed=codes.FORCE_HALT_REPLAY,
        vote=codes.HALT_CLEAR_APPROVAL,
        approved=codes.FORCE_HALT_CLEAR,
    )
    summary = "clear a halt on a stored file, a trace or a snapshot: a council quorum signs"
    signed_in: ClassVar[Mapping[str, str]] = {signing.ROLE_COUNCIL: matrix.HALT_CLEAR}

    # --- its approval page (protocol.KindPages): /requests/halt-clear/<seq>/
    has_pages = True
    has_list = False  # the halts page (/governance/halts/) lists them, with the incident form
    title = "Halt clear"
    what = "halt"
    seen_by: tuple[str, ...] = (matrix.BROWSE,)
    decisions: tuple[str, ...] = ()
    heading_partial = "console/requests/halt_clear_heading.html"
    body_partial = "console/requests/halt_clear_body.html"
    sign_heading = "Sign toward clearing"
    signed_message = "Your signature toward clearing this halt is recorded."
    nav_section = "halts"

    def page_title(self, request: Any) -> str:
        return f"Halt #{request.seq}"

    def detail(self, key: str) -> Any:
        try:
            seq = int(str(key))
        except ValueError:
            return None
        return Halt.objects.filter(seq=seq).first()

    def page_context(self, request: Any, *, user: Any) -> dict[str, Any]:
        active = selectors.halts_active().filter(seq=request.seq).exists()
        approvals = selectors.halt_ballots(halt_seq=request.seq)  # the ledger's, not the rows
        blocker = ""
        if not active:
            blocker = "This halt is cleared: it takes no more signatures."
        elif request.actor_id is not None and request.actor_id == user.pk:
            blocker = "You declared this halt: other council members must clear it."
        elif any(a.approver_id == user.pk for a in approvals):
            blocker = "You have already signed toward clearing this halt."
        return {
            "halt": request,
            "active": active,
            "approvals": approvals,
            "quorum": conf.council_quorum(),
            "blocker": blocker,
        }

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return halt_clear_payload_for(halt=request, reason=reason)

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        return halt_clear_approval_record(
            halt_seq=request.seq, approver=approver, document=document
        )

    def done_url(self, request: Any) -> str:
        return reverse("request-detail", args=[self.name, request.seq])

    def state_of(self, request: Any) -> str:
        """``pending`` while the halt holds, ``cleared`` once a quorum cleared it."""
        active = selectors.halts_active().filter(seq=request.seq).exists()
        return "pending" if active else "cleared"

    def votes(self, request: Any) -> list[Vote]:
        return [vote_of_ballot(b) for b in selectors.halt_ballots(halt_seq=request.seq)]

    def signer_roles(self) -> frozenset[str]:
        return signer_roles_of(self.signed_in)

    def capacities(self, open_request: OpenRequest) -> Mapping[str, str]:
        return self.signed_in

    def quorum(self) -> str:
        return f"{conf.council_quorum()} council signature(s)"

    def open_requests(self, *, now: datetime) -> list[OpenRequest]:
        """The active halts with their signatures: three queries whatever their number."""
        halts = list(selectors.halts_active())
        ballots = selectors.ballots_by_subject(
            event_type=self.codes.vote, field="halt_seq", after={h.seq: h.seq for h in halts}
        )
        return [
            OpenRequest(
                kind=self.name,
                key=str(halt.seq),
                subject=f"clear halt {halt.seq} on {halt.target_kind} {halt.target_id}",
                filed_by=halt.actor_label,
                filed_at=halt.created_at,
                url=reverse("request-detail", args=[self.name, halt.seq]),
                request=halt,
                facts={"ballots": ballots[halt.seq]},
            )
            for halt in halts
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
        return halt_clear_refusal(
            halt=open_request.request, approver=user, ballots=open_request.facts["ballots"]
        )

    def key_of(self, payload: Mapping[str, Any], seq: int) -> str:
        return str(seq)

    def needed(self, open_request: OpenRequest) -> dict[str, int]:
        result = selectors.halt_tally(ballots=open_request.facts["ballots"])
        return {signing.ROLE_COUNCIL: result.council_required - result.council}


KIND = HaltClearKind()
