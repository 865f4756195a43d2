"""Production replays approved by the council: the request of someone who may not run one
alone, the council's signed votes, and the run queued for them on quorum."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.ledger import codes, signing
from core.ledger import roles as matrix
from governance import council, ledger, membership, selectors
from governance.models import ProductionReplayRequest, Vote
from governance.services.replays import _enqueue, _replay_request
from governance.services.votes import (
    _council_vote_record,
    _expiry,
    _request_decide,
    _request_file,
)
from replay.models import Trace

# --- messages (asserted verbatim in tests) ----------------------------------------------------
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
PRODUCTION_MODE = "production"


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
    return _request_file(
        request,
        event_type=codes.PRODUCTION_REPLAY_REQUEST,
        idempotency_key=f"production-replay-request:{request.id}",
        subject={
            "trace_id": trace.trace_id,
            "trace_sha256": trace.blob.sha256,
            "mode": "production",
            "requested_by": actor.get_username(),
        },
    )


def production_replay_payload_for(
    *, request: ProductionReplayRequest, decision: str, reason: str = ""
) -> dict[str, Any]:
    """The exact payload a council member signs for ``request`` (the page and ``governance
    sign --production``)."""
    return signing.production_replay_payload(
        request_id=str(request.id),
        trace_id=request.trace.trace_id,
        trace_sha256=request.trace.blob.sha256,
        requested_by=request.filer_name(),
        decision=decision,
        expires_at=signing.format_time(request.expiry()),
        reason=reason,
    )


@transaction.atomic(durable=True)
def production_replay_approval_record(
    *, request: ProductionReplayRequest, approver: Any, document: Mapping[str, Any]
) -> Vote:
    """Record one council member's signed approval or denial of a production replay.

    On quorum this appends PRODUCTION_REPLAY_APPROVED and queues the production run for the
    requester (its REPLAY_REQUEST names this request); on the deny threshold,
    PRODUCTION_REPLAY_REJECTED.
    """
    ledger.lock()
    request = (
        ProductionReplayRequest.objects.select_for_update(of=("self", "governedrequest_ptr"))
        .select_related("trace__blob", "requested_by")
        .get(id=request.id)
    )
    approval = _council_vote_record(request, approver=approver, document=document)
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

    _request_decide(request, result=result, payload=payload)


def production_replay_queued(request: ProductionReplayRequest) -> None:
    """What an approved production replay does (its kind's ``on_approval``): queue the one
    production run of the stored file, for who asked."""
    request.run = _replay_request(
        trace=request.trace,
        mode=PRODUCTION_MODE,
        actor=request.requested_by,
        actor_label=None,
        production=request,
    )
    _enqueue(request.run)
