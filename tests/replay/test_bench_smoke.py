"""The replay benchmark still runs: a smoke run with small sizes, so the bench does not rot.

Figures are not asserted (they are measurements, printed by `make bench`); only that the
script runs, prints its tables, and that the big trace it streams for the memory figure is
a valid trace.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from core.formats import default_registry, native
from core.formats.native import engine
from core.replay.signatures import HMAC_SHA256, KeyMaterial, StaticKeyRing

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_replay.py"


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_replay", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_prints_the_replay_table_in_a_quick_run():
    # part 2 (two Django commands in subprocesses) is left to `make bench`: start-up alone
    # would take most of this test's time budget; its trace writer is checked below.
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--events", "300", "--big-mb", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )

    assert "Traceback" not in done.stderr, done.stderr
    out = done.stdout
    assert "trace: 300 events" in out
    for heading in ("contender", "events/s", "peak RSS MiB", "x ceiling", "x straightfwd"):
        assert heading in out
    for row in ("engine, .jsonl, 1 core", "CEILING", "straightforward", "sha256 raw"):
        assert row in out
    assert "goals (engine .jsonl, 1 core)" in out
    assert "goal (engine .json, 1 core): >= 0.5x ceiling: " in out
    assert "NOT OK" not in out


def test_its_big_trace_writer_streams_a_trace_that_replays_ok(tmp_path):
    bench = _bench_module()
    path = tmp_path / "big.trace.jsonl"

    size, events = bench.write_big_trace(path, target_bytes=200_000, payload_bytes=8_192)

    assert path.stat().st_size == size >= 200_000
    keys = StaticKeyRing([KeyMaterial(bench.KEY_ID, HMAC_SHA256, secret=bench.SECRET)])
    with path.open("rb") as fh:
        trace = native.open_native(fh, path.name)
        report = engine.replay(trace, mode=engine.AUDIT, registry=default_registry(), keys=keys)
    assert (report.status, report.message) == (engine.OK, "")
    assert report.stats["events"] == events
