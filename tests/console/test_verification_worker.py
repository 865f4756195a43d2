"""The verification API under the real Celery worker (CI's PostgreSQL + Redis pass): beyond
GOVERNANCE_VERIFY_INLINE_MAX new events the request checks nothing itself, queues the
background verification, the worker runs it, and the next request reads its signed mark."""

from __future__ import annotations

import time

import pytest

from governance import services
from governance.models import GovernanceEvent, LedgerVerification, VerificationMark

pytestmark = [pytest.mark.celery_worker, pytest.mark.postgres]


@pytest.mark.usefixtures("flushable_transactional_db")
def test_the_api_queues_what_it_does_not_check_and_the_worker_verifies_it(
    celery_worker, as_persona, settings
):
    settings.GOVERNANCE_VERIFY_INLINE_MAX = 2
    client = as_persona("vera")
    for i in range(5):
        services.pii_access_record(actor=None, trace_id=f"t{i}", fields=["email"], reason="DSR")
    head = GovernanceEvent.objects.order_by("-seq").first()

    first = client.get("/api/governance/verification/").json()

    assert (first["ok"], first["checked_now"], first["unverified"]) == (False, 0, head.seq)
    run = LedgerVerification.objects.get(pk=first["verification_id"])
    deadline = time.monotonic() + 60
    while LedgerVerification.objects.get(pk=run.pk).finished_at is None:
        if time.monotonic() > deadline:
            pytest.fail(f"the worker did not verify:\n{celery_worker.output()[-4000:]}")
        time.sleep(0.2)
    run.refresh_from_db()
    assert (run.state, run.scope, run.checked, run.total) == ("done", "new", head.seq, head.seq)
    assert VerificationMark.objects.get().through_seq == head.seq

    again = client.get("/api/governance/verification/").json()

    assert (again["ok"], again["checked_now"], again["unverified"]) == (True, 0, 0)
    assert (again["verified_through"], again["head_hash"]) == (head.seq, head.hash)
