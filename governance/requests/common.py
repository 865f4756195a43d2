"""What the three council request kinds (force-continue, production replay, role grant) share:
their rows are ``governance.models.CouncilRequest``, their filing and votes are ledger events
named by ``request_id``, and a vote's refusal is ``governance.services.votes.vote_refusal``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar

from django.urls import reverse

from governance import roles as matrix
from governance import selectors, signing
from governance.models import CouncilRequest
from governance.requests.protocol import KindCodes, OpenRequest
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
    #: the model, what its rows select with it, and its approval page's URL name
    model: type[CouncilRequest]
    related: tuple[str, ...] = ("requested_by",)
    url_name: str
    #: capacity (the role a vote is signed in) -> the roles-matrix action allowing it
    signed_in: ClassVar[Mapping[str, str]]
    admins_required = 0
    tally: Callable[..., Any]

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
        after = {str(r.id): (f.seq if (f := filings[r.id]) is not None else 0) for r in rows}
        ballots = selectors.ballots_by_subject(
            event_type=self.codes.vote, field="request_id", after=after
        )
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
                    filed_by=row.requested_by.get_username(),
                    filed_at=row.created_at,
                    url=reverse(self.url_name, args=[row.id]),
                    request=row,
                    expires_at=expires_at,
                    facts={"ballots": ballots[str(row.id)]},
                )
            )
        return found

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
