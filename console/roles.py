"""The roles and permission matrix: the one place that says who may do what.

Roles are Django Groups named after the constants below; a user may hold several. Every view,
API endpoint and task entry point asks `can(user, action)` or goes through one of the
`access_*_by_id` functions at the bottom, never the ORM directly.

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
from typing import TYPE_CHECKING, Any, Final

from django.core.exceptions import PermissionDenied
from django.http import Http404

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from replay.models import ReplayRun, Trace

    User = AbstractBaseUser | AnonymousUser

# --- roles (Django Group names) ------------------------------------------------------------
VIEWER: Final = "viewer"
AUDITOR: Final = "auditor"
OPERATOR: Final = "operator"
ADMIN: Final = "admin"
COUNCIL: Final = "council"
LEGAL: Final = "legal"

ROLES: Final = (VIEWER, AUDITOR, OPERATOR, ADMIN, COUNCIL, LEGAL)
#: roles that count only in a session verified with TOTP
STRONG_ROLES: Final = frozenset({ADMIN, COUNCIL})

# --- actions -------------------------------------------------------------------------------
BROWSE: Final = "browse"  # traces, reports (PII redacted), ledger, dashboard
UPLOAD: Final = "upload"
REPLAY_AUDIT: Final = "replay_audit"  # audit and sandbox modes
REPLAY_PRODUCTION: Final = "replay_production"
REPLAY_PRODUCTION_REQUEST: Final = "replay_production_request"  # ask the council
REPLAY_PRODUCTION_APPROVE: Final = "replay_production_approve"  # a council signature
FORCE_CONTINUE_REQUEST: Final = "force_continue_request"
FORCE_CONTINUE_APPROVE_ADMIN: Final = "force_continue_approve_admin"
FORCE_CONTINUE_APPROVE_COUNCIL: Final = "force_continue_approve_council"
HALT_CLEAR: Final = "halt_clear"  # a council quorum; each member adds a signed vote
INCIDENT_DECLARE: Final = "incident_declare"  # SECURITY_INCIDENT: halts until a council clear
DSR: Final = "dsr"  # open / export Data Subject Requests
PII_REVEAL: Final = "pii_reveal"  # every reveal is logged as a governance event
MANAGE: Final = "manage"  # users, roles, keys
SIGNING_KEY_REGISTER: Final = "signing_key_register"  # register one's own public key
API_TOKENS_OWN: Final = "api_tokens_own"  # create, list and revoke one's own API tokens

ACTIONS: Final = (
    BROWSE,
    UPLOAD,
    REPLAY_AUDIT,
    REPLAY_PRODUCTION,
    REPLAY_PRODUCTION_REQUEST,
    REPLAY_PRODUCTION_APPROVE,
    FORCE_CONTINUE_REQUEST,
    FORCE_CONTINUE_APPROVE_ADMIN,
    FORCE_CONTINUE_APPROVE_COUNCIL,
    HALT_CLEAR,
    INCIDENT_DECLARE,
    DSR,
    PII_REVEAL,
    MANAGE,
    SIGNING_KEY_REGISTER,
    API_TOKENS_OWN,
)

#: action -> the roles that grant it on their own (ARCHITECTURE.md, "Roles")
MATRIX: Final[dict[str, frozenset[str]]] = {
    BROWSE: frozenset(ROLES),
    UPLOAD: frozenset({AUDITOR, OPERATOR, ADMIN}),
    REPLAY_AUDIT: frozenset({AUDITOR, OPERATOR, ADMIN}),
    REPLAY_PRODUCTION: frozenset(),  # only the combination below
    REPLAY_PRODUCTION_REQUEST: frozenset({AUDITOR, ADMIN}),
    REPLAY_PRODUCTION_APPROVE: frozenset({COUNCIL}),
    FORCE_CONTINUE_REQUEST: frozenset({AUDITOR, ADMIN}),
    FORCE_CONTINUE_APPROVE_ADMIN: frozenset({ADMIN}),
    FORCE_CONTINUE_APPROVE_COUNCIL: frozenset({COUNCIL}),
    HALT_CLEAR: frozenset({COUNCIL}),
    INCIDENT_DECLARE: frozenset({ADMIN}),
    DSR: frozenset({ADMIN, LEGAL}),
    PII_REVEAL: frozenset({ADMIN}),
    MANAGE: frozenset({ADMIN}),
    SIGNING_KEY_REGISTER: frozenset({ADMIN, COUNCIL}),
    API_TOKENS_OWN: frozenset(ROLES),  # anyone with a role, for their own tokens only
}

#: action -> sets of roles that grant it only when held together
COMBINATIONS: Final[dict[str, tuple[frozenset[str], ...]]] = {
    REPLAY_PRODUCTION: (frozenset({AUDITOR, ADMIN}),),
}

MODE_AUDIT: Final = "audit"
MODE_SANDBOX: Final = "sandbox"
MODE_PRODUCTION: Final = "production"

_CACHE_ATTR = "_console_roles"


def held_roles(user: User) -> frozenset[str]:
    """Every role the user holds through group membership, verified or not."""
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return frozenset()
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is None:
        names = user.groups.filter(name__in=ROLES).values_list("name", flat=True)  # type: ignore[union-attr]
        cached = frozenset(names)
        setattr(user, _CACHE_ATTR, cached)
    return cached


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
    if action not in MATRIX:
        raise ValueError(f"unknown action {action!r}")
    effective = roles(user)
    if effective & MATRIX[action]:
        return True
    return any(combo <= effective for combo in COMBINATIONS.get(action, ()))


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


#: the capacity a force-continue approval is signed in -> the action that allows signing in it
#: (the capacities are the governance payload's `role`, spelled as the role names)
SIGNING_CAPACITIES: Final = {
    ADMIN: FORCE_CONTINUE_APPROVE_ADMIN,
    COUNCIL: FORCE_CONTINUE_APPROVE_COUNCIL,
}
MESSAGE_CANNOT_SIGN: Final = "your roles do not allow signing a force-continue"


def signing_capacities(user: User) -> list[str]:
    """The capacities this user may sign a force-continue in, in the order pages offer them."""
    return [capacity for capacity, action in SIGNING_CAPACITIES.items() if can(user, action)]


def require_signing(user: User, capacity: object = None) -> None:
    """The user may sign a force-continue at all (no capacity given) or in this capacity."""
    if isinstance(capacity, str) and capacity in SIGNING_CAPACITIES:
        require(user, SIGNING_CAPACITIES[capacity])
    elif not signing_capacities(user):
        raise PermissionDenied(MESSAGE_CANNOT_SIGN)


# --- access functions: one per protected object ------------------------------------------
# Each checks the role first (403 whether or not the object exists), then looks up (404).


def access_trace_by_id(user: User, trace_ref: str, action: str = BROWSE) -> Trace:
    """A stored trace by the sha256 of its file (exact), or by trace id (the newest copy).

    Several files may carry one trace id (a tampered copy is evidence in its own right), so
    pages link to a stored trace by its content address.
    """
    from replay.models import Trace

    require(user, action)
    ref = str(trace_ref).strip().lower()
    found = Trace.objects.select_related("blob", "uploaded_by")
    if len(ref) == 64:
        trace = found.filter(blob__sha256=ref).first()
    else:
        trace = found.filter(trace_id=ref).order_by("-created_at", "-id").first()
    if trace is None:
        raise Http404("no such trace")
    return trace


def _by_uuid(user: User, action: str, rows: Any, ref: uuid.UUID | str, what: str) -> Any:
    """The row of ``rows`` with this uuid primary key, after the role check (see above)."""
    require(user, action)
    try:
        key = uuid.UUID(str(ref))
    except ValueError:
        raise Http404(f"no such {what}") from None
    found = rows.filter(id=key).first()
    if found is None:
        raise Http404(f"no such {what}")
    return found


def access_run_by_id(user: User, run_id: uuid.UUID | str, action: str = BROWSE) -> ReplayRun:
    from replay.models import ReplayRun

    rows = ReplayRun.objects.select_related("trace__blob")
    return _by_uuid(user, action, rows, run_id, "replay")


def access_force_continue_by_id(user: User, request_id: uuid.UUID | str, action: str = BROWSE):
    from governance.models import ForceContinueRequest

    rows = ForceContinueRequest.objects.select_related("run__trace", "requested_by", "resumed_run")
    return _by_uuid(user, action, rows, request_id, "force-continue request")


def access_production_request_by_id(user: User, request_id: uuid.UUID | str, action: str = BROWSE):
    from governance.models import ProductionReplayRequest

    rows = ProductionReplayRequest.objects.select_related("trace__blob", "requested_by", "run")
    return _by_uuid(user, action, rows, request_id, "production replay request")


def access_halt_by_seq(user: User, halt_seq: int, action: str = BROWSE):
    from governance.models import Halt

    require(user, action)
    found = Halt.objects.filter(seq=int(halt_seq)).first()
    if found is None:
        raise Http404("no such halt")
    return found


def access_member_key_by_id(user: User, key_id: str, action: str = MANAGE):
    from governance.models import MemberKey

    require(user, action)
    found = MemberKey.objects.filter(key_id=str(key_id)).select_related("user").first()
    if found is None:
        raise Http404("no such key")
    return found


def access_api_token_by_id(user: User, token_id: int | str, action: str = API_TOKENS_OWN):
    """One of the user's own API tokens: someone else's is a 404, exactly like a missing one."""
    from governance.selectors import api_token_of

    require(user, action)
    found = api_token_of(user=user, token_id=token_id)
    if found is None:
        raise Http404("no such API token")
    return found


def access_user_by_id(user: User, user_id: int | str, action: str = MANAGE):
    from django.contrib.auth import get_user_model

    require(user, action)
    try:
        pk = int(user_id)
    except (TypeError, ValueError):
        raise Http404("no such user") from None
    found = get_user_model().objects.filter(pk=pk).first()
    if found is None:
        raise Http404("no such user")
    return found
