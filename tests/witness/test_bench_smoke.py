"""`bench/bench_witness.py` runs three real witnesses and prints its line (a smoke run on
SQLite, not a timing; the figure is measured on PostgreSQL, see the report)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_witness_bench_cosigns_with_three_witnesses(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "GOVERNANCE_WITNESSES"}}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_witness.py"),
            *("--database-url", "sqlite", "--events", "5", "--rounds", "2"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "witnesses (SQLite, 5 events)"
    assert re.fullmatch(
        r"  checkpoint co-signed by 3 witnesses +[0-9.]+ ms median, [0-9.]+ ms max over 2 "
        r"\(first push from size 0: [0-9.]+ ms; witnessed through 26 of 26\)",
        lines[1],
    ), lines[1]
