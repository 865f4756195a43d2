"""Governance codes, in one place: ledger event types and the governance refusal codes.

Pure (no Django). Two tables live here and nowhere else:

* ``EVENT_TYPES``: every ledger event type with its stable numeric code. Codes are grouped in
  ranges of a hundred, one range per concern, and a code is never reused or renumbered
  once an event with it has been appended (it is part of every hashed event body).

  ====  ==================================================================================
  1xx   replay: requests, results, divergences, integrity failures, timeouts, the
        council's signed approval of a production replay, retention's expiries, and
        auditors' notes on a trace
  2xx   force-continue: requests, signed approvals and denials, quorum decisions
  3xx   halts: FORCE_HALT_REPLAY, council signatures toward FORCE_HALT_CLEAR, incidents
  4xx   keys: server signing keys and council/admin member keys (added, rotated, revoked);
        41x: people's API tokens (created, revoked; the token itself is never in a payload)
  5xx   personal data: every unredacted PII access
  6xx   data subject requests: opened, identity verified, started, signed four-eyes
        approvals (bundle release, erasure), exported, erased (a receipt), closed
  7xx   roles: the installation's first admins and council members, every role change,
        and the council's signed approval of an admin or council grant
  ====  ==================================================================================

* ``CHAIN_BREAKS`` and ``TABLE_MISMATCHES``: what ``governance verify`` finds, in the hash
  chain (the first broken seq) and in the tables the decisions depend on (each row that
  disagrees with the ledger; ``core.ledger.reconcile``).

* ``REFUSALS``: why a governance action was refused. Verdict error codes of a replay
  (``FORCE_CONTINUE_REQUIRED``, ``FORCE_HALT_ACTIVE`` ...) are not here: they live in
  ``core.errors`` only. The human-readable messages are constants next to the service
  that raises them (``governance.services``).

Every event type (``EVENT_TYPES`` below carries the same list with a description each):

  ====  ======================================================================
  100   REPLAY_REQUEST           101  REPLAY_RESULT         102  REPLAY_DIVERGENCE
  103   INTEGRITY_FAILURE        104  REPLAY_TIMEOUT
  105   PRODUCTION_REPLAY_REQUEST                        106  PRODUCTION_REPLAY_APPROVAL
  107   PRODUCTION_REPLAY_APPROVED                       108  PRODUCTION_REPLAY_REJECTED
  109   TRACE_EXPIRED            110  TRACE_NOTE
  111   OTLP_RECEIVED            112  OTEL_TRACE_SEALED
  200   FORCE_CONTINUE_REQUEST   201  FORCE_CONTINUE_APPROVAL
  202   FORCE_CONTINUE_APPROVED  203  FORCE_CONTINUE_REJECTED
  204   FORCE_CONTINUE_REFUSED
  300   FORCE_HALT_REPLAY        301  FORCE_HALT_CLEAR      302  HALT_CLEAR_APPROVAL
  303   SECURITY_INCIDENT
  400   KEY_ADDED                401  KEY_ROTATED           402  KEY_REVOKED
  403   KEY_CONFIRMED
  410   API_TOKEN_CREATED        411  API_TOKEN_REVOKED
  500   PII_REVEALED
  600   DSR_OPENED               601  DSR_EXPORTED          602  DSR_ERASED
  603   DSR_CLOSED               604  DSR_IDENTITY_VERIFIED 605  DSR_APPROVAL
  606   DSR_STATE_CHANGED
  700   ROLES_INSTALLED          701  ROLES_CHANGED         702  ROLE_GRANT_REQUEST
  703   ROLE_GRANT_APPROVAL      704  ROLE_GRANT_APPROVED   705  ROLE_GRANT_REJECTED
  ====  ======================================================================

To add an event type: append a line to ``EVENT_TYPES`` in its range with the next free code
and to the table above, write the service that appends it, and test it
(``tests/governance/test_codes.py`` checks the table and the ranges).

A kind of governed request an installed package brings declares its own event types (codes
from ``INSTALLED_FIRST_CODE``, 1000, up) in its ``KindCodes.event_types``; registering the
kind registers them (:func:`register_event_types`), so they are known wherever ``BY_NAME``
and ``BY_CODE`` are read. ``EVENT_TYPES`` stays this console's own list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class EventType:
    code: int
    name: str
    description: str


RANGES: Final[dict[int, str]] = {
    1: "replay",
    2: "force-continue",
    3: "halts",
    4: "keys",
    5: "personal-data access",
    6: "data subject requests",
    7: "roles",
}

# --- 1xx replay ------------------------------------------------------------------------------
REPLAY_REQUEST: Final = "REPLAY_REQUEST"
REPLAY_RESULT: Final = "REPLAY_RESULT"
REPLAY_DIVERGENCE: Final = "REPLAY_DIVERGENCE"
INTEGRITY_FAILURE: Final = "INTEGRITY_FAILURE"
REPLAY_TIMEOUT: Final = "REPLAY_TIMEOUT"
PRODUCTION_REPLAY_REQUEST: Final = "PRODUCTION_REPLAY_REQUEST"
PRODUCTION_REPLAY_APPROVAL: Final = "PRODUCTION_REPLAY_APPROVAL"
PRODUCTION_REPLAY_APPROVED: Final = "PRODUCTION_REPLAY_APPROVED"
PRODUCTION_REPLAY_REJECTED: Final = "PRODUCTION_REPLAY_REJECTED"
TRACE_EXPIRED: Final = "TRACE_EXPIRED"
TRACE_NOTE: Final = "TRACE_NOTE"
OTLP_RECEIVED: Final = "OTLP_RECEIVED"
OTEL_TRACE_SEALED: Final = "OTEL_TRACE_SEALED"
# --- 2xx force-continue ----------------------------------------------------------------------
FORCE_CONTINUE_REQUEST: Final = "FORCE_CONTINUE_REQUEST"
FORCE_CONTINUE_APPROVAL: Final = "FORCE_CONTINUE_APPROVAL"
FORCE_CONTINUE_APPROVED: Final = "FORCE_CONTINUE_APPROVED"
FORCE_CONTINUE_REJECTED: Final = "FORCE_CONTINUE_REJECTED"
FORCE_CONTINUE_REFUSED: Final = "FORCE_CONTINUE_REFUSED"
# --- 3xx halts -------------------------------------------------------------------------------
FORCE_HALT_REPLAY: Final = "FORCE_HALT_REPLAY"
FORCE_HALT_CLEAR: Final = "FORCE_HALT_CLEAR"
HALT_CLEAR_APPROVAL: Final = "HALT_CLEAR_APPROVAL"
SECURITY_INCIDENT: Final = "SECURITY_INCIDENT"
# --- 4xx keys --------------------------------------------------------------------------------
KEY_ADDED: Final = "KEY_ADDED"
KEY_ROTATED: Final = "KEY_ROTATED"
KEY_REVOKED: Final = "KEY_REVOKED"
KEY_CONFIRMED: Final = "KEY_CONFIRMED"
API_TOKEN_CREATED: Final = "API_TOKEN_CREATED"  # noqa: S105 - not a secret
API_TOKEN_REVOKED: Final = "API_TOKEN_REVOKED"  # noqa: S105 - not a secret
# --- 5xx personal data -----------------------------------------------------------------------
PII_REVEALED: Final = "PII_REVEALED"
# --- 6xx data subject requests (payloads name subjects by opaque refs only) ----------------
DSR_OPENED: Final = "DSR_OPENED"
DSR_EXPORTED: Final = "DSR_EXPORTED"
DSR_ERASED: Final = "DSR_ERASED"
DSR_CLOSED: Final = "DSR_CLOSED"
DSR_IDENTITY_VERIFIED: Final = "DSR_IDENTITY_VERIFIED"
DSR_APPROVAL: Final = "DSR_APPROVAL"
DSR_STATE_CHANGED: Final = "DSR_STATE_CHANGED"
# --- 7xx roles -------------------------------------------------------------------------------
ROLES_INSTALLED: Final = "ROLES_INSTALLED"
ROLES_CHANGED: Final = "ROLES_CHANGED"
ROLE_GRANT_REQUEST: Final = "ROLE_GRANT_REQUEST"
ROLE_GRANT_APPROVAL: Final = "ROLE_GRANT_APPROVAL"
ROLE_GRANT_APPROVED: Final = "ROLE_GRANT_APPROVED"
ROLE_GRANT_REJECTED: Final = "ROLE_GRANT_REJECTED"
#: the events that set someone's roles (their payload's ``user_id`` and ``roles_after``)
ROLE_SETTING_EVENTS: Final = (ROLES_INSTALLED, ROLES_CHANGED, ROLE_GRANT_APPROVED)

EVENT_TYPES: Final[tuple[EventType, ...]] = (
    EventType(100, REPLAY_REQUEST, "a replay was requested (actor, mode, trace, run); signed"),
    EventType(101, REPLAY_RESULT, "a replay finished: its verdict, error code and report digest"),
    EventType(
        102, REPLAY_DIVERGENCE, "a replay diverged: the first divergence and the diff digest"
    ),
    EventType(103, INTEGRITY_FAILURE, "a replay found a signature, id or chain hash that fails"),
    EventType(104, REPLAY_TIMEOUT, "a replay exceeded its time or iteration cap"),
    EventType(
        105, PRODUCTION_REPLAY_REQUEST, "council approval of a production replay was requested"
    ),
    EventType(
        106, PRODUCTION_REPLAY_APPROVAL, "one council member's signed vote on a production replay"
    ),
    EventType(
        107, PRODUCTION_REPLAY_APPROVED, "a production replay reached quorum; the run is queued"
    ),
    EventType(108, PRODUCTION_REPLAY_REJECTED, "a production replay reached the deny threshold"),
    EventType(
        109, TRACE_EXPIRED, "retention removed a stored file's content; its row and hashes stay"
    ),
    EventType(
        110, TRACE_NOTE, "an auditor's note on a stored trace (append-only, no personal data)"
    ),
    EventType(
        111, OTLP_RECEIVED, "an OTLP export body was received and stored: its digest and spans"
    ),
    EventType(
        112, OTEL_TRACE_SEALED, "an OpenTelemetry trace version was sealed: its record's digest"
    ),
    EventType(200, FORCE_CONTINUE_REQUEST, "a force-continue past a divergence was requested"),
    EventType(201, FORCE_CONTINUE_APPROVAL, "one signed approval or denial of a force-continue"),
    EventType(202, FORCE_CONTINUE_APPROVED, "a force-continue reached quorum; the replay resumes"),
    EventType(203, FORCE_CONTINUE_REJECTED, "a force-continue reached the deny threshold"),
    EventType(204, FORCE_CONTINUE_REFUSED, "a continue without an approved force-continue"),
    EventType(
        300, FORCE_HALT_REPLAY, "replays of a stored file, a trace id or a snapshot are halted"
    ),
    EventType(301, FORCE_HALT_CLEAR, "a council quorum cleared a halt"),
    EventType(302, HALT_CLEAR_APPROVAL, "one council member's signature toward clearing a halt"),
    EventType(303, SECURITY_INCIDENT, "an admin declared a security incident; it halts its target"),
    EventType(400, KEY_ADDED, "a signing key was added (server key or member public key)"),
    EventType(401, KEY_ROTATED, "the server signing key was rotated; signed by the old key"),
    EventType(402, KEY_REVOKED, "a key was revoked; what it signed before stays valid"),
    EventType(403, KEY_CONFIRMED, "an admin confirmed a member's public key"),
    EventType(410, API_TOKEN_CREATED, "a person's API token was created (its id and prefix)"),
    EventType(411, API_TOKEN_REVOKED, "a person's API token was revoked; it authenticates no more"),
    EventType(500, PII_REVEALED, "unredacted personal data was shown to someone"),
    EventType(600, DSR_OPENED, "a data subject request was opened (subject refs, kind, basis)"),
    EventType(601, DSR_EXPORTED, "a data subject access export was produced"),
    EventType(602, DSR_ERASED, "personal data was erased for a data subject request (receipt)"),
    EventType(603, DSR_CLOSED, "a data subject request was closed: fulfilled, or refused"),
    EventType(604, DSR_IDENTITY_VERIFIED, "how, by whom and when a subject's identity was checked"),
    EventType(605, DSR_APPROVAL, "a signed four-eyes approval of a bundle release or an erasure"),
    EventType(606, DSR_STATE_CHANGED, "a data subject request moved on (open to in progress)"),
    EventType(700, ROLES_INSTALLED, "installation set a first admin or council member's roles"),
    EventType(701, ROLES_CHANGED, "an admin changed someone else's roles: before and after"),
    EventType(702, ROLE_GRANT_REQUEST, "an admin asked the council to grant admin or council"),
    EventType(703, ROLE_GRANT_APPROVAL, "one council member's signed vote on a role grant"),
    EventType(704, ROLE_GRANT_APPROVED, "a role grant reached quorum: the new roles take effect"),
    EventType(705, ROLE_GRANT_REJECTED, "a role grant reached the deny threshold"),
)

#: every known event type by name and by code: ``EVENT_TYPES`` plus the types the installed
#: kinds of governed request declare (:func:`register_event_types`)
BY_NAME: Final[dict[str, EventType]] = {t.name: t for t in EVENT_TYPES}
BY_CODE: Final[dict[int, EventType]] = {t.code: t for t in EVENT_TYPES}

#: the first code an installed kind's event type may take: codes below are this console's
#: (the ranges above, and room for more), so an installed package never takes one of them
INSTALLED_FIRST_CODE: Final = 1000


def code_of(name: str) -> int:
    """The stable numeric code of an event type name (KeyError for an unknown type)."""
    return BY_NAME[name].code


def register_event_types(types: tuple[EventType, ...]) -> None:
    """Make an installed kind's own event types known (its ``KindCodes.event_types``): the
    ledger then appends them, and ``governance verify`` reads them as it reads this module's.

    Each code is ``INSTALLED_FIRST_CODE`` or more, and neither its name nor its code is taken
    by another type (ValueError): an event's code and type are hashed into it, so once one is
    appended they never change. Registering the same types again does nothing."""
    for t in types:
        if t.code < INSTALLED_FIRST_CODE:
            raise ValueError(
                f"event type {t.name!r}: an installed kind's codes start at "
                f"{INSTALLED_FIRST_CODE}, not {t.code}"
            )
        for found in (BY_NAME.get(t.name), BY_CODE.get(t.code)):
            if found is not None and found != t:
                raise ValueError(
                    f"event type {t.name!r} ({t.code}) clashes with {found.name!r} ({found.code})"
                )
    for t in types:
        BY_NAME[t.name] = t
        BY_CODE[t.code] = t


# --- governance refusals -----------------------------------------------------------------------
APPROVAL_SELF: Final = "APPROVAL_SELF"
APPROVAL_DUPLICATE_PERSON: Final = "APPROVAL_DUPLICATE_PERSON"
APPROVAL_DUPLICATE_KEY: Final = "APPROVAL_DUPLICATE_KEY"
APPROVAL_OTHER_REQUEST: Final = "APPROVAL_OTHER_REQUEST"
APPROVAL_PAYLOAD_MISMATCH: Final = "APPROVAL_PAYLOAD_MISMATCH"
APPROVAL_EXPIRED: Final = "APPROVAL_EXPIRED"
APPROVAL_KEY_REVOKED: Final = "APPROVAL_KEY_REVOKED"
APPROVAL_KEY_UNKNOWN: Final = "APPROVAL_KEY_UNKNOWN"
APPROVAL_KEY_UNCONFIRMED: Final = "APPROVAL_KEY_UNCONFIRMED"
APPROVAL_BAD_SIGNATURE: Final = "APPROVAL_BAD_SIGNATURE"
APPROVAL_ROLE: Final = "APPROVAL_ROLE"
APPROVAL_MALFORMED: Final = "APPROVAL_MALFORMED"
REQUEST_CLOSED: Final = "REQUEST_CLOSED"
REQUEST_NOT_DIVERGED: Final = "REQUEST_NOT_DIVERGED"
REQUEST_PENDING: Final = "REQUEST_PENDING"
REQUEST_ALREADY_APPROVED: Final = "REQUEST_ALREADY_APPROVED"
REQUEST_INVALID: Final = "REQUEST_INVALID"
REQUEST_NOT_REPLAYABLE: Final = "REQUEST_NOT_REPLAYABLE"
REQUEST_ROLE: Final = "REQUEST_ROLE"
REQUEST_HALTED: Final = "REQUEST_HALTED"
HALT_NOT_ACTIVE: Final = "HALT_NOT_ACTIVE"
INCIDENT_TARGET_UNKNOWN: Final = "INCIDENT_TARGET_UNKNOWN"
KEY_INVALID: Final = "KEY_INVALID"
KEY_DUPLICATE: Final = "KEY_DUPLICATE"
KEY_STATE: Final = "KEY_STATE"
EVENT_TYPE_UNKNOWN: Final = "EVENT_TYPE_UNKNOWN"
LEDGER_EMPTY: Final = "LEDGER_EMPTY"
LEDGER_BROKEN: Final = "LEDGER_BROKEN"
LEDGER_UNVERIFIED: Final = "LEDGER_UNVERIFIED"
ROLE_SELF: Final = "ROLE_SELF"
ROLE_UNKNOWN: Final = "ROLE_UNKNOWN"
ROLES_ALREADY_INSTALLED: Final = "ROLES_ALREADY_INSTALLED"
DSR_INVALID: Final = "DSR_INVALID"
DSR_IDENTITY_UNVERIFIED: Final = "DSR_IDENTITY_UNVERIFIED"
DSR_SELF_APPROVAL: Final = "DSR_SELF_APPROVAL"
DSR_ALREADY_APPROVED: Final = "DSR_ALREADY_APPROVED"
DSR_STATE: Final = "DSR_STATE"
DSR_REPLAY_MODE: Final = "DSR_REPLAY_MODE"
DSR_RELEASE_NOT_APPROVED: Final = "DSR_RELEASE_NOT_APPROVED"
DSR_PLAN_CHANGED: Final = "DSR_PLAN_CHANGED"
RUN_NOT_STALE: Final = "RUN_NOT_STALE"
PROOF_RANGE: Final = "PROOF_RANGE"
NOTE_INVALID: Final = "NOTE_INVALID"
NOTE_PERSONAL_DATA: Final = "NOTE_PERSONAL_DATA"

REFUSALS: Final[dict[str, str]] = {
    APPROVAL_SELF: (
        "the requester tried to approve their own request, or the admin who declared a halt's "
        "incident signed toward clearing it"
    ),
    APPROVAL_DUPLICATE_PERSON: "this person has already signed this request",
    APPROVAL_DUPLICATE_KEY: "this key has already signed this request",
    APPROVAL_OTHER_REQUEST: "the signed payload names another request (a replayed approval)",
    APPROVAL_PAYLOAD_MISMATCH: "a signed payload field differs from the request's",
    APPROVAL_EXPIRED: "the request expired before this approval",
    APPROVAL_KEY_REVOKED: "the signing key was revoked before this signature",
    APPROVAL_KEY_UNKNOWN: "the signing key is not registered to this person",
    APPROVAL_KEY_UNCONFIRMED: "the signing key has not been confirmed by an admin",
    APPROVAL_BAD_SIGNATURE: "the Ed25519 signature does not verify over the payload",
    APPROVAL_ROLE: "the signer lacked the role they signed in, per the ledger, before the request",
    APPROVAL_MALFORMED: "the signed approval document is not well formed",
    REQUEST_CLOSED: "the request is already approved or rejected",
    REQUEST_NOT_DIVERGED: "force-continue needs a finished replay that diverged",
    REQUEST_PENDING: "a request for this replay (this production replay, this role grant) is open",
    REQUEST_ALREADY_APPROVED: "a force-continue for this replay was already approved (it resumed)",
    REQUEST_INVALID: "the request's reason or expiry is not acceptable",
    REQUEST_NOT_REPLAYABLE: "production replay needs every snapshot and agent output persisted",
    REQUEST_ROLE: "the requester holds no role that may file this request",
    REQUEST_HALTED: (
        "the stored file, its trace id or one of its snapshots is halted until a council "
        "FORCE_HALT_CLEAR"
    ),
    HALT_NOT_ACTIVE: "the halt is not active (unknown or already cleared)",
    INCIDENT_TARGET_UNKNOWN: "a security incident names a trace, file or snapshot not stored",
    KEY_INVALID: "the public or private key is not a valid Ed25519 key",
    KEY_DUPLICATE: "the key is already registered",
    KEY_STATE: "the key cannot make this transition (unknown, revoked, or current)",
    EVENT_TYPE_UNKNOWN: "the event type is not in core.ledger.codes.EVENT_TYPES",
    LEDGER_EMPTY: "the ledger has no events (nothing to checkpoint)",
    LEDGER_BROKEN: "the ledger does not verify (no checkpoint is signed over it)",
    LEDGER_UNVERIFIED: (
        "no event is verified yet and more are new than a request checks itself: the "
        "background verification was queued (no checkpoint until it finishes)"
    ),
    ROLE_SELF: "nobody changes their own roles",
    ROLE_UNKNOWN: "a role named in a role change is not in the roles matrix",
    ROLES_ALREADY_INSTALLED: "the ledger already records roles: installation happens once",
    DSR_INVALID: (
        "a legal request is malformed: no subject, no legal basis, an unknown kind or purpose, "
        "or a due date in the past (the message names which)"
    ),
    DSR_IDENTITY_UNVERIFIED: "the subject's identity is not verified yet: nothing can be approved",
    DSR_SELF_APPROVAL: "the person who opened a legal request cannot approve it (four eyes)",
    DSR_ALREADY_APPROVED: "this person already approved it, or the approval is already complete",
    DSR_STATE: "the legal request cannot make this transition from its current state",
    DSR_REPLAY_MODE: "a data subject request replays traces in audit mode only",
    DSR_RELEASE_NOT_APPROVED: (
        "a value is not among those the signed release approval of the legal request covers: "
        "releasing it needs a new legal request and its approval"
    ),
    DSR_PLAN_CHANGED: (
        "the erasure plan (subjects, traces, fields) changed since its approval was signed: "
        "a new approval is needed"
    ),
    RUN_NOT_STALE: (
        "only a replay still queued, not picked up for longer than REPLAY_STALE_SECONDS, can "
        "be queued again"
    ),
    PROOF_RANGE: (
        "a Merkle proof or checkpoint asked for an event or a tree size the ledger's tree does "
        "not have (the message names the sizes)"
    ),
    NOTE_INVALID: "a note on a trace is empty or longer than the limit",
    NOTE_PERSONAL_DATA: (
        "a note quotes a personal value of its trace (the ledger cannot be erased): name the "
        "subject by its opaque ref instead"
    ),
}

# --- ledger verification: why a seq is broken (core.ledger.chain) -------------------------------
CHAIN_SEQ: Final = "CHAIN_SEQ"
CHAIN_PREV_HASH: Final = "CHAIN_PREV_HASH"
CHAIN_HASH: Final = "CHAIN_HASH"
CHAIN_KEY_UNKNOWN: Final = "CHAIN_KEY_UNKNOWN"
CHAIN_KEY_WINDOW: Final = "CHAIN_KEY_WINDOW"
CHAIN_KEY_UNANNOUNCED: Final = "CHAIN_KEY_UNANNOUNCED"
CHAIN_SIGNATURE: Final = "CHAIN_SIGNATURE"
CHAIN_ACTOR_SIGNATURE: Final = "CHAIN_ACTOR_SIGNATURE"
CHAIN_MEMBER_KEY: Final = "CHAIN_MEMBER_KEY"
CHAIN_MALFORMED: Final = "CHAIN_MALFORMED"

CHAIN_BREAKS: Final[dict[str, str]] = {
    CHAIN_SEQ: "a seq is missing, repeated or out of order (the chain must be gapless from 1)",
    CHAIN_PREV_HASH: "prev_hash differs from the previous event's hash",
    CHAIN_HASH: "the hash does not recompute from prev_hash and the canonical body",
    CHAIN_KEY_UNKNOWN: "the server key that signed the event is not in the registry",
    CHAIN_KEY_WINDOW: "the server key was not effective when the event was created",
    CHAIN_KEY_UNANNOUNCED: "the server key was not introduced by an earlier key event",
    CHAIN_SIGNATURE: "the server's Ed25519 signature over the hash does not verify",
    CHAIN_ACTOR_SIGNATURE: "the actor's Ed25519 signature over the payload does not verify",
    CHAIN_MEMBER_KEY: (
        "a member key event or an actor signature the ledger's member key events do not allow"
        " (a key never added, confirmed by its owner, not yet confirmed, or already revoked)"
    ),
    CHAIN_MALFORMED: "a stored field cannot be read (wrong type or encoding)",
}

# --- ledger verification: a table the decisions depend on disagrees with the ledger -----------
TABLE_APPROVAL: Final = "TABLE_APPROVAL"
TABLE_APPROVAL_MISSING: Final = "TABLE_APPROVAL_MISSING"
TABLE_MEMBER_KEY: Final = "TABLE_MEMBER_KEY"
TABLE_REQUEST: Final = "TABLE_REQUEST"
TABLE_RELEASE: Final = "TABLE_RELEASE"
TABLE_EVENT_TYPE_UNKNOWN: Final = "TABLE_EVENT_TYPE_UNKNOWN"

TABLE_MISMATCHES: Final[dict[str, str]] = {
    TABLE_APPROVAL: "an approval row differs from its signed ledger event, or has none",
    TABLE_APPROVAL_MISSING: "a signed vote in the ledger has no approval row",
    TABLE_MEMBER_KEY: "a member key row differs from the ledger's key events (added, confirmed,"
    " revoked), or the ledger has a key the table lacks",
    TABLE_REQUEST: "a request row's state or events differ from the ledger's",
    TABLE_RELEASE: "a legal request's release row differs from its PII_REVEALED event, or has"
    " none; or such an event has no row",
    TABLE_EVENT_TYPE_UNKNOWN: "the ledger holds events of a type (code and name) that neither"
    " this console nor an installed kind declares: the chain is verified, but the rows they"
    " decide cannot be reconciled (the message names the type, its first seq and its count)",
}

# --- verification marks: a stored "verified through seq N" that is not believed ---------------
MARK_SIGNATURE: Final = "MARK_SIGNATURE"
MARK_FORKED: Final = "MARK_FORKED"
MARK_SUPERSEDED: Final = "MARK_SUPERSEDED"

MARK_FAILURES: Final[dict[str, str]] = {
    MARK_SIGNATURE: "a verification mark's signature does not verify with its server key",
    MARK_FORKED: "the ledger's event at a verification mark's seq has another hash than the mark",
    MARK_SUPERSEDED: "a later verification found the chain broken at a seq the mark covers",
}

# --- checkpoints -------------------------------------------------------------------------------
CHECKPOINT_MALFORMED: Final = "CHECKPOINT_MALFORMED"
CHECKPOINT_SIGNATURE: Final = "CHECKPOINT_SIGNATURE"
CHECKPOINT_TRUNCATED: Final = "CHECKPOINT_TRUNCATED"
CHECKPOINT_FORKED: Final = "CHECKPOINT_FORKED"
CHECKPOINT_LEDGER_BROKEN: Final = "CHECKPOINT_LEDGER_BROKEN"

CHECKPOINT_FAILURES: Final[dict[str, str]] = {
    CHECKPOINT_MALFORMED: "the checkpoint file is not a checkpoint",
    CHECKPOINT_SIGNATURE: "the checkpoint's signature does not verify with a registered key",
    CHECKPOINT_TRUNCATED: "the ledger is shorter than the checkpoint (truncation or rollback)",
    CHECKPOINT_FORKED: "the ledger's event at the checkpoint's size has another hash",
    CHECKPOINT_LEDGER_BROKEN: "the current ledger does not verify",
}

# --- evidence bundles: the first thing that fails when a DSR bundle is checked (core.bundle) ---
BUNDLE_MALFORMED: Final = "BUNDLE_MALFORMED"
BUNDLE_MEMBER_MISSING: Final = "BUNDLE_MEMBER_MISSING"
BUNDLE_MEMBER_EXTRA: Final = "BUNDLE_MEMBER_EXTRA"
BUNDLE_MEMBER_HASH: Final = "BUNDLE_MEMBER_HASH"
BUNDLE_SIGNATURE: Final = "BUNDLE_SIGNATURE"
BUNDLE_UNTRUSTED_KEY: Final = "BUNDLE_UNTRUSTED_KEY"
BUNDLE_EVENT_HASH: Final = "BUNDLE_EVENT_HASH"
BUNDLE_EVENT_SIGNATURE: Final = "BUNDLE_EVENT_SIGNATURE"
BUNDLE_CHAIN: Final = "BUNDLE_CHAIN"
BUNDLE_CHECKPOINT: Final = "BUNDLE_CHECKPOINT"
BUNDLE_INCLUSION: Final = "BUNDLE_INCLUSION"
BUNDLE_CONSISTENCY: Final = "BUNDLE_CONSISTENCY"
BUNDLE_WITNESS_QUORUM: Final = "BUNDLE_WITNESS_QUORUM"
#: ``python -m tlog ... --witness VKEY --quorum K``: fewer valid cosignatures of the named
#: witnesses on the checkpoint than K (``tlog.quorum.CODE``)
WITNESS_QUORUM: Final = "WITNESS_QUORUM"

BUNDLE_FAILURES: Final[dict[str, str]] = {
    BUNDLE_MALFORMED: "the file is not a bundle: too large, not canonical JSON, or a part of it"
    " is missing or of the wrong shape",
    BUNDLE_MEMBER_MISSING: "a member the manifest lists is not in the bundle",
    BUNDLE_MEMBER_EXTRA: "the bundle holds a member the manifest does not list",
    BUNDLE_MEMBER_HASH: "a member's sha256 or size differs from the manifest's",
    BUNDLE_SIGNATURE: "the server's signature over the manifest does not verify with the key"
    " the manifest names, or the key id is not that key's",
    BUNDLE_UNTRUSTED_KEY: "the bundle is signed by a key that is not the trusted key (or not the"
    " key of the trusted checkpoint)",
    BUNDLE_EVENT_HASH: "a ledger event's hash does not recompute from its prev_hash and body",
    BUNDLE_EVENT_SIGNATURE: "a ledger event's server or actor signature does not verify, or its"
    " server key is unknown or was not effective when the event was created",
    BUNDLE_CHAIN: "the ledger events are out of order, repeated, not linked by prev_hash where"
    " consecutive, or disagree with the ledger checkpoint in the bundle",
    BUNDLE_CHECKPOINT: "the bundle's transparency-log checkpoint is not signed by the verifier"
    " key given (--vkey), or the bundle carries none",
    BUNDLE_INCLUSION: "a ledger event's inclusion proof does not lead to the checkpoint's root,"
    " or an event has no proof in the checkpoint",
    BUNDLE_CONSISTENCY: "the bundle's checkpoint is not proven to extend the older checkpoint"
    " given (--older-checkpoint)",
    BUNDLE_WITNESS_QUORUM: "the bundle's checkpoint carries fewer valid cosignatures of the"
    " witnesses named (--witness) than the quorum asked for (--quorum)",
}


class GovernanceError(Exception):
    """A governance action refused with one code from this module and an exact message."""

    def __init__(self, code: str, message: str, *, detail: dict[str, Any] | None = None) -> None:
        if code not in REFUSALS:
            raise ValueError(f"unknown governance refusal code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.detail = detail or {}
