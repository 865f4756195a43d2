"""Governance writes: every function appends to the ledger, and top-level ones are durable.

Named ``<entity>_<action>``, keyword-only, typed. A refusal raises
``governance.codes.GovernanceError`` with one code and one of the message constants below
(tests compare against these constants), or ``replay.errors.ReplayError`` for the replay
verdicts governance enforces (``FORCE_CONTINUE_REQUIRED``).

Roles: these services check what only governance can know (the signer of an approval holds
the role they signed in, the requester does not approve their own request, an admin confirms
someone else's key). Whether a signed-in person may call a service at all is the console's
permission matrix, checked by its views before the call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance import codes, conf, council, ledger, membership, selectors, signing
from governance.membership import user_has_role
from governance.models import (
    Approval,
    CouncilRequest,
    ForceContinueRequest,
    GovernanceEvent,
    Halt,
    MemberKey,
    ProductionReplayRequest,
    SigningKey,
)
from replay import errors
from replay.canonical import jcs
from replay.models import ReplayRun, Trace

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
APPROVAL_MALFORMED_MESSAGE = "a signed approval is {{payload, key_id, alg, signature}}: {problem}"
REQUEST_CLOSED_MESSAGE = "request {request} is already {state}"
REQUEST_NOT_DIVERGED_MESSAGE = "replay {run} did not stop at a divergence ({status})"
REQUEST_PENDING_MESSAGE = "request {request} for replay {run} is still open"
REQUEST_REASON_MESSAGE = "a force-continue request needs a reason"
REQUEST_EXPIRY_MESSAGE = "the expiry must be in the future and within {hours} hours"
PRODUCTION_REASON_MESSAGE = "a production replay request needs a reason"
PRODUCTION_ROLE_MESSAGE = (
    "{user} holds neither the auditor nor the admin role: only they may run a production replay"
)
PRODUCTION_NOT_REPLAYABLE_MESSAGE = (
    "trace {trace} cannot be replayed in production: missing {missing}"
)
PRODUCTION_HALTED_MESSAGE = (
    "trace {trace} is halted ({why}): a production replay would be refused until a council "
    "quorum clears the halt"
)
PRODUCTION_PENDING_MESSAGE = "request {request} for a production replay of {trace} is still open"
FORCE_CONTINUE_REQUIRED_MESSAGE = (
    "continuing replay {run} past step {step} needs an approved force-continue "
    "(one admin and {quorum} council signatures)"
)
FORCE_CONTINUE_NOTHING_MESSAGE = "replay {run} did not stop at a divergence: nothing to continue"
HALT_NOT_ACTIVE_MESSAGE = "halt {halt} is not active"
KEY_INVALID_MESSAGE = "not an Ed25519 public key: {problem}"
KEY_DUPLICATE_MESSAGE = "key {key_id} is already registered"
KEY_CONFIRM_OWN_MESSAGE = "{user} cannot confirm their own key {key_id}"
KEY_CONFIRM_ROLE_MESSAGE = "only an admin can confirm a member key"
KEY_ALREADY_CONFIRMED_MESSAGE = "key {key_id} is already confirmed"
KEY_ALREADY_REVOKED_MESSAGE = "key {key_id} was already revoked at {revoked_at}"
KEY_REVOKE_ROLE_MESSAGE = "{user} can revoke only their own keys unless they are an admin"
SERVER_KEY_UNKNOWN_MESSAGE = "no server signing key {key_id}"
SERVER_KEY_CURRENT_MESSAGE = "key {key_id} is the current signing key: rotate it first"
EVENT_TYPE_UNKNOWN_MESSAGE = "unknown governance event type {event_type!r}"
PRODUCTION_MODE = "production"


def _system_label(actor: Any, actor_label: str | None) -> str | None:
    return actor_label if actor is None else None


# --- the ledger -------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def event_append(
    *,
    event_type: str,
    payload: Mapping[str, Any],
    actor: Any = None,
    actor_label: str | None = None,
    idempotency_key: str | None = None,
) -> GovernanceEvent:
    """Append one event (signed by the server) and return it; idempotent per key."""
    if event_type not in codes.BY_NAME:
        raise codes.GovernanceError(
            codes.EVENT_TYPE_UNKNOWN, EVENT_TYPE_UNKNOWN_MESSAGE.format(event_type=event_type)
        )
    return ledger.append(
        event_type=event_type,
        payload=payload,
        actor=actor,
        actor_label=_system_label(actor, actor_label),
        idempotency_key=idempotency_key,
    )


# --- replays ----------------------------------------------------------------------------------


def _enqueue(run: ReplayRun) -> None:
    from governance.tasks import replay_run_governed
    from replay.background import enqueue

    enqueue(replay_run_governed, str(run.id))


def _replay_request(
    *,
    trace: Trace,
    mode: str,
    actor: Any,
    actor_label: str | None,
    continue_past: Sequence[int] = (),
    resumed_from: ReplayRun | None = None,
    force_continue: ForceContinueRequest | None = None,
    production: ProductionReplayRequest | None = None,
) -> ReplayRun:
    from replay.services import replay_run_create

    run = replay_run_create(
        trace=trace,
        mode=mode,
        requested_by=actor,
        continue_past=continue_past,
        resumed_from=resumed_from,
    )
    payload: dict[str, Any] = {
        "run_id": str(run.id),
        "trace_id": trace.trace_id,
        "trace_sha256": trace.blob.sha256,
        "mode": mode,
        "continue_past": list(continue_past),
        "resumed_from": str(resumed_from.id) if resumed_from else None,
    }
    if force_continue is not None:
        payload["force_continue_request"] = str(force_continue.id)
    if production is not None:
        payload["production_request"] = str(production.id)
    ledger.append(
        event_type=codes.REPLAY_REQUEST,
        payload=payload,
        actor=actor,
        actor_label=_system_label(actor, actor_label),
        idempotency_key=f"replay-request:{run.id}",
    )
    return run


@transaction.atomic(durable=True)
def replay_request(
    *,
    trace: Trace,
    mode: str,
    actor: Any = None,
    actor_label: str | None = None,
    enqueue: bool = True,
) -> ReplayRun:
    """Create a queued run, append its signed REPLAY_REQUEST, and queue it on commit.

    ``enqueue=False`` leaves execution to the caller (the CLI runs it in-process with
    :func:`replay_run_govern`).
    """
    run = _replay_request(trace=trace, mode=mode, actor=actor, actor_label=actor_label)
    if enqueue:
        _enqueue(run)
    return run


def replay_run_govern(*, run_id: Any, progress: Any = None, workers: int = 1) -> ReplayRun:
    """Execute a queued run under governance: halts first, then the outcome's events.

    What the Celery task calls. Idempotent: the replay service returns a finished run as is,
    and every event appended here has an idempotency key, so a retry appends nothing twice.
    Not one transaction: a replay can take minutes; its outcome is recorded in one.
    """
    from governance.selectors import halts_active_map
    from replay.services import replay_run_execute

    run = replay_run_execute(
        run_id=run_id, halted=halts_active_map(), progress=progress, workers=workers
    )
    replay_outcome_record(run=run)
    run.refresh_from_db()
    return run


def _snapshot_concerned(report: Mapping[str, Any]) -> str | None:
    failed = [c for c in report.get("checks", []) if not c.get("ok")]
    snapshot_ids = report.get("snapshot_ids") or []
    index = report.get("broke_at")
    if (
        failed
        and failed[-1].get("name") == "snapshots"
        and isinstance(index, int)
        and 0 <= index < len(snapshot_ids)
    ):
        return str(snapshot_ids[index])
    return None


def _halt_set(
    *, target_kind: str, target_id: str, reason: str, cause: GovernanceEvent, actor: Any = None
) -> GovernanceEvent:
    existing = Halt.objects.active().filter(
        payload__target_kind=target_kind, payload__target_id=target_id
    )
    found = existing.first()
    if found is not None:
        return found
    return ledger.append(
        event_type=codes.FORCE_HALT_REPLAY,
        payload={
            "target_kind": target_kind,
            "target_id": target_id,
            "reason": reason,
            "cause_seq": cause.seq,
            "cause_type": cause.type,
        },
        actor=actor,
        idempotency_key=f"halt:{target_kind}:{target_id}:{cause.seq}",
    )


@transaction.atomic(durable=True)
def replay_outcome_record(*, run: ReplayRun) -> list[GovernanceEvent]:
    """Append what a finished run's report says, once: divergence, integrity failure (and its
    halts), timeout, then REPLAY_RESULT last."""
    ledger.lock()
    run = ReplayRun.objects.select_related("trace").get(id=run.id)
    report: Mapping[str, Any] = run.report or {}
    trace_id = run.trace.trace_id
    base = {"run_id": str(run.id), "trace_id": trace_id, "mode": run.mode}
    appended: list[GovernanceEvent] = []
    code = run.error_code or None
    if code == errors.REPLAY_DIVERGENCE or report.get("divergences"):
        divergences = list(report.get("divergences") or [])
        first = divergences[0] if divergences else {}
        appended.append(
            ledger.append(
                event_type=codes.REPLAY_DIVERGENCE,
                payload={
                    **base,
                    "step": first.get("step"),
                    "step_id": first.get("step_id"),
                    "path": first.get("path"),
                    "divergences": len(divergences),
                    "divergence_digest": signing.divergence_digest(divergences),
                    "force_continued": bool(report.get("force_continued")),
                },
                idempotency_key=f"replay-divergence:{run.id}",
            )
        )
    if code == errors.INTEGRITY_FAILURE:
        snapshot_id = _snapshot_concerned(report)
        failure = ledger.append(
            event_type=codes.INTEGRITY_FAILURE,
            payload={
                **base,
                "snapshot_id": snapshot_id,
                "broke_at": report.get("broke_at"),
                "expected": report.get("expected"),
                "observed": report.get("observed"),
                "message": report.get("message", ""),
            },
            idempotency_key=f"integrity-failure:{run.id}",
        )
        appended.append(failure)
        reason = f"INTEGRITY_FAILURE in replay {run.id}: {report.get('message', '')}".strip()
        appended.append(
            _halt_set(target_kind="trace", target_id=trace_id, reason=reason, cause=failure)
        )
        if snapshot_id is not None:
            appended.append(
                _halt_set(
                    target_kind="snapshot", target_id=snapshot_id, reason=reason, cause=failure
                )
            )
    if code == errors.REPLAY_TIMEOUT:
        appended.append(
            ledger.append(
                event_type=codes.REPLAY_TIMEOUT,
                payload={**base, "message": report.get("message", "")},
                idempotency_key=f"replay-timeout:{run.id}",
            )
        )
    appended.append(
        ledger.append(
            event_type=codes.REPLAY_RESULT,
            payload={
                **base,
                "state": run.state,
                "status": run.status,
                "error_code": code,
                "authoritative": run.authoritative,
                "force_continued": bool(report.get("force_continued")),
                "resumed_from": str(run.resumed_from_id) if run.resumed_from_id else None,
                "report_digest": "sha256:" + hashlib.sha256(jcs(report)).hexdigest(),
            },
            idempotency_key=f"replay-result:{run.id}",
        )
    )
    return appended


# --- force-continue ---------------------------------------------------------------------------


def _diverged_step(run: ReplayRun) -> tuple[int, list[Any]] | None:
    report = run.report or {}
    divergences = list(report.get("divergences") or [])
    if (
        run.state != ReplayRun.State.DONE
        or run.error_code != errors.REPLAY_DIVERGENCE
        or not divergences
        or not isinstance(divergences[0].get("step"), int)
    ):
        return None
    # the first divergence not already force-continued is where this run stopped
    for divergence in divergences:
        if not divergence.get("force_continued"):
            return int(divergence["step"]), divergences
    return None


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


@transaction.atomic(durable=True)
def force_continue_request_file(
    *,
    run: ReplayRun,
    actor: Any,
    reason: str,
    expires_at: datetime | None = None,
) -> ForceContinueRequest:
    """File a request to continue ``run`` past the step where it diverged."""
    ledger.lock()
    run = ReplayRun.objects.select_related("trace").get(id=run.id)
    found = _diverged_step(run)
    if found is None:
        raise codes.GovernanceError(
            codes.REQUEST_NOT_DIVERGED,
            REQUEST_NOT_DIVERGED_MESSAGE.format(
                run=run.id, status=run.error_code or run.status or run.state
            ),
        )
    step, divergences = found
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, REQUEST_REASON_MESSAGE)
    now = timezone.now()
    expires_at = _expiry(expires_at, now)
    open_request = ForceContinueRequest.objects.filter(
        run=run, state=ForceContinueRequest.State.PENDING, expires_at__gt=now
    ).first()
    if open_request is not None:
        raise codes.GovernanceError(
            codes.REQUEST_PENDING,
            REQUEST_PENDING_MESSAGE.format(request=open_request.id, run=run.id),
        )
    request = ForceContinueRequest(
        run=run,
        step=step,
        divergence_digest=signing.divergence_digest(divergences),
        reason=reason.strip(),
        requested_by=actor,
        expires_at=expires_at,
        created_at=now,
    )
    request.request_event = ledger.append(
        event_type=codes.FORCE_CONTINUE_REQUEST,
        payload={
            "request_id": str(request.id),
            "run_id": str(run.id),
            "trace_id": run.trace.trace_id,
            "step": step,
            "divergence_digest": request.divergence_digest,
            "reason": request.reason,
            "expires_at": signing.format_time(expires_at),
            "admins_required": 1,
            "council_required": conf.council_quorum(),
            "deny_threshold": conf.deny_threshold(),
        },
        actor=actor,
        idempotency_key=f"force-continue-request:{request.id}",
    )
    request.save(force_insert=True)
    return request


def force_continue_payload_for(
    *, request: ForceContinueRequest, decision: str, role: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload a signer signs for ``request`` (the page and ``governance sign``)."""
    return signing.force_continue_payload(
        request_id=str(request.id),
        replay_id=str(request.run_id),
        trace_id=request.run.trace.trace_id,
        step=request.step,
        divergence_digest=request.divergence_digest,
        decision=decision,
        role=role,
        expires_at=signing.format_time(request.expires_at),
        reason=reason,
    )


def _document(document: Any) -> tuple[dict[str, Any], str, str]:
    def malformed(problem: str) -> codes.GovernanceError:
        return codes.GovernanceError(
            codes.APPROVAL_MALFORMED, APPROVAL_MALFORMED_MESSAGE.format(problem=problem)
        )

    if not isinstance(document, Mapping):
        raise malformed("not a JSON object")
    payload, key_id, signature = (
        document.get("payload"),
        document.get("key_id"),
        document.get("signature"),
    )
    if not isinstance(payload, dict):
        raise malformed("payload is not an object")
    if not isinstance(key_id, str) or not key_id:
        raise malformed("key_id is not a string")
    if not isinstance(signature, str):
        raise malformed("signature is not a string")
    if document.get("alg", signing.ALG) != signing.ALG:
        raise malformed(f"alg must be {signing.ALG}")
    try:
        jcs(payload)
    except ValueError as exc:
        raise malformed(f"payload has no canonical form ({exc})") from None
    return payload, key_id, signature


def _signer_key(
    *, approver: Any, key_id: str, payload: dict[str, Any], signature: str, now: datetime
) -> MemberKey:
    key = MemberKey.objects.filter(key_id=key_id, user=approver).first()
    if key is None:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_UNKNOWN,
            APPROVAL_KEY_UNKNOWN_MESSAGE.format(key_id=key_id, user=approver.get_username()),
        )
    if key.revoked_at is not None and key.revoked_at <= now:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_REVOKED,
            APPROVAL_KEY_REVOKED_MESSAGE.format(
                key_id=key.key_id, revoked_at=signing.format_time(key.revoked_at)
            ),
        )
    if key.confirmed_at is None:
        raise codes.GovernanceError(
            codes.APPROVAL_KEY_UNCONFIRMED, APPROVAL_KEY_UNCONFIRMED_MESSAGE.format(key_id=key_id)
        )
    if not signing.verify(bytes.fromhex(key.public_key), jcs(payload), signature):
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


def _not_twice(*, approvals: Any, approver: Any, key: MemberKey, subject: str) -> None:
    if approvals.filter(key=key).exists():
        raise codes.GovernanceError(
            codes.APPROVAL_DUPLICATE_KEY,
            APPROVAL_DUPLICATE_KEY_MESSAGE.format(key_id=key.key_id, subject=subject),
        )
    if approvals.filter(approver=approver).exists():
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


def _require_reason(payload: Mapping[str, Any]) -> str:
    reason = payload.get("reason")
    if not isinstance(reason, str):
        raise codes.GovernanceError(
            codes.APPROVAL_MALFORMED,
            APPROVAL_MALFORMED_MESSAGE.format(problem="reason is not a string"),
        )
    return reason


def _require_role(approver: Any, role: str) -> None:
    if not user_has_role(approver, role):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            APPROVAL_ROLE_MESSAGE.format(user=approver.get_username(), role=role),
        )


def _vote_append(
    *,
    event_type: str,
    approvals: Any,
    approver: Any,
    key: MemberKey,
    payload: Mapping[str, Any],
    signature: str,
    role: str,
    decision: str,
    reason: str,
    label: str,
    **subject: Any,
) -> Approval:
    """Append a signed vote to the ledger and keep its Approval row (request=, halt= or
    production=), once per person and per key among the subject's ``approvals``; ``label``
    names the subject in refusals."""
    _not_twice(approvals=approvals, approver=approver, key=key, subject=label)
    event = ledger.append(
        event_type=event_type,
        payload=payload,
        actor=approver,
        actor_key_id=key.key_id,
        actor_signature=signature,
    )
    return Approval.objects.create(
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


def _votes(approvals: Any) -> list[council.Vote]:
    return [
        council.Vote(person=a.approver_id, key_id=a.key.key_id, role=a.role, decision=a.decision)
        for a in approvals.select_related("key")
    ]


def _open_for_votes(request: CouncilRequest, *, approver: Any, now: datetime) -> None:
    """A request (force-continue or production replay) takes this approver's vote now."""
    if request.state != CouncilRequest.State.PENDING:
        raise codes.GovernanceError(
            codes.REQUEST_CLOSED,
            REQUEST_CLOSED_MESSAGE.format(request=request.id, state=request.state),
        )
    if now >= request.expires_at:
        raise codes.GovernanceError(
            codes.APPROVAL_EXPIRED,
            APPROVAL_EXPIRED_MESSAGE.format(
                request=request.id, expires_at=signing.format_time(request.expires_at)
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
    payload, key_id, signature = _document(document)
    key = _signer_key(
        approver=approver, key_id=key_id, payload=payload, signature=signature, now=now
    )
    _require_subject(
        payload,
        type_=type_,
        field="request_id",
        value=str(request.id),
        label="request",
        subject=f"request {request.id}",
    )
    return payload, key, signature


@transaction.atomic(durable=True)
def approval_record(
    *, request: ForceContinueRequest, approver: Any, document: Mapping[str, Any]
) -> Approval:
    """Record one signed approval or denial of a force-continue request, then decide.

    ``document`` is the signed approval (``{"payload", "key_id", "alg", "signature"}``) the
    browser or ``governance sign`` produced. On quorum this appends FORCE_CONTINUE_APPROVED
    and queues the resumed run; on the deny threshold, FORCE_CONTINUE_REJECTED.
    """
    ledger.lock()
    request = (
        ForceContinueRequest.objects.select_for_update()
        .select_related("run__trace")
        .get(id=request.id)
    )
    subject = f"request {request.id}"
    payload, key, signature = _vote_opened(
        request, approver=approver, document=document, type_=signing.FORCE_CONTINUE_APPROVAL_TYPE
    )
    decision, role = payload.get("decision"), payload.get("role")
    if decision not in signing.DECISIONS or role not in signing.SIGNING_ROLES:
        raise codes.GovernanceError(
            codes.APPROVAL_MALFORMED,
            APPROVAL_MALFORMED_MESSAGE.format(problem="decision or role is not recognised"),
        )
    reason = _require_reason(payload)
    expected = force_continue_payload_for(
        request=request, decision=str(decision), role=str(role), reason=reason
    )
    _compare(payload, expected, subject)
    _require_role(approver, str(role))
    approval = _vote_append(
        event_type=codes.FORCE_CONTINUE_APPROVAL,
        approvals=request.approvals.all(),
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=str(role),
        decision=str(decision),
        reason=reason,
        label=subject,
        request=request,
    )
    result = selectors.force_continue_tally(request=request)
    if result.state != council.PENDING:
        _force_continue_decide(request=request, result=result)
    return approval


def _force_continue_decide(*, request: ForceContinueRequest, result: council.Tally) -> None:
    run = request.run
    approvals = list(request.approvals.order_by("event_id").values_list("event_id", flat=True))
    payload = {
        "request_id": str(request.id),
        "run_id": str(run.id),
        "trace_id": run.trace.trace_id,
        "step": request.step,
        "divergence_digest": request.divergence_digest,
        "approval_seqs": approvals,
        "admins": result.admins,
        "council": result.council,
        "denials": result.denials,
    }
    if result.state == council.REJECTED:
        request.decision_event = ledger.append(
            event_type=codes.FORCE_CONTINUE_REJECTED,
            payload=payload,
            idempotency_key=f"force-continue-decision:{request.id}",
        )
        request.state = ForceContinueRequest.State.REJECTED
    else:
        request.decision_event = ledger.append(
            event_type=codes.FORCE_CONTINUE_APPROVED,
            payload=payload,
            idempotency_key=f"force-continue-decision:{request.id}",
        )
        request.state = ForceContinueRequest.State.APPROVED
        request.resumed_run = _replay_request(
            trace=run.trace,
            mode=run.mode,
            actor=request.requested_by,
            actor_label=None,
            continue_past=[*run.continue_past, request.step],
            resumed_from=run,
            force_continue=request,
        )
        _enqueue(request.resumed_run)
    request.decided_at = request.decision_event.created_at
    request.save(update_fields=["state", "decision_event", "decided_at", "resumed_run"])


@transaction.atomic(durable=True)
def _force_continue_refusal_record(*, run: ReplayRun, step: int | None, actor: Any) -> None:
    ledger.append(
        event_type=codes.FORCE_CONTINUE_REFUSED,
        payload={
            "run_id": str(run.id),
            "trace_id": run.trace.trace_id,
            "step": step,
            "error_code": errors.FORCE_CONTINUE_REQUIRED,
        },
        actor=actor,
    )


def force_continue_resume(*, run: ReplayRun, actor: Any = None) -> ReplayRun:
    """The resumed run of an approved force-continue of ``run``, or a refusal.

    Without an approved request this appends FORCE_CONTINUE_REFUSED (the attempt is on the
    record) and raises ``ReplayError(FORCE_CONTINUE_REQUIRED)`` (REPLAY-06).
    """
    approved = (
        ForceContinueRequest.objects.filter(
            run=run, state=ForceContinueRequest.State.APPROVED, resumed_run__isnull=False
        )
        .select_related("resumed_run")
        .order_by("-decided_at")
        .first()
    )
    if approved is not None and approved.resumed_run is not None:
        return approved.resumed_run
    found = _diverged_step(run)
    step = found[0] if found else None
    _force_continue_refusal_record(run=run, step=step, actor=actor)
    if found is None:
        message = FORCE_CONTINUE_NOTHING_MESSAGE.format(run=run.id)
    else:
        message = FORCE_CONTINUE_REQUIRED_MESSAGE.format(
            run=run.id, step=step, quorum=conf.council_quorum()
        )
    raise errors.ReplayError(
        errors.FORCE_CONTINUE_REQUIRED,
        message,
        broke_at=step,
        detail={"run_id": str(run.id)},
    )


# --- production replay approved by the council ------------------------------------------------


@transaction.atomic(durable=True)
def production_replay_request_file(
    *,
    trace: Trace,
    actor: Any,
    reason: str,
    expires_at: datetime | None = None,
) -> ProductionReplayRequest:
    """Ask a council quorum to approve one production replay of ``trace`` for ``actor``.

    For someone who holds auditor or admin but not both (who holds both may just run it).
    Refused for a trace that is not replayable in production: the run could only end in
    MISSING_SNAPSHOT or MISSING_PERSISTED_AGENT_OUTPUT, so there is nothing to approve.
    """
    from replay.selectors import trace_missing

    ledger.lock()
    trace = Trace.objects.select_related("blob").get(pk=trace.pk)
    if not (user_has_role(actor, membership.ADMIN) or user_has_role(actor, membership.AUDITOR)):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE, PRODUCTION_ROLE_MESSAGE.format(user=actor.get_username())
        )
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, PRODUCTION_REASON_MESSAGE)
    missing = trace_missing(trace)
    if missing:
        raise codes.GovernanceError(
            codes.REQUEST_NOT_REPLAYABLE,
            PRODUCTION_NOT_REPLAYABLE_MESSAGE.format(
                trace=trace.trace_id, missing=", ".join(missing)
            ),
        )
    halted = selectors.halts_active_map()
    targets = [trace.trace_id] + [
        str(ref.get("snapshot_id")) for ref in trace.required_snapshot_ids or []
    ]
    why = next((halted[t] for t in targets if t in halted), None)
    if why is not None:
        raise codes.GovernanceError(
            codes.REQUEST_HALTED, PRODUCTION_HALTED_MESSAGE.format(trace=trace.trace_id, why=why)
        )
    now = timezone.now()
    expires_at = _expiry(expires_at, now)
    open_request = ProductionReplayRequest.objects.filter(
        trace=trace,
        requested_by=actor,
        state=ProductionReplayRequest.State.PENDING,
        expires_at__gt=now,
    ).first()
    if open_request is not None:
        raise codes.GovernanceError(
            codes.REQUEST_PENDING,
            PRODUCTION_PENDING_MESSAGE.format(request=open_request.id, trace=trace.trace_id),
        )
    request = ProductionReplayRequest(
        trace=trace,
        reason=reason.strip(),
        requested_by=actor,
        expires_at=expires_at,
        created_at=now,
    )
    request.request_event = ledger.append(
        event_type=codes.PRODUCTION_REPLAY_REQUEST,
        payload={
            "request_id": str(request.id),
            "trace_id": trace.trace_id,
            "trace_sha256": trace.blob.sha256,
            "mode": "production",
            "requested_by": actor.get_username(),
            "reason": request.reason,
            "expires_at": signing.format_time(expires_at),
            "council_required": conf.council_quorum(),
            "deny_threshold": conf.deny_threshold(),
        },
        actor=actor,
        idempotency_key=f"production-replay-request:{request.id}",
    )
    request.save(force_insert=True)
    return request


def production_replay_payload_for(
    *, request: ProductionReplayRequest, decision: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload a council member signs for ``request`` (the page and ``governance
    sign --production``)."""
    return signing.production_replay_payload(
        request_id=str(request.id),
        trace_id=request.trace.trace_id,
        trace_sha256=request.trace.blob.sha256,
        requested_by=request.requested_by.get_username(),
        decision=decision,
        expires_at=signing.format_time(request.expires_at),
        reason=reason,
    )


@transaction.atomic(durable=True)
def production_replay_approval_record(
    *, request: ProductionReplayRequest, approver: Any, document: Mapping[str, Any]
) -> Approval:
    """Record one council member's signed approval or denial of a production replay.

    On quorum this appends PRODUCTION_REPLAY_APPROVED and queues the production run for the
    requester (its REPLAY_REQUEST names this request); on the deny threshold,
    PRODUCTION_REPLAY_REJECTED.
    """
    ledger.lock()
    request = (
        ProductionReplayRequest.objects.select_for_update()
        .select_related("trace__blob", "requested_by")
        .get(id=request.id)
    )
    subject = f"request {request.id}"
    payload, key, signature = _vote_opened(
        request,
        approver=approver,
        document=document,
        type_=signing.PRODUCTION_REPLAY_APPROVAL_TYPE,
    )
    decision = payload.get("decision")
    if decision not in signing.DECISIONS:
        raise codes.GovernanceError(
            codes.APPROVAL_MALFORMED,
            APPROVAL_MALFORMED_MESSAGE.format(problem="decision is not recognised"),
        )
    reason = _require_reason(payload)
    expected = production_replay_payload_for(request=request, decision=str(decision), reason=reason)
    _compare(payload, expected, subject, chosen=("decision", "reason"))
    _require_role(approver, signing.ROLE_COUNCIL)
    approval = _vote_append(
        event_type=codes.PRODUCTION_REPLAY_APPROVAL,
        approvals=request.approvals.all(),
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=signing.ROLE_COUNCIL,
        decision=str(decision),
        reason=reason,
        label=subject,
        production=request,
    )
    result = selectors.production_tally(request=request)
    if result.state != council.PENDING:
        _production_replay_decide(request=request, result=result)
    return approval


def _production_replay_decide(*, request: ProductionReplayRequest, result: council.Tally) -> None:
    payload = {
        "request_id": str(request.id),
        "trace_id": request.trace.trace_id,
        "trace_sha256": request.trace.blob.sha256,
        "approval_seqs": list(
            request.approvals.order_by("event_id").values_list("event_id", flat=True)
        ),
        "council": result.council,
        "denials": result.denials,
    }
    key = f"production-replay-decision:{request.id}"
    if result.state == council.REJECTED:
        request.decision_event = ledger.append(
            event_type=codes.PRODUCTION_REPLAY_REJECTED, payload=payload, idempotency_key=key
        )
        request.state = ProductionReplayRequest.State.REJECTED
    else:
        request.decision_event = ledger.append(
            event_type=codes.PRODUCTION_REPLAY_APPROVED, payload=payload, idempotency_key=key
        )
        request.state = ProductionReplayRequest.State.APPROVED
        request.run = _replay_request(
            trace=request.trace,
            mode=PRODUCTION_MODE,
            actor=request.requested_by,
            actor_label=None,
            production=request,
        )
        _enqueue(request.run)
    request.decided_at = request.decision_event.created_at
    request.save(update_fields=["state", "decision_event", "decided_at", "run"])


# --- halts ------------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def security_incident_record(
    *, actor: Any, targets: Sequence[tuple[str, str]], reason: str
) -> GovernanceEvent:
    """Declare a security incident; every (kind, id) target ("trace" or "snapshot") is halted."""
    incident = ledger.append(
        event_type=codes.SECURITY_INCIDENT,
        payload={"targets": [list(t) for t in targets], "reason": reason},
        actor=actor,
    )
    for kind, target_id in targets:
        if kind not in ("trace", "snapshot"):
            raise ValueError(f"a halt target is a trace or a snapshot, not {kind!r}")
        _halt_set(
            target_kind=kind,
            target_id=target_id,
            reason=f"SECURITY_INCIDENT: {reason}",
            cause=incident,
            actor=actor,
        )
    return incident


def halt_clear_payload_for(*, halt: GovernanceEvent, reason: str = "") -> dict[str, Any]:
    """The exact payload a council member signs to clear ``halt``."""
    return signing.halt_clear_payload(
        halt_seq=halt.seq,
        halt_hash=halt.hash,
        target_kind=str(halt.payload.get("target_kind")),
        target_id=str(halt.payload.get("target_id")),
        reason=reason,
    )


@transaction.atomic(durable=True)
def halt_clear_approval_record(
    *, halt_seq: int, approver: Any, document: Mapping[str, Any]
) -> Approval:
    """Record one council signature toward clearing a halt; on quorum, FORCE_HALT_CLEAR."""
    ledger.lock()
    halt = Halt.objects.active().filter(seq=halt_seq).first()
    if halt is None:
        raise codes.GovernanceError(
            codes.HALT_NOT_ACTIVE, HALT_NOT_ACTIVE_MESSAGE.format(halt=halt_seq)
        )
    subject = f"halt {halt.seq}"
    now = timezone.now()
    payload, key_id, signature = _document(document)
    key = _signer_key(
        approver=approver, key_id=key_id, payload=payload, signature=signature, now=now
    )
    _require_subject(
        payload,
        type_=signing.HALT_CLEAR_APPROVAL_TYPE,
        field="halt_seq",
        value=halt.seq,
        label="halt",
        subject=subject,
    )
    reason = _require_reason(payload)
    expected = halt_clear_payload_for(halt=halt, reason=reason)
    _compare(payload, expected, subject, chosen=("reason",))
    _require_role(approver, signing.ROLE_COUNCIL)
    approvals = Approval.objects.filter(halt=halt)
    approval = _vote_append(
        event_type=codes.HALT_CLEAR_APPROVAL,
        approvals=approvals,
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=signing.ROLE_COUNCIL,
        decision=signing.APPROVE,
        reason=reason,
        label=subject,
        halt=halt,
    )
    result = council.tally(
        _votes(approvals),
        admins_required=0,
        council_required=conf.council_quorum(),
        deny_threshold=1_000_000,
    )
    if result.state == council.APPROVED:
        ledger.append(
            event_type=codes.FORCE_HALT_CLEAR,
            payload={
                "halt_seq": halt.seq,
                "target_kind": halt.payload.get("target_kind"),
                "target_id": halt.payload.get("target_id"),
                "approval_seqs": list(
                    approvals.order_by("event_id").values_list("event_id", flat=True)
                ),
            },
            idempotency_key=f"halt-clear:{halt.seq}",
        )
    return approval


# --- keys -------------------------------------------------------------------------------------


@transaction.atomic(durable=True)
def signing_key_rotate(*, actor: Any = None, actor_label: str | None = None) -> SigningKey:
    """Retire the current server key and introduce a new one, vouched for by the old one.

    The KEY_ROTATED event is the old key's last signature; from the next event on, the new
    key signs. (The first key ever is introduced by the first append, self-signed.)
    """
    ledger.lock()
    prev = ledger.head()
    now = timezone.now()
    created_at = max(now, prev.created_at) if prev else now
    old = ledger.server_key_current()
    if old is None:
        new, _ = ledger.server_key_create(valid_from=created_at)
        ledger.insert(
            prev=prev,
            event_type=codes.KEY_ADDED,
            payload=ledger.server_key_payload(new),
            key=new,
            created_at=created_at,
            actor=actor,
            actor_label=_system_label(actor, actor_label),
        )
        return new
    new, _ = ledger.server_key_create(valid_from=created_at)
    ledger.insert(
        prev=prev,
        event_type=codes.KEY_ROTATED,
        payload=ledger.server_key_payload(new, new_key_id=new.key_id, old_key_id=old.key_id),
        key=old,
        created_at=created_at,
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    old.valid_until = created_at
    old.save(update_fields=["valid_until"])
    return new


@transaction.atomic(durable=True)
def signing_key_revoke(
    *, key_id: str, reason: str, actor: Any = None, actor_label: str | None = None
) -> SigningKey:
    """Revoke a retired server key: it signs nothing more; what it signed before stays valid."""
    ledger.lock()
    key = SigningKey.objects.filter(key_id=key_id).first()
    if key is None:
        raise codes.GovernanceError(
            codes.KEY_STATE, SERVER_KEY_UNKNOWN_MESSAGE.format(key_id=key_id)
        )
    if key.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            KEY_ALREADY_REVOKED_MESSAGE.format(
                key_id=key_id, revoked_at=signing.format_time(key.revoked_at)
            ),
        )
    current = ledger.server_key_current()
    if current is not None and current.pk == key.pk:
        raise codes.GovernanceError(
            codes.KEY_STATE, SERVER_KEY_CURRENT_MESSAGE.format(key_id=key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_REVOKED,
        payload={
            "registry": "server",
            "key_id": key.key_id,
            "fingerprint": key.fingerprint,
            "reason": reason,
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    key.revoked_at = event.created_at
    key.revocation_reason = reason
    key.save(update_fields=["revoked_at", "revocation_reason"])
    return key


@transaction.atomic(durable=True)
def member_key_register(*, user: Any, public_key: bytes | str, label: str = "") -> MemberKey:
    """Register a member's Ed25519 public key (PEM, hex or base64); an admin confirms it."""
    try:
        raw = signing.public_key_from_text(public_key)
    except signing.KeyFormatError as exc:
        raise codes.GovernanceError(
            codes.KEY_INVALID, KEY_INVALID_MESSAGE.format(problem=exc)
        ) from None
    ledger.lock()
    key_id = signing.key_id_for(raw, "member")
    if MemberKey.objects.filter(fingerprint=signing.fingerprint(raw)).exists():
        raise codes.GovernanceError(
            codes.KEY_DUPLICATE, KEY_DUPLICATE_MESSAGE.format(key_id=key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_ADDED,
        payload={
            "registry": "member",
            "key_id": key_id,
            "user_id": user.pk,
            "username": user.get_username(),
            "public_key": raw.hex(),
            "fingerprint": signing.fingerprint(raw),
            "label": label,
        },
        actor=user,
    )
    return MemberKey.objects.create(
        key_id=key_id,
        user=user,
        public_key=raw.hex(),
        fingerprint=signing.fingerprint(raw),
        label=label,
        registered_at=event.created_at,
    )


@transaction.atomic(durable=True)
def member_key_confirm(*, key: MemberKey, admin: Any) -> MemberKey:
    """An admin (not the key's owner) confirms that the key belongs to its owner."""
    ledger.lock()
    key = MemberKey.objects.select_for_update().get(pk=key.pk)
    if not user_has_role(admin, signing.ROLE_ADMIN):
        raise codes.GovernanceError(codes.APPROVAL_ROLE, KEY_CONFIRM_ROLE_MESSAGE)
    if admin.pk == key.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF,
            KEY_CONFIRM_OWN_MESSAGE.format(user=admin.get_username(), key_id=key.key_id),
        )
    if key.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            KEY_ALREADY_REVOKED_MESSAGE.format(
                key_id=key.key_id, revoked_at=signing.format_time(key.revoked_at)
            ),
        )
    if key.confirmed_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE, KEY_ALREADY_CONFIRMED_MESSAGE.format(key_id=key.key_id)
        )
    event = ledger.append(
        event_type=codes.KEY_CONFIRMED,
        payload={
            "registry": "member",
            "key_id": key.key_id,
            "user_id": key.user_id,
            "fingerprint": key.fingerprint,
        },
        actor=admin,
    )
    key.confirmed_at = event.created_at
    key.confirmed_by = admin
    key.save(update_fields=["confirmed_at", "confirmed_by"])
    return key


@transaction.atomic(durable=True)
def member_key_revoke(*, key: MemberKey, actor: Any, reason: str) -> MemberKey:
    """Revoke a member key (its owner or an admin): it can sign no new approval."""
    ledger.lock()
    key = MemberKey.objects.select_for_update().get(pk=key.pk)
    if actor.pk != key.user_id and not user_has_role(actor, signing.ROLE_ADMIN):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE, KEY_REVOKE_ROLE_MESSAGE.format(user=actor.get_username())
        )
    if key.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            KEY_ALREADY_REVOKED_MESSAGE.format(
                key_id=key.key_id, revoked_at=signing.format_time(key.revoked_at)
            ),
        )
    event = ledger.append(
        event_type=codes.KEY_REVOKED,
        payload={
            "registry": "member",
            "key_id": key.key_id,
            "user_id": key.user_id,
            "fingerprint": key.fingerprint,
            "reason": reason,
        },
        actor=actor,
    )
    key.revoked_at = event.created_at
    key.revoked_by = actor
    key.revocation_reason = reason
    key.save(update_fields=["revoked_at", "revoked_by", "revocation_reason"])
    return key


# --- personal data ----------------------------------------------------------------------------


@transaction.atomic(durable=True)
def pii_access_record(
    *,
    actor: Any,
    trace_id: str,
    fields: Sequence[str],
    reason: str,
    context: str = "",
) -> GovernanceEvent:
    """Log that ``actor`` was shown unredacted personal data (call before showing it)."""
    return ledger.append(
        event_type=codes.PII_REVEALED,
        payload={
            "trace_id": trace_id,
            "fields": list(fields),
            "reason": reason,
            "context": context,
        },
        actor=actor,
    )
