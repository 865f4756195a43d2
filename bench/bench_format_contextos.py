"""ContextOS traces (seed 004): files verified per second beside the seed's own code under
Node.js, and a 100 000-entry trace verified in bounded memory.

Run: ``.venv/bin/python bench/bench_format_contextos.py [--quick] [--files N] [--entries N]``

1. ``--files`` (10 000; 1 000 with ``--quick``) generated traces -- records made by the
   registered loop, chains sealed by ``reference.js`` (the seed's code) -- are each read,
   parsed and chain-verified: by the console (``contextos.parse`` + ``contextos.verify``, the
   report with its unprotected fields, no Django; the chain by the compiled module when it is
   built, which the output says) and by ``reference.js bench`` (the seed's
   ``loadReplayInput`` + ``verifyChain`` on ``JSON.parse``), both in one process over the
   same files. Both must find every file intact. Both sides are timed the same way: inside
   their own process, around the loop that reads, parses and verifies each file (interpreter
   startup, imports and the directory listing excluded), by the clock and by CPU time; then
   each side again as a whole process, startup included.
2. A trace with ``--entries`` tool envelopes (100 000; 20 000 with ``--quick``), sealed by
   ``reference.js``, verified in a fresh process: peak traced Python allocations
   (tracemalloc) and peak RSS (``VmHWM``), beside the file's size.

Needs ``node`` on PATH (Node.js is installed on every machine here).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.formats import contextos as cx  # noqa: E402
from tests.replay.fixtures.contextos import make_fixtures as mk  # noqa: E402

REFERENCE_JS = mk.REFERENCE_JS


def generate(directory: Path, count: int) -> None:
    """``count`` traces of the refund job, each with its own request, sealed by the seed."""
    skeletons = directory / "skeletons.jsonl"
    with skeletons.open("w") as fh:
        for n in range(count):
            request = {**mk.REQUEST, "request_id": f"req-{n:06d}", "amount": 10 + n % 90}
            fh.write(json.dumps(mk.skeleton(request)) + "\n")
    out = directory / "files"
    out.mkdir()
    subprocess.run(
        ["node", str(REFERENCE_JS), "sealmany", "reference", str(skeletons), str(out)],
        check=True,
    )
    skeletons.unlink()


def console_rate(files: list[Path]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, files intact)."""
    ok = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as fh:  # unbuffered, as readFileSync
            trace = cx.parse(fh, path.name)
        if cx.verify(trace).status == "ok":
            ok += 1
    return time.perf_counter() - t0, time.process_time() - c0, ok


def _chain_engine() -> str:
    from core.formats.contextos import chain

    if chain._compiled is None:
        return "the Python writers (core.formats.contextos._compiled is not built)"
    sha = "OpenSSL" if chain._compiled.OPENSSL_SHA256 else "hashlib"
    return f"compiled (core/formats/contextos/_compiled.c, SHA-256 by {sha})"


def node_rate(directory: Path) -> tuple[float, float, int]:
    out = subprocess.run(
        ["node", str(REFERENCE_JS), "bench", str(directory)],
        capture_output=True,
        check=True,
        text=True,
    )
    data = json.loads(out.stdout)
    return data["seconds"], data["cpu_seconds"], data["ok"]


PROCESS = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from core.formats import contextos as cx
ok = 0
for path in sorted(Path({directory!r}).glob("*.json")):
    with open(path, "rb", buffering=0) as fh:
        ok += cx.verify(cx.parse(fh, path.name)).status == "ok"
print(ok)
"""


def process_seconds(command: list[str]) -> float:
    """Wall seconds of a whole process: interpreter start, imports, listing, the work."""
    t0 = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True)
    return time.perf_counter() - t0


def big_trace(path: Path, entries: int) -> None:
    """A trace with ``entries`` tool envelopes, sealed by reference.js."""
    envelopes = [
        {
            "call": {
                "call_id": f"req-big-{i}",
                "kind": "tool",
                "capability": "lookup_order",
                "args": {"order_id": f"ord-{i}"},
            },
            "result": {
                "call_id": f"req-big-{i}",
                "kind": "ok",
                "output": {"order_id": f"ord-{i}", "total": i % 1000, "evidence_ref": f"o:{i}"},
            },
        }
        for i in range(entries)
    ]
    skeleton = {
        "trace_id": "b" * 32,
        "pack_version": mk.PACK_VERSION,
        "kg_snapshot_id": cx.kg_snapshot_id(mk.KG),
        "invoke": {"run_context": mk.RUN_CONTEXT, "request": mk.REQUEST, "envelope_hash": ""},
        "tool_envelopes": envelopes,
        "decision_record": dict.fromkeys(cx.RECORD_FIELDS, "x"),
        "audit": {"chain_root_hash": "", "signed_by": "bench", "chain_prev_hash": ""},
    }
    with path.open("wb") as fh:
        subprocess.run(
            ["node", "--max-old-space-size=4096", str(REFERENCE_JS), "seal", "reference"],
            input=json.dumps(skeleton).encode(),
            stdout=fh,
            check=True,
        )


MEASURE = """
import sys, tracemalloc, time
sys.path.insert(0, {root!r})
from core.formats import contextos as cx
def once():
    with open({path!r}, "rb") as fh:
        trace = cx.parse(fh, "big.json")
    report = cx.verify(trace)
    trace.envelopes.close()
    return report
t0 = time.perf_counter()
once()
seconds = time.perf_counter() - t0
tracemalloc.start()
report = once()
peak = tracemalloc.get_traced_memory()[1]
# VmHWM: this process's own peak RSS (ru_maxrss would carry the parent's across fork+exec)
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(report.status, report.contextos["entries"], seconds, peak, hwm)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--files", type=int, default=None)
    parser.add_argument("--entries", type=int, default=None)
    args = parser.parse_args()
    count = args.files if args.files is not None else (1000 if args.quick else 10_000)
    entries = args.entries if args.entries is not None else (20_000 if args.quick else 100_000)

    with tempfile.TemporaryDirectory(prefix="bench-contextos-") as tmp:
        base = Path(tmp)
        generate(base, count)
        files = sorted((base / "files").glob("*.json"))
        size = sum(p.stat().st_size for p in files)
        console_s, console_cpu, console_ok = console_rate(files)
        node_s, node_cpu, node_ok = node_rate(base / "files")
        print(f"ContextOS verify: {count} generated traces ({size / count:.0f} bytes each)")
        print(f"console's reference chain: {_chain_engine()}")
        print(f"{'verifier':<44} {'files/s':>10} {'per CPU s':>10} {'intact':>8}")
        print(
            f"{'console (contextos.parse + verify, Python)':<44} {count / console_s:>10.0f} "
            f"{count / console_cpu:>10.0f} {console_ok:>8}"
        )
        print(
            f"{'seed reference.js (JSON.parse + verifyChain)':<44} {count / node_s:>10.0f} "
            f"{count / node_cpu:>10.0f} {node_ok:>8}"
        )
        print(
            f"console / reference: {node_s / console_s:.2f}x by the clock, "
            f"{node_cpu / console_cpu:.2f}x by CPU time (both timed inside their process, "
            "around the loop over the files: reading, parsing, verifying; startup excluded)"
        )
        code = PROCESS.format(root=str(ROOT), directory=str(base / "files"))
        console_p = process_seconds([sys.executable, "-c", code])
        node_p = process_seconds(["node", str(REFERENCE_JS), "bench", str(base / "files")])
        print(
            f"whole processes (startup and imports included): console {console_p:.2f} s, "
            f"reference.js {node_p:.2f} s ({node_p / console_p:.2f}x)"
        )

        (base / "big").mkdir()
        big = base / "big" / "big.json"
        big_trace(big, entries)
        done = subprocess.run(
            [sys.executable, "-c", MEASURE.format(root=str(ROOT), path=str(big))],
            capture_output=True,
            text=True,
            check=True,
        )
        status, n, seconds, peak, rss = done.stdout.split()
        node = subprocess.run(
            ["node", "--max-old-space-size=4096", str(REFERENCE_JS), "bench", str(base / "big")],
            capture_output=True,
            check=True,
            text=True,
        )
        node_big = json.loads(node.stdout)
        print()
        print(f"{entries}-envelope trace ({n} chain entries), {big.stat().st_size / 1e6:.1f} MB:")
        print(
            f"  status {status}, {float(seconds):.2f} s (without tracemalloc), tracemalloc peak "
            f"{int(peak) / 1e6:.1f} MB, peak RSS {int(rss) / 1e3:.1f} MB"
        )
        print(
            f"  seed reference.js: intact {node_big['ok'] == 1}, {node_big['seconds']:.2f} s, "
            f"peak RSS {node_big['maxrss_kb'] / 1e3:.1f} MB (it reads the whole document)"
        )


if __name__ == "__main__":
    main()
