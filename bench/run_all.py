"""Run every benchmark in bench/ and print their tables (``make bench``).

Run: ``.venv/bin/python bench/run_all.py [--quick] [--timeout SECONDS] [--only NAME ...]
[--strict]``

Each ``bench/bench_*.py`` runs in its own subprocess with a timeout, the known ones first in
the order of issue 2's figures (canonical, diff, replay, governance, console), then any
other. A known benchmark that is not there yet is skipped with a note. ``--quick`` shrinks
the sizes for a smoke run: a script that takes ``--quick`` gets it, the others get small
sizes through their own options where this file knows them. Benchmarks are measurements,
not tests: the exit status is 0 unless ``--strict`` is given and a script failed, timed out
or is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
KNOWN = ("canonical", "diff", "replay", "governance", "tlog", "console", "pages", "otlp")

#: small sizes for scripts that have no --quick of their own
QUICK_ARGS: dict[str, list[str]] = {
    "canonical": ["--docs", "2000", "--repeat", "1"],
    "diff": ["--size-mb", "0.5", "--changes", "20", "--repeat", "1"],
}


#: scripts that need longer than --timeout by default (bench_scale fills 1,000,000 signed
#: ledger events, then drives two servers: about 25 minutes on a shared 2-core machine;
#: bench_otlp waits before each of its three runs for the load to settle)
LONGER: dict[str, float] = {"scale": 3600.0, "pages": 3600.0, "otlp": 3600.0}


def scripts() -> list[tuple[str, Path | None]]:
    """(name, path or None when missing): the known ones in order, then the rest."""
    present = {p.stem.removeprefix("bench_"): p for p in sorted(BENCH.glob("bench_*.py"))}
    ordered: list[tuple[str, Path | None]] = [(name, present.pop(name, None)) for name in KNOWN]
    return ordered + sorted(present.items())


def quick_args(name: str, path: Path) -> list[str]:
    if '"--quick"' in path.read_text(encoding="utf-8"):
        return ["--quick"]
    return QUICK_ARGS.get(name, [])


def run(name: str, path: Path, extra: list[str], timeout: float) -> tuple[str, float]:
    """Run one benchmark, relaying its output; return its outcome and wall seconds."""
    argv = [sys.executable, str(path), *extra]
    print(f"=== {path.name} {' '.join(extra)}".rstrip(), flush=True)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, cwd=BENCH.parent
        )
    except subprocess.TimeoutExpired as exc:
        seconds = time.perf_counter() - t0
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        print(out or "", end="")
        print(f"--- {path.name}: killed after the {timeout:g} s timeout")
        return "timeout", seconds
    seconds = time.perf_counter() - t0
    print(done.stdout, end="")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        if tail:
            print(f"--- {path.name} stderr (last lines):\n{tail}")
    outcome = "ok" if done.returncode == 0 else f"exit {done.returncode}"
    print(f"--- {path.name}: {outcome} in {seconds:.1f} s\n", flush=True)
    return outcome, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per script")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="e.g. replay diff")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any script failed")
    args = parser.parse_args()

    summary: list[tuple[str, str, float | None]] = []
    for name, path in scripts():
        if args.only and name not in args.only:
            continue
        if path is None:
            print(f"=== bench_{name}.py: not there yet, skipped\n")
            summary.append((f"bench_{name}.py", "missing", None))
            continue
        extra = quick_args(name, path) if args.quick else []
        timeout = args.timeout if args.quick else max(args.timeout, LONGER.get(name, 0.0))
        outcome, seconds = run(name, path, extra, timeout)
        summary.append((path.name, outcome, seconds))

    header = f"{'benchmark':<24} {'outcome':<10} {'seconds':>8}"
    print(header)
    print("-" * len(header))
    for script, outcome, seconds in summary:
        shown = f"{seconds:>8.1f}" if seconds is not None else f"{'-':>8}"
        print(f"{script:<24} {outcome:<10} {shown}")
    failed = [s for s in summary if s[1] != "ok"]
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
