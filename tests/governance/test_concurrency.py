"""Concurrent appends from 8 processes on PostgreSQL: one gapless chain that verifies.

The writers are real processes with their own connections, so they need a database that
outlives a test transaction: the test creates a scratch database, migrates it, and drops it.
SQLite is not exercised here because the test database is in memory (and SQLite serialises
every writer with BEGIN IMMEDIATE anyway, a rule the governance system check enforces).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

WRITERS = 8
EACH = 40

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="needs PostgreSQL: 8 writer processes cannot share an in-memory SQLite database",
    ),
]

ROOT = Path(__file__).resolve().parents[2]


def _url(db: dict, name: str) -> str:
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


@pytest.fixture
def scratch_database():
    db = settings.DATABASES["default"]
    name = f"governance_concurrency_{uuid.uuid4().hex[:8]}"
    admin = _url(db, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _url(db, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("batch", [1, 5], ids=["one-per-lock", "five-per-lock"])
def test_eight_processes_append_one_gapless_chain_that_verifies(scratch_database, tmp_path, batch):
    env = {
        **os.environ,
        "DATABASE_URL": scratch_database,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    migrated = manage("migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    start = tmp_path / "go"
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.governance.append_worker",
                str(EACH),
                f"w{i}",
                start,
                str(batch),
            ],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WRITERS)
    ]
    start.touch()
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err

    verified = manage("governance", "verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    result = json.loads(verified.stdout)
    assert result["ok"] is True
    assert result["size"] == 1 + WRITERS * EACH  # the first key's KEY_ADDED, then every append

    with psycopg.connect(scratch_database) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM governance_governanceevent ORDER BY 1")]
        per_writer = dict(
            conn.execute(
                "SELECT actor_label, COUNT(*) FROM governance_governanceevent"
                " WHERE code = 500 GROUP BY actor_label"
            ).fetchall()
        )
    assert seqs == list(range(1, 1 + WRITERS * EACH + 1))
    assert per_writer == {f"w{i}": EACH for i in range(WRITERS)}
    with psycopg.connect(scratch_database) as conn:
        written = conn.execute(
            "SELECT actor_label, (payload->>'n')::int FROM governance_governanceevent"
            " WHERE code = 500 ORDER BY seq"
        ).fetchall()
    for i in range(WRITERS):  # each writer's events in the order it appended them
        assert [n for label, n in written if label == f"w{i}"] == list(range(EACH))

    # the Merkle tree the writers grew together is exactly the tree of the chain
    from tlog import merkle

    with psycopg.connect(scratch_database) as conn:
        hashes = [
            r[0] for r in conn.execute("SELECT hash FROM governance_governanceevent ORDER BY seq")
        ]
        stored = {
            (level, index): bytes(value)
            for level, index, value in conn.execute(
                'SELECT level, "index", hash FROM governance_merklenode'
            )
        }
    tree = merkle.MemoryTree([h.encode("ascii") for h in hashes])
    assert stored == {
        (level, index): value
        for level, nodes in enumerate(tree.levels)
        for index, value in enumerate(nodes)
    }
