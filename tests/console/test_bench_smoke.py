"""The console benchmark still runs (small sizes): figures are printed, not asserted."""

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
        reason="the benchmark creates a scratch database on a PostgreSQL server",
    ),
]


def test_it_prints_the_pages_and_upload_tables_in_a_small_run():
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    server = f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/postgres"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_console.py"),
            "--traces",
            "500",
            "--requests",
            "3",
            "--upload-mb",
            "1",
            "--database-url",
            server,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trace list, deep cursor page" in done.stdout
    assert "trace page (random trace)" in done.stdout
    assert "server RSS before" in done.stdout
