"""The AHD / Paxman format benchmark still runs (a small smoke run; figures are not asserted,
only that every generated file verified ok under both the console and the reference code)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_format_ahd_paxman.py"


def test_it_prints_the_format_table_in_a_small_run():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--files", "40", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("; 40 files per format")
    assert [line.split()[0] for line in lines[2:6]] == ["paxman", "paxman", "ahd", "ahd"]
    assert lines[6].startswith("paxman: console / reference = ")
    assert lines[-1].startswith("peak RSS ")
