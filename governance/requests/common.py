"""What the three council request kinds (force-continue, production replay, role grant) share:
their rows are ``governance.models.CouncilRequest``, their filing and votes are ledger events
named by ``request_id``, and a vote's refusal is ``governance.services.votes.vote_refusal``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar

from django.urls import reverse

from core.ledger import roles as matrix
from core.ledger import signing
from core.ledger.requests import KindCodes, OpenRequest, Vote, vote_of_ballot
from governance import selectors
from governance.models import CouncilRequest
from governance.services.votes import vote_refusal


def signer_roles_of(capacities: Mapping[str, str]) -> frozenset[str]:
    """The roles that may sign in one of ``capacities`` (capacity -> the roles-matrix action
    that allows signing in it): a capacity is a role, and counts where the matrix grants it."""
    return frozenset(role for role, action in capacities.items() if role in matrix.MATRIX[action])


class CouncilRequestKind:
    """A kind whose requests are rows of a ``CouncilRequest`` model."""

    name: str
    label: str
    codes: KindCodes
    summary: str
    #: the model and what its rows select with it
    model: type[CouncilRequest]
    related: tuple[str, ...] = ("requested_by",)
    #: capacity (the role a vote is signed in) -> the roles-matrix action allowing it
    signed_in: ClassVar[Mapping[str, str]]
    admins_required = 0
    tally: Callable[..., Any]
    #: its signed votes on one request, from the ledger (``request=``), never from the rows
    ballots: Callable[..., Any]
    #: what the generic vote recording (``governance.services.votes``) reads from the kind
    #: instead of being handed callbacks: the ``type`` its signed vote payloads carry, the
    #: role every vote is signed in (None: the signer names it, one of ``signed_in``), and
    #: the row's columns its ``on_approval`` sets
    payload_type: str
    vote_role: str | None = signing.ROLE_COUNCIL
    approval_saves: tuple[str, ...] = ()

    # --- what its pages need: one list and one approval page for every kind
    # (console/views/requests.py, templates/console/request_list.html, request_approve.html;
    # the approval page's attributes are those of ``protocol.KindPages``)
    has_pages = True
    has_list = True
    heading_partial = ""
    body_partial = "console/requests/council_body.html"
    sign_heading = "Sign"
    signed_message = "Your signed decision is recorded in the ledger."
    decisions: tuple[str, ...] = signing.DECISIONS
    #: the approval page's heading, the list's heading, hint and what it says when empty
    title: str
    list_title: str
    list_hint = ""
    list_empty: str
    #: what the page calls one row ("This grant is approved", "no such role grant")
    noun = "request"
    what: str
    #: the template of its "What is asked" facts (``asked`` is the row)
    summary_partial: str
    #: the roles-matrix actions that let someone see its pages (any one of them)
    seen_by: tuple[str, ...] = (matrix.BROWSE,)
    #: what the approval page selects with a row
    page_related: tuple[str, ...] = ("requested_by",)
    #: the navigation section its pages are under
    nav_section: str
    #: what a filer who may sign is told
    own_message = "You filed this request: someone else must approve it."
    #: (link id, words) of the run its approval started, where it starts one
    outcome: tuple[str, str] | None = None

    def page_title(self, request: Any) -> str:
        return self.title

    def detail(self, key: str) -> Any:
        """The request ``key`` names (its uuid), or None."""
        try:
            pk = uuid.UUID(str(key))
        except ValueError:
            return None
        return self.model.objects.select_related(*self.page_related).filter(id=pk).first()

    def page_blocker(self, request: Any, *, user: Any, approvals: list[Any], expired: bool) -> str:
        """Why ``user`` may not sign ``request`` now, in words, or ""."""
        if request.state != self.model.State.PENDING:
            return f"This {self.noun} is {request.state}: it can no longer be signed."
        if expired:
            return f"This {self.noun} expired at {signing.format_time(request.expiry())}."
        if request.requested_by_id == user.pk:
            return self.own_message
        extra = self.blocker_of(request, user=user)
        if extra:
            return extra
        if any(a.approver_id == user.pk for a in approvals):
            return f"You have already signed this {self.noun}."
        return ""

    def page_context(self, request: Any, *, user: Any) -> dict[str, Any]:
        """What its approval page's body (``body_partial``) reads, with ``blocker``."""
        approvals = self.ballots(request=request)  # the ledger's votes, not the rows
        expired = selectors.request_is_expired(request=request)
        return {
            **self.page_facts(request),
            "tally": self.tally(request=request, ballots=approvals),
            "approvals": approvals,
            "expired": expired,
            "outcome_run_id": self.outcome_run_id(request),
            "blocker": self.page_blocker(request, user=user, approvals=approvals, expired=expired),
        }

    def done_url(self, request: Any) -> str:
        return reverse("request-detail", args=[self.name, request.id])

    def state_of(self, request: Any) -> str:
        if request.state == self.model.State.PENDING and selectors.request_is_expired(
            request=request
        ):
            return "expired"
        return str(request.state)

    def votes(self, request: Any) -> list[Vote]:
        return [vote_of_ballot(b) for b in self.ballots(request=request)]

    def rows(self) -> Any:
        """Its requests for the list, newest first."""
        return self.model.objects.select_related(*self.related).order_by("-created_at")

    def payload_for(self, request: Any, *, decision: str, role: str, reason: str) -> dict:
        """The exact payload a signer signs (its service's ``*_payload_for``)."""
        raise NotImplementedError

    def record(self, request: Any, *, approver: Any, document: Any) -> Any:
        """Record one signed vote (its service's ``*_approval_record``); refuses with a
        ``GovernanceError``."""
        raise NotImplementedError

    def on_approval(self, request: Any) -> None:
        """What the request asked for, done once its approval is in the ledger (its
        ``decision_event`` is set): called by ``votes._request_decide``."""
        raise NotImplementedError

    def page_facts(self, request: Any) -> dict[str, Any]:
        """What its summary partial reads besides the row."""
        return {}

    def outcome_run_id(self, request: Any) -> Any:
        return None

    def blocker_of(self, request: Any, *, user: Any) -> str:
        """Why ``user`` may not sign ``request`` beyond the common reasons, or ""."""
        return ""

    def signer_roles(self) -> frozenset[str]:
        return signer_roles_of(self.signed_in)

    def capacities(self, open_request: OpenRequest) -> Mapping[str, str]:
        return self.signed_in

    def subject(self, request: Any) -> str:
        raise NotImplementedError

    def open_requests(self, *, now: datetime) -> list[OpenRequest]:
        """Pending requests whose row has not expired (a row only shortens the signed expiry),
        with their signed filings and votes: three queries whatever their number."""
        rows = list(
            self.model.objects.filter(state=CouncilRequest.State.PENDING, expires_at__gt=now)
            .select_related(*self.related)
            .order_by("created_at")
        )
        filings = selectors.request_filings(requests=rows)
        ballots = self.ballots_of_rows(rows, filings=filings)
        found = []
        for row in rows:
            expires_at = selectors.request_expiry(request=row, filing=filings[row.id])
            if now >= expires_at:
                continue
            found.append(
                OpenRequest(
                    kind=self.name,
                    key=str(row.id),
                    subject=self.subject(row),
                    filed_by=row.filer_name(),
                    filed_at=row.created_at,
                    url=reverse("request-detail", args=[self.name, row.id]),
                    request=row,
                    expires_at=expires_at,
                    facts={"ballots": ballots[str(row.id)]},
                )
            )
        return found

    def ballots_of_rows(
        self, rows: list[Any], *, filings: Mapping[Any, Any] | None = None
    ) -> dict[str, list[Any]]:
        """The signed votes on each of ``rows`` (by request id), from the ledger, as
        ``ballots`` reads them one request at a time: two queries whatever their number."""
        if filings is None:
            filings = selectors.request_filings(requests=rows)
        after = {str(r.id): (f.seq if (f := filings[r.id]) is not None else 0) for r in rows}
        return selectors.ballots_by_subject(
            event_type=self.codes.vote, field="request_id", after=after
        )

    def refusal(
        self,
        open_request: OpenRequest,
        *,
        user: Any,
        role: str,
        now: datetime,
        history: tuple[tuple[int, frozenset[str]], ...],
    ) -> Exception | None:
        return vote_refusal(
            open_request.request,
            approver=user,
            role=role,
            now=now,
            ballots=open_request.facts["ballots"],
            expires_at=open_request.expires_at,
            history=history,
        )

    def needed(self, open_request: OpenRequest) -> dict[str, int]:
        result = self.tally(request=open_request.request, ballots=open_request.facts["ballots"])
        return {
            signing.ROLE_ADMIN: result.admins_required - result.admins,
            signing.ROLE_COUNCIL: result.council_required - result.council,
        }

    def key_of(self, payload: Mapping[str, Any], seq: int) -> str:
        return str(payload.get("request_id"))

    def quorum(self) -> str:
        from governance import conf

        council = f"{conf.council_quorum()} council signature(s)"
        return f"1 admin signature and {council}" if self.admins_required else council
