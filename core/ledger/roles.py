"""The roles and permission matrix: the one table that says which role may do what. Pure.

Every path that acts for a person asks this table: the pages and the API through
``console.roles`` (which adds the request-specific rule that strong roles count only in a
session verified with a second factor), and the management commands that take ``--user``
through ``governance.membership`` (with the roles the ledger says the person holds). Both
import it from here, so governance and the commands never import the console.

A user may hold several roles. Most actions are granted by any one role in ``MATRIX``;
production replay only by the roles in ``COMBINATIONS`` held together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

# --- roles ---------------------------------------------------------------------------------
VIEWER: Final = "viewer"
AUDITOR: Final = "auditor"
OPERATOR: Final = "operator"
ADMIN: Final = "admin"
COUNCIL: Final = "council"
LEGAL: Final = "legal"

ROLES: Final = (VIEWER, AUDITOR, OPERATOR, ADMIN, COUNCIL, LEGAL)
#: roles that count only in a session verified with TOTP; granting one needs a council quorum
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
#: sign the release of a DSR bundle or the execution of an erasure (four eyes: never the
#: requester); admin by default, a council quorum where ``DSR_APPROVAL_BY`` says "council"
DSR_APPROVE: Final = "dsr_approve"
PII_REVEAL: Final = "pii_reveal"  # every reveal is logged as a governance event
MANAGE: Final = "manage"  # users, roles, keys
ROLE_GRANT_APPROVE: Final = "role_grant_approve"  # a council signature on an admin/council grant
SIGNING_KEY_REGISTER: Final = "signing_key_register"  # register one's own public key
API_TOKENS_OWN: Final = "api_tokens_own"  # create, list and revoke one's own API tokens
LEDGER_VERIFY_FULL: Final = "ledger_verify_full"  # a background re-verification from seq 1
INBOX: Final = "inbox"  # the governed requests waiting for one's own signature
TRACE_NOTE_ADD: Final = "trace_note_add"  # a TRACE_NOTE; everyone who browses reads them

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
    DSR_APPROVE,
    PII_REVEAL,
    MANAGE,
    ROLE_GRANT_APPROVE,
    SIGNING_KEY_REGISTER,
    API_TOKENS_OWN,
    LEDGER_VERIFY_FULL,
    INBOX,
    TRACE_NOTE_ADD,
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
    DSR_APPROVE: frozenset({ADMIN, COUNCIL}),  # the capacity required: dsr.conf.approval_by()
    PII_REVEAL: frozenset({ADMIN}),
    MANAGE: frozenset({ADMIN}),
    ROLE_GRANT_APPROVE: frozenset({COUNCIL}),
    SIGNING_KEY_REGISTER: frozenset({ADMIN, COUNCIL}),
    API_TOKENS_OWN: frozenset(ROLES),  # anyone with a role, for their own tokens only
    LEDGER_VERIFY_FULL: frozenset({ADMIN}),  # minutes of a worker; checking new events: BROWSE
    INBOX: frozenset(ROLES),  # anyone with a role; it lists only what they may sign
    TRACE_NOTE_ADD: frozenset({AUDITOR, ADMIN}),
}

#: action -> sets of roles that grant it only when held together
COMBINATIONS: Final[dict[str, tuple[frozenset[str], ...]]] = {
    REPLAY_PRODUCTION: (frozenset({AUDITOR, ADMIN}),),
}

MODE_AUDIT: Final = "audit"
MODE_SANDBOX: Final = "sandbox"
MODE_PRODUCTION: Final = "production"

#: replay mode -> the action that allows starting a replay in it
MODE_ACTIONS: Final[dict[str, str]] = {
    MODE_AUDIT: REPLAY_AUDIT,
    MODE_SANDBOX: REPLAY_AUDIT,
    MODE_PRODUCTION: REPLAY_PRODUCTION,
}


def allowed(roles: Iterable[str], action: str) -> bool:
    """True when someone holding ``roles`` may do ``action`` (ValueError for an unknown one)."""
    if action not in MATRIX:
        raise ValueError(f"unknown action {action!r}")
    held = frozenset(roles)
    if held & MATRIX[action]:
        return True
    return any(combo <= held for combo in COMBINATIONS.get(action, ()))


def describe(action: str) -> str:
    """An action in words, for refusals ("replay production")."""
    return action.replace("_", " ")
