"""Figures at scale through real HTTP (issue 12, item 4): 100,000 traces and 1,000,000 ledger
events in PostgreSQL, the production stack (deploy/stack.py: gunicorn, WhiteNoise, Celery
worker and beat) and the development server (manage.py runserver) on the same database,
driven by 1, 10 and 50 concurrent clients.

Run: ``.venv/bin/python bench/bench_scale.py [--quick] [--traces N] [--events N]
[--trace-events N] [--requests N] [--clients 1 10 50] [--reuse] [--skip-dev] [--verify]
[--pg postgres://postgres@127.0.0.1:5432] [--database bench_scale] [--redis URL]``

1. FILL (skipped with ``--reuse`` when the database already holds the figures' data): drops
   and creates its own database (``--database``, default ``bench_scale``; no other is
   touched), migrates, installs the roles (an admin, a council member, the auditor alice
   with a password), ingests ONE real trace of ``--trace-events`` events (100,000) through
   the real ingest path (``replay.services.trace_ingest``: parsed, verified, stored), then
   bulk-creates ``--traces`` trace rows with realistic facts (formats, verdicts, job ids,
   missing outputs, timestamps over 100 days), then appends ``--events`` ledger events: a
   real hash chain (``core.ledger.chain``) from the real head, each event signed with the
   real server key (``core.ledger.signing``), written with COPY in batches. Each part's time
   is printed.
2. HTTP: the stack starts on a free port against that database (its state directory
   ``var/<database>-state/``, kept with the database for ``--reuse``; Redis db 8) and,
   after it, ``manage.py runserver`` (``--noreload``, threaded, the same settings and
   database, ``DATABASE_CONN_MAX_AGE=0``). A real sign-in (the login form, the
   session cookie), then per URL and per client count: warm-up requests, then ``--requests``
   requests (at least one per client) spread over the clients (threads, one
   ``http.client`` connection each). URLs: the trace list, the 100,000-event trace's page,
   its events page 500 (``?seq=24951``: a keyset window deep in the trace), the ledger page,
   the API's trace list.
3. The table: URL x clients -> p50, p95 (ms), requests per second, errors, for the stack and
   the development server; the bench process's peak RSS. With ``--verify``, after the
   stack's figures: ``GET /api/governance/verification/`` on the ledger (it verifies nothing
   itself and queues the background verification), the time the stack's worker takes to
   verify the whole chain, and the same request once the signed mark is there.

Absolute times depend on the machine (and on what else runs on it): say so with the figures.
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_console import free_port, percentile, recorded_trace  # noqa: E402 - bench/ on sys.path

KEY_ID = "bench-scale"
SECRET = b"bench scale trace key, a test vector"
PASSWORD = "bench scale password 1"  # noqa: S105 (a scratch database's throwaway user)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 5000
LEDGER_BATCH = 20_000
WINDOW = 50  # console.selectors.WINDOW_SIZE: events page 500 starts at seq 499 * 50 + 1
REDIS_DEFAULT = "redis://127.0.0.1:6379/8"


def log(message: str) -> None:
    print(f"[bench_scale] {message}", file=sys.stderr, flush=True)


# --- environment: one state directory shared by this process, the stack and runserver -------


def state_env(args: argparse.Namespace, state: Path) -> dict[str, str]:
    """The stack's environment (deploy/stack.py's, whose secrets this process shares: the
    server key is encrypted with its key encryption key)."""
    sys.path.insert(0, str(ROOT / "deploy"))
    import stack  # deploy/stack.py

    ns = argparse.Namespace(
        dir=str(state), pg=args.pg, database=args.database, redis=args.redis, port=0
    )
    # stack_env gives the served processes' environment (the limited app role) and the owner
    # role's URL; the bench migrates and fills the scratch database, so it acts as the owner
    env, owner_url = stack.stack_env(ns)
    env["DATABASE_URL"] = owner_url
    env.pop("GUNICORN_BIND", None)
    return env


def database_fresh(args: argparse.Namespace) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(args.database))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.database)))


def database_filled(args: argparse.Namespace) -> dict[str, int] | None:
    """The figures' sizes if the database exists and was filled to completion."""
    import psycopg

    try:
        with psycopg.connect(f"{args.pg}/{args.database}") as conn:
            row = conn.execute("SELECT value FROM bench_scale_filled").fetchone()
    except psycopg.Error:
        return None
    return json.loads(row[0]) if row else None


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()


# --- fill -----------------------------------------------------------------------------------


def fill_people() -> Any:
    from django.contrib.auth.models import User

    from governance.services import roles_install
    from replay.keys import key_add_hmac

    key_add_hmac(key_id=KEY_ID, secret=SECRET, valid_from=T0 - timedelta(days=3650))
    alice = User.objects.create_user("alice", "alice@example.org", PASSWORD)
    roles_install(
        admins=[User.objects.create_user("adam", "adam@example.org", PASSWORD)],
        council=[User.objects.create_user("cora", "cora@example.org", PASSWORD)],
        others=[
            (alice, ["auditor"]),
            # legal staff: the legal-request pages (bench_pages)
            (User.objects.create_user("lena", "lena@example.org", PASSWORD), ["legal"]),
        ],
    )
    return alice


def fill_big_trace(events: int) -> Any:
    from replay.services import trace_ingest

    t0 = time.perf_counter()
    data = recorded_trace(events, "bench-scale-big", key_id=KEY_ID, secret=SECRET)
    recorded = time.perf_counter() - t0
    t0 = time.perf_counter()
    trace = trace_ingest(source=io.BytesIO(data), filename="big.trace.jsonl").trace
    ingested = time.perf_counter() - t0
    log(
        f"one real trace of {trace.event_count} events ({len(data) / 1e6:.1f} MB) recorded in "
        f"{recorded:.1f} s, ingested (parsed, verified, stored) in {ingested:.1f} s: "
        f"{trace.trace_id} verdict {trace.last_status}"
    )
    return trace


def fill_traces(count: int, real: Any) -> float:
    """``count`` trace rows with realistic facts (each with its own blob row; the bytes are
    the real trace's file, which no list page opens)."""
    from django.db import connection

    from replay.models import Blob, Trace

    rng = random.Random(12)
    statuses = ["ok"] * 6 + ["diverged"] * 2 + ["tamper_detected", "refused", "new"]
    t0 = time.perf_counter()
    made = 0
    while made < count:
        n = min(BATCH, count - made)
        blobs = Blob.objects.bulk_create(
            [
                Blob(
                    sha256=f"{i + 1:064x}",
                    size=rng.randrange(2_000, 5_000_000),
                    storage_name=real.blob.storage_name,
                )
                for i in range(made, made + n)
            ]
        )
        Trace.objects.bulk_create(
            [
                Trace(
                    trace_id=f"{i:032x}",
                    format=real.format,
                    schema_version=real.schema_version,
                    blob=blob,
                    filename=f"run-{i}.trace.jsonl",
                    encoding=real.encoding,
                    job_id=f"job-{i % 20_000}",
                    job_seed=f"seed-{i}",
                    runtime_name=real.runtime_name,
                    runtime_version=real.runtime_version,
                    event_count=rng.randrange(20, 5_000),
                    step_count=rng.randrange(1, 60),
                    required_snapshot_ids=real.required_snapshot_ids,
                    missing_outputs=["out-0001"] if i % 10 == 0 else [],
                    ingest_report=real.ingest_report,
                    last_status=statuses[i % len(statuses)],
                )
                for i, blob in zip(range(made, made + n), blobs, strict=True)
            ],
            batch_size=BATCH,
        )
        made += n
    with connection.cursor() as cur:
        # created_at is auto_now_add: spread the stamps over 100 days, several per second
        cur.execute(
            "UPDATE replay_trace SET created_at = %s + ((id * 7919) %% 8640000) "
            "* interval '1 second' WHERE id <> %s",
            [T0, real.pk],
        )
    seconds = time.perf_counter() - t0
    log(f"{count} trace rows in {seconds:.1f} s")
    return seconds


def fill_ledger(count: int, actor: Any) -> float:
    """``count`` events after the real head: the real chain rules, the real server key,
    COPY in batches of LEDGER_BATCH. Each event is what ``services.pii_access_record``
    appends (an auditor shown unredacted personal data)."""
    from django.db import connection, transaction

    from core.ledger import chain, codes, signing
    from governance import ledger

    head = ledger.head_row()
    key = ledger.server_key_current()
    private = ledger.private_key_of(key)
    code = codes.code_of(codes.PII_REVEALED)
    columns = ", ".join(chain.FIELDS)
    seq, prev_hash = head.seq, head.hash
    created = head.created_at  # then 100 microseconds apart (never before the key's start)
    label = actor.get_username()
    t0 = time.perf_counter()
    written = 0
    while written < count:
        n = min(LEDGER_BATCH, count - written)
        rows = []
        for i in range(n):
            seq += 1
            created += timedelta(microseconds=100)
            payload = {
                "trace_id": f"{(written + i) % 100_000:032x}",
                "fields": ["email", "name"] if i % 3 else ["email"],
                "reason": f"DSR-{(written + i) // 7}",
                "context": "trace page",
            }
            row = (
                seq, code, codes.PII_REVEALED, created, actor.pk, label, payload, None,
                key.key_id, None, None, prev_hash,
            )  # fmt: skip
            digest = chain.event_hash(prev_hash, chain.row_body((*row, None, None)))
            signature = signing.sign(private, digest.encode("ascii"))
            rows.append((*row[:6], json.dumps(payload), *row[7:], digest, signature))
            prev_hash = digest
        with (
            transaction.atomic(),
            connection.cursor() as cur,
            cur.cursor.copy(f"COPY governance_governanceevent ({columns}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        written += n
        if written % 100_000 == 0 or written == count:
            elapsed = time.perf_counter() - t0
            log(f"ledger: {written} events in {elapsed:.1f} s ({written / elapsed:.0f}/s)")
    return time.perf_counter() - t0


def fill(args: argparse.Namespace) -> dict[str, Any]:
    from django.core.management import call_command
    from django.db import connection

    t0 = time.perf_counter()
    call_command("migrate", "--noinput", verbosity=0)
    log(f"migrated in {time.perf_counter() - t0:.1f} s")
    alice = fill_people()
    t0 = time.perf_counter()
    real = fill_big_trace(args.trace_events)
    big_seconds = time.perf_counter() - t0
    trace_seconds = fill_traces(args.traces - 1, real)
    ledger_seconds = fill_ledger(args.events, alice)
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")  # autocommit: outside any transaction
    analyze_seconds = time.perf_counter() - t0
    sizes = {
        "traces": args.traces,
        "events": args.events,
        "trace_events": real.event_count,
        "big_trace": real.trace_id,
        "big_trace_seconds": round(big_seconds, 1),
        "traces_seconds": round(trace_seconds, 1),
        "ledger_seconds": round(ledger_seconds, 1),
        "analyze_seconds": round(analyze_seconds, 1),
    }
    with connection.cursor() as cur:
        cur.execute("CREATE TABLE bench_scale_filled (value text)")
        cur.execute("INSERT INTO bench_scale_filled VALUES (%s)", [json.dumps(sizes)])
    return sizes


# --- servers --------------------------------------------------------------------------------


def wait_ready(url: str, process: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            conn = http.client.HTTPConnection(url, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status in (200, 503):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} not up after {seconds} s")


def start_stack(args: argparse.Namespace, state: Path, port: int) -> subprocess.Popen:
    log_path = state.parent / "stack.log"
    process = subprocess.Popen(
        [
            sys.executable, str(ROOT / "deploy" / "stack.py"), "--dir", str(state),
            "--port", str(port), "--pg", args.pg, "--database", args.database,
            "--redis", args.redis,
        ],
        cwd=ROOT,
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if b"[stack] ready: " in log_path.read_bytes():
            return process
        if process.poll() is not None:
            raise RuntimeError(f"the stack exited: {log_path.read_text()[-3000:]}")
        time.sleep(0.5)
    raise RuntimeError("the stack did not become ready")


def start_dev(env: dict[str, str], state: Path, port: int) -> subprocess.Popen:
    dev_env = {**env, "DATABASE_CONN_MAX_AGE": "0"}
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=dev_env,
        stdout=(state.parent / "runserver.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    wait_ready(f"127.0.0.1:{port}", process)
    return process


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


# --- HTTP -----------------------------------------------------------------------------------


def sign_in(host: str, username: str, password: str) -> str:
    """The login form, as a browser submits it; the Cookie header of the session."""
    conn = http.client.HTTPConnection(host, timeout=60)
    conn.request("GET", "/accounts/login/")
    response = conn.getresponse()
    page = response.read().decode()
    cookies = {
        c.split("=", 1)[0]: c.split("=", 1)[1].split(";", 1)[0]
        for c in response.headers.get_all("Set-Cookie") or []
    }
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
    body = urllib.parse.urlencode(
        {"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"}
    )
    conn.request(
        "POST",
        "/accounts/login/",
        body=body,
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items()),
            "Referer": f"http://{host}/accounts/login/",
        },
    )
    response = conn.getresponse()
    response.read()
    if response.status != 302:
        raise RuntimeError(f"sign-in answered {response.status}")
    for c in response.headers.get_all("Set-Cookie") or []:
        name, rest = c.split("=", 1)
        cookies[name] = rest.split(";", 1)[0]
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def drive(host: str, cookie: str, path: str, clients: int, requests: int) -> dict[str, Any]:
    """``requests`` GETs of ``path`` spread over ``clients`` threads, each its own
    connection (reopened when the server closes it)."""
    total = max(requests, clients)
    shares = [total // clients + (1 if k < total % clients else 0) for k in range(clients)]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def client(share: int) -> None:
        conn = http.client.HTTPConnection(host, timeout=300)
        mine: list[float] = []
        bad: list[str] = []
        start.wait()
        for _ in range(share):
            t0 = time.perf_counter()
            try:
                conn.request("GET", path, headers={"Cookie": cookie})
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    bad.append(str(response.status))
                if response.will_close:
                    conn.close()
            except (OSError, http.client.HTTPException) as exc:
                bad.append(type(exc).__name__)
                conn.close()
            mine.append((time.perf_counter() - t0) * 1000)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors.extend(bad)

    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {
        "requests": total,
        "p50": statistics.median(latencies),
        "p95": percentile(latencies, 0.95),
        "rps": total / wall,
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
    }


def urls(big_trace: str, trace_events: int) -> list[tuple[str, str]]:
    deep = min(499 * WINDOW + 1, max(1, trace_events - WINDOW))
    return [
        ("trace list", "/traces/"),
        (f"trace page ({trace_events} events)", f"/traces/{big_trace}/"),
        (f"events page 500 (seq {deep})", f"/traces/{big_trace}/?seq={deep}"),
        ("ledger page", "/governance/"),
        ("API trace list", "/api/traces/"),
    ]


def measure(
    name: str, host: str, targets: list[tuple[str, str]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    cookie = sign_in(host, "alice", PASSWORD)
    found = []
    for label, path in targets:
        warm = drive(host, cookie, path, 1, args.warmup)
        if warm["errors"]:
            log(f"{name} {label}: warm-up errors {warm['error_kinds']}")
        for clients in args.clients:
            figures = drive(host, cookie, path, clients, args.requests)
            found.append({"server": name, "url": label, "path": path, "clients": clients,
                          **figures})  # fmt: skip
            log(
                f"{name:<5} {label:<34} {clients:>3} clients: p50 {figures['p50']:7.1f} ms "
                f"p95 {figures['p95']:7.1f} ms {figures['rps']:7.1f} req/s "
                f"errors {figures['errors']}"
            )
    return found


def _get_json(host: str, cookie: str, path: str) -> tuple[float, dict[str, Any]]:
    conn = http.client.HTTPConnection(host, timeout=300)
    t0 = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": cookie, "Accept": "application/json"})
    response = conn.getresponse()
    body = response.read()
    ms = (time.perf_counter() - t0) * 1000
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}: {body[:300]!r}")
    return ms, json.loads(body)


def verification(host: str, timeout: float) -> dict[str, Any]:
    """GET /api/governance/verification/ on the unverified ledger (it checks nothing itself
    and queues the background verification), wait for the stack's worker to verify the
    whole chain, then GET it again (it reads the signed mark)."""
    cookie = sign_in(host, "alice", PASSWORD)
    path = "/api/governance/verification/"
    before_ms, before = _get_json(host, cookie, path)
    log(
        f"verification API before the mark: {before_ms:.0f} ms, unverified "
        f"{before['unverified']}, checked in the request {before['checked_now']}, "
        f"verification {before['verification_id']} {before['verification_state']}"
    )
    t0 = time.perf_counter()
    body = before
    while body["unverified"] and time.perf_counter() - t0 < timeout:
        time.sleep(2)
        _ms, body = _get_json(host, cookie, path)
    seconds = time.perf_counter() - t0
    after_ms, after = _get_json(host, cookie, path)
    log(
        f"the worker verified the chain in {seconds:.0f} s; verification API after: "
        f"{after_ms:.0f} ms, ok {after['ok']}, verified through {after['verified_through']}"
    )
    return {
        "before_ms": before_ms,
        "before_unverified": before["unverified"],
        "before_checked_now": before["checked_now"],
        "worker_seconds": seconds,
        "after_ms": after_ms,
        "after_ok": after["ok"],
        "after_checked_now": after["checked_now"],
        "verified_through": after["verified_through"],
    }


def table(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'server':<6} {'URL':<34} {'clients':>7} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'req/s':>7} {'errors':>6}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['server']:<6} {r['url']:<34} {r['clients']:>7} {r['requests']:>5} "
            f"{r['p50']:>8.1f} {r['p95']:>8.1f} {r['rps']:>7.1f} {r['errors']:>6}"
        )
    return "\n".join(lines)


# --- main -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--trace-events", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=100, help="per URL and client count")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="bench_scale")
    parser.add_argument("--redis", default=REDIS_DEFAULT)
    parser.add_argument("--reuse", action="store_true", help="keep a database already filled")
    parser.add_argument("--skip-dev", action="store_true", help="the stack's figures only")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="then the verification API before and after the worker verifies the ledger",
    )
    args = parser.parse_args()
    if args.quick:
        args.traces, args.events, args.trace_events = 2000, 10_000, 30_000
        args.requests, args.warmup = 20, 2
        if args.database == "bench_scale":
            args.database = "bench_scale_quick"

    # the state (secrets, blobs) lives beside the database it belongs to, so --reuse finds
    # the stored trace files and the key the server key is encrypted with
    state = ROOT / "var" / f"{args.database}-state" / "prod"
    filled = database_filled(args) if args.reuse and state.exists() else None
    if filled is not None and (filled["traces"], filled["events"]) != (args.traces, args.events):
        filled = None
    if filled is None:
        shutil.rmtree(state.parent, ignore_errors=True)
        database_fresh(args)
    state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = state_env(args, state)
    django_setup(env)
    log(f"database {args.database}, state {state}")
    if filled is None:
        t0 = time.perf_counter()
        filled = fill(args)
        filled["fill_seconds"] = round(time.perf_counter() - t0, 1)
    log(f"sizes: {filled}")
    from django.db import connections

    connections.close_all()

    targets = urls(filled["big_trace"], filled["trace_events"])
    rows: list[dict[str, Any]] = []
    port = free_port()
    stack_process = start_stack(args, state, port)
    verified: dict[str, Any] = {}
    try:
        rows += measure("stack", f"127.0.0.1:{port}", targets, args)
        if args.verify:
            verified = verification(f"127.0.0.1:{port}", timeout=3600)
    finally:
        stop(stack_process)
    if not args.skip_dev:
        port = free_port()
        dev = start_dev(env, state, port)
        try:
            rows += measure("dev", f"127.0.0.1:{port}", targets, args)
        finally:
            stop(dev)

    print(
        f"Scale: {filled['traces']} traces, {filled['events']} ledger events after the "
        f"installation's, one trace of {filled['trace_events']} events; PostgreSQL "
        f"{args.database}; {os.cpu_count()} CPU cores (shared with whatever else runs)."
    )
    print(
        f"Fill: big trace {filled['big_trace_seconds']} s (record + ingest), trace rows "
        f"{filled['traces_seconds']} s, ledger {filled['ledger_seconds']} s "
        f"({filled['events'] / max(filled['ledger_seconds'], 0.001):.0f} events/s, signed), "
        f"VACUUM ANALYZE {filled['analyze_seconds']} s"
    )
    print(
        "stack = deploy/stack.py (gunicorn sync workers, WEB_CONCURRENCY default); "
        "dev = manage.py runserver --noreload (threaded), same settings and database"
    )
    print(table(rows))
    if verified:
        print(
            f"verification API on the unverified ledger: {verified['before_ms']:.0f} ms "
            f"({verified['before_checked_now']} events checked in the request, "
            f"{verified['before_unverified']} not yet verified, background run queued); the "
            f"stack's worker verified the chain in {verified['worker_seconds']:.0f} s; then "
            f"{verified['after_ms']:.0f} ms (ok {verified['after_ok']}, verified through "
            f"{verified['verified_through']}, {verified['after_checked_now']} checked)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the bench process: {peak:.0f} MiB")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "sizes": filled,
                    "rows": rows,
                    "verification": verified,
                    "peak_rss_mib": round(peak),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
