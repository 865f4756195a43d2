"""The blob guard lets exactly one update through: retention setting ``expired_at`` once, from
NULL, with nothing else changed (``replay.dbguards.expiry_only_sql``). Every other rewrite is
refused by the database as before."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import DatabaseError, connection, transaction

from replay.models import AppendOnlyError, Blob

pytestmark = pytest.mark.django_db
AT = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def blob():
    return Blob.objects.create(sha256="b" * 64, size=3, storage_name="bb/bbbb")


def _raw(sql, params):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)


def test_it_lets_retention_set_expired_at_once(blob):
    assert Blob.objects.filter(pk=blob.pk, expired_at__isnull=True).update(expired_at=AT) == 1

    blob.refresh_from_db()
    assert (blob.expired_at, blob.sha256, blob.size) == (AT, "b" * 64, 3)


def test_it_refuses_setting_expired_at_a_second_time(blob):
    Blob.objects.filter(pk=blob.pk).update(expired_at=AT)

    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE replay_blob SET expired_at = %s WHERE id = %s", [datetime.now(UTC), blob.pk])
    blob.refresh_from_db()
    assert blob.expired_at == AT


def test_it_refuses_clearing_expired_at(blob):
    Blob.objects.filter(pk=blob.pk).update(expired_at=AT)

    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE replay_blob SET expired_at = NULL WHERE id = %s", [blob.pk])


@pytest.mark.parametrize(
    ("assignment", "value"),
    [("size", 4), ("sha256", "c" * 64), ("storage_name", "elsewhere")],
)
def test_it_refuses_any_other_column_changed_with_the_expiry(blob, assignment, value):
    with pytest.raises(DatabaseError, match="append-only"):
        _raw(
            f"UPDATE replay_blob SET expired_at = %s, {assignment} = %s WHERE id = %s",  # noqa: S608 - fixed column names
            [AT, value, blob.pk],
        )
    blob.refresh_from_db()
    assert (blob.expired_at, blob.size, blob.sha256) == (None, 3, "b" * 64)


def test_it_still_refuses_updates_and_deletes_of_an_expired_blob(blob):
    Blob.objects.filter(pk=blob.pk).update(expired_at=AT)

    with pytest.raises(DatabaseError, match="append-only"):
        _raw("UPDATE replay_blob SET size = 4 WHERE id = %s", [blob.pk])
    with pytest.raises(DatabaseError, match="append-only"):
        _raw("DELETE FROM replay_blob WHERE id = %s", [blob.pk])
    blob.refresh_from_db()
    with pytest.raises(AppendOnlyError):
        blob.delete()
