"""PostgreSQL: an append that is its caller's whole transaction (``services.event_append``,
``events_append``: ``ledger.append_and_commit``) sends its COMMIT with the INSERT, so while
it holds the ledger lock it makes one round trip for the lock and the head (and which of its
idempotency keys are known) and one for the event, its nodes and the commit. Run in a
process of its own on a scratch database: inside a test's transaction nothing commits."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest
from django.db import connection

from tests.governance.test_concurrency import ROOT, scratch_database  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the round trips counted are PostgreSQL's"
    ),
]


def test_an_append_of_its_own_commits_with_its_insert(scratch_database):  # noqa: F811
    env = {
        **os.environ,
        "DATABASE_URL": scratch_database,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
    }
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    ran = subprocess.run(
        [sys.executable, "-m", "tests.governance.commit_worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    runs = json.loads(ran.stdout)

    lock = "SELECT pg_advisory_xact_lock("
    insert = "WITH event AS (INSERT INTO governance_governanceevent"
    one, keyed, retried, batch = runs["one"], runs["keyed"], runs["retried"], runs["batch"]
    assert [s[: len(lock)] for s in one["sql"]] == [lock, insert[: len(lock)]]
    assert one["sql"][1].startswith(insert)
    assert one["sql"][1].endswith("; COMMIT")
    assert "idempotency_key = ANY" not in one["sql"][0]
    # the known keys are read with the lock and the head: still two statements
    assert len(keyed["sql"]) == 2
    assert keyed["sql"][0].startswith(lock)
    assert "idempotency_key = ANY" in keyed["sql"][0]
    assert keyed["sql"][1].startswith(insert)
    assert keyed["sql"][1].endswith("; COMMIT")
    # a retry finds its key with the lock, reads its event, writes nothing
    assert len(retried["sql"]) == 2
    assert retried["seqs"] == keyed["seqs"]
    assert retried["sql"][1].startswith('SELECT "governance_governanceevent"')
    assert len(batch["sql"]) == 2
    assert batch["sql"][1].endswith("; COMMIT")
    assert [r["in_transaction"] for r in runs.values()] == [False] * 4
    assert (one["seqs"], keyed["seqs"], batch["seqs"]) == ([4], [5], [6, 7, 8])

    with psycopg.connect(scratch_database) as conn:  # committed: another connection sees it
        seqs = [r[0] for r in conn.execute("SELECT seq FROM governance_governanceevent ORDER BY 1")]
    assert seqs == list(range(1, 9))
    verified = subprocess.run(
        [sys.executable, "manage.py", "governance", "verify", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(verified.stdout)["ok"] is True, verified.stdout
