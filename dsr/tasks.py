"""Celery tasks of the DSR workflow: thin, take ids, call one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, reject_on_worker_lost=True)
def legal_request_bundle(request_id: str) -> str:
    """Build a legal request's evidence bundle (audit replays, the signed file)."""
    from dsr.access import bundle_build

    return bundle_build(request_id=request_id).bundle_state
