"""Replays under governance: a signed REPLAY_REQUEST before a run is queued, and the run's
outcome in the ledger after it (divergence, integrity failure and its halts, timeout, result)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import errors
from core.canonical import jcs
from core.ledger import codes, signing
from core.ledger import roles as matrix
from governance import ledger, selectors
from governance.models import (
    HALT_BLOB,
    ForceContinueRequest,
    GovernanceEvent,
    ProductionReplayRequest,
)
from governance.services.actors import _system_label, actor_require
from governance.services.halts import _halt_set
from replay import conf as replay_conf
from replay.models import ReplayRun, Trace


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


RUN_NOT_STALE_MESSAGE = (
    "run {run} is {state}, queued since {since}: only a run queued without being picked up for "
    "more than {limit} s can be queued again"
)


def replay_stale_seconds() -> int:
    return replay_conf.stale_seconds()


def replay_run_stale(run: ReplayRun, *, now: datetime | None = None) -> bool:
    """A run still queued, not picked up for longer than ``REPLAY_STALE_SECONDS`` since it
    was (last) queued: its task was lost (the process that held it stopped, the broker was
    down) and it may be queued again."""
    now = now or timezone.now()
    return run.state == ReplayRun.State.QUEUED and now - run.queued_since > timedelta(
        seconds=replay_stale_seconds()
    )


@transaction.atomic(durable=True)
def replay_run_requeue(*, run: ReplayRun, now: datetime | None = None) -> ReplayRun:
    """Hand a stale queued run to the runner again (the view checks who may). Only if it is
    still the same stale run (a compare-and-set on its state and queuing time), so two people
    pressing at once queue it once; the task is idempotent besides. Not stale: RUN_NOT_STALE.
    """
    now = now or timezone.now()
    if not replay_run_stale(run, now=now) or not ReplayRun.objects.filter(
        pk=run.pk, state=ReplayRun.State.QUEUED, requeued_at=run.requeued_at
    ).update(requeued_at=now):
        run.refresh_from_db()
        raise codes.GovernanceError(
            codes.RUN_NOT_STALE,
            RUN_NOT_STALE_MESSAGE.format(
                run=run.id,
                state=run.state,
                since=signing.format_time(run.queued_since),
                limit=replay_stale_seconds(),
            ),
        )
    _enqueue(run)
    run.refresh_from_db()
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
