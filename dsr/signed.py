"""What the signed ledger says about a legal request: who opened it and on what terms
(``DSR_OPENED``), whether and where its identity check is (``DSR_IDENTITY_VERIFIED``), which
``DSR_APPROVAL`` events verify and count, what its releases are, and the table check that
names every legal approval vote / ``dsr_dsrrelease`` row that differs from its event.

Every approved action (the erasure, the bundle's release, the fulfilment) decides from here,
never from a table row: a row inserted by hand counts for nothing and ``governance verify``
names it. An approval counts when its event is a ``DSR_APPROVAL`` over exactly the payload the
request's own ledger events rebuild (request, subjects, kind, basis, due date, requester, the
identity check's seq, the deployment's signing role), signed with the approver's member key
as the ledger's key events say it was (added for them, confirmed by someone else before, not
revoked before), by someone other than the requester who held the role (per the ledger)
before the request was opened; once per person and per key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model

from core.bundle import scope
from core.canonical import jcs
from core.ledger import codes, reconcile, signing
from dsr import conf
from dsr.models import DsrRelease, LegalRequest
from governance import ledger, membership
from governance.models import GovernanceEvent
from replay.models import Trace

_OPENED = codes.code_of(codes.DSR_OPENED)
_IDENTITY = codes.code_of(codes.DSR_IDENTITY_VERIFIED)
_APPROVAL = codes.code_of(codes.DSR_APPROVAL)
_REVEALED = codes.code_of(codes.PII_REVEALED)
#: the kinds of governed request a legal request's approvals are votes on
LEGAL_KINDS = tuple(f"legal-{purpose}" for purpose in signing.DSR_PURPOSES)


@dataclass(frozen=True, slots=True)
class Filing:
    """The DSR_OPENED event of a request: its seq, who opened it, the terms it recorded."""

    seq: int
    actor_id: int | None
    terms: Mapping[str, Any]


def filing(request: LegalRequest) -> Filing | None:
    row = (
        GovernanceEvent.objects.filter(code=_OPENED, payload__request_id=str(request.id))
        .order_by("seq")
        .values_list("seq", "actor_id", "payload")
        .first()
    )
    return Filing(*row) if row else None


def identity_seq(request: LegalRequest) -> int | None:
    """The seq of the request's DSR_IDENTITY_VERIFIED event, or None: the ledger's word."""
    return (
        GovernanceEvent.objects.filter(code=_IDENTITY, payload__request_id=str(request.id))
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )


@dataclass(frozen=True, slots=True)
class SignedApproval:
    """One DSR_APPROVAL event that verifies and counts."""

    seq: int
    approver_id: int
    approver: str
    key_id: str
    payload: Mapping[str, Any]

    @property
    def values(self) -> list[dict[str, Any]] | None:
        """The released values it signed (None: recorded before approvals signed them)."""
        found = self.payload.get("values")
        return list(found) if isinstance(found, list) else None

    @property
    def plan(self) -> dict[str, Any] | None:
        """The erasure plan it signed (None: recorded before approvals signed one)."""
        found = self.payload.get("plan")
        return dict(found) if isinstance(found, Mapping) else None


@dataclass(frozen=True, slots=True)
class Approvals:
    """A purpose's approvals per the ledger: those that count, and why the others do not."""

    counted: tuple[SignedApproval, ...]
    ignored: tuple[tuple[int, str], ...]

    @property
    def seqs(self) -> list[int]:
        return [a.seq for a in self.counted]

    @property
    def approvers(self) -> tuple[str, ...]:
        return tuple(a.approver for a in self.counted)


def expected_payload(
    terms: Mapping[str, Any],
    *,
    request_id: str,
    purpose: str,
    identity: int,
    reason: str,
    values: Any = None,
    plan: Any = None,
) -> dict[str, Any]:
    """The payload an approval of ``purpose`` signs, rebuilt from the request's DSR_OPENED
    terms, its identity check's seq and what it covers (the page, the API, ``manage.py dsr
    payload`` and the ledger check all build it here)."""
    return signing.dsr_approval_payload(
        request_id=request_id,
        purpose=purpose,
        kind=str(terms.get("kind")),
        subjects=list(terms.get("subjects") or []),
        legal_basis=str(terms.get("legal_basis")),
        due_date=str(terms.get("due_date")),
        requested_by=str(terms.get("requested_by")),
        identity_seq=identity,
        role=conf.approval_by(),
        reason=reason,
        values=values,
        plan=plan,
    )


def _covers(payload: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """(values, plan) as signed, or None when either is malformed."""
    values, plan = payload.get("values"), payload.get("plan")
    if values is not None and not (
        isinstance(values, list) and all(isinstance(v, Mapping) for v in values)
    ):
        return None
    if plan is not None and not isinstance(plan, Mapping):
        return None
    return values, plan


def approvals(request: LegalRequest, purpose: str) -> Approvals:
    """The ``purpose`` approvals of ``request`` per the signed ledger (see the module)."""
    events = list(
        GovernanceEvent.objects.filter(
            code=_APPROVAL, payload__request_id=str(request.id), payload__purpose=purpose
        )
        .order_by("seq")
        .values_list("seq", "actor_id", "actor_key_id", "actor_signature", "payload")
    )
    if not events:
        return Approvals((), ())
    filed = filing(request)
    identity = identity_seq(request)
    users = get_user_model().objects.in_bulk({e[1] for e in events if e[1] is not None})
    keys = ledger.member_key_states()
    role = conf.approval_by()
    counted: list[SignedApproval] = []
    ignored: list[tuple[int, str]] = []
    for seq, actor_id, key_id, signature, payload in events:
        why = _problem(
            seq=seq,
            actor_id=actor_id,
            key_id=key_id,
            signature=signature,
            payload=payload,
            request_id=str(request.id),
            purpose=purpose,
            filed=filed,
            identity=identity,
            user=users.get(actor_id),
            key=keys.get(key_id) if key_id else None,
            role=role,
            counted=counted,
        )
        if why is not None:
            ignored.append((seq, why))
            continue
        user = users[actor_id]
        counted.append(SignedApproval(seq, actor_id, user.get_username(), key_id, payload))
    return Approvals(tuple(counted), tuple(ignored))


def _problem(
    *,
    seq: int,
    actor_id: int | None,
    key_id: str | None,
    signature: str | None,
    payload: Any,
    request_id: str,
    purpose: str,
    filed: Filing | None,
    identity: int | None,
    user: Any,
    key: Any,
    role: str,
    counted: list[SignedApproval],
) -> str | None:
    """Why DSR_APPROVAL event ``seq`` does not count, or None when it does."""
    if filed is None:
        return f"no DSR_OPENED event opened legal request {request_id}"
    if identity is None or identity > seq:
        return "no identity check precedes it in the ledger"
    if user is None or not key_id or not signature:
        return "it names no signer, key or signature"
    if actor_id == filed.actor_id:
        return "its signer opened the request"
    if key is None or key.user_id != actor_id:
        return f"member key {key_id} is not a key the ledger added for its signer"
    if key.confirmed_seq is None or key.confirmed_seq > seq:
        return f"member key {key_id} was not confirmed before it"
    if key.revoked_seq is not None and key.revoked_seq < seq:
        return f"member key {key_id} was revoked (event {key.revoked_seq}) before it"
    try:
        public = bytes.fromhex(key.public_key)
    except ValueError:
        public = b""
    if not isinstance(payload, dict) or not signing.verify(public, jcs(payload), signature):
        return f"its signature does not verify with member key {key_id}"
    covers = _covers(payload)
    reason = payload.get("reason")
    if covers is None or not isinstance(reason, str):
        return "its payload is malformed"
    expected = expected_payload(
        filed.terms,
        request_id=request_id,
        purpose=purpose,
        identity=identity,
        reason=reason,
        values=covers[0],
        plan=covers[1],
    )
    if payload != expected:
        differs = sorted(
            k for k in set(payload) | set(expected) if payload.get(k) != expected.get(k)
        )
        return f"its signed {', '.join(differs)} differ(s) from the request's ledger events"
    if not membership.user_has_role(user, role, before_seq=filed.seq):
        return f"its signer did not hold the {role} role before the request was opened"
    if any(c.approver_id == actor_id for c in counted):
        return "its signer already approved"
    if any(c.key_id == key_id for c in counted):
        return f"member key {key_id} already approved"
    return None


def signed_by(
    request: LegalRequest, purpose: str, user: Any, *, key_id: str | None = None
) -> int | None:
    """The seq of a DSR_APPROVAL ``user`` appended for this purpose (counted or not); with
    ``key_id``, one they signed with that key."""
    found = GovernanceEvent.objects.filter(
        code=_APPROVAL,
        actor_id=user.pk,
        payload__request_id=str(request.id),
        payload__purpose=purpose,
    )
    if key_id is not None:
        found = found.filter(actor_key_id=key_id)
    return found.values_list("seq", flat=True).first()


# --- releases ---------------------------------------------------------------------------------


def _release_rows(**where: Any) -> Iterator[scope.ReleaseRow]:
    rows = list(
        DsrRelease.objects.filter(**where)
        .order_by("event_id")
        .values_list(
            "id",
            "event_id",
            "request_id",
            "subject_ref",
            "trace_pk",
            "location",
            "path",
            "released_by_id",
        )
    )
    traces = {
        pk: (trace_id, sha)
        for pk, trace_id, sha in Trace.objects.filter(pk__in={r[4] for r in rows}).values_list(
            "pk", "trace_id", "blob__sha256"
        )
    }
    for id_, event_id, request_id, subject, trace_pk, location, path, by in rows:
        trace_id, sha = traces.get(trace_pk, (None, None))
        yield scope.ReleaseRow(
            id_, event_id, str(request_id), subject, trace_id, sha, location, path, by, trace_pk
        )


@dataclass(frozen=True, slots=True)
class Release:
    """A release row its PII_REVEALED event agrees with."""

    seq: int
    trace_pk: int
    value: dict[str, str]


def releases(request: LegalRequest) -> list[Release]:
    """The request's releases that the ledger backs (a row its event does not back reveals
    nothing; ``governance verify`` names it)."""
    rows = list(_release_rows(request=request))
    events = {
        seq: (code, actor_id, payload)
        for seq, code, actor_id, payload in GovernanceEvent.objects.filter(
            seq__in=[r.event_id for r in rows]
        ).values_list("seq", "code", "actor_id", "payload")
    }
    found = []
    for row in rows:
        event = events.get(row.event_id)
        if event is None or event[0] != _REVEALED:
            continue
        if scope.release_problem(row, event[1], event[2]) is None:
            found.append(Release(row.event_id, row.trace_pk, row.value))
    return found


def covered(request: LegalRequest) -> tuple[Approvals, list[dict[str, Any]] | None]:
    """The release approvals per the ledger and the values they cover: those every counted
    approval signed (one recorded before approvals signed values covers the releases the
    ledger holds before it), or None while no approval counts."""
    signed = approvals(request, signing.DSR_RELEASE)
    if not signed.counted:
        return signed, None
    backed = releases(request)
    cover: dict[tuple[str, ...], dict[str, Any]] | None = None
    for approval in signed.counted:
        values = approval.values
        if values is None:
            values = [r.value for r in backed if r.seq < approval.seq]
        mine = {scope.value_key(v): dict(v) for v in values}
        cover = mine if cover is None else {k: v for k, v in cover.items() if k in mine}
    return signed, scope.release_values((cover or {}).values())


# --- the table check (``governance verify``) ----------------------------------------------------


def _release_problem(row: scope.ReleaseRow, event: reconcile.VoteEvent) -> str | None:
    return scope.release_problem(row, event.actor_id, event.payload)


def table_mismatches() -> Iterator[reconcile.Mismatch]:
    """Every legal approval vote (``governance_vote``) against its DSR_APPROVAL event (and
    every such event with no row), every ``dsr_dsrrelease`` row against its PII_REVEALED
    event (and every PII_REVEALED naming a legal request with no row): registered with
    ``governance.ledger.tables_register``."""
    yield from reconcile.approvals(
        ledger.vote_rows(LEGAL_KINDS),
        ledger.vote_events(reconcile.DSR_VOTE_CODES),
        ledger.event_type_of,
        table=reconcile.VOTES_TABLE,
    )
    revealed = (
        e
        for e in ledger.vote_events([_REVEALED])
        if isinstance(e.payload, Mapping) and e.payload.get("request_id") is not None
    )
    yield from reconcile.against_events(
        _release_rows(),
        revealed,
        ledger.event_type_of,
        problem=_release_problem,
        table=DsrRelease._meta.db_table,
        noun="release",
        code=codes.TABLE_RELEASE,
        missing_code=codes.TABLE_RELEASE,
    )
