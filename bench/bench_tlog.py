"""The ledger as a transparency log (issue 21): proof generation, offline checks, appends.

Run: ``.venv/bin/python bench/bench_tlog.py [--events 200000] [--appends 1000] [--writers 8]
[--memory-leaves 1000000] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
[--quick] [--keep]``

1. PURE (no database): a ``tlog.merkle.MemoryTree`` of ``--memory-leaves`` leaves; leaves
   appended per second; an inclusion and a consistency proof generated from it; and the
   offline check of an inclusion proof document as ``python -m tlog check-inclusion`` does it
   (``tlog.proof.check_inclusion``: one Ed25519 signature of the checkpoint note, then
   log2(n) hashes), median and p99 over 2,000 random events.
2. STORED (a scratch PostgreSQL database, migrated, dropped at the end unless ``--keep``):
   a ledger of ``--events`` events written in bulk (bench_governance's builder), its tree
   built by ``governance.transparency.sync`` (the backfill); then ``transparency.inclusion``
   and ``transparency.consistency`` (what the API serves, less HTTP) for random events and
   sizes, median and p99; then appends through the service, one writer in this process with
   and without the tree's upkeep, and ``--writers`` concurrent processes
   (bench_governance's append workers), the chain and the tree checked after; and, with
   ``--witnesses 3`` (the default; 0 for none), the time to a checkpoint co-signed by that
   many local witness processes (``bench/bench_witness.py``).
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bench_governance as gov_bench  # noqa: E402 - bench/ on sys.path

from tlog import checkpoint as checkpoints  # noqa: E402
from tlog import merkle, proof  # noqa: E402
from tlog import note as notes  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def pure(leaves: int, samples: int) -> dict[str, Any]:
    tree = merkle.MemoryTree()
    hashes = [merkle.leaf_hash(b"sha256:%064x" % i) for i in range(leaves)]
    began = time.perf_counter()
    for h in hashes:
        tree.append_hash(h)
    append_rate = leaves / (time.perf_counter() - began)
    rng = random.Random(21)
    signer = notes.Signer.from_seed("bench.example/ledger", bytes(range(32)))
    note = notes.sign_note(
        checkpoints.Checkpoint(signer.name, leaves, tree.root()).body(), [signer]
    ).decode()
    verifiers = [signer.verifier]
    gen, check, cons = [], [], []
    for _ in range(samples):
        index = rng.randrange(leaves)
        t0 = time.perf_counter()
        path = tree.inclusion_proof(index)
        gen.append(time.perf_counter() - t0)
        doc = {
            "type": proof.INCLUSION_TYPE,
            "checkpoint": note,
            "seq": index + 1,
            "tree_size": leaves,
            "leaf": f"sha256:{index:064x}",
            "proof": [base64.b64encode(p).decode() for p in path],
        }
        t0 = time.perf_counter()
        proof.check_inclusion(doc, verifiers)
        check.append(time.perf_counter() - t0)
        old = rng.randrange(1, leaves)
        t0 = time.perf_counter()
        tree.consistency_proof(old)
        cons.append(time.perf_counter() - t0)
    return {
        "leaves": leaves,
        "append_per_s": append_rate,
        "inclusion_gen": (statistics.median(gen), pct(gen, 0.99)),
        "consistency_gen": (statistics.median(cons), pct(cons, 0.99)),
        "offline_check": (statistics.median(check), pct(check, 0.99)),
    }


def stored(args: argparse.Namespace, log) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    name = args.database_name or f"tlog_bench_{tag}"
    var = tempfile.mkdtemp(prefix="tlog-bench-")
    url = gov_bench.create_database(args.database_url, name)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": var,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": url,
    }
    try:
        log(f"migrating scratch database {name}")
        gov_bench.migrate(env)
        os.environ.update(env)
        import django

        django.setup()
        from django.db import connection, transaction

        from core.ledger import codes
        from governance import ledger, services, transparency

        log(f"building a {args.events:,}-event ledger")
        written, _sample = gov_bench.build_ledger(args.events, args.workers, log)
        began = time.perf_counter()
        with transaction.atomic():
            ledger.lock()
            transparency.sync()
        sync_seconds = time.perf_counter() - began
        with connection.cursor() as cur:
            cur.execute("ANALYZE governance_merklenode")
        size = transparency.tree_size()
        assert size == written, (size, written)
        log(f"tree built for {size:,} events in {sync_seconds:.1f} s")

        rng = random.Random(21)
        inc, con = [], []
        for _ in range(args.samples):
            seq = rng.randrange(1, size + 1)
            t0 = time.perf_counter()
            transparency.inclusion(seq, size)
            inc.append(time.perf_counter() - t0)
            old = rng.randrange(1, size)
            t0 = time.perf_counter()
            transparency.consistency(old, size)
            con.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cp = transparency.checkpoint()
        checkpoint_seconds = time.perf_counter() - t0
        cosigned = None
        if args.witnesses:  # three local witness processes (bench/bench_witness.py)
            import bench_witness

            cosigned = bench_witness.cosign_times(args.witnesses, rounds=10)

        def one_writer(count: int) -> float:
            began = time.perf_counter()
            for n in range(count):
                services.event_append(
                    event_type=codes.REPLAY_REQUEST, payload={"n": n, "mode": "audit"}
                )
            return count / (time.perf_counter() - began)

        with_tree = one_writer(args.appends)
        keep = transparency.nodes_for_append
        transparency.nodes_for_append = lambda **_: []  # type: ignore[assignment]
        without_tree = one_writer(args.appends)
        transparency.nodes_for_append = keep
        # the tree is behind by the appends made without it: the next append catches it up
        one_writer(1)
        assert transparency.tree_size() == transparency.GovernanceEvent.objects.count()
        connection.close()

        start = os.path.join(var, "go")
        writers = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "bench" / "bench_governance.py"),
                    "--append-worker",
                    str(args.appends // args.writers or 1),
                    f"w{i}",
                    start,
                    "1",
                ],
                cwd=ROOT,
                env=env,
            )
            for i in range(args.writers)
        ]
        while sum(Path(f"{start}.w{i}.ready").exists() for i in range(args.writers)) < len(writers):
            if any(w.poll() not in (None, 0) for w in writers):
                raise SystemExit("an append writer failed to start")
            time.sleep(0.05)
        began = time.perf_counter()
        Path(start).touch()
        if any(w.wait() != 0 for w in writers):
            raise SystemExit("an append writer failed")
        concurrent = (
            args.writers * (args.appends // args.writers or 1) / (time.perf_counter() - began)
        )
        events = transparency.GovernanceEvent.objects.count()
        tree_ok = transparency.tree_size() == events and bytes(
            transparency.nodes([(0, events - 1)])[(0, events - 1)]
        ) == merkle.leaf_hash(
            transparency.GovernanceEvent.objects.get(seq=events).hash.encode("ascii")
        )
        return {
            "events": written,
            "sync_per_s": written / sync_seconds,
            "inclusion": (statistics.median(inc), pct(inc, 0.99)),
            "consistency": (statistics.median(con), pct(con, 0.99)),
            "checkpoint": checkpoint_seconds,
            "checkpoint_size": cp.size,
            "cosigned": cosigned,
            "appends_with_tree": with_tree,
            "appends_without_tree": without_tree,
            "appends_concurrent": concurrent,
            "tree_ok": tree_ok,
        }
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            gov_bench.drop_database(args.database_url, name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--memory-leaves", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--witnesses", type=int, default=3, help="local witnesses co-signing (0: none)"
    )
    parser.add_argument("--database-name", default=None, help="the scratch database's name")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-database", action="store_true", help="the pure part only")
    args = parser.parse_args()
    if args.quick:
        args.events, args.appends, args.memory_leaves, args.samples = 20_000, 200, 100_000, 300

    def log(message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    p = pure(args.memory_leaves, args.samples)
    print(f"transparency log, pure (tlog, in memory, {p['leaves']:,} leaves)")
    print(f"  leaves appended           {p['append_per_s']:>12,.0f} /s")
    print(
        f"  inclusion proof generated {ms(p['inclusion_gen'][0]):>12} median, "
        f"{ms(p['inclusion_gen'][1])} p99"
    )
    print(
        f"  consistency proof         {ms(p['consistency_gen'][0]):>12} median, "
        f"{ms(p['consistency_gen'][1])} p99"
    )
    print(
        f"  offline inclusion check   {ms(p['offline_check'][0]):>12} median, "
        f"{ms(p['offline_check'][1])} p99 (note signature + hashes)"
    )
    if args.no_database:
        return 0
    try:
        s = stored(args, log)
    except Exception as exc:  # an unusable server ends the stored part, not the run
        print(f"transparency log, stored: needs PostgreSQL at {args.database_url}: {exc}")
        return 2
    print(f"transparency log, stored (PostgreSQL, {s['events']:,} events)")
    print(f"  tree backfilled           {s['sync_per_s']:>12,.0f} events/s")
    print(
        f"  inclusion proof served    {ms(s['inclusion'][0]):>12} median, "
        f"{ms(s['inclusion'][1])} p99"
    )
    print(
        f"  consistency proof served  {ms(s['consistency'][0]):>12} median, "
        f"{ms(s['consistency'][1])} p99"
    )
    print(f"  checkpoint signed         {ms(s['checkpoint']):>12} (size {s['checkpoint_size']:,})")
    if s["cosigned"] is not None:
        import bench_witness

        print(bench_witness.report(s["cosigned"]))
    print(
        f"  appends, 1 writer         {s['appends_with_tree']:>12,.0f} /s with the tree, "
        f"{s['appends_without_tree']:,.0f} /s without"
    )
    print(
        f"  appends, {args.writers} writers        {s['appends_concurrent']:>12,.0f} /s; "
        f"tree agrees with the chain: {s['tree_ok']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
