"""Console figures on PostgreSQL: the trace list and trace pages with 100,000 traces, and the
upload of a 100 MB trace through the browser's path with the server's peak memory.

Run: ``.venv/bin/python bench/bench_console.py [--traces 100000] [--requests 200]
[--upload-mb 100] [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--quick]
[--keep]``

Everything happens in a scratch database created on that server (dropped at the end unless
``--keep``) and a temporary REPLAY_VAR_DIR:

1. PAGES: one real trace is ingested (its blob is what every trace page opens), then
   ``--traces`` trace rows are bulk-created over 100 days with mixed verdicts, some not
   replayable. ``--requests`` requests per scenario go through the whole Django stack
   (middleware, CSP, sessions, roles, templates) with the test client, signed in as an
   auditor: the first page of the list, a page deep in the list (a cursor from the middle
   of the table), the list filtered by verdict, by replayable=no and by a job id, and the
   page of a random trace. Reported: median and p95 in milliseconds, and the SQL each costs.
2. UPLOAD: ``manage.py runserver`` runs in its own process on the same database; a trace of
   about ``--upload-mb`` MB (JSON Lines, recorded by the reference runtime) is posted as
   multipart/form-data to /traces/upload/ after a real sign-in, as upload.js does. Reported:
   MB/s end to end (transfer, spool, verification, blob store, rows) and the server's peak
   RSS (VmHWM) before and after. Goal: bounded memory, well under the file's size.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import random
import re
import socket
import statistics
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

KEY_ID = "bench-console"
SECRET = b"bench console trace key, a test vector"
PASSWORD = "bench console password 1"  # noqa: S105 (a scratch database's throwaway user)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 5000


def log(message: str) -> None:
    print(f"[bench_console] {message}", file=sys.stderr, flush=True)


# --- scratch database ---------------------------------------------------------------------------


def scratch_database(admin_url: str) -> tuple[str, str]:
    import psycopg

    name = f"console_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, admin_url.rsplit("/", 1)[0] + f"/{name}"


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- data ---------------------------------------------------------------------------------------


def recorded_trace(
    events: int, seed: str, *, key_id: str = KEY_ID, secret: bytes = SECRET
) -> bytes:
    """A native trace of ``events`` filler events recorded by the reference runtime and signed
    with ``key_id`` (bench_scale records its own under its key)."""
    from core.formats import default_registry, native
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256

    document = record(
        RecordOptions(seed=seed, iterations=12, filler_events=events),
        default_registry(),
        signer_for(key_id, HMAC_SHA256, secret),
    )
    return b"".join(native.iter_jsonl(document))


def populate(count: int) -> dict[str, Any]:
    """One real ingested trace, then `count` rows whose blob rows all name its stored file
    (bulk, no verification: a trace row has its own blob row, but the bytes are shared)."""
    from django.contrib.auth.models import User
    from django.db import connection

    from governance.services import roles_install
    from replay.keys import key_add_hmac
    from replay.models import Blob, Trace
    from replay.services import trace_ingest

    key_add_hmac(key_id=KEY_ID, secret=SECRET, valid_from=T0 - timedelta(days=3650))
    alice = User.objects.create_user("alice", "alice@example.org", PASSWORD)
    # roles are what the ledger says: the installation records them (an admin and a council
    # member must be among its first events)
    roles_install(
        admins=[User.objects.create_user("adam", "adam@example.org", PASSWORD)],
        council=[User.objects.create_user("cora", "cora@example.org", PASSWORD)],
        others=[(alice, ["auditor"])],
    )
    real = trace_ingest(
        source=io.BytesIO(recorded_trace(200, "bench-console-page")),
        filename="page.trace.jsonl",
    ).trace
    statuses = ["ok"] * 6 + ["diverged"] * 2 + ["tamper_detected", "refused", "new"]
    rows = []
    made = 0
    started = time.perf_counter()
    while made < count:
        n = min(BATCH, count - made)
        blobs = Blob.objects.bulk_create(
            [
                Blob(sha256=f"{i:064x}", size=real.blob.size, storage_name=real.blob.storage_name)
                for i in range(made, made + n)
            ]
        )
        for i, blob in zip(range(made, made + n), blobs, strict=True):
            rows.append(
                Trace(
                    trace_id=f"{i:032x}",
                    format=real.format,
                    schema_version=real.schema_version,
                    blob=blob,
                    filename=real.filename,
                    encoding=real.encoding,
                    job_id=f"job-{i}",
                    job_seed=f"seed-{i}",
                    runtime_name=real.runtime_name,
                    runtime_version=real.runtime_version,
                    event_count=real.event_count,
                    step_count=real.step_count,
                    required_snapshot_ids=real.required_snapshot_ids,
                    missing_outputs=["out-0001"] if i % 10 == 0 else [],
                    ingest_report=real.ingest_report,
                    last_status=statuses[i % len(statuses)],
                )
            )
        Trace.objects.bulk_create(rows, batch_size=BATCH)
        rows.clear()
        made += n
    # created_at is auto_now_add: spread the stamps over 100 days in one UPDATE (a mix of
    # stamps, several rows per second, as uploads in bursts would leave)
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE replay_trace SET created_at = %s + ((id * 7919) %% 8640000) "
            "* interval '1 second' WHERE trace_id <> %s",
            [T0, real.trace_id],
        )
        cur.execute("ANALYZE replay_trace")
    log(f"{count} traces in {time.perf_counter() - started:.1f} s")
    return {"user": alice, "real": real}


# --- part 1: pages ------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def time_pages(user: Any, requests: int) -> list[tuple[str, float, float, float]]:
    from django.db import connection
    from django.test import Client

    from console.selectors import cursor_encode
    from replay.models import Trace

    client = Client()
    client.force_login(user)
    rng = random.Random(11)
    count = Trace.objects.count()
    sha = Trace.objects.values_list("blob__sha256", flat=True).first()
    middle = Trace.objects.order_by("-created_at", "-id").values("created_at", "id")[count // 2]
    deep = cursor_encode(middle["created_at"], middle["id"], "older")
    trace_ids = list(Trace.objects.values_list("trace_id", flat=True)[:50_000])

    scenarios = {
        "trace list, first page": lambda: "/traces/",
        "trace list, deep cursor page": lambda: f"/traces/?cursor={deep}",
        "trace list, verdict=diverged": lambda: "/traces/?verdict=diverged",
        "trace list, replayable=no": lambda: "/traces/?replayable=no",
        "trace list, job id": lambda: f"/traces/?q=job-{rng.randrange(count - 1)}",
        "trace page (random trace)": lambda: f"/traces/{rng.choice(trace_ids)}/",
        "trace page (by sha256)": lambda: f"/traces/{sha}/",
    }
    results = []
    for label, url in scenarios.items():
        for _ in range(5):  # warm caches and connections
            assert client.get(url()).status_code == 200, label
        times = []
        executed: list[str] = []

        def counted(execute, sql, *rest, executed=executed):
            executed.append(sql)
            return execute(sql, *rest)

        with connection.execute_wrapper(counted):
            response = client.get(url())
        assert response.status_code == 200, label
        for _ in range(requests):
            target = url()
            t0 = time.perf_counter()
            response = client.get(target)
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, (label, target)
        results.append(
            (
                label,
                statistics.median(times),
                percentile(times, 0.95),
                len(executed),
            )
        )
        log(f"{label}: median {results[-1][1]:.1f} ms")
    return results


# --- part 2: upload through the browser's path --------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vm_hwm_mib(pid: int) -> float:
    """Peak resident set size of a process, from /proc (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def upload(env: dict[str, str], size_mb: float, workdir: Path) -> dict[str, Any]:
    import requests

    # about 250 bytes per recorded event in JSON Lines
    events = max(1000, int(size_mb * 1024 * 1024 / 250))
    path = workdir / "big.trace.jsonl"
    log(f"recording a trace of {events} events")
    path.write_bytes(recorded_trace(events, "bench-console-upload"))
    size = path.stat().st_size
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(f"{base}/accounts/login/", timeout=2)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("runserver did not start") from None
                time.sleep(0.3)
        session = requests.Session()
        session.get(f"{base}/accounts/login/", timeout=10)
        signed_in = session.post(
            f"{base}/accounts/login/",
            data={"username": "alice", "password": PASSWORD, "next": "/traces/upload/"},
            headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": base + "/"},
            timeout=30,
        )
        assert signed_in.url.endswith("/traces/upload/"), signed_in.url
        before = vm_hwm_mib(server.pid)
        with path.open("rb") as fh:
            t0 = time.perf_counter()
            response = session.post(
                f"{base}/traces/upload/",
                files={"files": ("big.trace.jsonl", fh, "application/octet-stream")},
                headers={
                    "X-CSRFToken": session.cookies["csrftoken"],
                    "HX-Request": "true",
                    "Referer": base + "/traces/upload/",
                },
                timeout=1800,
            )
            seconds = time.perf_counter() - t0
        after = vm_hwm_mib(server.pid)
        accepted = 'class="upload-outcome accepted"' in response.text
        verdict = re.search(r'<span class="badge verdict-(\w+)">', response.text)
        return {
            "size": size,
            "seconds": seconds,
            "status": response.status_code,
            "accepted": accepted,
            "verdict": verdict[1] if verdict else "?",
            "rss_before": before,
            "rss_after": after,
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


# --- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--upload-mb", type=float, default=100.0)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server to create the scratch database on",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()
    if args.quick:
        args.traces, args.requests, args.upload_mb = 5000, 20, 5.0

    name, url = scratch_database(args.database_url)
    workdir = Path(tempfile.mkdtemp(prefix="bench-console-"))
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": str(workdir / "var"),
        "DJANGO_SECRET_KEY": uuid.uuid4().hex * 2,
        "REPLAY_KEY_ENCRYPTION_KEY": uuid.uuid4().hex,
        "CELERY_BROKER_URL": "",
    }
    env.pop("CELERY_BROKER_URL")  # replays in-process: the figures are the web path's
    # pages are timed with production settings (DEBUG off: no query log, cached templates);
    # the upload server keeps DEBUG on so its cookies work over plain http
    os.environ.update(
        {
            **env,
            "DJANGO_DEBUG": "0",
            "DJANGO_ALLOWED_HOSTS": "testserver",
            "DJANGO_SECURE_SSL_REDIRECT": "0",
        }
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    env["DJANGO_DEBUG"] = "1"
    try:
        import django

        django.setup()
        from django.core.management import call_command

        log(f"migrating scratch database {name}")
        call_command("migrate", verbosity=0, interactive=False)
        # as in production: pages name the compressed, content-hashed static files
        call_command("collectstatic", verbosity=0, interactive=False)
        data = populate(args.traces)
        pages = time_pages(data["user"], args.requests)
        up = upload(env, args.upload_mb, workdir)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(args.database_url, name)
        else:
            log(f"kept database {name} and {workdir}")

    print(f"\nConsole pages, {args.traces:,} traces in PostgreSQL, {args.requests} requests each")
    print(
        f"({platform.python_implementation()} {platform.python_version()}, DEBUG off, "
        "Django test client in process: middleware, sessions, roles, templates, SQL)"
    )
    header = f"{'scenario':<32} {'median ms':>10} {'p95 ms':>8} {'queries':>8}"
    print(header)
    print("-" * len(header))
    for label, median, p95, queries in pages:
        print(f"{label:<32} {median:>10.1f} {p95:>8.1f} {queries:>8}")
    mb = up["size"] / 1024 / 1024
    print(
        "\nUpload through the browser's path (multipart POST to /traces/upload/ on "
        "manage.py runserver; spool, verify, store)"
    )
    header = f"{'file MB':>8} {'seconds':>8} {'MB/s':>6} {'status':>6} {'verdict':>10} "
    header += f"{'server RSS before':>18} {'peak after':>11}"
    print(header)
    print("-" * len(header))
    print(
        f"{mb:>8.1f} {up['seconds']:>8.1f} {mb / up['seconds']:>6.1f} {up['status']:>6} "
        f"{up['verdict']:>10} {up['rss_before']:>15.0f} MB {up['rss_after']:>8.0f} MB"
    )
    if not up["accepted"]:
        print("the upload was not accepted")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
