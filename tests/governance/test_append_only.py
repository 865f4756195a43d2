"""The ledger and the approvals refuse rewrites in the database itself, for any SQL."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from governance.models import Approval, GovernanceEvent
from tests.governance.factories import approve, enrol, filed_request

pytestmark = pytest.mark.django_db

TABLES = {
    "governance_governanceevent": ("seq", "actor_label = 'mallory'"),
    "governance_approval": ("id", "reason = 'forged'"),
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
        "governance_approval": Approval.objects.get().id,
    }


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

    approval = Approval.objects.get()
    approval.reason = "forged"
    with pytest.raises(AppendOnlyError):
        approval.save()
    with pytest.raises(AppendOnlyError):
        approval.delete()
    with pytest.raises(AppendOnlyError):
        Approval.objects.update(reason="forged")
