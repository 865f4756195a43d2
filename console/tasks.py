"""Console tasks: thin, call one service. Replays themselves run as governance.tasks."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def drift_sample(fraction: float | None = None) -> str:
    """The periodic drift sampling (CELERY_BEAT_SCHEDULE in settings)."""
    from console.services import drift_sample_run

    return str(drift_sample_run(fraction=fraction))


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def trace_index_build(trace_pk: int) -> str:
    """A stored trace's index, built after its upload (console.selectors.trace_index_queue)."""
    from console.selectors import trace_index_build as build
    from replay.models import Trace

    trace = Trace.objects.select_related("blob").filter(pk=trace_pk).first()
    if trace is None or trace.expired_at is not None:
        return "gone"
    return "built" if build(trace) is not None else "unreadable"
