"""Which roles a person holds, as the ledger says: the Django side of ``core.ledger.roles``.

The ledger is the record of who held what: a person's roles are the ``roles_after`` of the
last role-setting event naming them (ROLES_INSTALLED, ROLES_CHANGED, ROLE_GRANT_APPROVED;
``core.ledger.codes.ROLE_SETTING_EVENTS``). The Django Groups of the same names are a mirror
the role services keep in step for the admin site; a group edited any other way (the Django
admin, SQL) grants nothing, because nothing reads the groups to decide.

``roles_held(user, before_seq=S)`` answers for the moment just before event S, which is how
an approval is judged: it counts only in a role the signer held before the request it signs
was filed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from core.ledger import codes
from core.ledger import roles as matrix

_CACHE_ATTR: Final = "_governance_roles"


def _setting_codes() -> list[int]:
    return [codes.code_of(name) for name in codes.ROLE_SETTING_EVENTS]


def roles_held(user: Any, *, before_seq: int | None = None) -> frozenset[str]:
    """The roles an active user holds per the ledger (now, or just before ``before_seq``)."""
    from governance.models import GovernanceEvent

    if user is None or getattr(user, "pk", None) is None or not getattr(user, "is_active", False):
        return frozenset()
    cacheable = before_seq is None
    if cacheable:
        cached = getattr(user, _CACHE_ATTR, None)
        if cached is not None:
            return cached
    events = GovernanceEvent.objects.filter(code__in=_setting_codes(), payload__user_id=user.pk)
    if before_seq is not None:
        events = events.filter(seq__lt=before_seq)
    last = events.order_by("-seq").values_list("payload", flat=True).first()
    held = _roles_of(last)
    if cacheable:
        setattr(user, _CACHE_ATTR, held)
    return held


def _roles_of(payload: Any) -> frozenset[str]:
    """The roles a role-setting event's payload sets (none for no event)."""
    if not isinstance(payload, dict):
        return frozenset()
    return frozenset(payload.get("roles_after") or []) & frozenset(matrix.ROLES)


def roles_history(user: Any) -> tuple[tuple[int, frozenset[str]], ...]:
    """Every role-setting event naming an active user, oldest first, as (seq, roles after):
    one query, for judging many requests at once with :func:`roles_before` (the inbox)."""
    from governance.models import GovernanceEvent

    if user is None or getattr(user, "pk", None) is None or not getattr(user, "is_active", False):
        return ()
    events = GovernanceEvent.objects.filter(code__in=_setting_codes(), payload__user_id=user.pk)
    rows = events.order_by("seq").values_list("seq", "payload")
    return tuple((seq, _roles_of(payload)) for seq, payload in rows)


def roles_before(history: tuple[tuple[int, frozenset[str]], ...], seq: int) -> frozenset[str]:
    """What ``roles_held(user, before_seq=seq)`` says, read from ``roles_history(user)``."""
    held: frozenset[str] = frozenset()
    for event_seq, roles in history:
        if event_seq >= seq:
            break
        held = roles
    return held


def forget(user: Any) -> None:
    """Drop the cached roles of this user object (after a role change)."""
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def user_has_role(user: Any, role: str, *, before_seq: int | None = None) -> bool:
    """True when an active user holds ``role`` per the ledger (now, or before ``before_seq``)."""
    return role in roles_held(user, before_seq=before_seq)


def user_may(user: Any, action: str) -> bool:
    """The roles matrix for a person acting outside a browser session (a command's --user)."""
    return matrix.allowed(roles_held(user), action)


def roles_installed() -> bool:
    """True once any role-setting event is in the ledger (installation has happened)."""
    from governance.models import GovernanceEvent

    return GovernanceEvent.objects.filter(code__in=_setting_codes()).exists()


def groups_mirror(user: Any, roles: Iterable[str]) -> None:
    """Make the user's role groups show ``roles`` (the admin site's view of the ledger)."""
    from django.contrib.auth.models import Group

    wanted = set(roles)
    groups = {g.name: g for g in Group.objects.filter(name__in=matrix.ROLES)}
    for name in matrix.ROLES:
        if name not in groups:
            groups[name] = Group.objects.create(name=name)
    user.groups.remove(*[groups[n] for n in matrix.ROLES if n not in wanted])
    user.groups.add(*[groups[n] for n in matrix.ROLES if n in wanted])
    forget(user)
