"""Force-continue: a request to continue a diverged replay past its step, one admin's and a
council quorum's signed votes on it, the resumed run, and the refusal of a resume without them
(REPLAY-06)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import errors
from core.ledger import codes, signing
from core.ledger import roles as matrix
from governance import conf, council, ledger, selectors
from governance.models import ForceContinueRequest, GovernanceEvent, Vote
from governance.services.actors import actor_require
from governance.services.replays import _enqueue, _replay_request
from governance.services.votes import (
    _council_vote_record,
    _expiry,
    _request_decide,
    _request_file,
)
from replay.models import ReplayRun

# --- messages (asserted verbatim in tests) ----------------------------------------------------
REQUEST_NOT_DIVERGED_MESSAGE = "replay {run} did not stop at a divergence ({status})"
REQUEST_PENDING_MESSAGE = "request {request} for replay {run} is still open"
REQUEST_ALREADY_APPROVED_MESSAGE = (
    "request {request} for replay {run} was already approved: the replay resumed as {resumed}"
)
REQUEST_REASON_MESSAGE = "a force-continue request needs a reason"
FORCE_CONTINUE_REQUIRED_MESSAGE = (
    "continuing replay {run} past step {step} needs an approved force-continue "
    "(one admin and {quorum} council signatures)"
)
FORCE_CONTINUE_NOTHING_MESSAGE = "replay {run} did not stop at a divergence: nothing to continue"


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
    return _request_file(
        request,
        event_type=codes.FORCE_CONTINUE_REQUEST,
        idempotency_key=f"force-continue-request:{request.id}",
        subject={
            "run_id": str(run.id),
            "trace_id": run.trace.trace_id,
            "step": step,
            "divergence_digest": request.divergence_digest,
        },
        admins_required=1,
    )


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
        expires_at=signing.format_time(request.expiry()),
        reason=reason,
    )


@transaction.atomic(durable=True)
def approval_record(
    *, request: ForceContinueRequest, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """Record one signed approval or denial of a force-continue request, then decide.

    ``document`` is the signed approval (``{"payload", "key_id", "alg", "signature"}``) the
    browser or ``governance sign`` produced. On quorum this appends FORCE_CONTINUE_APPROVED
    and queues the resumed run; on the deny threshold, FORCE_CONTINUE_REJECTED.
    """
    ledger.lock()
    request = (
        ForceContinueRequest.objects.select_for_update(of=("self", "governedrequest_ptr"))
        .select_related("run__trace")
        .get(id=request.id)
    )
    approval = _council_vote_record(request, approver=approver, document=document)
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

    _request_decide(request, result=result, payload=payload)


def force_continue_resumed(request: ForceContinueRequest) -> None:
    """What an approved force-continue does (its kind's ``on_approval``): queue the run
    resumed past the step, for who asked."""
    run = request.run
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
    if request.decision_event_id is None:
        return False
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
