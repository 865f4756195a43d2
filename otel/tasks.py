"""Celery tasks of the OTLP receiver: thin, take ids, call one service; idempotent, so a
redelivered task (acks late) stores nothing twice."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError


@shared_task(
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError,),
    retry_backoff=True,
    max_retries=5,
)
def otlp_read_body(body_pk: int) -> int:
    """Read one stored export body's spans into rows (``otel.services.otlp_read``)."""
    from otel.services import otlp_read

    # a body another runner is reading (the sweep) is left to it: waiting would hold this
    # process idle meanwhile, and the queued reads behind it would then follow the sweep
    # body by body, one process working for two
    done = otlp_read(body_pk=body_pk, wait=False)
    return done.new_spans if done is not None else 0


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=3)
def otel_sweep() -> dict[str, int]:
    """Read unread bodies and seal the traces that are due (celery beat: ``otel-sweep``)."""
    from otel.services import otel_sweep as sweep

    return sweep()


def enqueue_read(body_pk: int) -> None:
    """Queue reading a body once the transaction that stored it commits."""
    from replay.background import enqueue

    enqueue(otlp_read_body, body_pk)
