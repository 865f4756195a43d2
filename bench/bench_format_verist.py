"""Verist snapshots verified per second: the console beside Verist's reference ``hashValue``.

Run: ``.venv/bin/python bench/bench_format_verist.py [--files N] [--repeat R] [--quick]``

1. Generates N snapshot files (10,000 by default; 500 with ``--quick``) by running the Node.js
   reference (``tests/replay/fixtures/verist/verist_ref.mjs generate``): each has an input,
   an ``llm-output`` artifact, a ``step-output`` and a ``step-commands`` artifact, every hash
   made by Verist's own ``hashValue``.
2. Times, over the same files, best of R passes, wall clock, files read from disk each time:

   - ``node hashValue``: the reference (``verist_ref.mjs bench``): ``JSON.parse``, then
     ``hashValue`` (Web Crypto SHA-256 of the key-sorted ``JSON.stringify``) of the input and
     of every artifact's content, compared with the recorded hashes;
   - ``console hashes``: the console's parse (strict, bounded, every field checked) and the
     same hash checks (``core.formats.verist.verify`` with no step registered);
   - ``console verify``: all of ``verify``: the hash checks, ``loadOutput`` and the recompute
     of each step with its registered function, its schemas and the output/commands diffs;
   - ``console verify, exact js_sorted path only``: the same with the ``orjson`` shortcut of
     ``verist.hash_matches`` switched off (the worst case: what a file whose integer-like keys
     or numbers ``orjson`` spells otherwise costs).

Prints files/s for each, the ratio console/node, the peak traced Python allocation of one
extra console pass (tracemalloc) and the peak RSS of both processes.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.formats import default_registry, verist  # noqa: E402
from core.formats.verist import snapshot as verist_snapshot  # noqa: E402
from core.replay.registry import Registry  # noqa: E402

REFERENCE = ROOT / "tests" / "replay" / "fixtures" / "verist" / "verist_ref.mjs"


def node(*args: str) -> str:
    return subprocess.run(
        ["node", str(REFERENCE), *args], check=True, capture_output=True, text=True
    ).stdout


def console_pass(files: list[Path], registry: Registry) -> tuple[float, int]:
    t0 = time.perf_counter()
    ok = 0
    for path in files:
        report = verist.verify_bytes(path.read_bytes(), registry=registry)
        ok += report.status == "ok"
    return time.perf_counter() - t0, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500 files, one pass")
    args = parser.parse_args()
    if args.quick:
        args.files, args.repeat = 500, 1

    with tempfile.TemporaryDirectory(prefix="verist-bench-") as tmp:
        t0 = time.perf_counter()
        node("generate", tmp, str(args.files))
        made = time.perf_counter() - t0
        files = sorted(Path(tmp).glob("*.json"))
        size = sum(p.stat().st_size for p in files)
        print(
            f"{len(files)} generated snapshots, {size / len(files):.0f} bytes each on average "
            f"(node generate: {made:.1f} s); best of {args.repeat}"
        )
        node_runs = [json.loads(node("bench", tmp)) for _ in range(args.repeat)]
        best_node = min(r["seconds"] for r in node_runs)
        assert all(r["ok"] == len(files) for r in node_runs), node_runs

        bare = Registry()
        full = default_registry()
        # one-time costs (imports, compiling the step's schemas) are not per-file costs
        verist.verify_bytes(files[0].read_bytes(), registry=full)
        hashes = [console_pass(files, bare) for _ in range(args.repeat)]
        whole = [console_pass(files, full) for _ in range(args.repeat)]
        assert all(ok == len(files) for _, ok in hashes + whole)
        best_hashes = min(s for s, _ in hashes)
        best_whole = min(s for s, _ in whole)
        # the worst case: every hash through the exact js_sorted writer (no orjson shortcut,
        # as for a value whose integer-like keys or numbers orjson spells otherwise)
        shortcut, verist_snapshot._orjson = verist_snapshot._orjson, None
        try:
            exact = [console_pass(files, full) for _ in range(args.repeat)]
        finally:
            verist_snapshot._orjson = shortcut
        assert all(ok == len(files) for _, ok in exact)
        best_exact = min(s for s, _ in exact)

        tracemalloc.start()
        console_pass(files, full)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()

    n = len(files)
    rows = [
        ("node hashValue (reference)", best_node),
        ("console hashes (parse + hashValue checks)", best_hashes),
        ("console verify (+ loadOutput, recompute)", best_whole),
        ("console verify, exact js_sorted path only", best_exact),
    ]
    print(f"{'what':<44} {'files/s':>10} {'x node':>8}")
    for name, seconds in rows:
        print(f"{name:<44} {n / seconds:>10.0f} {best_node / seconds:>8.2f}")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"peak traced Python allocation in one console verify pass: {peak / 1024:.0f} KiB; "
        f"peak RSS: console {rss_mb:.0f} MiB, node {node_runs[0]['rss'] / 1024**2:.0f} MiB"
    )
    version = subprocess.run(
        ["node", "--version"], check=True, capture_output=True, text=True
    ).stdout
    print(f"python {platform.python_version()}, node {version.strip()}, {platform.machine()}")


if __name__ == "__main__":
    main()
