"""Change any single stored field of any event underneath (triggers dropped, as an attacker
with database access would): ``governance verify`` names that event's seq."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from core.ledger import chain
from governance import services
from governance.models import GovernanceEvent
from replay.dbguards import drop_append_only_sql
from tests.governance.factories import approve, enrol, filed_request, person

pytestmark = pytest.mark.django_db

TABLE = "governance_governanceevent"


def _flip(text: str) -> str:
    return text[:-1] + ("0" if text[-1] != "0" else "1")


#: field -> how an attacker changes it
CHANGES = {
    "seq": lambda e: e.seq + 1000,
    "code": lambda e: e.code + 1,
    "type": lambda e: "REPLAY_RESULT",
    "created_at": lambda e: e.created_at + timedelta(microseconds=1),
    "actor_id": lambda e: person("frank").pk,
    "actor_label": lambda e: "mallory",
    "payload": lambda e: {**e.payload, "decision": "deny"},
    "idempotency_key": lambda e: "replay-result:forged",
    "server_key_id": lambda e: "server-0000000000000000",
    "actor_key_id": lambda e: "member-0000000000000000",
    "actor_signature": lambda e: _flip(e.actor_signature),
    "prev_hash": lambda e: _flip(e.prev_hash),
    "hash": lambda e: _flip(e.hash),
    "server_signature": lambda e: _flip(e.server_signature),
}


def test_every_stored_field_is_covered():
    columns = {f.attname for f in GovernanceEvent._meta.concrete_fields}
    assert columns == set(chain.FIELDS) == set(CHANGES)


@pytest.fixture
def ledger_with_an_approval():
    """A ledger whose middle event has every optional field set (an actor's signed approval)."""
    carol = enrol("carol")
    request = filed_request()
    approval = services.approval_record(
        request=request, approver=carol.user, document=approve(carol, request)
    )
    services.pii_access_record(actor=person("bob"), trace_id="t", fields=["email"], reason="DSR")
    event = approval.event
    assert event.actor_signature
    assert event.actor_key_id
    assert event.actor_id
    # idempotency_key is null on approvals; it is set on most replay events
    return event


def _verify_json():
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("governance", "verify", "--json", stdout=out)
    assert exited.value.code == 1
    return json.loads(out.getvalue())


def test_it_verifies_before_anything_is_changed(ledger_with_an_approval):
    out = StringIO()
    call_command("governance", "verify", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["ok"] is True
    assert result["broke_at"] is None
    assert result["size"] == GovernanceEvent.objects.count()


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_changing_one_field_underneath_names_that_seq(ledger_with_an_approval, field):
    event = ledger_with_an_approval
    column = GovernanceEvent._meta.get_field(field if field != "actor_id" else "actor")
    value = CHANGES[field](event)
    original = getattr(event, column.attname)
    sql = f"UPDATE {TABLE} SET {column.column} = %s WHERE seq = %s"  # noqa: S608
    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, TABLE):
            cur.execute(drop)
        cur.execute(sql, [column.get_db_prep_save(value, connection), event.seq])
    result = _verify_json()
    assert result["ok"] is False
    assert result["broke_at"] == event.seq, result
    # put it back so the deferred foreign keys hold when the test database is checked
    where = value if field == "seq" else event.seq
    with connection.cursor() as cur:
        cur.execute(sql, [column.get_db_prep_save(original, connection), where])


def test_a_deleted_event_is_named_as_the_missing_seq(ledger_with_an_approval):
    event = ledger_with_an_approval
    with connection.cursor() as cur:
        for table in (TABLE, "governance_vote"):
            for sql in drop_append_only_sql(connection.vendor, table):
                cur.execute(sql)
        cur.execute("DELETE FROM governance_vote WHERE event_id = %s", [event.seq])
        cur.execute(f"DELETE FROM {TABLE} WHERE seq = %s", [event.seq])  # noqa: S608
    result = _verify_json()
    assert (result["broke_at"], result["code"]) == (event.seq, "CHAIN_SEQ")
    assert result["expected"] == str(event.seq)
    assert result["observed"] == str(event.seq + 1)


def test_the_parallel_verifier_names_the_same_seq(ledger_with_an_approval):
    """Worker processes check hashes and signatures; the first break is still the first."""
    from governance import ledger

    event = ledger_with_an_approval
    assert ledger.verify(workers=2, chunk_size=3).ok
    column = GovernanceEvent._meta.get_field("payload")
    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, TABLE):
            cur.execute(drop)
        cur.execute(
            f"UPDATE {TABLE} SET payload = %s WHERE seq = %s",  # noqa: S608
            [column.get_db_prep_save({**event.payload, "decision": "deny"}, connection), event.seq],
        )
    parallel = ledger.verify(workers=2, chunk_size=3)
    assert parallel.broken is not None
    assert parallel.broken.seq == event.seq
    assert parallel.broken == ledger.verify(workers=1).broken
