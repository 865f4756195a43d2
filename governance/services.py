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
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from governance import chain, codes, conf, council, ledger, membership, selectors, signing
from governance import roles as matrix
from governance.membership import user_has_role
from governance.models import (
    HALT_BLOB,
    HALT_SNAPSHOT,
    HALT_TARGET_KINDS,
    HALT_TRACE,
    ApiToken,
    Approval,
    CouncilRequest,
    ForceContinueRequest,
    GovernanceEvent,
    Halt,
    MemberKey,
    ProductionReplayRequest,
    RoleGrantRequest,
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
APPROVAL_ROLE_BEFORE_MESSAGE = (
    "{user} signed as {role} but, per the ledger, did not hold the {role} role before "
    "{subject} was filed (seq {seq})"
)
APPROVAL_MALFORMED_MESSAGE = "a signed approval is {{payload, key_id, alg, signature}}: {problem}"
REQUEST_CLOSED_MESSAGE = "request {request} is already {state}"
REQUEST_NOT_DIVERGED_MESSAGE = "replay {run} did not stop at a divergence ({status})"
REQUEST_PENDING_MESSAGE = "request {request} for replay {run} is still open"
REQUEST_ALREADY_APPROVED_MESSAGE = (
    "request {request} for replay {run} was already approved: the replay resumed as {resumed}"
)
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
INCIDENT_ROLE_MESSAGE = "{user} is not an admin: only an admin may declare a security incident"
INCIDENT_REASON_MESSAGE = "a security incident needs a reason"
INCIDENT_TARGET_MESSAGE = (
    "a security incident names one target: a trace (its trace id, or the sha256 of a stored "
    "file) or a snapshot id"
)
INCIDENT_TARGET_UNKNOWN_MESSAGE = "no stored {what}"
KEY_INVALID_MESSAGE = "not an Ed25519 public key: {problem}"
KEY_DUPLICATE_MESSAGE = "key {key_id} is already registered"
KEY_CONFIRM_OWN_MESSAGE = "{user} cannot confirm their own key {key_id}"
KEY_CONFIRM_ROLE_MESSAGE = "only an admin can confirm a member key"
KEY_ALREADY_CONFIRMED_MESSAGE = "key {key_id} is already confirmed"
KEY_ALREADY_REVOKED_MESSAGE = "key {key_id} was already revoked at {revoked_at}"
KEY_UNANNOUNCED_MESSAGE = "key {key_id} was never added in the ledger"
KEY_REVOKE_ROLE_MESSAGE = "{user} can revoke only their own keys unless they are an admin"
SERVER_KEY_UNKNOWN_MESSAGE = "no server signing key {key_id}"
SERVER_KEY_CURRENT_MESSAGE = "key {key_id} is the current signing key: rotate it first"
API_TOKEN_ALREADY_REVOKED_MESSAGE = "API token {prefix} was already revoked at {revoked_at}"  # noqa: S105 - not a secret
API_TOKEN_NOT_OWN_MESSAGE = "{user} can revoke only their own API tokens"  # noqa: S105 - not a secret
EVENT_TYPE_UNKNOWN_MESSAGE = "unknown governance event type {event_type!r}"
PRODUCTION_MODE = "production"


ACTION_ROLE_MESSAGE = (
    "{user} may not {action}: their roles per the ledger ({roles}) do not allow it"
)
#: how a management command run without --user is named in the ledger (it acts as the system)
CLI_SYSTEM_ACTOR = "system:cli"


def _system_label(actor: Any, actor_label: str | None) -> str | None:
    return actor_label if actor is None else None


def actor_require(*, actor: Any, action: str) -> None:
    """A person acting outside a browser session (a command's ``--user``) may do ``action``
    per the roles matrix, with the roles the ledger says they hold; the system (no actor) may.

    Shell access to the server is a stronger credential than a signed-in session, so strong
    roles count here without a second factor; what counts is that the ledger records them.
    """
    if actor is None:
        return
    membership.forget(actor)
    held = membership.roles_held(actor)
    if not matrix.allowed(held, action):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE,
            ACTION_ROLE_MESSAGE.format(
                user=actor.get_username(),
                action=matrix.describe(action),
                roles=", ".join(sorted(held)) or "none",
            ),
        )


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
    options: Mapping[str, Any] | None = None,
) -> ReplayRun:
    from replay.services import replay_run_create

    run = replay_run_create(
        trace=trace,
        mode=mode,
        requested_by=actor,
        continue_past=continue_past,
        resumed_from=resumed_from,
        options=options,
    )
    payload: dict[str, Any] = {
        "run_id": str(run.id),
        "trace_id": trace.trace_id,
        "trace_sha256": trace.blob.sha256,
        "mode": mode,
        "continue_past": list(continue_past),
        "resumed_from": str(resumed_from.id) if resumed_from else None,
    }
    if run.options:  # a format with replay options (Verist's): the ones this run uses
        payload["options"] = run.options
    if force_continue is not None:
        payload["force_continue_request"] = str(force_continue.id)
    if production is not None:
        payload["production_request"] = str(production.id)
    if actor is None:
        payload["acting_as"] = "system"
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
    options: Mapping[str, Any] | None = None,
) -> ReplayRun:
    """Create a queued run, append its signed REPLAY_REQUEST, and queue it on commit.

    ``enqueue=False`` leaves execution to the caller (the CLI runs it in-process with
    :func:`replay_run_govern`). A person needs the mode's action in the roles matrix
    (REQUEST_ROLE otherwise); without an actor the system asks, and the payload says so.
    ``options``: the format's replay options (Verist's ``validate``, ``strictOutput``,
    ``captureArtifacts``); the run stores every one it uses and the REPLAY_REQUEST names
    them. One the format does not take raises ``OptionError`` and nothing is written.
    """
    actor_require(actor=actor, action=matrix.MODE_ACTIONS[mode])
    run = _replay_request(
        trace=trace, mode=mode, actor=actor, actor_label=actor_label, options=options
    )
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


def _halt_set(
    *,
    target_kind: str,
    target_id: str,
    reason: str,
    cause: GovernanceEvent,
    actor: Any = None,
    trace_id: str | None = None,
) -> GovernanceEvent:
    if target_kind not in HALT_TARGET_KINDS:
        raise ValueError(f"a halt names a {', '.join(HALT_TARGET_KINDS)}, not {target_kind!r}")
    existing = Halt.objects.active().filter(
        payload__target_kind=target_kind, payload__target_id=target_id
    )
    found = existing.first()
    if found is not None:
        return found
    payload: dict[str, Any] = {"target_kind": target_kind, "target_id": target_id}
    if trace_id is not None:  # a file: the trace id it carries, for the reader
        payload["trace_id"] = trace_id
    payload |= {"reason": reason, "cause_seq": cause.seq, "cause_type": cause.type}
    return ledger.append(
        event_type=codes.FORCE_HALT_REPLAY,
        payload=payload,
        actor=actor,
        idempotency_key=f"halt:{target_kind}:{target_id}:{cause.seq}",
    )


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


@transaction.atomic(durable=True)
def replay_outcome_record(*, run: ReplayRun) -> list[GovernanceEvent]:
    """Append what a finished run's report says, once: divergence, integrity failure (and its
    halts), timeout, then REPLAY_RESULT last."""
    ledger.lock()
    run = ReplayRun.objects.select_related("trace__blob", "trace__uploaded_by", "requested_by").get(
        id=run.id
    )
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
    if code in errors.INTEGRITY_CODES:
        target_kind, target_id = selectors.integrity_halt_target(trace=run.trace, report=report)
        uploader = _username(run.trace.uploaded_by)
        message = str(report.get("message", ""))
        failure = ledger.append(
            event_type=codes.INTEGRITY_FAILURE,
            payload={
                **base,
                "trace_sha256": run.trace.blob.sha256,
                "uploaded_by": uploader,
                "replayed_by": _username(run.requested_by),
                "target_kind": target_kind,
                "target_id": target_id,
                "snapshot_id": selectors.integrity_snapshot(report),
                "broke_at": report.get("broke_at"),
                "expected": report.get("expected"),
                "observed": report.get("observed"),
                "message": message,
                **({"error_code": code} if code != errors.INTEGRITY_FAILURE else {}),
            },
            actor=run.requested_by,
            idempotency_key=f"integrity-failure:{run.id}",
        )
        appended.append(failure)
        if target_kind == HALT_BLOB:
            who = uploader or "nobody on record"
            reason = f"{code} in replay {run.id} of a file uploaded by {who}: {message}"
        else:
            reason = f"INTEGRITY_FAILURE in replay {run.id}: the stored {message}"
        appended.append(
            _halt_set(
                target_kind=target_kind,
                target_id=target_id,
                reason=reason,
                cause=failure,
                trace_id=trace_id if target_kind == HALT_BLOB else None,
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
    actor_require(actor=actor, action=matrix.FORCE_CONTINUE_REQUEST)
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
    # an approved request already resumed this run past its divergence, an open one is still
    # collecting signatures: a second request would ask for the same thing again (a rejected
    # or expired one may be asked again)
    standing = selectors.force_continue_standing(run_id=run.id)
    if standing is not None and standing.state == ForceContinueRequest.State.APPROVED:
        raise codes.GovernanceError(
            codes.REQUEST_ALREADY_APPROVED,
            REQUEST_ALREADY_APPROVED_MESSAGE.format(
                request=standing.id, run=run.id, resumed=standing.resumed_run_id
            ),
        )
    if standing is not None:
        raise codes.GovernanceError(
            codes.REQUEST_PENDING,
            REQUEST_PENDING_MESSAGE.format(request=standing.id, run=run.id),
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


def _require_reason(payload: Mapping[str, Any]) -> str:
    reason = payload.get("reason")
    if not isinstance(reason, str):
        raise codes.GovernanceError(
            codes.APPROVAL_MALFORMED,
            APPROVAL_MALFORMED_MESSAGE.format(problem="reason is not a string"),
        )
    return reason


def _require_role(approver: Any, role: str, *, filed_seq: int | None, subject: str) -> None:
    """The approver holds ``role`` per the ledger now and, for a request someone filed (seq
    ``filed_seq``), held it before it was filed: a role granted afterwards, or never recorded
    in the ledger (a group edited by hand), does not count. A halt was filed by nobody, so
    clearing one needs the role per the ledger now."""
    if not user_has_role(approver, role):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            APPROVAL_ROLE_MESSAGE.format(user=approver.get_username(), role=role),
        )
    if filed_seq is not None and not user_has_role(approver, role, before_seq=filed_seq):
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE,
            APPROVAL_ROLE_BEFORE_MESSAGE.format(
                user=approver.get_username(), role=role, subject=subject, seq=filed_seq
            ),
        )


def _vote_append(
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
) -> Approval:
    """Append a signed vote to the ledger and keep its Approval row (request=, halt= or
    production=), once per person and per key among the subject's signed ``ballots`` (the
    ledger's); ``label`` names the subject in refusals."""
    _not_twice(ballots=ballots, approver=approver, key=key, subject=label)
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


def _open_for_votes(request: CouncilRequest, *, approver: Any, now: datetime) -> None:
    """A request (force-continue or production replay) takes this approver's vote now."""
    if request.state != CouncilRequest.State.PENDING:
        raise codes.GovernanceError(
            codes.REQUEST_CLOSED,
            REQUEST_CLOSED_MESSAGE.format(request=request.id, state=request.state),
        )
    expires_at = selectors.request_expiry(request=request)  # the signed filing's, at the latest
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
    _require_role(approver, str(role), filed_seq=request.request_event_id, subject=subject)
    approval = _vote_append(
        event_type=codes.FORCE_CONTINUE_APPROVAL,
        ballots=selectors.force_continue_ballots(request=request),
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
    approvals = [b.seq for b in selectors.force_continue_ballots(request=request)]
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
            options=run.options,
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


def _approved_in_ledger(request: ForceContinueRequest, resumed: ReplayRun) -> bool:
    """The ledger, not the row, says ``request`` was approved and ``resumed`` is its run."""
    decision = GovernanceEvent.objects.filter(seq=request.decision_event_id).first()
    resumed_request = GovernanceEvent.objects.filter(
        idempotency_key=f"replay-request:{resumed.id}"
    ).first()
    return (
        decision is not None
        and decision.type == codes.FORCE_CONTINUE_APPROVED
        and isinstance(decision.payload, dict)
        and decision.payload.get("request_id") == str(request.id)
        and resumed_request is not None
        and isinstance(resumed_request.payload, dict)
        and resumed_request.payload.get("force_continue_request") == str(request.id)
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
    if (
        approved is not None
        and approved.resumed_run is not None
        and _approved_in_ledger(approved, approved.resumed_run)
    ):
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
    membership.forget(actor)
    if not membership.user_may(actor, matrix.REPLAY_PRODUCTION_REQUEST):
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
    why = next(iter(selectors.halts_on_trace(trace=trace).values()), None)
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
    _require_role(
        approver, signing.ROLE_COUNCIL, filed_seq=request.request_event_id, subject=subject
    )
    approval = _vote_append(
        event_type=codes.PRODUCTION_REPLAY_APPROVAL,
        ballots=selectors.production_ballots(request=request),
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
        "approval_seqs": [b.seq for b in selectors.production_ballots(request=request)],
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


def _incident_append(
    *, actor: Any, targets: Sequence[tuple[str, str]], reason: str, trace_id: str | None = None
) -> tuple[GovernanceEvent, list[GovernanceEvent]]:
    incident = ledger.append(
        event_type=codes.SECURITY_INCIDENT,
        payload={"targets": [list(t) for t in targets], "reason": reason},
        actor=actor,
    )
    why = f"SECURITY_INCIDENT {incident.seq} declared by {incident.actor_label}: {reason}"
    halts = [
        _halt_set(
            target_kind=kind,
            target_id=target_id,
            reason=why,
            cause=incident,
            actor=actor,
            trace_id=trace_id if kind == HALT_BLOB else None,
        )
        for kind, target_id in targets
    ]
    return incident, halts


@transaction.atomic(durable=True)
def security_incident_record(
    *, actor: Any, targets: Sequence[tuple[str, str]], reason: str
) -> GovernanceEvent:
    """Record a security incident on targets already resolved to (kind, id) pairs (kinds as in
    ``HALT_TARGET_KINDS``) and halt each; :func:`security_incident_declare` is what people
    call."""
    incident, _halts = _incident_append(actor=actor, targets=targets, reason=reason)
    return incident


def _incident_target(trace: str | None, snapshot: str | None) -> tuple[str, str, str | None]:
    """(kind, id, trace id of a file) of what an incident names; refused if not stored."""
    from replay.selectors import snapshot_referenced

    if (trace is None) == (snapshot is None):
        raise codes.GovernanceError(codes.REQUEST_INVALID, INCIDENT_TARGET_MESSAGE)
    if snapshot is not None:
        snapshot_id = snapshot.strip()
        if not snapshot_referenced(snapshot_id):
            raise codes.GovernanceError(
                codes.INCIDENT_TARGET_UNKNOWN,
                INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"snapshot {snapshot_id}"),
            )
        return HALT_SNAPSHOT, snapshot_id, None
    assert trace is not None
    ref = trace.strip().lower()
    if len(ref) == 64:
        found = Trace.objects.filter(blob__sha256=ref).values_list("trace_id", flat=True).first()
        if found is None:
            raise codes.GovernanceError(
                codes.INCIDENT_TARGET_UNKNOWN,
                INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"file {ref}"),
            )
        return HALT_BLOB, ref, found
    if not Trace.objects.filter(trace_id=ref).exists():
        raise codes.GovernanceError(
            codes.INCIDENT_TARGET_UNKNOWN,
            INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=f"trace {ref}"),
        )
    return HALT_TRACE, ref, None


@transaction.atomic(durable=True)
def security_incident_declare(
    *, actor: Any, reason: str, trace: str | None = None, snapshot: str | None = None
) -> tuple[GovernanceEvent, GovernanceEvent]:
    """An admin declares a security incident (seed 003 §10) against one target: ``trace`` (a
    trace id halts every stored copy; a stored file's sha256 halts that file) or ``snapshot``
    (a snapshot id halts every trace using it). Appends the signed SECURITY_INCIDENT and its
    FORCE_HALT_REPLAY, which only a council quorum clears; returns both events (an already
    active halt on the same target is returned instead of a second one)."""
    ledger.lock()
    if not user_has_role(actor, signing.ROLE_ADMIN):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE, INCIDENT_ROLE_MESSAGE.format(user=actor.get_username())
        )
    kind, target_id, trace_id = _incident_target(trace, snapshot)
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, INCIDENT_REASON_MESSAGE)
    incident, (halt,) = _incident_append(
        actor=actor, targets=[(kind, target_id)], reason=reason.strip(), trace_id=trace_id
    )
    return incident, halt


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
    _require_role(approver, signing.ROLE_COUNCIL, filed_seq=None, subject=subject)
    approval = _vote_append(
        event_type=codes.HALT_CLEAR_APPROVAL,
        ballots=selectors.halt_ballots(halt_seq=halt.seq),
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
    ballots = selectors.halt_ballots(halt_seq=halt.seq)
    result = council.tally(
        [b.vote for b in ballots],
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
                "approval_seqs": [b.seq for b in ballots],
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


def _key_state(key: MemberKey) -> chain.MemberKeyState:
    """A member key's state as the ledger says it (refused if the ledger never added it)."""
    state = ledger.member_key_states(key_id=key.key_id).get(key.key_id)
    if state is None or state.user_id != key.user_id:
        raise codes.GovernanceError(
            codes.KEY_STATE, KEY_UNANNOUNCED_MESSAGE.format(key_id=key.key_id)
        )
    return state


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
    state = _key_state(key)
    if state.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            KEY_ALREADY_REVOKED_MESSAGE.format(
                key_id=key.key_id, revoked_at=signing.format_time(state.revoked_at)
            ),
        )
    if state.confirmed_seq is not None:
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
    state = _key_state(key)
    if state.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            KEY_ALREADY_REVOKED_MESSAGE.format(
                key_id=key.key_id, revoked_at=signing.format_time(state.revoked_at)
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


# --- API tokens -------------------------------------------------------------------------------

#: every token starts with this, so a leaked one is recognisable (secret scanners)
API_TOKEN_MARK = "rac_"  # noqa: S105 - not a secret
API_TOKEN_PREFIX_LENGTH = 12


def api_token_digest(token: str) -> str:
    """The hex SHA-256 a token is stored and looked up by (it has 240 random bits)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@transaction.atomic(durable=True)
def api_token_create(
    *, user: Any, name: str = "", actor: Any = None, actor_label: str | None = None
) -> tuple[ApiToken, str]:
    """A new API token for ``user``: returns the row and the token, which is not kept.

    The ledger's API_TOKEN_CREATED names the token by id and prefix, never the token.
    """
    if actor is None and actor_label is None:
        actor = user  # a person creating their own token
    token = API_TOKEN_MARK + secrets.token_urlsafe(30)
    prefix = token[:API_TOKEN_PREFIX_LENGTH]
    ledger.lock()
    row = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        digest=api_token_digest(token),
        created_at=timezone.now(),
    )
    event = ledger.append(
        event_type=codes.API_TOKEN_CREATED,
        payload={
            "token_id": row.pk,
            "prefix": prefix,
            "name": name,
            "user_id": user.pk,
            "username": user.get_username(),
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    row.created_at = event.created_at
    row.save(update_fields=["created_at"])
    return row, token


@transaction.atomic(durable=True)
def api_token_revoke(
    *, token: ApiToken, actor: Any = None, actor_label: str | None = None
) -> ApiToken:
    """Revoke an API token (its owner, or the command line): it authenticates no more."""
    ledger.lock()
    token = ApiToken.objects.select_for_update().get(pk=token.pk)
    if actor is not None and actor.pk != token.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_ROLE, API_TOKEN_NOT_OWN_MESSAGE.format(user=actor.get_username())
        )
    if token.revoked_at is not None:
        raise codes.GovernanceError(
            codes.KEY_STATE,
            API_TOKEN_ALREADY_REVOKED_MESSAGE.format(
                prefix=token.prefix, revoked_at=signing.format_time(token.revoked_at)
            ),
        )
    event = ledger.append(
        event_type=codes.API_TOKEN_REVOKED,
        payload={
            "token_id": token.pk,
            "prefix": token.prefix,
            "user_id": token.user_id,
            "username": token.user.get_username(),
        },
        actor=actor,
        actor_label=_system_label(actor, actor_label),
    )
    token.revoked_at = event.created_at
    token.save(update_fields=["revoked_at"])
    return token


#: how stale `last_used_at` may get before a request writes it again
API_TOKEN_TOUCH_SECONDS = 60


def api_token_touch(*, token: ApiToken) -> None:
    """Note that the token was just used (not a ledger event; at most once a minute).

    One UPDATE inside whatever request authenticated with the token, so not durable."""
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(
        seconds=API_TOKEN_TOUCH_SECONDS
    ):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


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


# --- roles ------------------------------------------------------------------------------------

ROLE_UNKNOWN_MESSAGE = "{role!r} is not a role (the roles are {roles})"
ROLE_SELF_MESSAGE = "{user} cannot change their own roles: ask another admin"
ROLE_MANAGE_MESSAGE = "{user} does not hold the admin role: only an admin changes roles"
ROLES_ALREADY_INSTALLED_MESSAGE = (
    "the ledger already records roles (seq {seq}): grant roles on the Users page instead"
)
ROLES_INSTALL_EMPTY_MESSAGE = "installation needs at least one admin and one council member"
ROLE_GRANT_PENDING_MESSAGE = "request {request} to grant {user} {roles} is still open"
ROLE_GRANT_SUBJECT_MESSAGE = "{user} cannot sign the grant of roles to themself"
ROLE_GRANT_REASON_MESSAGE = "a grant of admin or council needs a reason"
INSTALL_ACTOR = "system:installation"


@dataclass(frozen=True)
class RoleChange:
    """What a role change did: ``event`` (ROLES_CHANGED) for what took effect at once,
    ``grant`` for the admin or council grant that now awaits a council quorum."""

    event: GovernanceEvent | None
    grant: RoleGrantRequest | None


def _roles_checked(wanted: Iterable[str]) -> list[str]:
    found = sorted(set(wanted))
    for role in found:
        if role not in matrix.ROLES:
            raise codes.GovernanceError(
                codes.ROLE_UNKNOWN,
                ROLE_UNKNOWN_MESSAGE.format(role=role, roles=", ".join(matrix.ROLES)),
            )
    return found


def _roles_payload(user: Any, before: Iterable[str], after: Iterable[str]) -> dict[str, Any]:
    return {
        "user_id": user.pk,
        "username": user.get_username(),
        "roles_before": sorted(before),
        "roles_after": sorted(after),
    }


@transaction.atomic(durable=True)
def roles_install(
    *,
    admins: Sequence[Any],
    council: Sequence[Any],
    others: Sequence[tuple[Any, Iterable[str]]] = (),
    actor_label: str = INSTALL_ACTOR,
) -> list[GovernanceEvent]:
    """Record the installation's first admins and council members (and, from ``others``,
    anyone's other roles, e.g. an upgrade's existing groups) as the ledger's first role events
    (ROLES_INSTALLED, one per person). Once only: refused when the ledger already records any
    role, since from then on every grant of admin or council needs a council quorum."""
    ledger.lock()
    if not admins or not council:
        raise codes.GovernanceError(codes.REQUEST_INVALID, ROLES_INSTALL_EMPTY_MESSAGE)
    first = (
        GovernanceEvent.objects.filter(
            code__in=[codes.code_of(n) for n in codes.ROLE_SETTING_EVENTS]
        )
        .order_by("seq")
        .first()
    )
    if first is not None:
        raise codes.GovernanceError(
            codes.ROLES_ALREADY_INSTALLED, ROLES_ALREADY_INSTALLED_MESSAGE.format(seq=first.seq)
        )
    wanted: dict[int, tuple[Any, set[str]]] = {}
    for role, people in ((matrix.ADMIN, admins), (matrix.COUNCIL, council)):
        for user in people:
            wanted.setdefault(user.pk, (user, set()))[1].add(role)
    for user, held in others:
        checked = _roles_checked(held)
        if checked:  # someone with no role needs no event
            wanted.setdefault(user.pk, (user, set()))[1].update(checked)
    appended = []
    for user, held in sorted(wanted.values(), key=lambda pair: pair[0].get_username()):
        appended.append(
            ledger.append(
                event_type=codes.ROLES_INSTALLED,
                payload={**_roles_payload(user, [], held), "acting_as": "system"},
                actor=None,
                actor_label=actor_label,
            )
        )
        membership.groups_mirror(user, held)
    return appended


@transaction.atomic(durable=True)
def user_roles_change(
    *, actor: Any, user: Any, roles: Iterable[str], reason: str = ""
) -> RoleChange:
    """An admin sets ``user``'s roles to ``roles``.

    Never one's own roles (ROLE_SELF). Revocations and grants of the other roles take effect
    at once with one signed ROLES_CHANGED event naming who changed whom, before and after. A
    grant of admin or council becomes a ROLE_GRANT_REQUEST that a council quorum must sign
    (:func:`role_grant_approval_record`) before it takes effect.
    """
    ledger.lock()
    wanted = set(_roles_checked(roles))
    if actor is None or actor.pk == user.pk:
        name = actor.get_username() if actor is not None else "the system"
        raise codes.GovernanceError(codes.ROLE_SELF, ROLE_SELF_MESSAGE.format(user=name))
    membership.forget(actor)
    if not membership.user_may(actor, matrix.MANAGE):
        raise codes.GovernanceError(
            codes.REQUEST_ROLE, ROLE_MANAGE_MESSAGE.format(user=actor.get_username())
        )
    membership.forget(user)
    before = set(membership.roles_held(user))
    strong_grants = (wanted - before) & matrix.STRONG_ROLES
    at_once = wanted - strong_grants
    event = None
    if at_once != before:
        event = ledger.append(
            event_type=codes.ROLES_CHANGED,
            payload={**_roles_payload(user, before, at_once), "reason": reason.strip()},
            actor=actor,
        )
        membership.groups_mirror(user, at_once)
    grant = None
    if strong_grants:
        grant = _role_grant_file(actor=actor, user=user, grant=strong_grants, reason=reason)
    return RoleChange(event=event, grant=grant)


def _role_grant_file(*, actor: Any, user: Any, grant: set[str], reason: str) -> RoleGrantRequest:
    now = timezone.now()
    if not reason.strip():
        raise codes.GovernanceError(codes.REQUEST_INVALID, ROLE_GRANT_REASON_MESSAGE)
    open_request = RoleGrantRequest.objects.filter(
        user=user, state=RoleGrantRequest.State.PENDING, expires_at__gt=now
    ).first()
    if open_request is not None:
        raise codes.GovernanceError(
            codes.REQUEST_PENDING,
            ROLE_GRANT_PENDING_MESSAGE.format(
                request=open_request.id,
                user=user.get_username(),
                roles=", ".join(open_request.roles),
            ),
        )
    expires_at = _expiry(None, now)
    request = RoleGrantRequest(
        user=user,
        roles=sorted(grant),
        reason=reason.strip(),
        requested_by=actor,
        expires_at=expires_at,
        created_at=now,
    )
    request.request_event = ledger.append(
        event_type=codes.ROLE_GRANT_REQUEST,
        payload={
            "request_id": str(request.id),
            "user_id": user.pk,
            "username": user.get_username(),
            "grant": sorted(grant),
            "requested_by": actor.get_username(),
            "reason": request.reason,
            "expires_at": signing.format_time(expires_at),
            "council_required": conf.council_quorum(),
            "deny_threshold": conf.deny_threshold(),
        },
        actor=actor,
        idempotency_key=f"role-grant-request:{request.id}",
    )
    request.save(force_insert=True)
    return request


def role_grant_payload_for(
    *, request: RoleGrantRequest, decision: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload a council member signs for ``request`` (the page, the API and
    ``governance sign --role-grant``)."""
    return signing.role_grant_payload(
        request_id=str(request.id),
        user_id=request.user_id,
        username=request.user.get_username(),
        grant=list(request.roles),
        requested_by=request.requested_by.get_username(),
        decision=decision,
        expires_at=signing.format_time(request.expires_at),
        reason=reason,
    )


@transaction.atomic(durable=True)
def role_grant_approval_record(
    *, request: RoleGrantRequest, approver: Any, document: Mapping[str, Any]
) -> Approval:
    """Record one council member's signed approval or denial of a role grant; on quorum the
    roles take effect (ROLE_GRANT_APPROVED), on the deny threshold ROLE_GRANT_REJECTED.

    Neither the admin who asked nor the person who would get the roles may sign, and the
    signer must have held the council role, per the ledger, before the request was filed.
    """
    ledger.lock()
    request = (
        RoleGrantRequest.objects.select_for_update()
        .select_related("user", "requested_by")
        .get(id=request.id)
    )
    subject = f"request {request.id}"
    if approver.pk == request.user_id:
        raise codes.GovernanceError(
            codes.APPROVAL_SELF, ROLE_GRANT_SUBJECT_MESSAGE.format(user=approver.get_username())
        )
    payload, key, signature = _vote_opened(
        request, approver=approver, document=document, type_=signing.ROLE_GRANT_APPROVAL_TYPE
    )
    decision = payload.get("decision")
    if decision not in signing.DECISIONS:
        raise codes.GovernanceError(
            codes.APPROVAL_MALFORMED,
            APPROVAL_MALFORMED_MESSAGE.format(problem="decision is not recognised"),
        )
    reason = _require_reason(payload)
    expected = role_grant_payload_for(request=request, decision=str(decision), reason=reason)
    _compare(payload, expected, subject, chosen=("decision", "reason"))
    _require_role(
        approver, signing.ROLE_COUNCIL, filed_seq=request.request_event_id, subject=subject
    )
    approval = _vote_append(
        event_type=codes.ROLE_GRANT_APPROVAL,
        ballots=selectors.role_grant_ballots(request=request),
        approver=approver,
        key=key,
        payload=payload,
        signature=signature,
        role=signing.ROLE_COUNCIL,
        decision=str(decision),
        reason=reason,
        label=subject,
        role_grant=request,
    )
    ballots = selectors.role_grant_ballots(request=request)
    result = selectors.role_grant_tally(request=request, ballots=ballots)
    if result.state != council.PENDING:
        _role_grant_decide(request=request, result=result, ballots=ballots)
    return approval


def _role_grant_decide(
    *, request: RoleGrantRequest, result: council.Tally, ballots: list[selectors.Ballot]
) -> None:
    user = request.user
    membership.forget(user)
    before = set(membership.roles_held(user))
    after = before | set(request.roles)
    payload = {
        "request_id": str(request.id),
        **_roles_payload(user, before, after),
        "grant": list(request.roles),
        "requested_by": request.requested_by.get_username(),
        "approval_seqs": [b.seq for b in ballots],
        "council": result.council,
        "denials": result.denials,
    }
    key = f"role-grant-decision:{request.id}"
    if result.state == council.REJECTED:
        payload["roles_after"] = sorted(before)
        request.decision_event = ledger.append(
            event_type=codes.ROLE_GRANT_REJECTED, payload=payload, idempotency_key=key
        )
        request.state = RoleGrantRequest.State.REJECTED
    else:
        request.decision_event = ledger.append(
            event_type=codes.ROLE_GRANT_APPROVED, payload=payload, idempotency_key=key
        )
        request.state = RoleGrantRequest.State.APPROVED
        membership.groups_mirror(user, after)
    request.decided_at = request.decision_event.created_at
    request.save(update_fields=["state", "decision_event", "decided_at"])
