"""The bombs benchmark still runs: a smoke run with small bombs (figures are printed by
`make bench`, not asserted here; only that every bomb is refused and the table is there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_bombs.py"


def test_it_prints_the_bombs_table_in_a_quick_run():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )

    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout
    out = done.stdout
    for heading in ("bomb", "sent KiB", "expands MiB", "seconds", "peak RSS MiB", "over base"):
        assert heading in out
    for row in (
        "gzip of newlines",
        ".json.gz inflating",
        "keys in meta",
        "keys in a record",
        "YAML aliases x99",
    ):
        line = next(line for line in out.splitlines() if row in line)
        assert "refused" in line
    assert out.rstrip().endswith("every bomb refused")
