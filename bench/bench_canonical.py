"""Throughput of the canonical JSON profiles on small event-like documents.

Run: ``.venv/bin/python bench/bench_canonical.py [--docs N] [--repeat R]``

Prints, per profile, docs/s and MB/s of canonical output (best of R timed passes over the
same N generated documents, timed in process CPU time so that other processes sharing the
machine do not count), plus the peak traced Python allocation during one extra pass
(tracemalloc, measured separately so it does not slow the timed passes) and the process's
peak RSS at the end. Baselines: ``json.dumps(sort_keys=True)``, the ``rfc8785`` package and,
when installed, ``orjson`` with sorted keys.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import canonical

EVENT_TYPES = ["job.start", "router.decide", "tool.call", "tool.result", "brainstate.tick"]
WORDS = ["alpha", "beta", "gamma", "refund", "order", "naïve", "café", "Straße", "ﬁle", "日本"]


def make_event(rnd: random.Random, seq: int) -> dict[str, Any]:
    """One small event of the shape the native trace format hashes (seq/type/id/payload)."""
    payload: dict[str, Any] = {
        "tool": rnd.choice(["search", "fetch", "lookup", "score"]),
        "args": {
            "query": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 5))),
            "limit": rnd.randint(1, 100),
        },
        "score": rnd.random(),
        "latency_ms": round(rnd.uniform(0.1, 900.0), 3),
        "tags": [rnd.choice(WORDS) for _ in range(rnd.randint(0, 3))],
        "ok": rnd.random() > 0.1,
        "note": None,
    }
    if rnd.random() < 0.3:
        payload["weights"] = [rnd.gauss(0, 1) for _ in range(4)]
    return {
        "seq": seq,
        "type": rnd.choice(EVENT_TYPES),
        "event_id": f"{rnd.getrandbits(256):064x}",
        "payload": payload,
    }


def _baselines() -> dict[str, Callable[[Any], bytes]]:
    out: dict[str, Callable[[Any], bytes]] = {
        "json.dumps(sort_keys)": lambda v: json.dumps(
            v, sort_keys=True, separators=(",", ":")
        ).encode(),
    }
    try:
        import rfc8785

        out["rfc8785 package"] = rfc8785.dumps
    except ImportError:
        pass
    try:
        import orjson

        out["orjson OPT_SORT_KEYS"] = lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS)
    except ImportError:
        pass
    return out


def bench(
    fn: Callable[[Any], bytes], docs: list[dict[str, Any]], repeat: int
) -> tuple[float, int, int]:
    """Return (best seconds for one pass, output bytes per pass, tracemalloc peak bytes)."""
    size = sum(len(fn(d)) for d in docs)  # warm-up and output size
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for d in docs:
            fn(d)
        best = min(best, time.process_time() - t0)
    tracemalloc.start()
    for d in docs:
        fn(d)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, size, peak


def main() -> None:
    """Generate the documents, time every profile and baseline, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=8785)
    args = parser.parse_args()

    rnd = random.Random(args.seed)
    docs = [make_event(rnd, i) for i in range(args.docs)]
    candidates: dict[str, Callable[[Any], bytes]] = dict(canonical.PROFILES)
    candidates["mace-v1 (reference)"] = canonical.mace_v1_reference
    candidates.update(_baselines())

    mismatches = sum(canonical.mace_v1(d) != canonical.mace_v1_reference(d) for d in docs)
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {args.docs} docs, "
        f"best of {args.repeat}; mace-v1 fast path == reference on all docs: {mismatches == 0}"
    )
    header = f"{'profile':<24} {'docs/s':>12} {'MB/s':>8} {'us/doc':>8} {'peak KiB':>9}"
    print(header)
    print("-" * len(header))
    for name, fn in candidates.items():
        seconds, size, peak = bench(fn, docs, args.repeat)
        print(
            f"{name:<24} {args.docs / seconds:>12,.0f} {size / seconds / 1e6:>8.1f} "
            f"{seconds / args.docs * 1e6:>8.2f} {peak / 1024:>9.1f}"
        )
    maxrss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(f"process peak RSS: {maxrss_kib / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
