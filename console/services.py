"""The console's own writes: drift sampling (replay a share of stored traces, note changes)."""

from __future__ import annotations

import math
import secrets
import uuid

from django.conf import settings
from django.db.models import Max, Min

from console.models import DriftSample
from replay.models import Trace

DRIFT_ACTOR = "drift-sampling"


def drift_sample_pick(*, fraction: float, max_count: int) -> list[Trace]:
    """About `fraction` of the stored traces, chosen at random without scanning the table.

    Random ids in [min, max] are drawn and looked up; ids that were never used are skipped,
    so a sparse table yields a few fewer than asked. ORDER BY random() would read every row.
    """
    bounds = Trace.objects.aggregate(low=Min("id"), high=Max("id"))
    low, high = bounds["low"], bounds["high"]
    if low is None:
        return []
    span = high - low + 1
    wanted = min(max_count, max(1, math.ceil(span * fraction)), span)
    ids = secrets.SystemRandom().sample(range(low, high + 1), wanted)
    # an expired trace (a tombstone) has nothing left to replay
    return list(Trace.objects.filter(id__in=ids, expired_at__isnull=True).select_related("blob"))


def drift_sample_run(*, fraction: float | None = None, max_count: int | None = None) -> uuid.UUID:
    """Replay a sample of traces in audit mode on the current runtime; record what moved.

    Each replay is a governed one (REPLAY_REQUEST/REPLAY_RESULT in the ledger, by the
    system actor). A trace "drifted" when its verdict now differs from the last one known.
    """
    from governance.services import replay_request, replay_run_govern

    fraction = settings.REPLAY_DRIFT_SAMPLE_FRACTION if fraction is None else fraction
    max_count = settings.REPLAY_DRIFT_SAMPLE_MAX if max_count is None else max_count
    sweep = uuid.uuid4()
    for trace in drift_sample_pick(fraction=fraction, max_count=max_count):
        previous = trace.last_status
        if previous == Trace.Status.NEW:
            previous = (trace.ingest_report or {}).get("status", previous)
        run = replay_request(
            trace=trace, mode="audit", actor=None, actor_label=DRIFT_ACTOR, enqueue=False
        )
        run = replay_run_govern(run_id=run.id)
        DriftSample.objects.create(
            sweep=sweep,
            trace=trace,
            run=run,
            previous_status=previous,
            status=run.status,
            error_code=run.error_code,
            drifted=run.status != previous,
            runtime=f"{trace.runtime_name} {trace.runtime_version}".strip(),
        )
    return sweep
