"""`bench/bench_dsr_bundle.py --quick` runs and prints its table (a smoke run, not a timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundle_benchmark_runs_quick():
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_dsr_bundle.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert "subject in 100 traces, 300 ledger events" in done.stdout
    assert [line.split()[0] for line in done.stdout.splitlines()[3:6]] == [
        "build_bundle",
        "verify_bundle",
        "sha256",
    ]
