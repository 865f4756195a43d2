"""People's roles in the ledger: the installation's first roles, an admin's changes, and the
grants of admin or council that take effect only once a council quorum has signed them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ledger import codes, signing
from core.ledger import roles as matrix
from governance import council, ledger, membership, selectors
from governance.models import GovernanceEvent, RoleGrantRequest, Vote
from governance.services.votes import (
    _council_vote_record,
    _expiry,
    _request_decide,
    _request_file,
    vote_refusal,
)

# --- messages (asserted verbatim in tests) ----------------------------------------------------
ROLE_UNKNOWN_MESSAGE = "{role!r} is not a role (the roles are {roles})"
ROLE_SELF_MESSAGE = "{user} cannot change their own roles: ask another admin"
ROLE_MANAGE_MESSAGE = "{user} does not hold the admin role: only an admin changes roles"
ROLES_ALREADY_INSTALLED_MESSAGE = (
    "the ledger already records roles (seq {seq}): grant roles on the Users page instead"
)
ROLES_INSTALL_EMPTY_MESSAGE = "installation needs at least one admin and one council member"
ROLE_GRANT_PENDING_MESSAGE = "request {request} to grant {user} {roles} is still open"
ROLE_GRANT_SUBJECT_MESSAGE = "{user} cannot sign the grant of roles to themself"
ROLE_GRANT_REASON_MESSAGE = "a grant of admin or council needs a reason"
INSTALL_ACTOR = "system:installation"


@dataclass(frozen=True)
class RoleChange:
    """What a role change did: ``event`` (ROLES_CHANGED) for what took effect at once,
    ``grant`` for the admin or council grant that now awaits a council quorum."""

    event: GovernanceEvent | None
    grant: RoleGrantRequest | None


def _roles_checked(wanted: Iterable[str]) -> list[str]:
    found = sorted(set(wanted))
    for role in found:
        if role not in matrix.ROLES:
            raise codes.GovernanceError(
                codes.ROLE_UNKNOWN,
                ROLE_UNKNOWN_MESSAGE.format(role=role, roles=", ".join(matrix.ROLES)),
            )
    return found


def _roles_payload(user: Any, before: Iterable[str], after: Iterable[str]) -> dict[str, Any]:
    return {
        "user_id": user.pk,
        "username": user.get_username(),
        "roles_before": sorted(before),
        "roles_after": sorted(after),
    }


@transaction.atomic(durable=True)
def roles_install(
    *,
    admins: Sequence[Any],
    council: Sequence[Any],
    others: Sequence[tuple[Any, Iterable[str]]] = (),
    actor_label: str = INSTALL_ACTOR,
) -> list[GovernanceEvent]:
    """Record the installation's first admins and council members (and, from ``others``,
    anyone's other roles, e.g. an upgrade's existing groups) as the ledger's first role events
    (ROLES_INSTALLED, one per person). Once only: refused when the ledger already records any
    role, since from then on every grant of admin or council needs a council quorum."""
    ledger.lock()
    if not admins or not council:
        raise codes.GovernanceError(codes.REQUEST_INVALID, ROLES_INSTALL_EMPTY_MESSAGE)
    first = (
        GovernanceEvent.objects.filter(
            code__in=[codes.code_of(n) for n in codes.ROLE_SETTING_EVENTS]
        )
        .order_by("seq")
        .first()
    )
    if first is not None:
        raise codes.GovernanceError(
            codes.ROLES_ALREADY_INSTALLED, ROLES_ALREADY_INSTALLED_MESSAGE.format(seq=first.seq)
        )
    wanted: dict[int, tuple[Any, set[str]]] = {}
    for role, people in ((matrix.ADMIN, admins), (matrix.COUNCIL, council)):
        for user in people:
            wanted.setdefault(user.pk, (user, set()))[1].add(role)
    for user, held in others:
        checked = _roles_checked(held)
        if checked:  # someone with no role needs no event
            wanted.setdefault(user.pk, (user, set()))[1].update(checked)
    appended = []
    for user, held in sorted(wanted.values(), key=lambda pair: pair[0].get_username()):
        appended.append(
            ledger.append(
                event_type=codes.ROLES_INSTALLED,
                payload={**_roles_payload(user, [], held), "acting_as": "system"},
                actor=None,
                actor_label=actor_label,
            )
        )
        membership.groups_mirror(user, held)
    return appended


@transaction.atomic(durable=True)
def user_roles_change(
    *, actor: Any, user: Any, roles: Iterable[str], reason: str = ""
) -> RoleChange:
    """An admin sets ``user``'s roles to ``roles``.

    Never one's own roles (ROLE_SELF). Revocations and grants of the other roles take effect
    at once with one signed ROLES_CHANGED event naming who changed whom, before and after. A
    grant of admin or council becomes a ROLE_GRANT_REQUEST that a council quorum must sign
    (:func:`role_grant_approval_record`) before it takes effect.
    """
    ledger.lock()
    wanted = set(_roles_checked(roles))
    if actor is None or actor.pk == user.pk:
        name = actor.get_username() if actor is not None else "the system"
        raise codes.GovernanceError(codes.ROLE_SELF, ROLE_SELF_MESSAGE.format(user=name))
    membership.forget(actor)
    if not membership.user_may(actor, matrix.MANAGE):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE, ROLE_MANAGE_MESSAGE.format(user=actor.get_username())
        )
    membership.forget(user)
    before = set(membership.roles_held(user))
    strong_grants = (wanted - before) & matrix.STRONG_ROLES
    at_once = wanted - strong_grants
    event = None
    if at_once != before:
        event = ledger.append(
            event_type=codes.ROLES_CHANGED,
            payload={**_roles_payload(user, before, at_once), "reason": reason.strip()},
            actor=actor,
        )
        membership.groups_mirror(user, at_once)
    grant = None
    if strong_grants:
        grant = _role_grant_file(actor=actor, user=user, grant=strong_grants, reason=reason)
    return RoleChange(event=event, grant=grant)


def _role_grant_file(*, actor: Any, user: Any, grant: set[str], reason: str) -> RoleGrantRequest:
    now = timezone.now()
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, ROLE_GRANT_REASON_MESSAGE)
    open_request = RoleGrantRequest.objects.filter(
        user=user, state=RoleGrantRequest.State.PENDING, expires_at__gt=now
    ).first()
    if open_request is not None:
        raise codes.GovernanceError(
            codes.REQUEST_PENDING,
            ROLE_GRANT_PENDING_MESSAGE.format(
                request=open_request.id,
                user=user.get_username(),
                roles=", ".join(open_request.roles),
            ),
        )
    expires_at = _expiry(None, now)
    request = RoleGrantRequest(
        user=user,
        roles=sorted(grant),
        reason=reason.strip(),
        requested_by=actor,
        expires_at=expires_at,
        created_at=now,
    )
    return _request_file(
        request,
        event_type=codes.ROLE_GRANT_REQUEST,
        idempotency_key=f"role-grant-request:{request.id}",
        subject={
            "user_id": user.pk,
            "username": user.get_username(),
            "grant": sorted(grant),
            "requested_by": actor.get_username(),
        },
    )


def role_grant_payload_for(
    *, request: RoleGrantRequest, decision: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload a council member signs for ``request`` (the page, the API and
    ``governance sign --role-grant``)."""
    return signing.role_grant_payload(
        request_id=str(request.id),
        user_id=request.user_id,
        username=request.user.get_username(),
        grant=list(request.roles),
        requested_by=request.filer_name(),
        decision=decision,
        expires_at=signing.format_time(request.expiry()),
        reason=reason,
    )


@transaction.atomic(durable=True)
def role_grant_approval_record(
    *, request: RoleGrantRequest, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """Record one council member's signed approval or denial of a role grant; on quorum the
    roles take effect (ROLE_GRANT_APPROVED), on the deny threshold ROLE_GRANT_REJECTED.

    Neither the admin who asked nor the person who would get the roles may sign, and the
    signer must have held the council role, per the ledger, before the request was filed.
    """
    ledger.lock()
    request = (
        RoleGrantRequest.objects.select_for_update(of=("self", "governedrequest_ptr"))
        .select_related("user", "requested_by")
        .get(id=request.id)
    )
    _not_the_grantee(request, approver=approver)
    approval = _council_vote_record(request, approver=approver, document=document)
    ballots = selectors.role_grant_ballots(request=request)
    result = selectors.role_grant_tally(request=request, ballots=ballots)
    if result.state != council.PENDING:
        _role_grant_decide(request=request, result=result, ballots=ballots)
    return approval


def _not_the_grantee(request: RoleGrantRequest, *, approver: Any) -> None:
    if approver.pk == request.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF, ROLE_GRANT_SUBJECT_MESSAGE.format(user=approver.get_username())
        )


def role_grant_refusal(
    request: RoleGrantRequest,
    *,
    approver: Any,
    now: datetime,
    ballots: Sequence[selectors.Ballot],
    expires_at: datetime | None = None,
    history: tuple[tuple[int, frozenset[str]], ...] | None = None,
) -> codes.GovernanceError | None:
    """Why ``approver`` may not sign ``request`` now, or None: the checks
    :func:`role_grant_approval_record` makes before it looks at a signature (never the
    person who would get the roles, then ``votes.vote_refusal``)."""
    try:
        _not_the_grantee(request, approver=approver)
    except codes.GovernanceError as refused:
        return refused
    return vote_refusal(
        request,
        approver=approver,
        role=signing.ROLE_COUNCIL,
        now=now,
        ballots=ballots,
        expires_at=expires_at,
        history=history,
    )


def _role_grant_decide(
    *, request: RoleGrantRequest, result: council.Tally, ballots: list[selectors.Ballot]
) -> None:
    user = request.user
    membership.forget(user)
    before = set(membership.roles_held(user))
    after = before if result.state == council.REJECTED else before | set(request.roles)
    payload = {
        "request_id": str(request.id),
        **_roles_payload(user, before, after),
        "grant": list(request.roles),
        "requested_by": request.filer_name(),
        "approval_seqs": [b.seq for b in ballots],
        "council": result.council,
        "denials": result.denials,
    }
    _request_decide(request, result=result, payload=payload)


def role_grant_granted(request: RoleGrantRequest) -> None:
    """What an approved role grant does (its kind's ``on_approval``): the grantee's groups
    mirror the roles its signed decision event says they hold after it."""
    if request.decision_event is None:  # called only once its decision event is appended
        raise ValueError(f"role grant {request.id} has no decision event")
    after = request.decision_event.payload["roles_after"]
    membership.groups_mirror(request.user, after)
