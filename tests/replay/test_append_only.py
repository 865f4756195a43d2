from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from replay.models import AppendOnlyError, Blob

pytestmark = pytest.mark.django_db


@pytest.fixture
def blob():
    return Blob.objects.create(sha256="a" * 64, size=3, storage_name="aa/aaaa")


def test_it_refuses_raw_sql_update_of_a_blob(blob):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute("UPDATE replay_blob SET size = 4 WHERE id = %s", [blob.id])
    blob.refresh_from_db()
    assert blob.size == 3


def test_it_refuses_raw_sql_delete_of_a_blob(blob):
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cur,
    ):
        cur.execute("DELETE FROM replay_blob WHERE id = %s", [blob.id])
    assert Blob.objects.filter(id=blob.id).exists()


def test_it_refuses_orm_update_and_delete_of_a_blob(blob):
    blob.size = 4
    with pytest.raises(AppendOnlyError):
        blob.save()
    with pytest.raises(AppendOnlyError):
        blob.delete()
