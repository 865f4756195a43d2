"""The ledger and the votes refuse rewrites in the database itself, for any SQL; a governed
request's rows change only as a decision does (pending to approved or rejected)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from governance.models import GovernanceEvent, Vote
from tests.governance.factories import approve, enrol, filed_request

pytestmark = pytest.mark.django_db

TABLES = {
    "governance_governanceevent": ("seq", "actor_label = 'mallory'"),
    "governance_vote": ("id", "reason = 'forged'"),
    "governance_request": ("id", "reason = 'forged'"),
    "governance_forcecontinuerequest": ("governedrequest_ptr_id", "step = 99"),
}


@pytest.fixture
def rows():
    """One approval and the events around it: a row in every protected table."""
    carol = enrol("carol")
    request = filed_request()
    from governance import services

    services.approval_record(request=request, approver=carol.user, document=approve(carol, request))
    return {
        "governance_governanceevent": GovernanceEvent.objects.order_by("-seq").first().seq,
        "governance_vote": Vote.objects.get().id,
        "governance_request": _id(request.id),
        "governance_forcecontinuerequest": _id(request.id),
    }


def _id(value):
    """A UUID as the vendor stores it (SQLite: 32 hex digits, PostgreSQL: uuid)."""
    return value.hex if connection.vendor == "sqlite" else value


def _raw(sql, params=()):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_it_refuses_a_raw_sql_update(rows, table):
    pk, assignment = TABLES[table]
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(f"UPDATE {table} SET {assignment} WHERE {pk} = %s", [rows[table]])  # noqa: S608


@pytest.mark.parametrize("table", sorted(TABLES))
def test_it_refuses_a_raw_sql_delete(rows, table):
    pk, _ = TABLES[table]
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(f"DELETE FROM {table} WHERE {pk} = %s", [rows[table]])  # noqa: S608
    with connection.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {table} WHERE {pk} = %s", [rows[table]])  # noqa: S608
        assert cur.fetchone() == (1,)


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="TRUNCATE exists only on PostgreSQL")
@pytest.mark.parametrize("table", sorted(TABLES))
def test_it_refuses_truncate_on_postgresql(rows, table):
    with connection.cursor() as cur:
        # fire the deferred foreign-key checks of this test's inserts first, or PostgreSQL
        # refuses the TRUNCATE for that reason before our trigger is even asked
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(f"TRUNCATE {table} CASCADE")


def test_it_refuses_orm_rewrites_of_approvals(rows):
    from replay.models import AppendOnlyError

    approval = Vote.objects.get()
    approval.reason = "forged"
    with pytest.raises(AppendOnlyError):
        approval.save()
    with pytest.raises(AppendOnlyError):
        approval.delete()
    with pytest.raises(AppendOnlyError):
        Vote.objects.update(reason="forged")


# --- a governed request changes only as a decision does ------------------------------------------


@pytest.fixture
def pending(rows):
    from governance.models import ForceContinueRequest

    return ForceContinueRequest.objects.get()


@pytest.mark.parametrize(
    "assignment",
    [
        "state = 'approved'",  # no decision event
        "state = 'withdrawn', decision_event_id = 1, decided_at = created_at",
        "reason = 'forged'",
        "expires_at = created_at",
        "request_event_id = 1",
        "subject = 'another run'",
        "payload = '{}'",
    ],
)
def test_a_request_row_refuses_every_update_but_a_decision(pending, assignment):
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(
            f"UPDATE governance_request SET {assignment} WHERE id = %s",  # noqa: S608
            [_id(pending.id)],
        )


def test_a_request_row_takes_its_decision_once(pending):
    first = GovernanceEvent.objects.order_by("seq").first().seq
    decide = (
        "UPDATE governance_request SET state = %s, decision_event_id = %s, "
        "decided_at = created_at WHERE id = %s"
    )
    _raw(decide, ["rejected", first, _id(pending.id)])
    pending.refresh_from_db()
    assert (pending.state, pending.decision_event_id) == ("rejected", first)
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(decide, ["approved", first, _id(pending.id)])


def test_a_force_continue_row_sets_its_resumed_run_once(pending):
    from tests.governance.factories import diverged_run

    run, other = diverged_run(), diverged_run()
    sql = (
        "UPDATE governance_forcecontinuerequest SET resumed_run_id = %s "
        "WHERE governedrequest_ptr_id = %s"
    )
    _raw(sql, [_id(run.id), _id(pending.id)])
    _raw(sql, [_id(run.id), _id(pending.id)])  # the same value again: what a decision's save does
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(sql, [_id(other.id), _id(pending.id)])
