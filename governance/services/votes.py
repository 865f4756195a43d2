"""Signed votes on a council request or a halt: the request takes votes and its expiry, the
signed document is well formed, the signer's key may sign, the payload is the subject's, and one
vote is appended per person and per key; a council request's vote, and its decision once a tally
decides it, the same way for each kind of request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.utils import timezone

from core.canonical import jcs
from core.ledger import codes, signing
from governance import conf, council, ledger, selectors
from governance.membership import roles_before, user_has_role
from governance.models import CouncilRequest, MemberKey, Vote

# --- messages (asserted verbatim in tests) ----------------------------------------------------
APPROVAL_SELF_MESSAGE = "{user} filed request {request} and cannot approve it"
APPROVAL_DUPLICATE_PERSON_MESSAGE = "{user} has already signed {subject}"
APPROVAL_DUPLICATE_KEY_MESSAGE = "key {key_id} has already signed {subject}"
APPROVAL_OTHER_REQUEST_MESSAGE = "the signature is over {signed}, not {subject}"
APPROVAL_PAYLOAD_MISMATCH_MESSAGE = "the signed {field} is {signed}, but {subject} has {expected}"
APPROVAL_EXPIRED_MESSAGE = "request {request} expired at {expires_at}"
APPROVAL_KEY_REVOKED_MESSAGE = "key {key_id} was revoked at {revoked_at}, before this signature"
APPROVAL_KEY_UNKNOWN_MESSAGE = "key {key_id} is not a registered key of {user}"
APPROVAL_KEY_UNCONFIRMED_MESSAGE = "key {key_id} has not been confirmed by an admin"
APPROVAL_BAD_SIGNATURE_MESSAGE = "the signature does not verify with key {key_id}"
APPROVAL_ROLE_MESSAGE = "{user} signed as {role} but does not hold the {role} role"
APPROVAL_ROLE_BEFORE_MESSAGE = (
    "{user} signed as {role} but, per the ledger, did not hold the {role} role before "
    "{subject} was filed (seq {seq})"
)
APPROVAL_MALFORMED_MESSAGE = "a signed approval is {{payload, key_id, alg, signature}}: {problem}"
#: the contract's spelling of a signature (core/ledger/signing.py): no other is normalised
SIGNATURE_NOT_HEX = "signature is not 128 lower-case hex digits"
REQUEST_CLOSED_MESSAGE = "request {request} is already {state}"
REQUEST_EXPIRY_MESSAGE = "the expiry must be in the future and within {hours} hours"

_Request = TypeVar("_Request", bound=CouncilRequest)


def _expiry(expires_at: datetime | None, now: datetime) -> datetime:
    """A request's expiry: the default lifetime, or the asked one within the maximum (to the
    second, as it is signed)."""
    max_hours = conf.force_continue_max_hours()
    if expires_at is None:
        expires_at = now + timedelta(hours=conf.force_continue_hours())
    if expires_at <= now or expires_at > now + timedelta(hours=max_hours):
        raise codes.GovernanceError(
            codes.REQUEST_INVALID, REQUEST_EXPIRY_MESSAGE.format(hours=max_hours)
        )
    return signing.parse_time(signing.format_time(expires_at))


def _malformed(problem: str) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.APPROVAL_MALFORMED, APPROVAL_MALFORMED_MESSAGE.format(problem=problem)
    )


def _document(document: Any) -> tuple[dict[str, Any], str, str]:
    if not isinstance(document, Mapping):
        raise _malformed("not a JSON object")
    payload, key_id, signature = (
        document.get("payload"),
        document.get("key_id"),
        document.get("signature"),
    )
    if not isinstance(payload, dict):
        raise _malformed("payload is not an object")
    if not isinstance(key_id, str) or not key_id:
        raise _malformed("key_id is not a string")
    if not isinstance(signature, str):
        raise _malformed("signature is not a string")
    if not signing.is_signature_hex(signature):
        raise _malformed(SIGNATURE_NOT_HEX)
    if document.get("alg", signing.ALG) != signing.ALG:
        raise _malformed(f"alg must be {signing.ALG}")
    try:
        jcs(payload)
    except ValueError as exc:
        raise _malformed(f"payload has no canonical form ({exc})") from None
    return payload, key_id, signature


def _signer_key(
    *, approver: Any, key_id: str, payload: dict[str, Any], signature: str, now: datetime
) -> MemberKey:
    """The approver's key, if the ledger says it may sign now: added for them, confirmed by
    another admin, not revoked (its table row's columns are not asked). The signature is
    checked with the public key the ledger announced."""
    key = MemberKey.objects.filter(key_id=key_id, user=approver).first()
    state = ledger.member_key_states(key_id=key_id).get(key_id)
    if key is None or state is None or state.user_id != approver.pk:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_UNKNOWN,
            APPROVAL_KEY_UNKNOWN_MESSAGE.format(key_id=key_id, user=approver.get_username()),
        )
    if state.revoked_at is not None and state.revoked_at <= now:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_REVOKED,
            APPROVAL_KEY_REVOKED_MESSAGE.format(
                key_id=key_id, revoked_at=signing.format_time(state.revoked_at)
            ),
        )
    if state.confirmed_seq is None:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_UNCONFIRMED, APPROVAL_KEY_UNCONFIRMED_MESSAGE.format(key_id=key_id)
        )
    try:
        public = bytes.fromhex(state.public_key)
    except ValueError:
        public = b""
    if not signing.verify(public, jcs(payload), signature):
        raise codes.GovernanceError(
            codes.APPROVAL_BAD_SIGNATURE, APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=key_id)
        )
    return key


def _compare(
    payload: Mapping[str, Any],
    expected: Mapping[str, Any],
    subject: str,
    *,
    chosen: tuple[str, ...] = ("decision", "role", "reason"),
) -> None:
    """Every field but those the signer ``chosen`` must be what the subject says."""
    for name in sorted(set(expected) | set(payload)):
        if name in chosen:
            continue
        if payload.get(name) != expected.get(name):
            raise codes.GovernanceError(
                codes.APPROVAL_PAYLOAD_MISMATCH,
                APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
                    field=name,
                    signed=jcs(payload.get(name)).decode(),
                    subject=subject,
                    expected=jcs(expected.get(name)).decode(),
                ),
            )


def _not_twice(
    *, ballots: Sequence[selectors.Ballot], approver: Any, key: MemberKey, subject: str
) -> None:
    if any(b.key_id == key.key_id for b in ballots):
        raise codes.GovernanceError(
            codes.APPROVAL_DUPLICATE_KEY,
            APPROVAL_DUPLICATE_KEY_MESSAGE.format(key_id=key.key_id, subject=subject),
        )
    _not_signed_by(ballots=ballots, approver=approver, subject=subject)


def _not_signed_by(*, ballots: Sequence[selectors.Ballot], approver: Any, subject: str) -> None:
    """One vote per person among the subject's signed ``ballots`` (the ledger's)."""
    if any(b.approver_id == approver.pk for b in ballots):
        raise codes.GovernanceError(
            codes.APPROVAL_DUPLICATE_PERSON,
            APPROVAL_DUPLICATE_PERSON_MESSAGE.format(user=approver.get_username(), subject=subject),
        )


def _require_subject(
    payload: Mapping[str, Any], *, type_: str, field: str, value: Any, label: str, subject: str
) -> None:
    """Refuse a signature made over another request's (or another kind of) payload."""
    if payload.get("type") == type_ and payload.get(field) == value:
        return
    signed = (
        f"{label} {payload.get(field)}"
        if payload.get("type") == type_
        else f"a {payload.get('type')!s} payload"
    )
    raise codes.GovernanceError(
        codes.APPROVAL_OTHER_REQUEST,
        APPROVAL_OTHER_REQUEST_MESSAGE.format(signed=signed, subject=subject),
    )


def _signed_vote(
    document: Any,
    *,
    approver: Any,
    now: datetime,
    type_: str,
    field: str,
    value: Any,
    label: str,
    subject: str,
) -> tuple[dict[str, Any], MemberKey, str]:
    """The checks every signed vote starts with: the document is well formed, the signature
    verifies with a key of the approver's that may sign ``now``, and it is over a ``type_``
    payload for this subject (its ``field`` is ``value``). Returns (payload, key, signature)."""
    payload, key_id, signature = _document(document)
    key = _signer_key(
        approver=approver, key_id=key_id, payload=payload, signature=signature, now=now
    )
    _require_subject(payload, type_=type_, field=field, value=value, label=label, subject=subject)
    return payload, key, signature


def _vote_matches(
    payload: Mapping[str, Any],
    *,
    kind: Any,
    request: Any,
    decision: str,
    chosen: tuple[str, ...],
    approver: Any,
    role: str,
    filed_seq: int | None,
    subject: str,
) -> str:
    """The checks every signed vote ends with: it carries a reason, the payload is the one its
    ``kind`` (the registry's kind module) rebuilds for ``request`` with ``payload_for`` (but for
    what the signer ``chosen``), and the approver holds ``role`` (see :func:`_require_role`).
    Returns the reason."""
    reason = _require_reason(payload)
    expected = kind.payload_for(request, decision=decision, role=role, reason=reason)
    _compare(payload, expected, subject, chosen=chosen)
    _require_role(approver, role, filed_seq=filed_seq, subject=subject)
    return reason


def _require_reason(payload: Mapping[str, Any]) -> str:
    reason = payload.get("reason")
    if not isinstance(reason, str):
        raise _malformed("reason is not a string")
    return reason


def _require_role(
    approver: Any,
    role: str,
    *,
    filed_seq: int | None,
    subject: str,
    history: tuple[tuple[int, frozenset[str]], ...] | None = None,
) -> None:
    """The approver holds ``role`` per the ledger now and, for a request someone filed (seq
    ``filed_seq``), held it before it was filed: a role granted afterwards, or never recorded
    in the ledger (a group edited by hand), does not count. A halt was filed by nobody, so
    clearing one needs the role per the ledger now. ``history`` is the approver's
    ``membership.roles_history`` when the caller judges many requests at once (the inbox)."""
    if not user_has_role(approver, role):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            APPROVAL_ROLE_MESSAGE.format(user=approver.get_username(), role=role),
        )
    if filed_seq is None:
        return
    held_before = (
        role in roles_before(history, filed_seq)
        if history is not None
        else user_has_role(approver, role, before_seq=filed_seq)
    )
    if not held_before:
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            APPROVAL_ROLE_BEFORE_MESSAGE.format(
                user=approver.get_username(), role=role, subject=subject, seq=filed_seq
            ),
        )


def vote_append(
    *,
    event_type: str,
    ballots: Sequence[selectors.Ballot],
    approver: Any,
    key: MemberKey,
    payload: Mapping[str, Any],
    signature: str,
    role: str,
    decision: str,
    reason: str,
    label: str,
    **subject: Any,
) -> Vote:
    """Append a signed vote to the ledger and keep its Vote row (``request=``, the governed
    request it decides), once per person and per key among the subject's signed ``ballots`` (the
    ledger's); ``label`` names the subject in refusals. Every kind's signing ends here, a kind
    an installed package brings too (``tests/toykind``)."""
    _not_twice(ballots=ballots, approver=approver, key=key, subject=label)
    event = ledger.append(
        event_type=event_type,
        payload=payload,
        actor=approver,
        actor_key_id=key.key_id,
        actor_signature=signature,
    )
    return Vote.objects.create(
        approver=approver,
        role=role,
        key=key,
        decision=decision,
        reason=reason,
        payload=payload,
        signature=signature,
        event=event,
        created_at=event.created_at,
        **subject,
    )


def _request_file(
    request: _Request,
    *,
    event_type: str,
    idempotency_key: str,
    subject: Mapping[str, Any],
    admins_required: int = 0,
) -> _Request:
    """File a council request: its signed filing event (the request's ``subject`` fields, its
    reason and expiry, and what a decision takes: ``admins_required`` when it takes an admin,
    the council quorum and the deny threshold) and its row."""
    needs: dict[str, int] = {"admins_required": admins_required} if admins_required else {}
    request.request_event = ledger.append(
        event_type=event_type,
        payload={
            "request_id": str(request.id),
            **subject,
            "reason": request.reason,
            "expires_at": signing.format_time(request.expiry()),
            **needs,
            "council_required": conf.council_quorum(),
            "deny_threshold": conf.deny_threshold(),
        },
        actor=request.requested_by,
        idempotency_key=idempotency_key,
    )
    request.kind = request.KIND
    request.subject = request.subject_key()
    request.payload = request.request_event.payload
    request.save(force_insert=True)
    return request


def _open_for_votes(
    request: CouncilRequest, *, approver: Any, now: datetime, expires_at: datetime | None = None
) -> None:
    """A request (force-continue or production replay) takes this approver's vote now.
    ``expires_at``: its ``selectors.request_expiry``, when the caller has read it already."""
    if request.state != CouncilRequest.State.PENDING:
        raise codes.GovernanceError(
            codes.REQUEST_CLOSED,
            REQUEST_CLOSED_MESSAGE.format(request=request.id, state=request.state),
        )
    if expires_at is None:  # the signed filing's, at the latest
        expires_at = selectors.request_expiry(request=request)
    if now >= expires_at:
        raise codes.GovernanceError(
            codes.APPROVAL_EXPIRED,
            APPROVAL_EXPIRED_MESSAGE.format(
                request=request.id, expires_at=signing.format_time(expires_at)
            ),
        )
    if approver.pk == request.requested_by_id:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF,
            APPROVAL_SELF_MESSAGE.format(user=approver.get_username(), request=request.id),
        )


def _vote_opened(
    request: CouncilRequest, *, approver: Any, document: Mapping[str, Any], type_: str
) -> tuple[dict[str, Any], MemberKey, str]:
    """The checks every signed vote on a request starts with: the request takes votes, from
    this approver, the document is well formed, the signature verifies with a confirmed key
    of theirs, and it is over a payload of this kind for this request."""
    now = timezone.now()
    _open_for_votes(request, approver=approver, now=now)
    return _signed_vote(
        document,
        approver=approver,
        now=now,
        type_=type_,
        field="request_id",
        value=str(request.id),
        label="request",
        subject=f"request {request.id}",
    )


def _kind_of(request: CouncilRequest) -> Any:
    """The kind module (``governance.requests``' registry) of a council request: what its
    votes are signed over (``payload_type``, ``payload_for``), counted from (``ballots``),
    appended as (``codes``), and what its approval does (``on_approval``)."""
    return kind_named(request.kind or request.KIND)


def kind_named(name: str) -> Any:
    """The registry's kind called ``name`` (a halt clear's, a legal approval's ...)."""
    from governance.requests.builtin import kinds  # the kinds import their services

    kind = kinds().get(name)
    if kind is None:
        raise LookupError(f"no kind of governed request is called {name!r}")
    return kind


def _council_vote_record(
    request: CouncilRequest, /, *, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """One signed vote on a council request (force-continue, production replay, role grant):
    the request takes it (:func:`_vote_opened`), the decision is one the signer may make, the
    payload is what its kind's ``payload_for`` rebuilds for ``request``, the signer held the
    role before the request was filed, and it is appended (as the kind's ``codes.vote``) once
    per person and per key among the kind's ``ballots(request=request)``. The kind's
    ``vote_role`` is the role every vote is signed in, or None when the signer names theirs
    (force-continue's admin or council) in the payload. The caller tallies and decides."""
    kind = _kind_of(request)
    label = f"request {request.id}"
    payload, key, signature = _vote_opened(
        request, approver=approver, document=document, type_=kind.payload_type
    )
    decision = payload.get("decision")
    role = kind.vote_role
    if role is None:
        signed_role = payload.get("role")
        if decision not in signing.DECISIONS or signed_role not in signing.SIGNING_ROLES:
            raise _malformed("decision or role is not recognised")
        role = str(signed_role)
        chosen: tuple[str, ...] = ("decision", "role", "reason")
    else:
        if decision not in signing.DECISIONS:
            raise _malformed("decision is not recognised")
        chosen = ("decision", "reason")
    reason = _vote_matches(
        payload,
        kind=kind,
        request=request,
        decision=str(decision),
        chosen=chosen,
        approver=approver,
        role=role,
        filed_seq=request.request_event_id,
        subject=label,
    )
    return vote_append(
        event_type=kind.codes.vote,
        ballots=kind.ballots(request=request),
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=role,
        decision=str(decision),
        reason=reason,
        label=label,
        request=request,
    )


def _request_decide(
    request: CouncilRequest, *, result: council.Tally, payload: Mapping[str, Any]
) -> None:
    """Close a council request the tally ``result`` decided: its kind's ``codes.approved`` or
    ``codes.rejected`` event (with ``payload``) and its state; on approval, the kind's
    ``on_approval(request)`` then does what the request asked for (setting the row's
    ``approval_saves``)."""
    kind = _kind_of(request)
    rejecting = result.state == council.REJECTED
    request.decision_event = ledger.append(
        event_type=kind.codes.rejected if rejecting else kind.codes.approved,
        payload=payload,
        idempotency_key=f"{kind.name}-decision:{request.id}",
    )
    saved: tuple[str, ...] = ()
    if rejecting:
        request.state = CouncilRequest.State.REJECTED
    else:
        request.state = CouncilRequest.State.APPROVED
        kind.on_approval(request)
        saved = kind.approval_saves
    request.decided_at = request.decision_event.created_at
    request.save(update_fields=["state", "decision_event", "decided_at", *saved])


def vote_refusal(
    request: CouncilRequest,
    *,
    approver: Any,
    role: str,
    now: datetime,
    ballots: Sequence[selectors.Ballot],
    expires_at: datetime | None = None,
    history: tuple[tuple[int, frozenset[str]], ...] | None = None,
) -> codes.GovernanceError | None:
    """Why ``approver`` may not vote on a council request in ``role`` now, before any
    signature is looked at, or None: the very checks a signed vote goes through
    (:func:`_open_for_votes`, :func:`_require_role`, one vote per person among the ledger's
    ``ballots``). The inbox asks this, so it lists exactly what the signing would take;
    ``expires_at`` and ``history`` let it judge many requests with the facts read at once."""
    subject = f"request {request.id}"
    try:
        _open_for_votes(request, approver=approver, now=now, expires_at=expires_at)
        _require_role(
            approver, role, filed_seq=request.request_event_id, subject=subject, history=history
        )
        _not_signed_by(ballots=ballots, approver=approver, subject=subject)
    except codes.GovernanceError as refused:
        return refused
    return None
