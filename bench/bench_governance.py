"""Governance ledger figures on PostgreSQL: appends per second with concurrent writers, and full
verification of a large ledger beside its SHA-256 + Ed25519 ceiling.

Run: ``.venv/bin/python bench/bench_governance.py [--events 1000000] [--writers 8]
[--appends 250] [--batch 10] [--appends-only] [--workers N] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
[--quick] [--keep]``

Everything happens in two scratch databases created on that server (and dropped at the end
unless ``--keep``), each migrated with ``manage.py migrate`` (triggers included):

1. APPENDS: ``--writers`` processes each append ``--appends`` events through the real
   service (``governance.services.event_append``: advisory lock, head read, jcs, SHA-256,
   Ed25519 signature, insert, commit), all released at once; then again with ``--batch``
   events per transaction (``services.events_append``: one hold of the lock each).
   Reported: appends per second over the wall time of each run, then the resulting chain is
   verified (gapless, one chain). ``--appends-only`` stops there.
2. VERIFY: a ledger of ``--events`` events is built in bulk, bypassing the service for
   speed but with the real definitions (``core.ledger.chain.event_body``/``event_hash``,
   ``core.ledger.signing.sign``, a real server key announced in event 1), written with
   ``COPY``. Then the real verifier (``governance.ledger.verify``: streamed rows, in-order
   linking here, hash + signature checks in ``--workers`` processes) walks all of it.
   Its tree is synced and a checkpoint with its signatures digest is signed (each server
   signature checked once), then the verifier runs twice in the same run: the old way
   (``vouched=False``, one Ed25519 check per event) and vouched by that checkpoint (hashes,
   Merkle root and signatures digest; docs/transparency.md). CPU-seconds count this process
   and the worker processes, not PostgreSQL's.
   Reported: events per second, and the ratio to the CEILING measured in the same run:
   one core doing only what any verifier must do per event (SHA-256 of prev hash + body
   bytes and one Ed25519 verify), over pre-built bytes, no database, no JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHUNK = 20_000


# --- the append writers (a subprocess mode of this script) -----------------------------------


def append_worker(count: int, label: str, start: str, batch: int = 1) -> None:
    import django

    django.setup()
    from django.db import connection

    from core.ledger import codes
    from governance import services

    connection.ensure_connection()
    # one append before the start line, so the timed ones do not pay a process's first-call
    # costs (entry points loaded, the server key decrypted): labelled apart, not counted
    services.event_append(
        event_type=codes.REPLAY_REQUEST,
        payload={"writer": f"{label}-warm", "n": 0, "mode": "audit"},
        actor_label=f"{label}-warm",
    )
    Path(f"{start}.{label}.ready").touch()
    parent = os.getppid()
    while not os.path.exists(start):
        if os.getppid() != parent:  # the bench was stopped: no start line will come
            raise SystemExit(1)
        time.sleep(0.002)
    if batch <= 1:
        for n in range(count):
            services.event_append(
                event_type=codes.REPLAY_REQUEST,
                payload={"writer": label, "n": n, "mode": "audit"},
                actor_label=label,
            )
        return
    for first in range(0, count, batch):
        services.events_append(
            [
                {
                    "event_type": codes.REPLAY_REQUEST,
                    "payload": {"writer": label, "n": n, "mode": "audit"},
                    "actor_label": label,
                }
                for n in range(first, min(count, first + batch))
            ]
        )


def run_writers(
    env: dict[str, str],
    var: str,
    writers: int,
    appends: int,
    batch: int,
    *,
    prefix: str = "w",
    root: Path = ROOT,
) -> float:
    """``writers`` processes append ``appends`` events each, ``batch`` per lock hold, all
    released at once (labelled ``<prefix><i>``, running the code under ``root``); returns
    the wall seconds."""
    start = os.path.join(var, f"go-{prefix}-{batch}")
    script = str(root / "bench" / "bench_governance.py")
    labels = [f"{prefix}{i}" for i in range(writers)]
    procs = [
        subprocess.Popen(
            [sys.executable, script, "--append-worker", str(appends), label, start, str(batch)],
            cwd=root,
            env={**env, "PYTHONPATH": str(root)},
        )
        for label in labels
    ]
    # every writer imports Django and connects before the start line
    while sum(Path(f"{start}.{label}.ready").exists() for label in labels) < len(procs):
        if any(w.poll() not in (None, 0) for w in procs):
            raise SystemExit("an append writer failed to start")
        time.sleep(0.05)
    began = time.perf_counter()
    Path(start).touch()
    failed = [w for w in procs if w.wait() != 0]
    seconds = time.perf_counter() - began
    if failed:
        raise SystemExit("an append writer failed")
    return seconds


# --- building a big ledger in bulk ----------------------------------------------------------


def _payload(n: int) -> dict[str, Any]:
    digest = hashlib.sha256(n.to_bytes(8, "big")).hexdigest()
    return {
        "run_id": str(uuid.UUID(digest[:32])),
        "trace_id": digest[32:],
        "mode": "audit",
        "state": "done",
        "status": "ok",
        "error_code": None,
        "authoritative": True,
        "force_continued": False,
        "resumed_from": None,
        "report_digest": "sha256:" + digest,
    }


def _bodies(args: tuple[int, int, str]) -> list[tuple[int, datetime, str, str, bytes]]:
    """Events start..stop-1 (REPLAY_RESULT-like): (seq, created_at, payload, idem, jcs body)."""
    from core.canonical import jcs
    from core.ledger import chain

    start, stop, key_id = args
    out = []
    for seq in range(start, stop):
        payload = _payload(seq)
        created = T0 + timedelta(milliseconds=seq)
        idem = f"replay-result:{payload['run_id']}"
        body = chain.event_body(
            seq=seq,
            code=101,
            type="REPLAY_RESULT",
            created_at=created,
            actor_id=None,
            actor_label="system",
            payload=payload,
            idempotency_key=idem,
            server_key_id=key_id,
            actor_key_id=None,
            actor_signature=None,
        )
        out.append((seq, created, json.dumps(payload), idem, jcs(body)))
    return out


_SIGNING_KEY: bytes = b""


def _init_signer(private: bytes) -> None:
    global _SIGNING_KEY  # noqa: PLW0603 - set once per pool process
    _SIGNING_KEY = private


def _sign(hashes: list[str]) -> list[str]:
    from core.ledger import signing

    return [signing.sign(_SIGNING_KEY, h.encode("ascii")) for h in hashes]


def build_ledger(events: int, workers: int, log) -> tuple[int, list[tuple[bytes, str, str]]]:
    """Write ``events`` valid events (1 key announcement + REPLAY_RESULTs) with COPY.

    Returns (events written, a sample of (message, signature, hash) for the ceiling).
    """
    from django.db import connection, transaction

    from core.ledger import chain, codes
    from governance import ledger

    with transaction.atomic():
        key, private = ledger.server_key_create(valid_from=T0)
        ledger.lock()
        genesis = ledger.insert(
            prev=None,
            event_type=codes.KEY_ADDED,
            payload=ledger.server_key_payload(key),
            key=key,
            created_at=T0,
        )
    prev = genesis.hash
    sample: list[tuple[bytes, str, str]] = []
    context = multiprocessing.get_context("spawn")
    columns = ", ".join(chain.FIELDS)
    written = 1
    started = time.perf_counter()
    with context.Pool(workers, initializer=_init_signer, initargs=(private,)) as pool:
        step = max(1000, CHUNK // workers)
        for chunk_start in range(2, events + 1, CHUNK):
            chunk_stop = min(events + 1, chunk_start + CHUNK)
            parts = [
                (s, min(chunk_stop, s + step), key.key_id)
                for s in range(chunk_start, chunk_stop, step)
            ]
            rows = [r for part in pool.map(_bodies, parts) for r in part]
            hashes, prevs = [], []
            for _seq, _created, _payload_json, _idem, body in rows:
                digest = "sha256:" + hashlib.sha256(prev.encode("ascii") + body).hexdigest()
                prevs.append(prev)
                hashes.append(digest)
                prev = digest
            batches = [hashes[i : i + step] for i in range(0, len(hashes), step)]
            signatures = [s for part in pool.map(_sign, batches) for s in part]
            if len(sample) < 20_000:
                for i in range(min(len(rows), 20_000 - len(sample))):
                    message = prevs[i].encode("ascii") + rows[i][4]
                    sample.append((message, signatures[i], hashes[i]))
            with connection.cursor() as cur:
                copy_sql = f"COPY governance_governanceevent ({columns}) FROM STDIN"
                with cur.cursor.copy(copy_sql) as copy:
                    for (seq, created, payload_json, idem, _body), p, h, s in zip(
                        rows, prevs, hashes, signatures, strict=True
                    ):
                        copy.write_row(
                            (
                                seq,
                                101,
                                "REPLAY_RESULT",
                                created,
                                None,
                                "system",
                                payload_json,
                                idem,
                                key.key_id,
                                None,
                                None,
                                p,
                                h,
                                s,
                            )
                        )
            written += len(rows)
            rate = (written - 1) / (time.perf_counter() - started)
            log(f"  built {written:,} / {events:,} events ({rate:,.0f}/s)")
    with connection.cursor() as cur:
        cur.execute("ANALYZE governance_governanceevent")
    return written, sample


def ceiling(sample: list[tuple[bytes, str, str]], public: bytes) -> float:
    """Events per CPU-second for SHA-256(prev + body) + one Ed25519 verify, on one core."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    key = Ed25519PublicKey.from_public_bytes(public)
    prepared = [(m, bytes.fromhex(s)) for m, s, _h in sample]
    started = time.process_time()
    for message, signature in prepared:
        digest = "sha256:" + hashlib.sha256(message).hexdigest()
        key.verify(signature, digest.encode("ascii"))
    return len(prepared) / (time.process_time() - started)


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the verifier's worker processes)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


# --- scratch databases ------------------------------------------------------------------------


def _with_name(url: str, name: str) -> str:
    base, _, _old = url.rpartition("/")
    return f"{base}/{name}"


def create_database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_name(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"migrate failed: {done.stderr}")


# --- the sweep: writers x events per lock hold, before and after ------------------------------


class WaitSampler:
    """Samples what the database's backends wait on while the writers run (a thread polling
    ``pg_stat_activity`` every 10 ms): the evidence for where an append's time goes."""

    def __init__(self, url: str, name: str) -> None:
        import threading

        self.url, self.name = url, name
        self.counts: dict[str, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                for state, kind, event in conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid() AND backend_type = "
                    "'client backend'",
                    [self.name],
                ):
                    what = f"{state}/{kind}:{event}" if kind else f"{state}/cpu"
                    self.counts[what] = self.counts.get(what, 0) + 1
                time.sleep(0.01)

    def __enter__(self) -> WaitSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def top(self, n: int = 4) -> str:
        total = sum(self.counts.values()) or 1
        ranked = sorted(self.counts.items(), key=lambda kv: -kv[1])[:n]
        return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in ranked)


def check_appends(url: str, env: dict[str, str], runs: list[tuple[str, int, int]]) -> str:
    """The checks after a sweep: seqs 1..n with no gap, each writer's events in the order it
    appended them (all of them), the chain verified by ``governance verify``, and the stored
    Merkle tree exactly the tree of the chain. Returns what failed ("" when all hold)."""
    import psycopg

    from tlog import merkle

    failed = []
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT seq, hash, actor_label, (payload->>'n')::int FROM governance_governanceevent "
            "ORDER BY seq"
        ).fetchall()
        stored = {
            (level, index): bytes(value)
            for level, index, value in conn.execute(
                'SELECT level, "index", hash FROM governance_merklenode'
            )
        }
    if [r[0] for r in rows] != list(range(1, len(rows) + 1)):
        failed.append("seqs have a gap")
    by_writer: dict[str, list[int]] = {}
    for _seq, _hash, label, n in rows:
        by_writer.setdefault(label, []).append(n)
    for prefix, writers, appends in runs:
        for i in range(writers):
            if by_writer.get(f"{prefix}{i}") != list(range(appends)):
                failed.append(f"writer {prefix}{i}'s events are not all there in its order")
    checked = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "governance", "verify", "--json"],
        cwd=ROOT,
        env={**env, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
    )
    result = json.loads(checked.stdout)
    if not result["ok"] or result["size"] != len(rows):
        failed.append(f"the chain does not verify: {result}")
    tree = merkle.MemoryTree([r[1].encode("ascii") for r in rows])
    if stored != {
        (level, index): value
        for level, nodes in enumerate(tree.levels)
        for index, value in enumerate(nodes)
    }:
        failed.append("the stored tree is not the chain's")
    return "; ".join(failed)


def sweep(args: argparse.Namespace, base_env: dict[str, str], var: str, log) -> int:
    """Appends/s for every writers x batch, the code under ``--compare-root`` (before) and
    this checkout's (after) back to back per cell, each in its own scratch database."""
    writers_list = [int(x) for x in args.sweep_writers.split(",")]
    batches = [int(x) for x in args.sweep_batches.split(",")]
    sides = [("after", ROOT)]
    if args.compare_root:
        sides.insert(0, ("before", Path(args.compare_root).resolve()))
    prefix_db = args.sweep_database_prefix
    urls = {}
    for side, _root in sides:
        urls[side] = create_database(args.database_url, f"{prefix_db}_{side}")
        migrate({**base_env, "DATABASE_URL": urls[side]})
    runs: dict[str, list[tuple[str, int, int]]] = {side: [] for side, _ in sides}
    print(f"governance ledger appends/s ({args.appends} appends per writer)")
    print("  load average at start: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    try:
        for writers in writers_list:
            for batch in batches:
                cells = []
                for side, root in sides:
                    prefix = f"{side[0]}{len(runs[side])}w"  # its own start line
                    env = {**base_env, "DATABASE_URL": urls[side]}
                    with WaitSampler(urls[side], urls[side].rpartition("/")[2]) as sampled:
                        seconds = run_writers(
                            env, var, writers, args.appends, batch, prefix=prefix, root=root
                        )
                    runs[side].append((prefix, writers, args.appends))
                    rate = writers * args.appends / seconds
                    cells.append(f"{side} {rate:7,.0f}/s [{sampled.top()}]")
                    log(f"  writers {writers} batch {batch} {side}: {rate:,.0f}/s")
                print(f"  writers {writers} x {batch:>2} per hold: " + " | ".join(cells))
        for side, _root in sides:
            failed = check_appends(urls[side], base_env, runs[side])
            print(
                f"  {side}: contiguous seqs, each writer's order, chain verifies, tree equals "
                f"chain: {'all hold' if not failed else 'FAILED: ' + failed}"
            )
        print("  load average at end: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    finally:
        if not args.keep:
            for side, _root in sides:
                drop_database(args.database_url, f"{prefix_db}_{side}")
    return 0


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=250, help="appends per writer")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server URL whose user may create databases",
    )
    parser.add_argument("--quick", action="store_true", help="20,000 events, 50 appends each")
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--batch", type=int, default=10, help="events per lock hold in the second append run"
    )
    parser.add_argument("--appends-only", action="store_true", help="skip the big ledger")
    parser.add_argument(
        "--sweep", action="store_true", help="appends/s for every --sweep-writers x batches"
    )
    parser.add_argument("--sweep-writers", default="1,2,4,8")
    parser.add_argument("--sweep-batches", default="1,10,50")
    parser.add_argument(
        "--compare-root",
        default=None,
        help="with --sweep: a checkout of the code to compare with (before), run back to back",
    )
    parser.add_argument("--sweep-database-prefix", default="governance_bench_sweep")
    parser.add_argument("--append-worker", nargs=4, metavar=("COUNT", "LABEL", "START", "BATCH"))
    args = parser.parse_args()

    if args.append_worker:
        count, label, start, batch = args.append_worker
        append_worker(int(count), label, start, int(batch))
        return 0
    if args.quick:
        args.events, args.appends = 20_000, 50

    def log(message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    if args.sweep:
        var = tempfile.mkdtemp(prefix="governance-bench-")
        return sweep(
            args,
            {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "console.settings",
                "REPLAY_VAR_DIR": var,
                "PYTHONPATH": str(ROOT),
            },
            var,
            log,
        )
    tag = uuid.uuid4().hex[:8]
    small, big = f"governance_bench_appends_{tag}", f"governance_bench_ledger_{tag}"
    var = tempfile.mkdtemp(prefix="governance-bench-")
    base_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": var,
        "PYTHONPATH": str(ROOT),
    }
    try:
        small_url = create_database(args.database_url, small)
    except Exception as exc:  # any reason the server is unusable ends the run
        print(f"governance ledger bench: needs PostgreSQL at {args.database_url}: {exc}")
        return 2
    big_url = create_database(args.database_url, big)
    try:
        log(f"migrating scratch databases {small} and {big}")
        migrate({**base_env, "DATABASE_URL": small_url})
        migrate({**base_env, "DATABASE_URL": big_url})

        # 1. concurrent appends through the service: one event per lock hold, then --batch
        env = {**base_env, "DATABASE_URL": small_url}
        append_seconds = run_writers(env, var, args.writers, args.appends, 1)
        batch_seconds = run_writers(env, var, args.writers, args.appends, args.batch)
        appended = args.writers * args.appends
        checked = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "governance", "verify", "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        append_result = json.loads(checked.stdout)
        # the first key's KEY_ADDED, each writer's warm-up append, then every timed append
        append_ok = (
            append_result["ok"] and append_result["size"] == 2 * appended + 1 + 2 * args.writers
        )
        log(f"appends: {appended} in {append_seconds:.2f} s; chain ok={append_result['ok']}")
        if args.appends_only:
            print("governance ledger bench (appends)")
            print(
                f"  {args.writers} writers, 1 event per lock hold: {appended:,} in "
                f"{append_seconds:.2f} s = {appended / append_seconds:,.0f} appends/s"
            )
            print(
                f"  {args.writers} writers, {args.batch} events per lock hold: {appended:,} in "
                f"{batch_seconds:.2f} s = {appended / batch_seconds:,.0f} appends/s"
            )
            print(f"  chain gapless and verified: {append_ok}")
            print(f"  load average (1, 5, 15 min)  {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            return 0

        # 2. a big ledger, verified by the real verifier
        os.environ.update({**base_env, "DATABASE_URL": big_url})
        import django

        django.setup()
        from governance import ledger
        from governance.models import SigningKey

        log(f"building a {args.events:,}-event ledger")
        built_at = time.perf_counter()
        written, sample = build_ledger(args.events, args.workers, log)
        build_seconds = time.perf_counter() - built_at
        public = bytes.fromhex(SigningKey.objects.get().public_key)
        ceiling_rate = ceiling(sample, public)
        from django.db import transaction

        from governance import transparency

        began = time.perf_counter()
        with transaction.atomic():
            ledger.lock()
            transparency.sync()
        tree_seconds = time.perf_counter() - began
        log(f"tree built in {tree_seconds:.1f} s; signing a checkpoint with its digest")
        began = time.perf_counter()
        cp = transparency.checkpoint(vouch_limit=None)  # checks each signature once
        vouch_seconds = time.perf_counter() - began
        if cp.size != written or cp.signatures_digest is None:
            raise SystemExit(f"the checkpoint does not vouch for the ledger: size {cp.size}")
        verified: dict[bool, tuple[float, float]] = {}
        for vouched in (False, True):  # old way first, then vouched, in one run
            log(f"verifying with {args.workers} worker process(es), vouched={vouched}")
            cpu_before = cpu_seconds()
            began = time.perf_counter()
            result = ledger.verify(
                workers=args.workers, chunk_size=5000, count=written, vouched=vouched
            )
            seconds = time.perf_counter() - began
            verified[vouched] = (seconds, cpu_seconds() - cpu_before)
            if not result.ok or result.size != written:
                raise SystemExit(f"verification failed: {result.as_dict()}")
        verify_seconds, verify_cpu = verified[False]
        new_seconds, new_cpu = verified[True]
        verify_rate = written / verify_seconds

        rows = [
            (
                "machine",
                f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
            ),
            (
                "appends (service, PostgreSQL)",
                f"{appended:,} by {args.writers} writers in {append_seconds:.2f} s = "
                f"{appended / append_seconds:,.0f} appends/s; {args.batch} per lock hold: "
                f"{appended / batch_seconds:,.0f} appends/s; chain gapless and verified: "
                f"{append_ok}",
            ),
            ("ledger built (bulk, COPY)", f"{written:,} events in {build_seconds:.1f} s"),
            (
                "full verification, old way",
                f"{written:,} events in {verify_seconds:.1f} s wall = {verify_rate:,.0f} "
                f"events/s ({args.workers} worker processes); {verify_cpu:.1f} CPU-s = "
                f"{written / verify_cpu:,.0f} events per CPU-second",
            ),
            (
                "checkpoint with digest",
                f"tree synced in {tree_seconds:.1f} s; checkpoint of {cp.size:,} signed, "
                f"each signature checked once, in {vouch_seconds:.1f} s",
            ),
            (
                "full verification, vouched",
                f"{written:,} events in {new_seconds:.1f} s wall = {written / new_seconds:,.0f} "
                f"events/s; {new_cpu:.1f} CPU-s = {written / new_cpu:,.0f} events per "
                f"CPU-second ({verify_seconds / new_seconds:.2f}x the old way's wall time; "
                f"1M at this rate: {1_000_000 * new_seconds / written:.1f} s)",
            ),
            (
                "ceiling, 1 core",
                f"SHA-256 + Ed25519 verify = {ceiling_rate:,.0f} events per CPU-second",
            ),
            (
                "verification / ceiling",
                f"{verify_rate / ceiling_rate:.2f}x in wall time; "
                f"{written / verify_cpu / ceiling_rate:.2f}x per CPU-second (work efficiency)",
            ),
            ("load average (1, 5, 15 min)", " ".join(f"{x:.1f}" for x in os.getloadavg())),
        ]
        width = max(len(k) for k, _ in rows)
        print("governance ledger bench")
        for key, value in rows:
            print(f"  {key:<{width}}  {value}")
    finally:
        if not args.keep:
            if "django.db" in sys.modules:  # not set up when only the appends ran here
                from django.conf import settings

                if settings.configured:
                    from django.db import connections

                    connections.close_all()
            drop_database(args.database_url, small)
            drop_database(args.database_url, big)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
