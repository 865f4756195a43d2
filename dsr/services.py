"""Legal requests (Data Subject Requests): the one service the pages, the API and
``manage.py dsr`` share.

A request names its subjects by opaque refs (``dsr.subjects_port``; identifiers are never
stored or put in a ledger payload), its kind (access, erasure or both), its legal basis and its
due date, and moves open -> in_progress -> fulfilled, or is refused with a reason. Every
transition is a server-signed ledger event (6xx, ``core.ledger.codes``). Releasing a bundle and
executing an erasure each need a signed four-eyes approval (``DSR_APPROVAL``, signed with the
approver's confirmed member key like a force-continue approval), which the identity check must
precede and the requester can never give.

Refusals raise ``core.ledger.codes.GovernanceError`` with one code and one of the message
constants below (tests compare against them). Whether a person may call a service at all is
the roles matrix, checked by the views, the API and the command (``actor_require``) first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.bundle import scope
from core.ledger import codes, signing
from dsr import conf, signed, subjects_port
from dsr.models import LegalRequest
from dsr.subjects_port import refs_for
from governance import ledger, membership
from governance import services as gov_services
from governance.models import GovernedRequest, Vote

# --- messages (asserted verbatim in tests) ----------------------------------------------------
NO_SUBJECT_MESSAGE = "a legal request names at least one subject identifier"
NO_BASIS_MESSAGE = "a legal request needs its legal basis"
BASIS_TOO_LONG_MESSAGE = "the legal basis is at most {limit} characters"
KIND_MESSAGE = "the kind must be one of access, erasure, both (not {kind!r})"
DUE_PAST_MESSAGE = "the due date {due} is in the past (today is {today})"
DUE_FORMAT_MESSAGE = "the due date {due!r} is not a date (YYYY-MM-DD)"
METHOD_MESSAGE = "say how the subject's identity was verified (1 to {limit} characters)"
REFUSAL_REASON_MESSAGE = "refusing a legal request needs a reason"
PURPOSE_MESSAGE = "the purpose must be one of release, erasure (not {purpose!r})"
PURPOSE_KIND_MESSAGE = "legal request {request} is a {kind} request: it has no {purpose} to approve"
STATE_MESSAGE = "legal request {request} is {state}: it cannot {action}"
IDENTITY_UNVERIFIED_MESSAGE = (
    "the identity of the subject of legal request {request} is not verified: record how it "
    "was verified before any approval"
)
IDENTITY_TWICE_MESSAGE = "legal request {request} already records an identity check (seq {seq})"
SELF_APPROVAL_MESSAGE = "{user} opened legal request {request} and cannot approve its {purpose}"
ALREADY_APPROVED_MESSAGE = "{user} already approved the {purpose} of legal request {request}"
APPROVAL_COMPLETE_MESSAGE = "the {purpose} of legal request {request} is already approved"
NOT_APPROVED_MESSAGE = (
    "the {purpose} of legal request {request} is not approved yet: it needs {missing}"
)
FULFIL_MESSAGE = "legal request {request} cannot be fulfilled before its {what}"
NOT_COUNTED_MESSAGE = "DSR_APPROVAL seq {seq} does not count: {why}"
UNFILED_MESSAGE = "legal request {request} has no DSR_OPENED event in the ledger"

BASIS_LIMIT = 500
METHOD_LIMIT = 200
SUBJECT_LIMIT = 50

#: purpose -> the kinds of request that have it
PURPOSE_KINDS = {
    signing.DSR_RELEASE: (LegalRequest.Kind.ACCESS, LegalRequest.Kind.BOTH),
    signing.DSR_ERASURE: (LegalRequest.Kind.ERASURE, LegalRequest.Kind.BOTH),
}


def _invalid(message: str) -> codes.GovernanceError:
    return codes.GovernanceError(codes.DSR_INVALID, message)


def _state_error(request: LegalRequest, action: str) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.DSR_STATE,
        STATE_MESSAGE.format(request=request.id, state=request.get_state_display(), action=action),
    )


def default_due_date(today: date | None = None) -> date:
    """One month from today (``DSR_DUE_MONTHS``)."""
    return conf.add_months(today or timezone.localdate(), conf.due_months())


def parse_due_date(value: date | str | None) -> date | None:
    """A due date from a form, the API or the command; DSR_INVALID when it is not a date."""
    if value is None or isinstance(value, date):
        return value
    text = str(value).strip()
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise _invalid(DUE_FORMAT_MESSAGE.format(due=text)) from None


def _username(user: Any) -> str:
    return user.get_username()


# --- open -------------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def legal_request_open(
    *,
    actor: Any,
    identifiers: Iterable[str],
    kind: str,
    legal_basis: str,
    due_date: date | str | None = None,
) -> LegalRequest:
    """Open a request (DSR_OPENED). The identifiers become opaque subject refs at once; neither
    the row nor the ledger payload holds them."""
    wanted = [str(i) for i in identifiers if str(i).strip()]
    if not wanted:
        raise _invalid(NO_SUBJECT_MESSAGE)
    if len(wanted) > SUBJECT_LIMIT:
        raise _invalid(f"a legal request names at most {SUBJECT_LIMIT} subject identifiers")
    basis = (legal_basis or "").strip()
    if not basis:
        raise _invalid(NO_BASIS_MESSAGE)
    if len(basis) > BASIS_LIMIT:
        raise _invalid(BASIS_TOO_LONG_MESSAGE.format(limit=BASIS_LIMIT))
    if kind not in LegalRequest.Kind.values:
        raise _invalid(KIND_MESSAGE.format(kind=kind))
    today = timezone.localdate()
    due = parse_due_date(due_date) or default_due_date(today)
    if due < today:
        raise _invalid(DUE_PAST_MESSAGE.format(due=due.isoformat(), today=today.isoformat()))
    request = LegalRequest(
        subject_refs=refs_for(wanted),
        kind=kind,
        legal_basis=basis,
        due_date=due,
        requested_by=actor,
        created_at=timezone.now(),
    )
    request.opened_event = ledger.append(
        event_type=codes.DSR_OPENED,
        payload={
            "request_id": str(request.id),
            "subjects": list(request.subject_refs),
            "kind": kind,
            "legal_basis": basis,
            "due_date": due.isoformat(),
            "requested_by": _username(actor),
        },
        actor=actor,
        idempotency_key=f"dsr-opened:{request.id}",
    )
    request.created_at = request.opened_event.created_at
    request.save(force_insert=True)
    return request


def _locked(request: LegalRequest) -> LegalRequest:
    ledger.lock()
    return LegalRequest.objects.select_for_update().get(pk=request.pk)


# --- identity ---------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def legal_request_identity_verify(
    *, request: LegalRequest, actor: Any, method: str
) -> LegalRequest:
    """Record how the subject's identity was verified, by whom and when
    (DSR_IDENTITY_VERIFIED); once per request."""
    request = _locked(request)
    if request.is_closed:
        raise _state_error(request, "record an identity check")
    if request.identity_event_id is not None:
        raise _state_error_twice(request)
    method = (method or "").strip()
    if not method or len(method) > METHOD_LIMIT:
        raise _invalid(METHOD_MESSAGE.format(limit=METHOD_LIMIT))
    event = ledger.append(
        event_type=codes.DSR_IDENTITY_VERIFIED,
        payload={
            "request_id": str(request.id),
            "subjects": list(request.subject_refs),
            "method": method,
            "verified_by": _username(actor),
        },
        actor=actor,
        idempotency_key=f"dsr-identity:{request.id}",
    )
    request.identity_method = method
    request.identity_verified_by = actor
    request.identity_verified_at = event.created_at
    request.identity_event = event
    request.save(
        update_fields=[
            "identity_method",
            "identity_verified_by",
            "identity_verified_at",
            "identity_event",
        ]
    )
    return request


def _state_error_twice(request: LegalRequest) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.DSR_STATE,
        IDENTITY_TWICE_MESSAGE.format(request=request.id, seq=request.identity_event_id),
    )


# --- state transitions ------------------------------------------------------------------------


def _state_change(request: LegalRequest, *, actor: Any, to: str) -> None:
    before = request.state
    ledger.append(
        event_type=codes.DSR_STATE_CHANGED,
        payload={
            "request_id": str(request.id),
            "from": before,
            "to": to,
            "by": _username(actor) if actor is not None else gov_services.CLI_SYSTEM_ACTOR,
        },
        actor=actor,
        actor_label=None if actor is not None else gov_services.CLI_SYSTEM_ACTOR,
    )
    request.state = to
    request.save(update_fields=["state"])


@transaction.atomic(durable=True)
def legal_request_start(*, request: LegalRequest, actor: Any) -> LegalRequest:
    """open -> in progress (DSR_STATE_CHANGED)."""
    request = _locked(request)
    if request.state != LegalRequest.State.OPEN:
        raise _state_error(request, "be started")
    _state_change(request, actor=actor, to=LegalRequest.State.IN_PROGRESS)
    return request


def _close(request: LegalRequest, *, actor: Any, outcome: str, reason: str = "") -> None:
    event = ledger.append(
        event_type=codes.DSR_CLOSED,
        payload={
            "request_id": str(request.id),
            "subjects": list(request.subject_refs),
            "from": request.state,
            "outcome": outcome,
            "reason": reason,
            "by": _username(actor),
        },
        actor=actor,
        idempotency_key=f"dsr-closed:{request.id}",
    )
    request.state = outcome
    request.refusal_reason = reason
    request.closed_event = event
    request.closed_at = event.created_at
    request.save(update_fields=["state", "refusal_reason", "closed_event", "closed_at"])


@transaction.atomic(durable=True)
def legal_request_refuse(*, request: LegalRequest, actor: Any, reason: str) -> LegalRequest:
    """open or in progress -> refused, with a reason (DSR_CLOSED, outcome refused)."""
    request = _locked(request)
    if request.is_closed:
        raise _state_error(request, "be refused")
    reason = (reason or "").strip()
    if not reason:
        raise _invalid(REFUSAL_REASON_MESSAGE)
    _close(request, actor=actor, outcome=LegalRequest.State.REFUSED, reason=reason)
    return request


@transaction.atomic(durable=True)
def legal_request_fulfil(*, request: LegalRequest, actor: Any) -> LegalRequest:
    """in progress -> fulfilled (DSR_CLOSED, outcome fulfilled), once what was asked is done:
    the bundle exported for an access request, the erasure executed for an erasure."""
    request = _locked(request)
    if request.state != LegalRequest.State.IN_PROGRESS:
        raise _state_error(request, "be fulfilled")
    if request.wants_access and (
        request.export_event_id is None
        or not approval_status(request=request, purpose=signing.DSR_RELEASE).complete
    ):
        raise _state_error_msg(request, "evidence bundle is built and its release approved")
    if request.wants_erasure and request.erasure_event_id is None:
        raise _state_error_msg(request, "erasure is executed")
    _close(request, actor=actor, outcome=LegalRequest.State.FULFILLED)
    return request


def _state_error_msg(request: LegalRequest, what: str) -> codes.GovernanceError:
    return codes.GovernanceError(
        codes.DSR_STATE, FULFIL_MESSAGE.format(request=request.id, what=what)
    )


# --- four-eyes approvals ----------------------------------------------------------------------


@dataclass(frozen=True)
class ApprovalStatus:
    """Where the approval of one purpose stands: signatures in the required capacity."""

    purpose: str
    role: str
    have: int
    needed: int
    approvers: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return self.have >= self.needed

    @property
    def missing(self) -> str:
        left = self.needed - self.have
        return "nothing" if left <= 0 else f"{left} {self.role} approval(s)"


def approval_status(*, request: LegalRequest, purpose: str) -> ApprovalStatus:
    """Where the approval stands, per the signed ledger (``dsr.signed``), never a row."""
    return _status(purpose, signed.approvals(request, purpose))


def _status(purpose: str, found: signed.Approvals) -> ApprovalStatus:
    names = found.approvers
    return ApprovalStatus(
        purpose, conf.approval_by(), len(set(names)), conf.approvals_needed(), names
    )


def purposes_of(request: LegalRequest) -> list[str]:
    """The approvals this request can have, in the order they happen."""
    return [p for p in signing.DSR_PURPOSES if request.kind in PURPOSE_KINDS[p]]


def approval_payload_for(
    *, request: LegalRequest, purpose: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload an approver signs (the page, the API and ``manage.py dsr payload``):
    the request's terms as its DSR_OPENED event recorded them, the seq of its identity check
    (0 before there is one), and exactly what it covers: for a release, the values the bundle
    hands over (:func:`release_values_for`), for an erasure, the plan it carries out."""
    _check_purpose(request, purpose)
    filed = signed.filing(request)
    if filed is None:
        raise codes.GovernanceError(codes.DSR_STATE, UNFILED_MESSAGE.format(request=request.id))
    subjects = list(filed.terms.get("subjects") or [])
    values = release_values_for(request) if purpose == signing.DSR_RELEASE else None
    plan = (
        scope.signed_plan(subjects_port.erasure_plan(subjects))
        if purpose == signing.DSR_ERASURE
        else None
    )
    return signed.expected_payload(
        filed.terms,
        request_id=str(request.id),
        purpose=purpose,
        identity=signed.identity_seq(request) or 0,
        reason=reason,
        values=values,
        plan=plan,
    )


def release_values_for(request: LegalRequest) -> list[dict[str, str]]:
    """The values a release of ``request`` hands over: its releases the ledger backs."""
    return scope.release_values(r.value for r in signed.releases(request))


def _check_purpose(request: LegalRequest, purpose: str) -> None:
    if purpose not in signing.DSR_PURPOSES:
        raise _invalid(PURPOSE_MESSAGE.format(purpose=purpose))
    if request.kind not in PURPOSE_KINDS[purpose]:
        raise _invalid(
            PURPOSE_KIND_MESSAGE.format(request=request.id, kind=request.kind, purpose=purpose)
        )


def approval_refusal(
    *, request: LegalRequest, purpose: str, approver: Any, key_id: str | None = None
) -> None:
    """The four-eyes rules, checked before any signature is looked at (the pages use it to say
    up front why someone cannot sign): the request is not closed, the identity is verified,
    the approver is not the requester, has not approved it already, and it is not complete.
    With the ``key_id`` a signed document names, a second signature with a key of theirs that
    already signed is APPROVAL_DUPLICATE_KEY, checked before the person (DSR_ALREADY_APPROVED)
    as every kind's votes are (``governance.services.votes._not_twice``)."""
    _check_purpose(request, purpose)
    if request.is_closed:
        raise _state_error(request, f"have its {purpose} approved")
    _require_identity(request)
    filed = signed.filing(request)
    if approver.pk in (request.requested_by_id, filed.actor_id if filed else None):
        raise codes.GovernanceError(
            codes.DSR_SELF_APPROVAL,
            SELF_APPROVAL_MESSAGE.format(
                user=approver.get_username(), request=request.id, purpose=purpose
            ),
        )
    with_key = signed.signed_by(request, purpose, approver, key_id=key_id) if key_id else None
    if with_key is not None:
        raise codes.GovernanceError(
            codes.APPROVAL_DUPLICATE_KEY,
            gov_services.APPROVAL_DUPLICATE_KEY_MESSAGE.format(
                key_id=key_id, subject=f"legal request {request.id}"
            ),
        )
    if signed.signed_by(request, purpose, approver) is not None:
        raise codes.GovernanceError(
            codes.DSR_ALREADY_APPROVED,
            ALREADY_APPROVED_MESSAGE.format(
                user=approver.get_username(), request=request.id, purpose=purpose
            ),
        )
    if approval_status(request=request, purpose=purpose).complete:
        raise codes.GovernanceError(
            codes.DSR_ALREADY_APPROVED,
            APPROVAL_COMPLETE_MESSAGE.format(request=request.id, purpose=purpose),
        )
    role = conf.approval_by()
    if not membership.user_has_role(approver, role):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            gov_services.APPROVAL_ROLE_MESSAGE.format(user=approver.get_username(), role=role),
        )


@transaction.atomic(durable=True)
def legal_request_approve(
    *, request: LegalRequest, purpose: str, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """Record one signed approval of ``purpose`` (release or erasure): a DSR_APPROVAL event
    carrying the approver's Ed25519 signature over the payload of
    :func:`approval_payload_for`, verified with their confirmed member key, signed in the
    capacity ``DSR_APPROVAL_BY`` names, which they held (per the ledger) before the request
    was opened."""
    request = _locked(request)
    named = document.get("key_id") if isinstance(document, Mapping) else None
    approval_refusal(
        request=request,
        purpose=purpose,
        approver=approver,
        key_id=named if isinstance(named, str) else None,
    )
    filed = signed.filing(request)
    if filed is None:
        raise codes.GovernanceError(codes.DSR_STATE, UNFILED_MESSAGE.format(request=request.id))
    subject = f"legal request {request.id}"
    payload, key, signature = gov_services._signed_vote(
        document,
        approver=approver,
        now=timezone.now(),
        type_=signing.DSR_APPROVAL_TYPE,
        field="request_id",
        value=str(request.id),
        label="legal request",
        subject=subject,
    )
    role = conf.approval_by()
    gov_services._vote_matches(
        payload,
        kind=gov_services.kind_named(f"legal-{purpose}"),
        request=request,
        decision=signing.APPROVE,
        chosen=("reason",),
        approver=approver,
        role=role,
        filed_seq=filed.seq,
        subject=subject,
    )
    event = ledger.append(
        event_type=codes.DSR_APPROVAL,
        payload=payload,
        actor=approver,
        actor_key_id=key.key_id,
        actor_signature=signature,
    )
    return Vote.objects.create(
        request=_governed(request, purpose, filed_seq=filed.seq),
        approver=approver,
        role=role,
        key=key,
        decision=signing.APPROVE,
        reason=str(payload.get("reason", "")),
        payload=payload,
        signature=signature,
        event=event,
        created_at=event.created_at,
    )


def _governed(request: LegalRequest, purpose: str, *, filed_seq: int) -> GovernedRequest:
    """The governed request (kind ``legal-<purpose>``) the approvals of ``purpose`` of this
    legal request are votes on: made with its first approval, filed by its DSR_OPENED."""
    found, _made = GovernedRequest.objects.get_or_create(
        kind=f"legal-{purpose}",
        subject=str(request.pk),
        defaults={
            "payload": request.opened_event.payload if request.opened_event else {},
            "reason": request.legal_basis,
            "requested_by": request.requested_by,
            "created_at": request.created_at,
            "request_event_id": filed_seq,
        },
    )
    return found


def _require_identity(request: LegalRequest) -> int:
    """The seq of the request's identity check per the ledger, else DSR_IDENTITY_UNVERIFIED."""
    seq = signed.identity_seq(request)
    if seq is None:
        raise codes.GovernanceError(
            codes.DSR_IDENTITY_UNVERIFIED, IDENTITY_UNVERIFIED_MESSAGE.format(request=request.id)
        )
    return seq


def require_approved(*, request: LegalRequest, purpose: str) -> signed.Approvals:
    """The approvals that let ``purpose`` happen, read from the signed ledger (the identity
    check, then the quorum of DSR_APPROVAL events that verify: ``dsr.signed``); refused with
    DSR_IDENTITY_UNVERIFIED, or DSR_STATE naming what is missing."""
    _require_identity(request)
    found = signed.approvals(request, purpose)
    status = _status(purpose, found)
    if not status.complete:
        message = NOT_APPROVED_MESSAGE.format(
            purpose=purpose, request=request.id, missing=status.missing
        )
        for seq, why in found.ignored:
            message += "; " + NOT_COUNTED_MESSAGE.format(seq=seq, why=why)
        raise codes.GovernanceError(codes.DSR_STATE, message)
    return found
