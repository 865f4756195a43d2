"""bench_scale's ledger fill is a real chain: the events it COPYs after the real head verify
with the real rules and the real server key (PostgreSQL: the fill uses COPY)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.db import connection

from governance import ledger, services
from governance.models import GovernanceEvent
from tests.governance.factories import person

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.postgres,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the fill writes with COPY"),
]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def test_the_filled_events_chain_from_the_real_head_and_verify():
    import bench_scale

    alice = person("alice")
    services.pii_access_record(actor=alice, trace_id="t", fields=["email"], reason="DSR")
    head = GovernanceEvent.objects.order_by("-seq").first()

    bench_scale.fill_ledger(250, alice)

    events = GovernanceEvent.objects.filter(seq__gt=head.seq).order_by("seq")
    assert events.count() == 250
    assert events.first().prev_hash == head.hash
    assert {e.type for e in events} == {"PII_REVEALED"}
    result = ledger.verify(workers=1)
    assert (result.ok, result.size) == (True, head.seq + 250)
