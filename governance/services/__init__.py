"""Governance writes: every function appends to the ledger, and top-level ones are durable.

Named ``<entity>_<action>``, keyword-only, typed. A refusal raises
``core.ledger.codes.GovernanceError`` with one code and one of the message constants next to
its service (tests compare against these constants), or ``core.errors.ReplayError`` for the
replay verdicts governance enforces (``FORCE_CONTINUE_REQUIRED``).

Roles: these services check what only governance can know (the signer of an approval holds
the role they signed in, the requester does not approve their own request, an admin confirms
someone else's key). Whether a signed-in person may call a service at all is the console's
permission matrix, checked by its views before the call.

One module per concern: ``actors`` (who acts), ``events`` (any event), ``replays`` (governed
runs), ``halts`` (halts and security incidents), ``votes`` (signed votes on a request or a
halt), ``force_continue``, ``production`` (production replays approved by the council),
``keys``, ``api_tokens``, ``personal_data``, ``notes`` (auditors' notes on a trace) and
``user_roles``. This package re-exports what
other code imports from ``governance.services``; anything else is imported from its module.
"""

from __future__ import annotations

from governance import selectors  # tests reach it as services.selectors
from governance.services.actors import CLI_SYSTEM_ACTOR, actor_require
from governance.services.api_tokens import api_token_create, api_token_revoke, api_token_touch
from governance.services.events import EVENT_TYPE_UNKNOWN_MESSAGE, event_append, events_append
from governance.services.force_continue import (
    FORCE_CONTINUE_REQUIRED_MESSAGE,
    REQUEST_ALREADY_APPROVED_MESSAGE,
    REQUEST_NOT_DIVERGED_MESSAGE,
    REQUEST_PENDING_MESSAGE,
    REQUEST_REASON_MESSAGE,
    approval_record,
    force_continue_payload_for,
    force_continue_request_file,
    force_continue_resume,
)
from governance.services.halts import (
    HALT_CLEAR_SELF_MESSAGE,
    HALT_NOT_ACTIVE_MESSAGE,
    INCIDENT_REASON_MESSAGE,
    INCIDENT_ROLE_MESSAGE,
    INCIDENT_TARGET_MESSAGE,
    INCIDENT_TARGET_UNKNOWN_MESSAGE,
    halt_clear_approval_record,
    halt_clear_payload_for,
    security_incident_declare,
    security_incident_record,
)
from governance.services.keys import (
    KEY_CONFIRM_OWN_MESSAGE,
    KEY_CONFIRM_ROLE_MESSAGE,
    KEY_DUPLICATE_MESSAGE,
    KEY_INVALID_MESSAGE,
    KEY_UNANNOUNCED_MESSAGE,
    SERVER_KEY_CURRENT_MESSAGE,
    member_key_confirm,
    member_key_register,
    member_key_revoke,
    signing_key_revoke,
    signing_key_rotate,
)
from governance.services.notes import (
    NOTE_EMPTY_MESSAGE,
    NOTE_PERSONAL_DATA_MESSAGE,
    NOTE_TOO_LONG_MESSAGE,
    trace_note_add,
)
from governance.services.personal_data import pii_access_record
from governance.services.production import (
    PRODUCTION_HALTED_MESSAGE,
    PRODUCTION_PENDING_MESSAGE,
    PRODUCTION_REASON_MESSAGE,
    PRODUCTION_ROLE_MESSAGE,
    production_replay_approval_record,
    production_replay_payload_for,
    production_replay_request_file,
)
from governance.services.replays import (
    RUN_NOT_STALE_MESSAGE,
    replay_request,
    replay_run_govern,
    replay_run_requeue,
    replay_run_stale,
)
from governance.services.user_roles import (
    INSTALL_ACTOR,
    role_grant_approval_record,
    role_grant_payload_for,
    roles_install,
    user_roles_change,
)
from governance.services.votes import (
    APPROVAL_BAD_SIGNATURE_MESSAGE,
    APPROVAL_DUPLICATE_KEY_MESSAGE,
    APPROVAL_DUPLICATE_PERSON_MESSAGE,
    APPROVAL_EXPIRED_MESSAGE,
    APPROVAL_KEY_REVOKED_MESSAGE,
    APPROVAL_KEY_UNCONFIRMED_MESSAGE,
    APPROVAL_KEY_UNKNOWN_MESSAGE,
    APPROVAL_MALFORMED_MESSAGE,
    APPROVAL_OTHER_REQUEST_MESSAGE,
    APPROVAL_PAYLOAD_MISMATCH_MESSAGE,
    APPROVAL_ROLE_MESSAGE,
    APPROVAL_SELF_MESSAGE,
    REQUEST_CLOSED_MESSAGE,
    REQUEST_EXPIRY_MESSAGE,
    # dsr.services checks its signed approvals with these
    _compare,
    _document,
    _require_reason,
    _require_role,
    _require_subject,
    _signed_vote,
    _signer_key,
    _vote_matches,
    kind_named,
)

__all__ = [
    "APPROVAL_BAD_SIGNATURE_MESSAGE",
    "APPROVAL_DUPLICATE_KEY_MESSAGE",
    "APPROVAL_DUPLICATE_PERSON_MESSAGE",
    "APPROVAL_EXPIRED_MESSAGE",
    "APPROVAL_KEY_REVOKED_MESSAGE",
    "APPROVAL_KEY_UNCONFIRMED_MESSAGE",
    "APPROVAL_KEY_UNKNOWN_MESSAGE",
    "APPROVAL_MALFORMED_MESSAGE",
    "APPROVAL_OTHER_REQUEST_MESSAGE",
    "APPROVAL_PAYLOAD_MISMATCH_MESSAGE",
    "APPROVAL_ROLE_MESSAGE",
    "APPROVAL_SELF_MESSAGE",
    "CLI_SYSTEM_ACTOR",
    "EVENT_TYPE_UNKNOWN_MESSAGE",
    "FORCE_CONTINUE_REQUIRED_MESSAGE",
    "HALT_CLEAR_SELF_MESSAGE",
    "HALT_NOT_ACTIVE_MESSAGE",
    "INCIDENT_REASON_MESSAGE",
    "INCIDENT_ROLE_MESSAGE",
    "INCIDENT_TARGET_MESSAGE",
    "INCIDENT_TARGET_UNKNOWN_MESSAGE",
    "INSTALL_ACTOR",
    "KEY_CONFIRM_OWN_MESSAGE",
    "KEY_CONFIRM_ROLE_MESSAGE",
    "KEY_DUPLICATE_MESSAGE",
    "KEY_INVALID_MESSAGE",
    "KEY_UNANNOUNCED_MESSAGE",
    "NOTE_EMPTY_MESSAGE",
    "NOTE_PERSONAL_DATA_MESSAGE",
    "NOTE_TOO_LONG_MESSAGE",
    "PRODUCTION_HALTED_MESSAGE",
    "PRODUCTION_PENDING_MESSAGE",
    "PRODUCTION_REASON_MESSAGE",
    "PRODUCTION_ROLE_MESSAGE",
    "REQUEST_ALREADY_APPROVED_MESSAGE",
    "REQUEST_CLOSED_MESSAGE",
    "REQUEST_EXPIRY_MESSAGE",
    "REQUEST_NOT_DIVERGED_MESSAGE",
    "REQUEST_PENDING_MESSAGE",
    "REQUEST_REASON_MESSAGE",
    "RUN_NOT_STALE_MESSAGE",
    "SERVER_KEY_CURRENT_MESSAGE",
    "_compare",
    "_document",
    "_require_reason",
    "_require_role",
    "_require_subject",
    "_signed_vote",
    "_signer_key",
    "_vote_matches",
    "actor_require",
    "api_token_create",
    "api_token_revoke",
    "api_token_touch",
    "approval_record",
    "event_append",
    "events_append",
    "force_continue_payload_for",
    "force_continue_request_file",
    "force_continue_resume",
    "halt_clear_approval_record",
    "halt_clear_payload_for",
    "kind_named",
    "member_key_confirm",
    "member_key_register",
    "member_key_revoke",
    "pii_access_record",
    "production_replay_approval_record",
    "production_replay_payload_for",
    "production_replay_request_file",
    "replay_request",
    "replay_run_govern",
    "replay_run_requeue",
    "replay_run_stale",
    "role_grant_approval_record",
    "role_grant_payload_for",
    "roles_install",
    "security_incident_declare",
    "security_incident_record",
    "selectors",
    "signing_key_revoke",
    "signing_key_rotate",
    "trace_note_add",
    "user_roles_change",
]
