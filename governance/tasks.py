"""Celery tasks: thin, take ids, call one service. Enqueued on commit by the services."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError

logger = logging.getLogger(__name__)


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def replay_run_governed(run_id: str) -> str:
    """Run a queued replay under governance (halts, REPLAY_RESULT and friends). Idempotent:
    a redelivered or retried task finds the run finished and its events appended."""
    from governance.services import replay_run_govern

    run = replay_run_govern(run_id=run_id)
    return run.status


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=3,
)
def ledger_verification_run(verification_id: int) -> str:
    """Run a queued ledger verification (governance.verification). Idempotent: a redelivered
    task finds the run claimed or finished and returns its state."""
    from governance.verification import ledger_verification_execute

    return ledger_verification_execute(verification_id=verification_id).state


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def retention_run() -> dict[str, int]:
    """Expire what retention says is due (celery beat: ``retention-run`` in settings). Each
    expiry is its own transaction and skips a trace already expired, so a rerun is harmless."""
    from governance.retention import retention_run as run

    outcome = run()
    return {"expired": len(outcome.expired), "skipped": len(outcome.skipped)}


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def witness_push() -> dict[str, str]:
    """Push the newest checkpoint to every configured witness (celery beat: ``witness-push``
    in settings; also enqueued on demand). Harmless to rerun: a witness holding the size
    already answers 409 with it and the next attempt starts from there."""
    from core.ledger.codes import GovernanceError
    from governance.witnessing import push_all

    try:
        outcomes = push_all()
    except GovernanceError as exc:  # no checkpoint to push (LEDGER_BROKEN: reported there)
        logger.warning("witness push: no checkpoint: %s %s", exc.code, exc.message)
        return {"error": exc.code}
    return {o.witness: o.outcome for o in outcomes}
