"""Several events appended in one hold of the ledger lock (``ledger.append_many``, the
``events_append`` service): the same events one ``append`` each would write, in order, with
the tree grown alike, in one INSERT on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.ledger import codes
from governance import ledger, services
from governance.models import GovernanceEvent, MerkleNode
from tlog import merkle

pytestmark = pytest.mark.django_db


def _entries(n: int, **extra) -> list[dict]:
    return [{"event_type": codes.SECURITY_INCIDENT, "payload": {"n": i}, **extra} for i in range(n)]


def _tree_is_the_chain() -> None:
    hashes = GovernanceEvent.objects.order_by("seq").values_list("hash", flat=True)
    tree = merkle.MemoryTree([h.encode("ascii") for h in hashes])
    stored = {(n.level, n.index): bytes(n.hash) for n in MerkleNode.objects.all()}
    assert stored == {
        (level, index): value
        for level, nodes in enumerate(tree.levels)
        for index, value in enumerate(nodes)
    }


def test_a_batch_appends_its_events_in_order_after_the_head():
    services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"first": True})
    head = GovernanceEvent.objects.order_by("-seq").first()

    events = services.events_append(_entries(7, actor_label="batcher"))

    assert [e.seq for e in events] == list(range(head.seq + 1, head.seq + 8))
    assert [e.payload for e in events] == [{"n": i} for i in range(7)]
    stored = list(GovernanceEvent.objects.filter(seq__gt=head.seq).order_by("seq"))
    assert [(e.seq, e.hash, e.prev_hash, e.actor_label) for e in stored] == [
        (e.seq, e.hash, e.prev_hash, "batcher") for e in events
    ]
    assert stored[0].prev_hash == head.hash
    assert ledger.verify(workers=1).ok
    _tree_is_the_chain()


def test_the_first_batch_announces_the_server_key_first():
    events = services.events_append(_entries(3))

    first = GovernanceEvent.objects.get(seq=1)
    assert first.type == codes.KEY_ADDED
    assert [e.seq for e in events] == [2, 3, 4]
    assert ledger.verify(workers=1).ok
    _tree_is_the_chain()


def test_a_batch_is_idempotent_per_key():
    earlier = services.event_append(
        event_type=codes.SECURITY_INCIDENT, payload={"n": -1}, idempotency_key="k-old"
    )
    entries = [
        {"event_type": codes.SECURITY_INCIDENT, "payload": {"n": 0}, "idempotency_key": "k-old"},
        {"event_type": codes.SECURITY_INCIDENT, "payload": {"n": 1}, "idempotency_key": "k-new"},
        {"event_type": codes.SECURITY_INCIDENT, "payload": {"n": 2}, "idempotency_key": "k-new"},
        {"event_type": codes.SECURITY_INCIDENT, "payload": {"n": 3}},
    ]

    events = services.events_append(entries)

    assert events[0].seq == earlier.seq
    assert events[1].seq == events[2].seq == earlier.seq + 1
    assert events[1].payload == {"n": 1}
    assert events[3].seq == earlier.seq + 2
    assert GovernanceEvent.objects.count() == earlier.seq + 2
    assert ledger.verify(workers=1).ok


def test_an_empty_batch_appends_nothing():
    assert services.events_append([]) == []
    assert GovernanceEvent.objects.count() == 0


def test_an_unknown_type_refuses_the_whole_batch():
    services.event_append(event_type=codes.SECURITY_INCIDENT, payload={})
    before = GovernanceEvent.objects.count()

    with pytest.raises(codes.GovernanceError) as refused:
        services.events_append([*_entries(2), {"event_type": "NOPE", "payload": {}}])

    assert refused.value.code == codes.EVENT_TYPE_UNKNOWN
    assert GovernanceEvent.objects.count() == before


def test_an_entry_with_an_unknown_field_is_refused():
    with pytest.raises(TypeError):
        services.events_append([{"event_type": codes.SECURITY_INCIDENT, "payload": {}, "x": 1}])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's round trips")
def test_a_batch_makes_two_statements_under_the_lock():
    services.event_append(event_type=codes.SECURITY_INCIDENT, payload={})
    services.event_append(event_type=codes.SECURITY_INCIDENT, payload={})

    with CaptureQueriesContext(connection) as captured:
        services.events_append(_entries(9))

    sql = [
        q["sql"][:60]
        for q in captured.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT"))
    ]
    assert len(sql) == 2, sql
    assert sql[0].startswith("SELECT pg_advisory_xact_lock(")
    assert sql[1].startswith("WITH event AS (INSERT INTO governance_governanceevent")
    _tree_is_the_chain()


def test_payloads_are_stored_as_given_and_verify():
    payloads = [
        {"x": 1.5, "tiny": 1e-7, "big": 2**53, "s": 'é😀\u2028"\\', "n": {"a": [1, None, True]}},
        {"empty": {}, "list": [], "text": ""},
    ]

    events = services.events_append(
        [{"event_type": codes.SECURITY_INCIDENT, "payload": p} for p in payloads]
    )

    for event, payload in zip(events, payloads, strict=True):
        assert GovernanceEvent.objects.get(seq=event.seq).payload == payload
    assert ledger.verify(workers=1).ok
