"""The inbox: the open requests of every kind that wait for one person's signature.

A request waits for someone when they may sign it in a role that is in effect for them (the
roles matrix, ``core.ledger.roles``: ``roles`` are what the console says is in effect, strong
roles only with a second factor), its kind's refusal (its own service's checks, see
:mod:`core.ledger.requests`) has nothing against it, and a signature in that role is
still missing. Oldest first.

Cheap enough for every page: each kind reads its open requests with a handful of queries
whatever their number, and the person's role history is read once (``roles_history``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.utils import timezone

from core.ledger import roles as matrix
from core.ledger.requests import KindRegistry, RequestKind, needs_in_words
from governance import membership
from governance.requests.builtin import kinds


@dataclass(frozen=True)
class Waiting:
    """One request waiting for this person's signature."""

    kind: str
    label: str
    key: str
    subject: str
    filed_by: str
    filed_at: datetime
    expires_at: datetime | None
    due_date: date | None
    needs: str
    url: str
    #: the roles this person may sign it in
    capacities: tuple[str, ...]


def _usable(capacities: Any, roles: frozenset[str]) -> list[str]:
    return [
        role
        for role, action in capacities.items()
        if role in roles and matrix.allowed(roles, action)
    ]


def signs_anything(roles: frozenset[str], registry: KindRegistry | None = None) -> bool:
    """Whether someone with ``roles`` in effect may sign some kind of request at all."""
    return any(kind.signer_roles() & roles for kind in registry or kinds())


def waiting_for(
    user: Any,
    *,
    roles: frozenset[str],
    registry: Iterable[RequestKind] | None = None,
    now: datetime | None = None,
) -> list[Waiting]:
    """What waits for ``user``'s signature across every kind, oldest first."""
    now = now or timezone.now()
    history: tuple[tuple[int, frozenset[str]], ...] | None = None
    found: list[Waiting] = []
    for kind in registry or kinds():
        if not kind.signer_roles() & roles:
            continue
        for open_request in kind.open_requests(now=now):
            usable = _usable(kind.capacities(open_request), roles)
            if not usable:
                continue
            if history is None:
                history = membership.roles_history(user)
            signable = [
                role
                for role in usable
                if kind.refusal(open_request, user=user, role=role, now=now, history=history)
                is None
            ]
            if not signable:
                continue
            needed = kind.needed(open_request)
            still = tuple(role for role in signable if needed.get(role, 0) > 0)
            if not still:
                continue
            found.append(
                Waiting(
                    kind=kind.name,
                    label=kind.label,
                    key=open_request.key,
                    subject=open_request.subject,
                    filed_by=open_request.filed_by,
                    filed_at=open_request.filed_at,
                    expires_at=open_request.expires_at,
                    due_date=open_request.due_date,
                    needs=needs_in_words(needed),
                    url=open_request.url,
                    capacities=still,
                )
            )
    found.sort(key=lambda w: (w.filed_at, w.kind, w.key))
    return found
