"""MACE reflective logs verified per second: the console against the seed's reference.

Run: ``.venv/bin/python bench/bench_format_mace.py [--quick] [--files N] [--repeat R]``

Generates N logs (10,000 by default; 1,000 with ``--quick``), each with its five snapshot
files, by MACE's reference rules (``tests/replay/mace_reference.py``), written as MACE
persists them (its canonical serializer's compact text), as bytes in memory.
Then times, on the same bytes, best of R rounds in process CPU time (the two take turns in
each round):

- **reference**: what seed 003 and MACE's writer show, literally: ``json.loads`` of the log
  and its five snapshots, each snapshot's HMAC-SHA256 over ``canonical_json_serialize`` of
  the snapshot without its signature, and the log's HMAC over its immutable sub-payload
  (``mace_reference.reference_verify``);
- **console**: ``core.formats.mace``: the strict bounded parse of the log and of each
  snapshot, id provenance (config_hash, snapshot_id, event ids), the sub-payload check, both
  signatures, REPLAYABLE (the full report).

Prints files/s for both and their ratio, and the peak traced allocation of one console pass
over 1,000 files (tracemalloc, measured separately) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.formats import mace
from core.replay.signatures import HMAC_SHA256, KeyMaterial, StaticKeyRing
from tests.replay import mace_reference as ref

KEYS = StaticKeyRing([KeyMaterial(ref.KEY_ID, HMAC_SHA256, secret=ref.SECRET)])
Files = list[tuple[bytes, dict[str, bytes]]]


def generate(n: int) -> Files:
    out = []
    for i in range(n):
        made = ref.job(f"seed-{i}")
        snaps = {s["snapshot_id"]: _written(s) for s in made["snapshots"].values()}
        out.append((_written(made["log"]), snaps))
    return out


def _written(doc: dict) -> bytes:
    """As MACE persists a log or snapshot: its canonical serializer's text (compact, sorted)."""
    return ref.canonical_json_serialize(doc).encode("utf-8")


def reference(files: Files) -> int:
    ok = 0
    for log_bytes, snaps in files:
        log = json.loads(log_bytes)
        parsed = {sid: json.loads(data) for sid, data in snaps.items()}
        ok += ref.reference_verify(log, parsed)
    return ok


def console(files: Files) -> int:
    ok = 0
    for log_bytes, snaps in files:
        log = mace.parse_log(log_bytes, where="log.json")
        report = mace.verify(
            log,
            snapshot_source=lambda _kind, sid, snaps=snaps: snaps.get(sid),
            keys=KEYS,
        )
        ok += report.status == "ok"
    return ok


def timed(fns: list[Callable[[Files], int]], files: Files, repeat: int) -> list[tuple[float, int]]:
    """Best CPU seconds of each verifier and how many files it passed; the verifiers take
    turns in every round, so a change in the machine's load falls on both."""
    best = [float("inf")] * len(fns)
    ok = [0] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            ok[i] = fn(files)
            best[i] = min(best[i], time.process_time() - t0)
    return list(zip(best, ok, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    n = args.files or (1000 if args.quick else 10_000)
    repeat = args.repeat or (1 if args.quick else 3)
    t0 = time.perf_counter()
    files = generate(n)
    made_in = time.perf_counter() - t0
    size = sum(len(log) + sum(map(len, snaps.values())) for log, snaps in files)
    print(
        f"MACE reflective logs: {n} logs (+{5 * n} snapshot files, {size / 1e6:.1f} MB), "
        f"generated in {made_in:.1f} s; Python {platform.python_version()}, best of {repeat} "
        "(process CPU time)"
    )
    (ref_s, ref_ok), (con_s, con_ok) = timed([reference, console], files, repeat)
    assert ref_ok == n, f"the reference verified {ref_ok} of {n}"
    assert con_ok == n, f"the console verified {con_ok} of {n}"
    print(f"{'verifier':<12}{'logs/s':>12}{'seconds':>10}")
    print(f"{'reference':<12}{n / ref_s:>12,.0f}{ref_s:>10.2f}")
    print(f"{'console':<12}{n / con_s:>12,.0f}{con_s:>10.2f}")
    print(f"console / reference: {ref_s / con_s:.2f}x the reference's speed")
    sample = files[:1000]
    tracemalloc.start()
    console(sample)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak traced allocation, console pass over {len(sample)} logs: {peak / 1e6:.2f} MB")
    print(f"peak RSS (all files in memory): {rss:.0f} MB")


if __name__ == "__main__":
    main()
