"""The tables the governance decisions depend on, checked against the signed ledger. Pure: no
Django; ``governance.ledger.tables_check`` streams the rows in and collects what this says.

The ledger is the source of truth. A table row is a convenience (a foreign key to point at, a
column to filter on) and must say exactly what the ledger says:

* every ``Vote`` row (``governance_vote``) matches exactly one signed vote event
  (``FORCE_CONTINUE_APPROVAL``, ``PRODUCTION_REPLAY_APPROVAL``, ``HALT_CLEAR_APPROVAL``,
  ``ROLE_GRANT_APPROVAL``): same subject, decision, role,
  signer, key, signature and payload; every such event has its row; a legal request's
  approval votes and ``DSR_APPROVAL`` events the same way, and other
  rows bound one to one to events (a legal request's releases) through
  :func:`against_events`, the same merge;
* every ``MemberKey`` row is a key the ledger added (same owner, public key, fingerprint), is
  confirmed and revoked exactly when and by whom the ledger's key events say, and every key
  the ledger added has its row;
* every force-continue, production replay and role grant request row names the ledger event
  that filed it, and its state and decision event are the ledger's decision (pending without
  one).

Each disagreement is a :class:`Mismatch` naming the table, the row and what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from core.ledger import codes
from core.ledger.chain import Break, ChainResult, MemberKeyState
from core.ledger.signing import APPROVE, ROLE_COUNCIL, format_time

VOTES_TABLE: Final = "governance_vote"  # every kind's votes, in one table
MEMBER_KEYS_TABLE: Final = "governance_memberkey"

_FORCE_CONTINUE_VOTE = codes.code_of(codes.FORCE_CONTINUE_APPROVAL)
_PRODUCTION_VOTE = codes.code_of(codes.PRODUCTION_REPLAY_APPROVAL)
_HALT_VOTE = codes.code_of(codes.HALT_CLEAR_APPROVAL)
_ROLE_GRANT_VOTE = codes.code_of(codes.ROLE_GRANT_APPROVAL)
_DSR_VOTE = codes.code_of(codes.DSR_APPROVAL)
#: the signed vote events of the council's requests, each with the payload field naming its
#: subject (their rows are ``governance_vote``)
VOTE_CODES: Final = {
    _FORCE_CONTINUE_VOTE: "request_id",
    _PRODUCTION_VOTE: "request_id",
    _HALT_VOTE: "halt_seq",
    _ROLE_GRANT_VOTE: "request_id",
}
#: the signed approvals of legal requests (their rows are ``governance_vote`` too)
DSR_VOTE_CODES: Final = {_DSR_VOTE: "request_id"}


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One row (or ledger event) where a table and the ledger disagree."""

    code: str
    table: str
    row: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "table": self.table, "row": self.row, "message": self.message}


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    id: int
    event_id: int
    request_id: str | None
    halt_id: int | None
    production_id: str | None
    role_grant_id: str | None
    approver_id: int
    role: str
    key_id: str
    decision: str
    payload: Any
    signature: str
    #: a legal request's approval vote: the request and what it approves
    legal_request_id: str | None = None
    purpose: str | None = None
    #: an installed kind's vote (``governance.ledger.installed_kinds``): its kind and the
    #: request's subject (the ``request_id`` its votes name)
    kind: str | None = None
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class VoteEvent:
    seq: int
    code: int
    type: str
    actor_id: int | None
    actor_key_id: str | None
    actor_signature: str | None
    payload: Any


def _subject_of_row(row: ApprovalRow) -> str:
    if row.kind is not None:
        return f"{row.kind} request {row.subject}"
    if row.legal_request_id is not None:
        return f"legal request {row.legal_request_id} ({row.purpose})"
    if row.request_id is not None:
        return f"force-continue request {row.request_id}"
    if row.production_id is not None:
        return f"production replay request {row.production_id}"
    if row.role_grant_id is not None:
        return f"role grant {row.role_grant_id}"
    return f"halt {row.halt_id}"


def _subject_of_event(event: VoteEvent, installed: Mapping[int, str]) -> str:
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    if event.code in installed:
        return f"{installed[event.code]} request {payload.get('request_id')}"
    if event.code == _FORCE_CONTINUE_VOTE:
        return f"force-continue request {payload.get('request_id')}"
    if event.code == _PRODUCTION_VOTE:
        return f"production replay request {payload.get('request_id')}"
    if event.code == _ROLE_GRANT_VOTE:
        return f"role grant {payload.get('request_id')}"
    if event.code == _DSR_VOTE:
        return f"legal request {payload.get('request_id')} ({payload.get('purpose')})"
    return f"halt {payload.get('halt_seq')}"


def vote_of(event: VoteEvent) -> tuple[str, str]:
    """(decision, role) a signed vote event carries (a halt clear is a council approval)."""
    payload = event.payload if isinstance(event.payload, Mapping) else {}
    if event.code == _HALT_VOTE:
        return APPROVE, ROLE_COUNCIL
    if event.code == _PRODUCTION_VOTE:
        return str(payload.get("decision")), ROLE_COUNCIL
    return str(payload.get("decision")), str(payload.get("role"))


def _approval_problem(
    row: ApprovalRow, event: VoteEvent, installed: Mapping[int, str]
) -> str | None:
    decision, role = vote_of(event)
    pairs = (
        ("subject", _subject_of_row(row), _subject_of_event(event, installed)),
        ("decision", row.decision, decision),
        ("role", row.role, role),
        ("signer", f"user {row.approver_id}", f"user {event.actor_id}"),
        ("key", row.key_id, event.actor_key_id),
        ("signature", row.signature, event.actor_signature),
    )
    for name, in_row, in_event in pairs:
        if in_row != in_event:
            return (
                f"approval row {row.id} says {name} {in_row}, its ledger event {event.seq} "
                f"says {in_event}"
            )
    if row.payload != event.payload:
        return f"approval row {row.id}'s signed payload differs from its ledger event {event.seq}'s"
    return None


def against_events(
    rows: Iterable[Any],
    events: Iterable[Any],
    type_of: Callable[[int], str | None],
    *,
    problem: Callable[[Any, Any], str | None],
    table: str,
    noun: str,
    code: str,
    missing_code: str,
) -> Iterator[Mismatch]:
    """Merge table ``rows`` (each with ``id`` and ``event_id``, ordered by ``event_id``) with
    the ledger ``events`` that must each have exactly one row (each with ``seq`` and ``type``,
    ordered by seq): one pass over each. A row whose event is not among ``events`` is named
    (``type_of(seq)`` says what that event is instead, asked only for such rows), so is each
    row ``problem(row, event)`` finds fault with, and each event with no row. ``noun`` is what
    a row is called in the messages ("approval", "release")."""

    def mismatch(row: Any, message: str) -> Mismatch:
        return Mismatch(code, table, str(row.id), message)

    def missing(event: Any) -> Mismatch:
        return Mismatch(
            missing_code,
            table,
            str(event.seq),
            f"ledger event {event.seq} ({event.type}) has no {noun} row",
        )

    pending_events = iter(events)
    event = next(pending_events, None)
    for row in rows:
        while event is not None and event.seq < row.event_id:
            yield missing(event)
            event = next(pending_events, None)
        if event is None or event.seq != row.event_id:
            other = type_of(row.event_id)
            where = f"event {row.event_id} is {other}" if other else f"no event {row.event_id}"
            yield mismatch(row, f"{noun} row {row.id} has no ledger event ({where})")
            continue
        found = problem(row, event)
        if found is not None:
            yield mismatch(row, found)
        event = next(pending_events, None)
    while event is not None:
        yield missing(event)
        event = next(pending_events, None)


def approvals(
    rows: Iterable[ApprovalRow],
    events: Iterable[VoteEvent],
    type_of: Callable[[int], str | None],
    *,
    table: str = VOTES_TABLE,
    installed: Mapping[int, str] | None = None,
) -> Iterator[Mismatch]:
    """Vote ``rows`` (ordered by ``event_id``, rows of ``table``: ``governance_vote``) against
    the signed vote ``events`` (ordered by seq) that each must have one. ``type_of(seq)``
    names an event a row points at that is not a vote (asked only for such rows).
    ``installed``: an installed kind's vote code -> its name (its votes name their request by
    ``request_id``, their decision and role in the payload)."""
    known = dict(installed or {})
    return against_events(
        rows,
        events,
        type_of,
        problem=lambda row, event: _approval_problem(row, event, known),
        table=table,
        noun="approval",
        code=codes.TABLE_APPROVAL,
        missing_code=codes.TABLE_APPROVAL_MISSING,
    )


@dataclass(frozen=True, slots=True)
class KeyRow:
    key_id: str
    user_id: int
    public_key: str
    fingerprint: str
    confirmed_at: datetime | None
    confirmed_by: int | None
    revoked_at: datetime | None
    revoked_by: int | None


def _when(moment: datetime | None) -> str:
    return format_time(moment) if moment is not None else "none"


def _key_problem(row: KeyRow, state: MemberKeyState | None) -> str | None:
    name = f"member key {row.key_id}"
    if state is None:
        return f"{name} is in the table but no ledger event added it"
    for field, in_row, in_ledger in (
        ("owner", f"user {row.user_id}", f"user {state.user_id}"),
        ("public key", row.public_key, state.public_key),
        ("fingerprint", row.fingerprint, state.fingerprint),
    ):
        if in_row != in_ledger:
            return (
                f"{name} has {field} {in_row} in the table, but event {state.added_seq} added "
                f"it with {in_ledger}"
            )
    if row.confirmed_at is not None and state.confirmed_seq is None:
        return f"{name} is confirmed in the table but not in the ledger"
    if row.confirmed_at is None and state.confirmed_seq is not None:
        return (
            f"{name} is confirmed in the ledger (event {state.confirmed_seq}) but not in the table"
        )
    if state.confirmed_seq is not None and (
        row.confirmed_at != state.confirmed_at or row.confirmed_by != state.confirmed_by
    ):
        return (
            f"{name} was confirmed at {_when(row.confirmed_at)} by user {row.confirmed_by} in "
            f"the table, but at {_when(state.confirmed_at)} by user {state.confirmed_by} in the "
            f"ledger (event {state.confirmed_seq})"
        )
    if row.revoked_at is not None and state.revoked_seq is None:
        return f"{name} is revoked in the table but not in the ledger"
    if row.revoked_at is None and state.revoked_seq is not None:
        return f"{name} is revoked in the ledger (event {state.revoked_seq}) but not in the table"
    if state.revoked_seq is not None and (
        row.revoked_at != state.revoked_at or row.revoked_by != state.revoked_by
    ):
        return (
            f"{name} was revoked at {_when(row.revoked_at)} by user {row.revoked_by} in the "
            f"table, but at {_when(state.revoked_at)} by user {state.revoked_by} in the ledger "
            f"(event {state.revoked_seq})"
        )
    return None


def member_keys(rows: Iterable[KeyRow], states: Mapping[str, MemberKeyState]) -> Iterator[Mismatch]:
    """Each member key row against the state the ledger's key events give it."""
    seen: set[str] = set()
    for row in rows:
        seen.add(row.key_id)
        problem = _key_problem(row, states.get(row.key_id))
        if problem is not None:
            yield Mismatch(codes.TABLE_MEMBER_KEY, MEMBER_KEYS_TABLE, row.key_id, problem)
    for key_id, state in states.items():
        if key_id not in seen:
            yield Mismatch(
                codes.TABLE_MEMBER_KEY,
                MEMBER_KEYS_TABLE,
                key_id,
                f"ledger event {state.added_seq} added member key {key_id}, which is not in the"
                " table",
            )


@dataclass(frozen=True, slots=True)
class RequestRow:
    id: str
    state: str
    request_event_id: int
    decision_event_id: int | None
    #: what the filing event signed, as the row holds it (expires_at, reason, requested_by ...)
    terms: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Filing:
    seq: int
    terms: Mapping[str, Any]


def requests(
    *,
    label: str,
    table: str,
    rows: Iterable[RequestRow],
    filed: Mapping[str, Filing],
    decided: Mapping[str, tuple[int, str]],
) -> Iterator[Mismatch]:
    """Request rows against the ledger: ``filed`` maps a request id to the event that filed it
    (its seq and the terms it signed); ``decided`` to the seq and state (approved/rejected) of
    its decision event."""
    seen: set[str] = set()
    for row in rows:
        seen.add(row.id)
        name = f"{label} request {row.id}"
        filing = filed.get(row.id)
        decision_seq, state = decided.get(row.id, (None, "pending"))
        problem = None
        if filing is None:
            problem = f"{name} is in the table but no ledger event filed it"
        elif row.request_event_id != filing.seq:
            problem = (
                f"{name} names event {row.request_event_id} as its filing, but the ledger filed "
                f"it at event {filing.seq}"
            )
        elif differs := next(
            (term for term in sorted(row.terms) if row.terms[term] != filing.terms.get(term)),
            None,
        ):
            problem = (
                f"{name} has {differs} {row.terms[differs]} in the table, but its filing event "
                f"{filing.seq} says {filing.terms.get(differs)}"
            )
        elif row.state != state:
            problem = f"{name} is {row.state} in the table, the ledger says {state}"
        elif row.decision_event_id != decision_seq:
            problem = (
                f"{name} names event {row.decision_event_id} as its decision, the ledger's is "
                f"{decision_seq}"
            )
        if problem is not None:
            yield Mismatch(codes.TABLE_REQUEST, table, row.id, problem)
    for request_id, filing in filed.items():
        if request_id not in seen:
            yield Mismatch(
                codes.TABLE_REQUEST,
                table,
                request_id,
                f"ledger event {filing.seq} filed {label} request {request_id}, which is not in "
                "the table",
            )


@dataclass(frozen=True, slots=True)
class GovernedRow:
    """A ``governance_request`` row a ledger event opened without a filing of its own (a halt
    clear, a legal request's approval), or of a kind nothing files."""

    id: str
    kind: str
    subject: str
    payload: Any
    state: str
    request_event_id: int
    decision_event_id: int | None


@dataclass(frozen=True, slots=True)
class Opening:
    """The ledger event a governed request names as its filing: its seq, type and payload."""

    seq: int
    type: str
    payload: Any


def _subject_of_opening(kind: str, opening: Opening) -> str:
    """What the opening event says the request's subject is: a halt's seq, else the payload's
    ``request_id`` (a legal request's id)."""
    if kind == "halt-clear":
        return str(opening.seq)
    payload = opening.payload if isinstance(opening.payload, Mapping) else {}
    return str(payload.get("request_id"))


def _governed_problem(
    row: GovernedRow,
    opening: Opening | None,
    opened_by: Mapping[str, str],
    decided: Mapping[str, int],
) -> str | None:
    name = f"{row.kind} request {row.id}"
    if row.kind not in opened_by:
        return f"governed request {row.id} has kind {row.kind!r}, which no kind files"
    if opening is None or opening.type != opened_by[row.kind]:
        found = opening.type if opening is not None else "no event"
        return (
            f"{name} names event {row.request_event_id} as its filing, which is {found}, not "
            f"{opened_by[row.kind]}"
        )
    subject = _subject_of_opening(row.kind, opening)
    if row.subject != subject:
        return f"{name} has subject {row.subject}, its filing event {opening.seq} says {subject}"
    if row.payload != opening.payload:
        return f"{name}'s payload differs from its filing event {opening.seq}'s"
    decision = decided.get(f"{row.kind} {row.subject}")
    state = "approved" if decision is not None else "pending"
    if row.state != state:
        return f"{name} is {row.state} in the table, the ledger says {state}"
    if row.decision_event_id != decision:
        return (
            f"{name} names event {row.decision_event_id} as its decision, the ledger's is "
            f"{decision}"
        )
    return None


def governed_requests(
    *,
    rows: Iterable[GovernedRow],
    openings: Mapping[int, Opening],
    opened_by: Mapping[str, str],
    decided: Mapping[str, int],
    table: str,
) -> Iterator[Mismatch]:
    """Governed request ``rows`` that no filing event of their own filed (halt clears, legal
    approvals, or an unknown kind) against the ledger: the event each names (``openings`` by
    seq) is of the type ``opened_by[kind]``, its subject and payload are the row's, and the
    row is approved exactly when ``decided`` (by ``"<kind> <subject>"``) names its decision
    event, else pending."""
    for row in rows:
        problem = _governed_problem(row, openings.get(row.request_event_id), opened_by, decided)
        if problem is not None:
            yield Mismatch(codes.TABLE_REQUEST, table, row.id, problem)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The whole verification: the hash chain, then the tables checked against it."""

    chain: ChainResult
    mismatches: tuple[Mismatch, ...] = ()

    @property
    def ok(self) -> bool:
        return self.chain.ok and not self.mismatches

    @property
    def size(self) -> int:
        return self.chain.size

    @property
    def head_hash(self) -> str:
        return self.chain.head_hash

    @property
    def genesis_hash(self) -> str:
        return self.chain.genesis_hash

    @property
    def broken(self) -> Break | None:
        return self.chain.broken

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.chain.as_dict(),
            "ok": self.ok,
            "tables": [m.as_dict() for m in self.mismatches],
        }
