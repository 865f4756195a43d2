"""Benchmark core.replay.diff against DeepDiff on two ~5 MB JSON documents with 100 changes.

Run: ``.venv/bin/python bench/bench_diff.py [--size-mb 5] [--changes 100] [--min-ratio 10]``

It builds a trace-like document (nested dicts and lists of events and snapshots), parses it
twice from JSON so the two sides share no objects (as two stored documents would), makes
``--changes`` scattered edits in the second copy (value changes, bool/int/float type
changes, object <-> array changes, added and removed keys, grown and shrunk arrays, keys
needing ``~0``/``~1`` escapes), and checks that core.replay.diff, DeepDiff and the generator's own
list of edits name exactly the same set of changed JSON Pointer paths. Then it prints times
(best of several runs for core.replay.diff, one run for DeepDiff), the speed ratio and the peak
memory each allocates (tracemalloc, measured in separate runs so it does not skew the
times). Exit status 1 if the paths disagree or the ratio is below ``--min-ratio``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.replay.diff import DiffEntry, apply_diff, diff, first_divergence, pointer_join

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "tool",
    "call",
    "search",
    "retrieve",
    "answer",
    "plan",
    "step",
    "model",
    "token",
]
EVENT_TYPES = ["llm.request", "llm.response", "tool.call", "tool.result", "step.start", "step.end"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _event(rng: random.Random, seq: int) -> dict[str, Any]:
    return {
        "seq": seq,
        "id": f"evt-{seq:06d}-{rng.getrandbits(48):012x}",
        "type": rng.choice(EVENT_TYPES),
        "ts": 1_700_000_000_000 + seq * 37,
        "parent": seq - 1 if seq else None,
        "ok": rng.random() > 0.05,
        "attrs": {
            "model": rng.choice(["m-small", "m-large"]),
            "temperature": rng.choice([0.0, 0.2, 0.7]),
            "tokens": {"prompt": rng.randint(10, 4000), "completion": rng.randint(1, 800)},
            "tool/name~v": rng.choice(["search", "fetch", None]),
        },
        "input": {
            "messages": [
                {"role": rng.choice(["system", "user", "assistant"]), "content": _text(rng, 8)}
                for _ in range(rng.randint(1, 3))
            ]
        },
        "output": {
            "text": _text(rng, rng.randint(3, 20)),
            "scores": [round(rng.random(), 4) for _ in range(rng.randint(1, 4))],
            "tool_calls": [
                {"name": rng.choice(WORDS), "args": {"q": _text(rng, 3), "k": rng.randint(1, 9)}}
                for _ in range(rng.randint(0, 2))
            ],
        },
        "tags": rng.sample(WORDS, rng.randint(0, 3)),
    }


def build_document(rng: random.Random, size_bytes: int) -> dict[str, Any]:
    """A trace-like document whose compact JSON is about ``size_bytes`` long."""
    doc: dict[str, Any] = {
        "trace_id": "tr-bench",
        "format": "native",
        "meta": {"schema_version": 1, "a/b": {"m~n": [1, 2, 3]}},
        "events": [],
        "snapshots": {},
    }
    size = 200
    seq = 0
    while size < size_bytes:
        event = _event(rng, seq)
        doc["events"].append(event)
        size += len(json.dumps(event, separators=(",", ":"))) + 1
        if seq % 10 == 0:
            snap = {"step": seq, "hash": f"{rng.getrandbits(128):032x}", "state": event["attrs"]}
            doc["snapshots"][f"snap/{seq}~x"] = json.loads(json.dumps(snap))
            size += 120
        seq += 1
    return doc


def mutate(rng: random.Random, doc: dict[str, Any], changes: int) -> set[str]:
    """Make ``changes`` edits in distinct events/snapshots of ``doc``; return their paths."""
    events = doc["events"]
    snap_keys = list(doc["snapshots"])
    targets = sorted(rng.sample(range(len(events)), changes - changes // 10))
    snaps = rng.sample(snap_keys, changes // 10)
    expected: set[str] = set()
    for i in targets:
        event = events[i]
        base = ["events", i]
        kind = rng.randrange(10)
        if kind == 0:  # string value
            event["output"]["text"] += " changed"
            path = [*base, "output", "text"]
        elif kind == 1:  # int -> float, same value (Python says equal)
            event["attrs"]["tokens"]["prompt"] = float(event["attrs"]["tokens"]["prompt"])
            path = [*base, "attrs", "tokens", "prompt"]
        elif kind == 2:  # bool -> int (Python says equal)
            event["ok"] = int(event["ok"])
            path = [*base, "ok"]
        elif kind == 3:  # key removed
            del event["tags"]
            path = [*base, "tags"]
        elif kind == 4:  # key added
            event["attrs"]["retry"] = 1
            path = [*base, "attrs", "retry"]
        elif kind == 5:  # array grows
            scores = event["output"]["scores"]
            scores.append(0.5)
            path = [*base, "output", "scores", len(scores) - 1]
        elif kind == 6:  # array shrinks
            messages = event["input"]["messages"]
            if len(messages) < 2:
                messages.append({"role": "user", "content": "extra"})
                path = [*base, "input", "messages", len(messages) - 1]
            else:
                messages.pop()
                path = [*base, "input", "messages", len(messages)]
        elif kind == 7:  # nested number
            event["attrs"]["temperature"] = event["attrs"]["temperature"] + 0.05
            path = [*base, "attrs", "temperature"]
        elif kind == 8:  # object -> array
            event["output"]["tool_calls"] = {"calls": event["output"]["tool_calls"]}
            path = [*base, "output", "tool_calls"]
        else:  # key needing escapes: null/string -> other value
            event["attrs"]["tool/name~v"] = "changed"  # was "search", "fetch" or null
            path = [*base, "attrs", "tool/name~v"]
        expected.add(pointer_join(path))
    for key in snaps:
        doc["snapshots"][key]["hash"] = "0" * 32
        expected.add(pointer_join(["snapshots", key, "hash"]))
    return expected


def deepdiff_paths(a: Any, b: Any) -> set[str]:
    """All changed paths DeepDiff reports, as JSON Pointers."""
    from deepdiff import DeepDiff

    tree = DeepDiff(a, b, view="tree", verbose_level=2)
    return {
        pointer_join(level.path(output_format="list"))
        for levels in tree.values()
        for level in levels
    }


def best_time(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def peak_memory(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=5.0)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=6901)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--min-ratio", type=float, default=10.0)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    text = json.dumps(build_document(rng, int(args.size_mb * 1_000_000)), separators=(",", ":"))
    a = json.loads(text)
    b = json.loads(text)
    a_again = json.loads(text)
    expected = mutate(rng, b, args.changes)
    size_b = len(json.dumps(b, separators=(",", ":")))
    print(f"documents: a {len(text) / 1e6:.2f} MB, b {size_b / 1e6:.2f} MB (compact JSON)")
    print(f"events: {len(a['events'])}, snapshots: {len(a['snapshots'])}, edits: {len(expected)}")

    ours_s, entries = best_time(lambda: diff(a, b), args.repeat)
    first_s, first = best_time(lambda: first_divergence(a, b), args.repeat)
    equal_s, _ = best_time(lambda: diff(a, a_again), args.repeat)
    apply_s, rebuilt = best_time(lambda: apply_diff(a, entries), 1)
    deep_s, theirs = best_time(lambda: deepdiff_paths(a, b), 1)

    ours = {entry.path for entry in entries}
    ok = True
    if not (ours == theirs == expected):
        ok = False
        print("PATHS DIFFER")
        print("  only ours:     ", sorted(ours - theirs)[:10])
        print("  only DeepDiff: ", sorted(theirs - ours)[:10])
        print("  not expected:  ", sorted(ours - expected)[:10])
        print("  missed:        ", sorted(expected - ours)[:10])
    if first != entries[0] or not isinstance(first, DiffEntry):
        ok = False
        print("first_divergence disagrees with diff()[0]")
    if diff(rebuilt, b):
        ok = False
        print("apply_diff(a, diff(a, b)) != b")

    ours_mem = peak_memory(lambda: diff(a, b))
    deep_mem = peak_memory(lambda: deepdiff_paths(a, b))
    ratio = deep_s / ours_s

    rows = [
        ("core.replay.diff.diff", ours_s, ours_mem, len(ours)),
        ("deepdiff.DeepDiff", deep_s, deep_mem, len(theirs)),
    ]
    print()
    print(f"{'implementation':<20} {'time (s)':>10} {'peak mem (MiB)':>15} {'paths':>7}")
    for name, seconds, mem, count in rows:
        print(f"{name:<20} {seconds:>10.4f} {mem / 2**20:>15.2f} {count:>7}")
    print()
    print(f"same changed paths as DeepDiff and as the edits made: {ours == theirs == expected}")
    print(f"speed-up over DeepDiff: {ratio:.1f}x (target >= {args.min_ratio:g}x)")
    print(f"first_divergence: {first_s:.4f} s   diff of equal documents: {equal_s:.4f} s")
    print(f"apply_diff (deep copy + {len(entries)} edits): {apply_s:.4f} s")
    if ratio < args.min_ratio:
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
