"""The DSR flow benchmark still runs (3 traces, SQLite in a temporary directory): figures
are printed, not asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_prints_the_bundle_and_erasure_figures_in_a_small_run():
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_dsr_flow.py"), "--traces", "3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "DSR flow (SQLite), a subject in 3 traces" in done.stdout
    assert "| erasure (shred, receipt, bundles dropped) |" in done.stdout
