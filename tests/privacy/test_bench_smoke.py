"""The DSR benchmark still runs (tiny sizes, SQLite): figures are printed, not asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_the_lookup_and_erasure_figures_in_a_tiny_run():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "bench_dsr.py"),
            "--traces",
            "200",
            "--values",
            "500",
            "--erase-traces",
            "20",
            "--lookups",
            "20",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "DSR figures (sqlite): 200 traces, 500 indexed fields"
    assert [line.split("  ")[0] for line in lines[2:]] == [
        "subject lookup + find, p50 (ms)",
        "subject lookup + find, p95 (ms)",
        "subject lookup + find, max (ms)",
        "erasure plan, subject in 20 traces (ms)",
        "erasure shred, 40 fields (ms)",
        "second shred, nothing destroyed (ms)",
    ]
