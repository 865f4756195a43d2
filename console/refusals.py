"""How a refusal from a service reads over HTTP: its status code, for the pages and the API.

Replay verdict codes (core.errors) and governance refusals (core.ledger.codes) keep their
exact strings; this module only decides the status that carries them.
"""

from __future__ import annotations

from core.ledger import codes

_FORBIDDEN = {
    codes.APPROVAL_SELF,
    codes.APPROVAL_ROLE,
    codes.REQUEST_ROLE,
    codes.ROLE_SELF,
    codes.DSR_SELF_APPROVAL,
}
_CONFLICT = {
    codes.REQUEST_CLOSED,
    codes.REQUEST_PENDING,
    codes.REQUEST_ALREADY_APPROVED,
    codes.REQUEST_NOT_DIVERGED,
    codes.REQUEST_NOT_REPLAYABLE,
    codes.REQUEST_HALTED,
    codes.APPROVAL_DUPLICATE_PERSON,
    codes.APPROVAL_DUPLICATE_KEY,
    codes.APPROVAL_EXPIRED,
    codes.KEY_DUPLICATE,
    codes.KEY_STATE,
    codes.HALT_NOT_ACTIVE,
    codes.LEDGER_EMPTY,
    codes.LEDGER_BROKEN,
    codes.LEDGER_UNVERIFIED,
    codes.ROLES_ALREADY_INSTALLED,
    codes.DSR_IDENTITY_UNVERIFIED,
    codes.DSR_ALREADY_APPROVED,
    codes.DSR_STATE,
    codes.DSR_RELEASE_NOT_APPROVED,
    codes.DSR_PLAN_CHANGED,
    codes.RUN_NOT_STALE,
}


_NOT_FOUND = {codes.INCIDENT_TARGET_UNKNOWN}


def governance_status(code: str) -> int:
    if code in _FORBIDDEN:
        return 403
    if code in _NOT_FOUND:
        return 404
    if code in _CONFLICT:
        return 409
    return 400
