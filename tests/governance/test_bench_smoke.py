"""The governance benchmark still runs (small sizes): figures are printed, not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason="the benchmark creates scratch databases on a PostgreSQL server",
    ),
]


def test_it_prints_the_governance_table_in_a_small_run():
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    server = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_governance.py"),
            "--events",
            "3000",
            "--writers",
            "2",
            "--appends",
            "10",
            "--workers",
            "2",
            "--database-url",
            server,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for row in (
        "appends (service, PostgreSQL)  20 by 2 writers",
        "chain gapless and verified: True",
        "full verification, old way     3,000 events",
        "full verification, vouched     3,000 events",
        "checkpoint with digest         tree synced in",
        "ceiling, 1 core",
        "verification / ceiling",
    ):
        assert row in done.stdout
