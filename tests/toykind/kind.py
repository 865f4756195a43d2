"""A toy kind of governed request: a notice that two council members sign, never who filed it.

It is what an installed package adds to bring a kind of its own: this one module (registered
through the entry-point group ``replay_console.request_kinds`` by ``register``), its body
partial (``templates/toykind/body.html``) and its tests. The shared approval page
``/requests/toy-notice/<id>/``, the API ``/api/requests/toy-notice/…``, the inbox and
``governance verify`` then take it with no other change.

It brings its own ledger event types (``KindCodes.event_types``, codes from 1000 up): the
filing ``TOY_NOTICE``, each signed vote ``TOY_NOTICE_APPROVAL`` and the approval
``TOY_NOTICE_OK`` are ledger events, its rows are the shared ``governance_request`` and
``governance_vote`` tables, and ``governance verify`` reconciles them as it does every kind
that brings its types (``governance.ledger.installed_kinds``). Tallies and refusals read the
signed votes from the ledger, never the rows; a signature is checked against the signer's
confirmed member key with ``core.ledger.signing.verify`` as the services check theirs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django.db import transaction
from django.urls import reverse

from core.canonical import jcs
from core.ledger import codes, signing
from core.ledger import roles as matrix
from core.ledger.requests import KindCodes, KindRegistry, OpenRequest, Vote
from core.ledger.requests import vote_of_ballot as as_vote
from governance import ledger
from governance import selectors as gov
from governance.models import GovernedRequest
from governance.models import Vote as VoteRow
from governance.requests.common import signer_roles_of
from governance.services.votes import vote_append

QUORUM = 2
PAYLOAD_TYPE = "replay-audit-console/toy-notice-approval/v1"
FILED, VOTED, APPROVED = "TOY_NOTICE", "TOY_NOTICE_APPROVAL", "TOY_NOTICE_OK"


@dataclass
class Notice:
    """One notice: its ``governance_request`` row and its signed votes, from the ledger."""

    row: GovernedRequest
    ballots: list[Any]  # governance.selectors.Ballot, the ledger's

    @property
    def votes(self) -> list[Vote]:
        return [as_vote(b) for b in self.ballots]

    @property
    def id(self) -> str:
        return self.row.subject

    @property
    def text(self) -> str:
        return str(self.row.payload["text"])

    @property
    def filed_by(self) -> Any:
        return self.row.requested_by

    @property
    def filed_at(self) -> datetime:
        return self.row.created_at

    @property
    def state(self) -> str:
        return str(self.row.state)


class ToyNoticeKind:
    name = "toy-notice"
    label = "Toy notice"
    codes = KindCodes(
        filed=FILED,
        vote=VOTED,
        approved=APPROVED,
        event_types=(
            codes.EventType(1000, FILED, "a toy notice was filed (tests/toykind)"),
            codes.EventType(1001, VOTED, "one council member's signature on a toy notice"),
            codes.EventType(1002, APPROVED, "a toy notice reached its two signatures"),
        ),
    )
    summary = "publish a toy notice: two council members sign it, never who filed it"
    #: a council action of the roles matrix (a real kind adds its own action)
    signed_in: ClassVar[Mapping[str, str]] = {signing.ROLE_COUNCIL: matrix.HALT_CLEAR}

    # --- its approval page (protocol.KindPages)
    has_pages = True
    has_list = False
    title = "Toy notice"
    what = "toy notice"
    seen_by: tuple[str, ...] = (matrix.BROWSE,)
    decisions: tuple[str, ...] = ()
    heading_partial = ""
    body_partial = "toykind/body.html"
    sign_heading = "Sign"
    signed_message = "Your signature on this notice is recorded."

    @transaction.atomic
    def file(self, *, actor: Any, text: str) -> Notice:
        """File a notice: its signed ``TOY_NOTICE`` event and its row."""
        notice_id = uuid.uuid4()
        event = ledger.append(
            event_type=FILED, payload={"request_id": str(notice_id), "text": text}, actor=actor
        )
        row = GovernedRequest.objects.create(
            id=notice_id,
            kind=self.name,
            subject=str(notice_id),
            payload=event.payload,
            requested_by=actor,
            created_at=event.created_at,
            request_event=event,
        )
        return Notice(row, [])

    def _notices(self, rows: list[GovernedRequest]) -> list[Notice]:
        """``rows`` with their signed votes, from the ledger (one query)."""
        ballots = gov.ballots_by_subject(
            event_type=VOTED,
            field="request_id",
            after={r.subject: r.request_event_id for r in rows},
        )
        return [Notice(r, ballots[r.subject]) for r in rows]

    # --- the inbox (protocol.RequestKind)
    def signer_roles(self) -> frozenset[str]:
        return signer_roles_of(self.signed_in)

    def quorum(self) -> str:
        return f"{QUORUM} council signature(s)"

    def open_requests(self, *, now: datetime) -> list[OpenRequest]:
        return [
            OpenRequest(
                kind=self.name,
                key=n.id,
                subject=f"publish {n.text!r}",
                filed_by=n.filed_by.get_username(),
                filed_at=n.filed_at,
                url=reverse("request-detail", args=[self.name, n.id]),
                request=n,
            )
            for n in self._notices(
                list(
                    GovernedRequest.objects.filter(kind=self.name, state="pending")
                    .select_related("requested_by")
                    .order_by("created_at")
                )
            )
        ]

    def capacities(self, open_request: OpenRequest) -> Mapping[str, str]:
        return self.signed_in

    def _refusal(self, notice: Notice, user: Any) -> codes.GovernanceError | None:
        if notice.state != "pending":
            return codes.GovernanceError(codes.REQUEST_CLOSED, f"this notice is {notice.state}")
        if notice.filed_by.pk == user.pk:
            return codes.GovernanceError(codes.APPROVAL_SELF, "you filed this notice")
        if any(v.approver == user.get_username() for v in notice.votes):
            return codes.GovernanceError(
                codes.APPROVAL_DUPLICATE_PERSON, f"{user.get_username()} has already signed"
            )
        return None

    def refusal(
        self,
        open_request: OpenRequest,
        *,
        user: Any,
        role: str,
        now: datetime,
        history: tuple[tuple[int, frozenset[str]], ...],
    ) -> Exception | None:
        return self._refusal(open_request.request, user)

    def needed(self, open_request: OpenRequest) -> dict[str, int]:
        return {signing.ROLE_COUNCIL: QUORUM - len(open_request.request.votes)}

    def key_of(self, payload: Mapping[str, Any], seq: int) -> str:
        return str(payload.get("request_id"))

    # --- the page and the API (protocol.KindPages)
    def page_title(self, request: Any) -> str:
        return self.title

    def detail(self, key: str) -> Notice | None:
        rows = GovernedRequest.objects.filter(kind=self.name, subject=str(key))
        return next(iter(self._notices(list(rows.select_related("requested_by")))), None)

    def page_context(self, request: Any, *, user: Any) -> dict[str, Any]:
        refused = self._refusal(request, user) if request.state == "pending" else None
        blocker = f"This notice is {request.state}." if request.state != "pending" else ""
        if refused is not None:
            blocker = f"{refused.code}: {refused.message}"
        return {"notice": request, "quorum": QUORUM, "blocker": blocker}

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        return {
            "type": PAYLOAD_TYPE,
            "request_id": request.id,
            "text": request.text,
            "decision": signing.APPROVE,
            "role": signing.ROLE_COUNCIL,
            "reason": reason,
        }

    @transaction.atomic
    def record(self, request: Any, *, approver: Any, document: Any) -> VoteRow:
        payload = document.get("payload")
        if isinstance(payload, str):
            payload = json.loads(payload)
        reason = payload.get("reason", "") if isinstance(payload, dict) else ""
        if payload != self.payload_for(request, decision="", role="", reason=str(reason)):
            raise codes.GovernanceError(
                codes.APPROVAL_PAYLOAD_MISMATCH, "the signed payload is not this notice's"
            )
        refused = self._refusal(request, approver)
        if refused is not None:
            raise refused
        key = gov.member_keys(user=approver, usable=True).filter(key_id=document["key_id"])
        found = key.first()
        if found is None:
            raise codes.GovernanceError(codes.APPROVAL_KEY_UNKNOWN, "no usable key of yours")
        public = bytes.fromhex(found.public_key)
        signature = str(document.get("signature", ""))
        if not signing.verify(public, jcs(payload), signature):
            raise codes.GovernanceError(codes.APPROVAL_BAD_SIGNATURE, "the signature fails")
        vote = vote_append(  # the ledger event and its row, once per person and per key
            event_type=VOTED,
            ballots=request.ballots,
            approver=approver,
            key=found,
            payload=payload,
            signature=signature,
            role=signing.ROLE_COUNCIL,
            decision=signing.APPROVE,
            reason=str(reason),
            label=f"notice {request.id}",
            request=request.row,
        )
        if len(request.votes) + 1 >= QUORUM:
            row = request.row
            row.decision_event = ledger.append(
                event_type=APPROVED,
                payload={"request_id": request.id},
                idempotency_key=f"{self.name}-decision:{request.id}",
            )
            row.state, row.decided_at = "approved", row.decision_event.created_at
            row.save(update_fields=["state", "decision_event", "decided_at"])
        return vote

    def done_url(self, request: Any) -> str:
        return reverse("request-detail", args=[self.name, request.id])

    def state_of(self, request: Any) -> str:
        return request.state

    def votes(self, request: Any) -> list[Vote]:
        return list(request.votes)


KIND = ToyNoticeKind()


def register(registry: KindRegistry) -> None:
    registry.register(KIND)
