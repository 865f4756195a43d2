"""docs/deployment.md's GRANT block does what it says: the application role cannot rewrite the
append-only tables (nor drop their triggers), and can still do its work."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction

from core.ledger import codes
from governance import services
from replay.models import Blob

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.postgres,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="database roles and GRANTs are PostgreSQL's"
    ),
]

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def _grant_block() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- app-role-grants.*?-->\s*```sql\n(.*?)```", text, re.S)
    assert block is not None, "the marked GRANT block is missing from docs/deployment.md"
    sql = "\n".join(
        line for line in block.group(1).splitlines() if not line.lstrip().startswith("--")
    )
    return [s.strip() for s in sql.split(";") if s.strip()]


@pytest.fixture
def app_role():
    role = f"replay_app_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cur:
        cur.execute(f"CREATE ROLE {role} NOLOGIN")
        cur.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        for statement in _grant_block():
            cur.execute(statement.replace("replay_app", role))
    return role


def _as(role: str, sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(f"SET LOCAL ROLE {role}")
        cur.execute(sql, params)


def test_the_app_role_appends_but_cannot_rewrite(app_role):
    event = services.event_append(event_type=codes.PII_REVEALED, payload={"trace_id": "t"})
    blob = Blob.objects.create(sha256="b" * 64, size=1, storage_name="bb/b")

    _as(app_role, "SELECT COUNT(*) FROM governance_governanceevent")
    _as(
        app_role,
        "INSERT INTO replay_blob (sha256, size, storage_name, created_at)"
        " VALUES (%s, 1, 'cc/c', now())",
        ["c" * 64],
    )
    for sql, params in (
        ("UPDATE governance_governanceevent SET actor_label = 'x' WHERE seq = %s", [event.seq]),
        ("DELETE FROM governance_governanceevent WHERE seq = %s", [event.seq]),
        ("TRUNCATE governance_governanceevent CASCADE", []),
        ("UPDATE replay_blob SET size = 2 WHERE id = %s", [blob.id]),
        ("DELETE FROM replay_blob WHERE id = %s", [blob.id]),
        ("UPDATE governance_vote SET reason = 'x'", []),
        ("UPDATE governance_verificationmark SET through_seq = 1", []),
        ("DELETE FROM governance_signingkey", []),
        ("DELETE FROM governance_request", []),
        ("DELETE FROM governance_forcecontinuerequest", []),
        ("DELETE FROM governance_productionreplayrequest", []),
    ):
        with pytest.raises(DatabaseError, match="permission denied"):
            _as(app_role, sql, params)
    with pytest.raises(DatabaseError, match="must be owner"):
        _as(
            app_role,
            "DROP TRIGGER governance_governanceevent_no_rewrite ON governance_governanceevent",
        )


@pytest.mark.parametrize(
    ("statement", "refusal"),
    [
        (
            "SET session_replication_role = replica",
            'permission denied to set parameter "session_replication_role"',
        ),
        (
            "SET LOCAL session_replication_role = replica",
            'permission denied to set parameter "session_replication_role"',
        ),
        (
            "ALTER TABLE governance_governanceevent DISABLE TRIGGER ALL",
            "must be owner of table governance_governanceevent",
        ),
        (
            "ALTER TABLE governance_governanceevent"
            " DISABLE TRIGGER governance_governanceevent_no_rewrite",
            "must be owner of table governance_governanceevent",
        ),
        (
            "DROP TRIGGER governance_governanceevent_no_truncate ON governance_governanceevent",
            "must be owner of relation governance_governanceevent",
        ),
        (
            "UPDATE governance_governanceevent SET payload = '{}'",
            "permission denied for table governance_governanceevent",
        ),
    ],
)
def test_the_app_role_cannot_switch_the_append_only_guards_off(app_role, statement, refusal):
    """`SET LOCAL session_replication_role = replica` would silence every trigger for the
    transaction: a superuser's right, which the application's credentials do not have."""
    services.event_append(event_type=codes.PII_REVEALED, payload={"trace_id": "t"})
    with pytest.raises(DatabaseError) as refused:
        _as(app_role, statement)
    assert str(refused.value).splitlines()[0] == refusal


def test_the_app_role_marks_a_blob_expired_once_and_nothing_else(app_role):
    """Retention runs as the application: it may set replay_blob.expired_at (the one column
    granted), once (the trigger), and lock a trace joined to its blob without locking the blob."""
    blob = Blob.objects.create(sha256="d" * 64, size=1, storage_name="dd/d")
    _as(app_role, "UPDATE replay_blob SET expired_at = now() WHERE id = %s", [blob.id])
    with pytest.raises(DatabaseError, match="append-only"):
        _as(app_role, "UPDATE replay_blob SET expired_at = now() WHERE id = %s", [blob.id])
    with pytest.raises(DatabaseError) as refused:
        _as(app_role, "UPDATE replay_blob SET storage_name = 'x' WHERE id = %s", [blob.id])
    assert str(refused.value).splitlines()[0] == "permission denied for table replay_blob"
