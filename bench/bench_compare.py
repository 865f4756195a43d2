"""Benchmark comparing two large native traces (the trace page's "compare with…").

Run: ``.venv/bin/python bench/bench_compare.py [--events 100000] [--quick]``

It builds two gzipped JSON Lines traces of ``--events`` events each (the header, steps and
outputs of a recorded run, the events written out as filler records), identical but for
``/steps/3/output/route``, and times :func:`core.formats.native.compare.compare` over
them two ways: line by line (the JSON Lines path: only the lines that differ are parsed) and
record by record (every record parsed and validated, the path a JSON document takes). It
checks both name exactly the one step change and the seal, and prints the times and the peak
memory each allocates (tracemalloc, in separate runs). Exit status 1 if they disagree.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import io
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.formats import default_registry, native
from core.formats.native.compare import compare, compare_records
from core.formats.native.recorder import record, reseal, signer_for
from core.replay.runtime import RecordOptions
from core.replay.signatures import HMAC_SHA256

SIGNER = signer_for("bench-compare", HMAC_SHA256, b"bench compare key, a test vector")


def jsonl(document: dict, events: int) -> bytes:
    """The document's JSON Lines spelling with ``events`` events (filler after its own)."""
    lines = list(native.iter_jsonl(document))
    own = len(document["events"])
    filler = []
    for seq in range(own, events):
        body = {"seq": seq, "type": "observation", "event_id": f"{seq:064x}"}
        body["payload"] = {"source": "sensor", "value": seq % 997, "note": "x" * 40}
        body["hash"] = "sha256:" + f"{seq:064x}"
        filler.append(json.dumps({"record": "event", **body}, separators=(",", ":")).encode())
    head, rest = lines[: 1 + own], lines[1 + own :]
    return gzip.compress(b"".join(head + [f + b"\n" for f in filler] + rest), mtime=0)


def opened(data: bytes):
    return native.open_native(io.BytesIO(data), "t.trace.jsonl.gz")


def line_by_line(a: bytes, b: bytes):
    return compare(opened(a), opened(b))


def record_by_record(a: bytes, b: bytes):
    left, right = opened(a), opened(b)
    return compare_records(left.header, right.header, left.records(), right.records())


def timed(fn, a, b):
    start = time.perf_counter()
    found = fn(a, b)
    return time.perf_counter() - start, found


def peak(fn, a, b) -> float:
    tracemalloc.start()
    fn(a, b)
    _size, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top / 1024**2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="2,000 events (a smoke run)")
    args = parser.parse_args()
    events = 2_000 if args.quick else args.events
    base = record(RecordOptions(seed="bench-compare"), default_registry(), SIGNER)
    other = copy.deepcopy(base)
    route = other["steps"][3]["output"]["route"]
    other["steps"][3]["output"]["route"] = "write" if route != "write" else "math"
    other = reseal(other, SIGNER)
    a, b = jsonl(base, events), jsonl(other, events)
    print(f"two gzipped JSON Lines traces of {events} events, {len(a)} bytes each")
    expected = ["/steps/3/output/route", "/seal/value"]
    print(f"{'path':<20} {'seconds':>8} {'peak MiB':>9}  changes")
    ok = True
    for name, fn in (("line by line", line_by_line), ("record by record", record_by_record)):
        seconds, found = timed(fn, a, b)
        paths = [c.path for c in found.changes]
        ok = ok and paths == expected
        print(f"{name:<20} {seconds:>8.2f} {peak(fn, a, b):>9.1f}  {', '.join(paths)}")
    if not ok:
        print(f"FAIL: expected exactly {expected}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
