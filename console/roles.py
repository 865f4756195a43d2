"""The roles and permission matrix: the one place that says who may do what.

The table (role names, actions, which roles allow which action) is `core.ledger.roles`, shared
with governance and the management commands; this module adds what belongs to a web request.
A user's roles are what the ledger says (`governance.membership`: the last role event naming
them); a user may hold several. Every view, API endpoint and task entry point asks
`can(user, action)` or goes through one of the `access_*_by_id` functions at the bottom, never
the ORM directly.

Rules that are not a plain "role X may do Y":

* Admin and council are *strong* roles: they count only once the session is verified with a
  second factor (TOTP, django-otp). A token-authenticated API client or an unverified session
  acts with its other roles only. Nothing else in the code base needs to know about 2FA.
* Production replay needs auditor and admin held together (`REPLAY_PRODUCTION`). Whoever
  holds only one of them asks the council instead (`REPLAY_PRODUCTION_REQUEST`); a council
  quorum's signed approvals (`REPLAY_PRODUCTION_APPROVE`) queue that one run for them, so a
  council-approved production replay is never started from the mode menu.
* Superuser and staff flags grant nothing here: only roles do.

Missing versus forbidden: the access functions check the role *before* they look anything
up, so a user without the role gets 403 whether or not the object exists, and a user with the
role gets 404 for an object that does not exist. Neither answer reveals existence to someone
who may not see it.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import Http404

from governance import membership
from governance.models import (
    ForceContinueRequest,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
)
from governance.selectors import api_token_of
from replay.models import ReplayRun, Trace
from replay.prepared import Prepared
from replay.selectors import UPLOAD_PREFIX, trace_by_upload_id, trace_to_replay

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    User = AbstractBaseUser | AnonymousUser

# The table itself (role names, actions, MATRIX, COMBINATIONS) is core.ledger.roles, so the
# management commands and governance use the very same one; its names stay importable here.
from core.ledger.roles import (
    ACTIONS,
    ADMIN,
    API_TOKENS_OWN,
    AUDITOR,
    BROWSE,
    COMBINATIONS,
    COUNCIL,
    DSR,
    DSR_APPROVE,
    FORCE_CONTINUE_APPROVE_ADMIN,
    FORCE_CONTINUE_APPROVE_COUNCIL,
    FORCE_CONTINUE_REQUEST,
    HALT_CLEAR,
    INBOX,
    INCIDENT_DECLARE,
    LEDGER_VERIFY_FULL,
    LEGAL,
    MANAGE,
    MATRIX,
    MODE_AUDIT,
    MODE_PRODUCTION,
    MODE_SANDBOX,
    OPERATOR,
    PII_REVEAL,
    REPLAY_AUDIT,
    REPLAY_PRODUCTION,
    REPLAY_PRODUCTION_APPROVE,
    REPLAY_PRODUCTION_REQUEST,
    ROLE_GRANT_APPROVE,
    ROLES,
    SIGNING_KEY_REGISTER,
    STRONG_ROLES,
    TRACE_NOTE_ADD,
    UPLOAD,
    VIEWER,
    allowed,
)

__all__ = [
    "ACTIONS",
    "ADMIN",
    "API_TOKENS_OWN",
    "AUDITOR",
    "BROWSE",
    "COMBINATIONS",
    "COUNCIL",
    "DSR",
    "DSR_APPROVE",
    "FORCE_CONTINUE_APPROVE_ADMIN",
    "FORCE_CONTINUE_APPROVE_COUNCIL",
    "FORCE_CONTINUE_REQUEST",
    "HALT_CLEAR",
    "INBOX",
    "INCIDENT_DECLARE",
    "LEDGER_VERIFY_FULL",
    "LEGAL",
    "MANAGE",
    "MATRIX",
    "MODE_AUDIT",
    "MODE_PRODUCTION",
    "MODE_SANDBOX",
    "OPERATOR",
    "PII_REVEAL",
    "REPLAY_AUDIT",
    "REPLAY_PRODUCTION",
    "REPLAY_PRODUCTION_APPROVE",
    "REPLAY_PRODUCTION_REQUEST",
    "ROLES",
    "ROLE_GRANT_APPROVE",
    "SIGNING_KEY_REGISTER",
    "STRONG_ROLES",
    "TRACE_NOTE_ADD",
    "UPLOAD",
    "VIEWER",
]


def held_roles(user: User) -> frozenset[str]:
    """Every role the user holds per the ledger (governance.membership), verified or not."""
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return frozenset()
    return membership.roles_held(user)


def is_verified(user: User) -> bool:
    """True when the OTP middleware verified this session with a second factor."""
    check = getattr(user, "is_verified", None)
    return bool(check and check())


def needs_second_factor(user: User) -> bool:
    """The user holds a strong role that is inert until the session is verified."""
    return bool(held_roles(user) & STRONG_ROLES) and not is_verified(user)


def roles(user: User) -> frozenset[str]:
    """The roles in effect for this request: strong roles only with a verified session."""
    held = held_roles(user)
    if held & STRONG_ROLES and not is_verified(user):
        return held - STRONG_ROLES
    return held


def can(user: User, action: str) -> bool:
    return allowed(roles(user), action)


def require(user: User, action: str) -> None:
    if not can(user, action):
        raise PermissionDenied(f"your roles do not allow {action.replace('_', ' ')}")


def replay_modes_for(user: User) -> list[str]:
    """The replay modes this user may start, in the order the page offers them.

    Without production here, `can(user, REPLAY_PRODUCTION_REQUEST)` says whether the page
    offers asking the council for one.
    """
    modes: list[str] = []
    if can(user, REPLAY_AUDIT):
        modes += [MODE_AUDIT, MODE_SANDBOX]
    if can(user, REPLAY_PRODUCTION):
        modes.append(MODE_PRODUCTION)
    return modes


# --- governed requests of any kind (governance.requests, protocol.KindPages) ---------------


def kind_capacities(user: User, kind: Any) -> list[str]:
    """The capacities ``user`` may sign ``kind`` in (``kind.signed_in``), in its order."""
    return [capacity for capacity, action in kind.signed_in.items() if can(user, action)]


def require_kind_sight(user: User, kind: Any) -> None:
    """``user`` may see ``kind``'s requests: one of ``kind.seen_by``."""
    if len(kind.seen_by) == 1:
        require(user, kind.seen_by[0])
    elif not any(can(user, action) for action in kind.seen_by):
        raise PermissionDenied(f"your roles do not allow seeing {kind.what} requests")


def require_kind_signing(user: User, kind: Any, capacity: object = None) -> None:
    """``user`` may sign ``kind`` at all, and in ``capacity`` where a payload names one."""
    signed = kind.signed_in
    if isinstance(capacity, str) and capacity in signed:
        require(user, signed[capacity])
    elif len(signed) == 1:
        require(user, next(iter(signed.values())))
    elif not kind_capacities(user, kind):
        raise PermissionDenied(f"your roles do not allow signing a {kind.name}")


def access_governed_request(user: User, kind: Any, key: str) -> Any:
    """One request of ``kind`` by its key: the role check first (403 whether or not it
    exists), then the lookup (404)."""
    require_kind_sight(user, kind)
    found = kind.detail(key)
    if found is None:
        raise Http404(f"no such {kind.what}")
    return found


# --- access functions: one per protected object ------------------------------------------
# Each checks the role first (403 whether or not the object exists), then looks up (404).


#: a stored trace by its file's sha256 (``.first()``: the model's ordering, one row)
TRACE_BY_SHA256: Prepared[Trace] = Prepared(
    lambda sha256: Trace.objects.select_related("blob", "uploaded_by").filter(blob__sha256=sha256)[
        :1
    ],
    sha256=str,
)


def access_trace_by_id(user: User, trace_ref: str, action: str = BROWSE) -> Trace:
    """A stored trace by the sha256 of its file (exact), or by trace id (the newest copy).

    Several files may carry one trace id (a tampered copy is evidence in its own right), so
    pages link to a stored trace by its content address.
    """
    require(user, action)
    ref = str(trace_ref).strip().lower()
    found = Trace.objects.select_related("blob", "uploaded_by")
    if ref.startswith(UPLOAD_PREFIX):
        trace = trace_by_upload_id(ref)
    elif len(ref) == 64:
        trace = next(iter(TRACE_BY_SHA256(sha256=ref)), None)
    else:
        trace = found.filter(trace_id=ref).order_by("-created_at", "-id").first()
    if trace is None:
        raise Http404("no such trace")
    return trace


def access_trace_to_replay(user: User, trace_ref: str, action: str) -> Trace:
    """The one stored file a replay (or a production replay request) names, after the role
    check: by ``upload:ID``, by sha256, or by a trace id exactly one stored file carries; a
    trace id several files carry raises ``ReplayError(AMBIGUOUS_TRACE_ID)`` naming each copy
    (replay.selectors.trace_to_replay), never the newest by guess."""
    require(user, action)
    trace = trace_to_replay(str(trace_ref))
    if trace is None:
        raise Http404("no such trace")
    return trace


def _by_uuid(user: User, action: str, rows: Any, ref: uuid.UUID | str, what: str) -> Any:
    """The row of ``rows`` with this uuid primary key, after the role check (see above)."""
    require(user, action)
    return by_uuid_after_check(rows, ref, what)


def by_uuid_after_check(rows: Any, ref: uuid.UUID | str, what: str) -> Any:
    """The row of ``rows`` with this uuid primary key (404 naming ``what`` when there is
    none), for a caller that has checked the roles first."""
    try:
        key = uuid.UUID(str(ref))
    except ValueError:
        raise Http404(f"no such {what}") from None
    found = rows.filter(id=key).first()
    if found is None:
        raise Http404(f"no such {what}")
    return found


def access_run_by_id(user: User, run_id: uuid.UUID | str, action: str = BROWSE) -> ReplayRun:
    rows = ReplayRun.objects.select_related("trace__blob")
    return _by_uuid(user, action, rows, run_id, "replay")


def access_force_continue_by_id(user: User, request_id: uuid.UUID | str, action: str = BROWSE):
    rows = ForceContinueRequest.objects.select_related("run__trace", "requested_by", "resumed_run")
    return _by_uuid(user, action, rows, request_id, "force-continue request")


def access_production_request_by_id(user: User, request_id: uuid.UUID | str, action: str = BROWSE):
    rows = ProductionReplayRequest.objects.select_related("trace__blob", "requested_by", "run")
    return _by_uuid(user, action, rows, request_id, "production replay request")


def access_member_key_by_id(user: User, key_id: str, action: str = MANAGE):
    require(user, action)
    found = MemberKey.objects.filter(key_id=str(key_id)).select_related("user").first()
    if found is None:
        raise Http404("no such key")
    return found


def access_api_token_by_id(user: User, token_id: int | str, action: str = API_TOKENS_OWN):
    """One of the user's own API tokens: someone else's is a 404, exactly like a missing one."""
    require(user, action)
    found = api_token_of(user=user, token_id=token_id)
    if found is None:
        raise Http404("no such API token")
    return found


def may_see_role_grants(user: User) -> bool:
    """Admins file role grants and the council signs them: both see them."""
    return can(user, MANAGE) or can(user, ROLE_GRANT_APPROVE)


def access_role_grant_by_id(user: User, request_id: uuid.UUID | str, action: str | None = None):
    """A role grant request; without ``action``, for seeing it (admins and the council)."""
    if action is None and not may_see_role_grants(user):
        raise PermissionDenied("your roles do not allow seeing role grants")
    if action is not None:
        require(user, action)
    try:
        key = uuid.UUID(str(request_id))
    except ValueError:
        raise Http404("no such role grant") from None
    found = RoleGrantRequest.objects.select_related("user", "requested_by").filter(id=key).first()
    if found is None:
        raise Http404("no such role grant")
    return found


def access_user_by_id(user: User, user_id: int | str, action: str = MANAGE):
    require(user, action)
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        raise Http404("no such user") from None
    found = get_user_model().objects.filter(pk=pk).first()
    if found is None:
        raise Http404("no such user")
    return found
