"""PostgreSQL: an append makes two statements while it holds the ledger lock (the lock, the
head and the Merkle tree's right edge in one; the event and its nodes in the other), even when
another process made the previous append, so every waiting writer waits less."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.ledger import codes
from governance import services, transparency
from governance.models import GovernanceEvent, MerkleNode
from tlog import merkle

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the round trips counted are PostgreSQL's"
    ),
]


def _append(n: int) -> None:
    for i in range(n):
        services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": i})


def _statements(captured) -> list[str]:
    return [
        q["sql"]
        for q in captured
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "BEGIN", "COMMIT"))
    ]


# (not after a key event: the next signer is then looked up in the key registry)
@pytest.mark.parametrize("before", [2, 3, 5, 6, 7, 14])
def test_an_append_after_another_process_s_makes_two_statements(before):
    _append(before)  # before + 1 events: the server key's KEY_ADDED first
    transparency._edge.clear()  # as if another process made the last append

    with CaptureQueriesContext(connection) as captured:
        _append(1)

    sql = _statements(captured.captured_queries)
    assert len(sql) == 2, [s[:90] for s in sql]
    assert sql[0].startswith("SELECT pg_advisory_xact_lock(")
    assert sql[1].startswith("WITH event AS (INSERT INTO governance_governanceevent")
    hashes = GovernanceEvent.objects.order_by("seq").values_list("hash", flat=True)
    tree = merkle.MemoryTree([h.encode("ascii") for h in hashes])
    stored = {(n.level, n.index): bytes(n.hash) for n in MerkleNode.objects.all()}
    assert stored == {
        (level, index): value
        for level, nodes in enumerate(tree.levels)
        for index, value in enumerate(nodes)
    }
