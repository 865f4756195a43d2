"""A toy kind of governed request: a notice that two council members sign, never who filed it.

It is what an installed package adds to bring a kind of its own: this one module (registered
through the entry-point group ``replay_console.request_kinds`` by ``register``), its body
partial (``templates/toykind/body.html``) and its tests. The shared approval page
``/requests/toy-notice/<id>/``, the API ``/api/requests/toy-notice/…`` and the inbox then take
it with no other change.

What it is not: a notice lives in this module's memory, not in the ledger. Ledger event types
are a closed set (``governance.codes.EVENT_TYPES``), so a real kind also adds its filing, vote
and decision codes there; signatures here are checked against the signer's confirmed member
key with ``governance.signing.verify`` as the services check theirs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.urls import reverse
from django.utils import timezone

from governance import codes, signing
from governance import roles as matrix
from governance import selectors as gov
from governance.requests.common import signer_roles_of
from governance.requests.protocol import KindCodes, KindRegistry, OpenRequest, Vote
from replay.canonical import jcs

QUORUM = 2
PAYLOAD_TYPE = "replay-audit-console/toy-notice-approval/v1"


@dataclass
class Notice:
    id: str
    text: str
    filed_by: Any
    filed_at: datetime
    votes: list[Vote] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "approved" if len(self.votes) >= QUORUM else "pending"


class ToyNoticeKind:
    name = "toy-notice"
    label = "Toy notice"
    codes = KindCodes(filed="TOY_NOTICE", vote="TOY_NOTICE_APPROVAL", approved="TOY_NOTICE_OK")
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

    def __init__(self) -> None:
        self.notices: dict[str, Notice] = {}

    def file(self, *, actor: Any, text: str) -> Notice:
        notice = Notice(str(uuid.uuid4()), text, actor, timezone.now())
        self.notices[notice.id] = notice
        return notice

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
            for n in self.notices.values()
            if n.state == "pending"
        ]

    def capacities(self, open_request: OpenRequest) -> Mapping[str, str]:
        return self.signed_in

    def _refusal(self, notice: Notice, user: Any) -> codes.GovernanceError | None:
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
        return self.notices.get(str(key))

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

    def record(self, request: Any, *, approver: Any, document: Any) -> Vote:
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
        if not signing.verify(public, jcs(payload), str(document.get("signature", ""))):
            raise codes.GovernanceError(codes.APPROVAL_BAD_SIGNATURE, "the signature fails")
        vote = Vote(
            seq=len(request.votes) + 1,
            approver=approver.get_username(),
            role=signing.ROLE_COUNCIL,
            key_id=found.key_id,
            decision=signing.APPROVE,
            reason=str(reason),
        )
        request.votes.append(vote)
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
