"""Every page of issue 23 through real HTTP at scale (``make bench``): the production stack
(deploy/stack.py: gunicorn, Celery worker and beat) and ``manage.py runserver`` side by side
on one scratch PostgreSQL database, 1, 10 and 50 concurrent signed-in clients, p50/p95/req/s
per page with the machine's load average beside each figure.

Run: ``.venv/bin/python bench/bench_pages.py [--traces 100000] [--events 1000000]
[--trace-events 100000] [--requests N] [--clients 1 10 50] [--tiny] [--reuse] [--skip-dev]
[--pg postgres://postgres@127.0.0.1:5432] [--database bench_pages] [--json FILE]
[--ports STACK DEV] [--fill-only] [--legal-requests N]``
(``bench/profile_pages.py`` then gives each page's server-side cost on the same database.)

The fill is bench_scale's (the project's own: one real trace of ``--trace-events`` events
ingested through the real path, ``--traces`` trace rows, ``--events`` real signed ledger
events written with COPY), plus what the other pages need: a small real trace of about 212
events (``trace_ingest``) and a second one (compare), a finished governed audit replay of it
(the run report), ``--legal-requests`` legal requests (1,000; the legal-request pages, seen
by the legal user lena) and the large trace's index built as ingest queues it. ``--tiny``
is a smoke run (a few hundred rows, 20 legal requests, a few requests;
tests/console/test_bench_smoke.py runs it). ``--reuse`` keeps a database this script filled
with the same sizes.

The figures are measurements, not tests: absolute times depend on the machine and on what
else runs on it, which is why the 1-minute load average is printed beside each row.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_scale  # noqa: E402 - bench/ on sys.path
from bench_console import free_port, recorded_trace  # noqa: E402

SMALL_FILLER = 200  # with the runtime's own events: a trace of about 212 events
LEGAL_REQUESTS = 1000  # the legal-request pages' fill (issue 23)
LEGAL_USER = "lena"  # bench_scale.fill_people's legal staff: the legal-request pages


def log(message: str) -> None:
    print(f"[bench_pages] {message}", file=sys.stderr, flush=True)


def fill_pages(big_trace: str, legal_requests: int = LEGAL_REQUESTS) -> dict[str, Any]:
    """What the pages beyond bench_scale's need: a small real trace, a finished replay of
    it, the large trace's index (built as ingest queues it, here in this process)."""
    from console.selectors import trace_index_build
    from governance.services import replay_request, replay_run_govern
    from replay.models import Trace
    from replay.services import trace_ingest

    data = recorded_trace(
        SMALL_FILLER, "bench-pages-small", key_id=bench_scale.KEY_ID, secret=bench_scale.SECRET
    )
    small = trace_ingest(source=io.BytesIO(data), filename="small.trace.jsonl").trace
    data = recorded_trace(
        SMALL_FILLER, "bench-pages-other", key_id=bench_scale.KEY_ID, secret=bench_scale.SECRET
    )
    other = trace_ingest(source=io.BytesIO(data), filename="other.trace.jsonl").trace
    legal = fill_legal_requests(legal_requests)
    run = replay_request(trace=small, mode="audit", enqueue=False)
    run = replay_run_govern(run_id=run.id)
    t0 = time.perf_counter()
    big = Trace.objects.select_related("blob").get(trace_id=big_trace)
    trace_index_build(big)
    log(f"index of the large trace built in {time.perf_counter() - t0:.1f} s")
    log(f"small trace {small.event_count} events, replay {run.id} {run.state}")
    return {
        "small_sha": small.blob.sha256,
        "small_events": small.event_count,
        "big_sha": big.blob.sha256,
        "run_id": str(run.id),
        "other_sha": other.blob.sha256,
        "legal_request": legal,
    }


#: the OpenTelemetry trace's spans (issue 31: a sealed 50,000-span trace's page p95 < 200 ms
#: at 10 clients)
OTEL_SPANS = 50_000
#: an export of one agent run captured from the real openai-v2 instrumentation without
#: content (tests/otel/fixtures/README.md): an agent span, two model calls and a tool call
OTEL_EXPORT = ROOT / "tests" / "otel" / "fixtures" / "openai-v2-json-nocontent.json"


def fill_otel(spans: int) -> dict[str, Any]:
    """One sealed OpenTelemetry GenAI trace of ``spans`` spans, stored through the real path
    (``trace_ingest`` of the sealed record, as ``otel_seal`` stores it) with its page's
    index built as ingest queues it: the captured run's agent span as the root and its
    three other spans repeated under it, each copy with its own span id and a start 1 ms
    after the one before (a long agent run)."""
    from console.selectors import trace_index_build
    from core.formats.otel import record as rec
    from replay.services import trace_ingest

    t0 = time.perf_counter()
    run = rec.assemble_export(OTEL_EXPORT.read_bytes())
    root, children = run.spans[0], run.spans[1:]
    start = int(root["start_time_unix_nano"])
    made = [dict(root, end_time_unix_nano=str(start + spans * 1_000_000 + 1))]
    for n in range(1, spans):
        span = dict(children[n % len(children)])
        took = int(span["end_time_unix_nano"]) - int(span["start_time_unix_nano"])
        begins = start + n * 1_000_000
        span.update(
            span_id=f"{n:016x}",
            parent_span_id=root["span_id"],
            start_time_unix_nano=str(begins),
            end_time_unix_nano=str(begins + min(took, 900_000)),
        )
        made.append(span)
    trace_id = "b" * 8 + run.trace_id[8:]
    _record, data, _digest = rec.seal(
        trace_id, made, sealed_at=rec.utc_iso(datetime.now(UTC)), reason="manual"
    )
    trace = trace_ingest(
        source=io.BytesIO(data), filename=f"{trace_id}.v1.otel.json", declared_format=rec.FORMAT
    ).trace
    log(
        f"OTel trace of {spans} spans ({len(data)} bytes) stored "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    t0 = time.perf_counter()
    trace_index_build(trace)
    log(f"its index built in {time.perf_counter() - t0:.1f} s")
    return {"otel_sha": trace.blob.sha256, "otel_spans": spans}


def fill_legal_requests(count: int) -> str:
    """``count`` legal requests opened by the legal user (lena) through the real service
    (each one a DSR_OPENED ledger event); the id of the one the detail page shows."""
    from django.contrib.auth.models import User

    from dsr.services import legal_request_open

    t0 = time.perf_counter()
    lena = User.objects.get(username="lena")
    kinds = ("access", "erasure", "both")
    opened = [
        legal_request_open(
            actor=lena,
            identifiers=[f"subject-{i}@example.org", f"+4479{i:08d}"],
            kind=kinds[i % 3],
            legal_basis=f"Art. 15 GDPR, letter {i}",
        )
        for i in range(count)
    ]
    log(f"{count} legal requests opened in {time.perf_counter() - t0:.1f} s")
    return str(opened[count // 2].id)


def deep_cursor(traces: int) -> str:
    """A cursor about 99% of the way back in the list filtered by verdict=diverged."""
    from console.selectors import TraceFilters, cursor_encode, trace_queryset

    qs = trace_queryset(TraceFilters(verdict="diverged")).order_by("-created_at", "-id")
    count = qs.count()
    row = qs[max(0, int(count * 0.99) - 1)] if count else None
    if row is None:
        return ""
    return cursor_encode(row.created_at, row.pk, "older")


def targets(filled: dict[str, Any], pages: dict[str, Any], cursor: str) -> list[tuple[str, str]]:
    big, small, events = pages["big_sha"], pages["small_sha"], filled["trace_events"]
    last = max(1, events - 12)
    found = [
        ("trace list, page 1", "/traces/"),
        ("list ?verdict=diverged", "/traces/?verdict=diverged"),
        ("list, deep cursor", f"/traces/?verdict=diverged&cursor={cursor}"),
        (f"small trace ({pages['small_events']} events)", f"/traces/{small}/"),
        ("event payload", f"/traces/{small}/events/5/"),
        (f"large trace ({events} events)", f"/traces/{big}/"),
        (f"large trace ?seq={last}", f"/traces/{big}/?seq={last}"),
        ("run report", f"/runs/{pages['run_id']}/"),
        ("ledger page", "/governance/"),
        ("ledger ?range=5", "/governance/?range=5"),
        ("ledger ?before=500000", "/governance/?before=500000"),
        ("operations page", "/ops/"),
        ("API trace list", "/api/traces/"),
        ("API trace detail", f"/api/traces/{small}/"),
        ("compare two small traces", f"/traces/{small}/compare/{pages['other_sha']}/"),
        ("legal requests list", "/dsr/"),
        ("legal request detail", f"/dsr/{pages['legal_request']}/"),
    ]
    if pages.get("otel_sha"):
        otel, spans = pages["otel_sha"], pages["otel_spans"]
        found += [
            (f"OTel trace ({spans} spans)", f"/traces/{otel}/"),
            (f"OTel trace ?at={spans // 2}", f"/traces/{otel}/?at={spans // 2}"),
            ("OTel span record", f"/traces/{otel}/records/{spans - 1}/"),
        ]
    return [(label, path) for label, path in found if "cursor=" not in path or cursor]


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of each process running now, and what runs it: the web processes
    (gunicorn or runserver), PostgreSQL's, this load client, the rest (Linux /proc; empty
    elsewhere). See `cpu_ms`."""
    out: dict[int, tuple[str, float]] = {}
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime
        pid = int(stat.parent.name)
        if pid == me:
            group = "client"
        elif text[text.index("(") + 1 : text.rindex(")")].startswith("postgres"):
            group = "db"
        elif b"gunicorn" in cmdline or b"runserver" in cmdline:
            group = "web"
        else:
            group = "other"
        out[pid] = (group, ticks / _TICK)
    return out


def cpu_ms(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], requests: int
) -> dict[str, float]:
    """CPU milliseconds a request spent in each group between two `cpu_seconds`: a process
    started meanwhile (a recycled gunicorn worker) counts from zero; one that exited
    meanwhile is not counted."""
    spent = {"web": 0.0, "db": 0.0, "client": 0.0, "other": 0.0}
    for pid, (group, seconds) in after.items():
        was = before.get(pid)
        spent[group] += seconds - (was[1] if was is not None and was[0] == group else 0.0)
    return {k: round(v * 1000 / requests, 1) for k, v in spent.items()}


def measure(
    name: str, host: str, pages: list[tuple[str, str]], args: argparse.Namespace
) -> list[dict[str, Any]]:
    cookies = {
        user: bench_scale.sign_in(host, user, bench_scale.PASSWORD)
        for user in ("alice", LEGAL_USER)  # an auditor; legal staff for /dsr/
    }
    rows = []
    for label, path in pages:
        cookie = cookies[LEGAL_USER if path.startswith("/dsr/") else "alice"]
        # as many clients as the stack has workers (gunicorn.conf.py's default), so each
        # worker has served the page before it is timed: a process's first view of a page
        # loads its templates and reads its trace's index
        workers = 2 * (os.cpu_count() or 1) + 1
        warm = bench_scale.drive(host, cookie, path, workers, args.warmup * workers)
        if warm["errors"]:
            log(f"{name} {label}: warm-up errors {warm['error_kinds']}")
        for clients in args.clients:
            before = cpu_seconds()
            figures = bench_scale.drive(host, cookie, path, clients, args.requests)
            after = cpu_seconds()
            figures["cpu_ms"] = cpu_ms(before, after, figures["requests"])
            load = os.getloadavg()[0]
            rows.append(
                {"server": name, "page": label, "path": path, "clients": clients,
                 "load": load, **figures}
            )  # fmt: skip
            log(
                f"{name:<5} {label:<30} {clients:>3} clients: p50 {figures['p50']:7.1f} ms "
                f"p95 {figures['p95']:7.1f} ms {figures['rps']:7.1f} req/s load {load:.2f}; "
                "CPU ms a request: " + " ".join(f"{k} {v}" for k, v in figures["cpu_ms"].items())
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    header = (
        f"{'server':<6} {'page':<30} {'clients':>7} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'req/s':>7} {'errors':>6} {'load':>5}  CPU ms a request: web  db client"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        cpu = r.get("cpu_ms", {})
        lines.append(
            f"{r['server']:<6} {r['page']:<30} {r['clients']:>7} {r['requests']:>5} "
            f"{r['p50']:>8.1f} {r['p95']:>8.1f} {r['rps']:>7.1f} {r['errors']:>6} "
            f"{r['load']:>5.2f}  {'':>17}{cpu.get('web', 0):>4.1f} {cpu.get('db', 0):>4.1f} "
            f"{cpu.get('client', 0):>4.1f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a smoke run: tiny fill")
    parser.add_argument("--quick", action="store_true", help="smaller fill (run_all --quick)")
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--trace-events", type=int, default=100_000)
    parser.add_argument("--legal-requests", type=int, default=LEGAL_REQUESTS)
    parser.add_argument("--otel-spans", type=int, default=OTEL_SPANS)
    parser.add_argument("--requests", type=int, default=100, help="per page and client count")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 10, 50])
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="bench_pages")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--reuse", action="store_true", help="keep a database already filled")
    parser.add_argument("--skip-dev", action="store_true", help="the stack's figures only")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--only", nargs="+", help="only the pages whose label holds one of these")
    parser.add_argument("--fill-only", action="store_true", help="fill (or reuse), measure nothing")
    parser.add_argument(
        "--ports", type=int, nargs=2, help="the stack's and runserver's ports (default: free ones)"
    )
    args = parser.parse_args()
    if args.tiny:
        args.traces, args.events, args.trace_events = 300, 1000, 2000
        args.requests, args.warmup, args.clients = 4, 1, [1, 2]
        args.legal_requests = 20
        args.otel_spans = 200
    elif args.quick:
        args.traces, args.events, args.trace_events = 10_000, 100_000, 20_000
        args.requests = 20
    if (args.tiny or args.quick) and args.database == "bench_pages":
        args.database = "bench_pages_tiny" if args.tiny else "bench_pages_quick"

    state = ROOT / "var" / f"{args.database}-state" / "prod"
    filled = bench_scale.database_filled(args) if args.reuse and state.exists() else None
    if filled is not None and (filled["traces"], filled["events"]) != (args.traces, args.events):
        filled = None
    if filled is None:
        shutil.rmtree(state.parent, ignore_errors=True)
        bench_scale.database_fresh(args)
    state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    env = bench_scale.state_env(args, state)
    bench_scale.django_setup(env)
    log(f"database {args.database}, state {state}")
    if filled is None:
        t0 = time.perf_counter()
        filled = bench_scale.fill(args)
        filled["pages"] = fill_pages(filled["big_trace"], args.legal_requests)
        filled["fill_seconds"] = round(time.perf_counter() - t0, 1)
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("UPDATE bench_scale_filled SET value = %s", [json.dumps(filled)])
    if "otel_sha" not in filled["pages"] or filled["pages"]["otel_spans"] != args.otel_spans:
        filled["pages"].update(fill_otel(args.otel_spans))  # a database filled before it
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute("UPDATE bench_scale_filled SET value = %s", [json.dumps(filled)])
    log(f"sizes: {filled}")
    if args.fill_only:
        return 0
    pages = targets(filled, filled["pages"], deep_cursor(args.traces))
    if args.only:
        pages = [(label, path) for label, path in pages if any(o in label for o in args.only)]
    from django.db import connections

    connections.close_all()

    rows: list[dict[str, Any]] = []
    port = args.ports[0] if args.ports else free_port()
    stack = bench_scale.start_stack(args, state, port)
    try:
        rows += measure("stack", f"127.0.0.1:{port}", pages, args)
    finally:
        bench_scale.stop(stack)
    if not args.skip_dev:
        port = args.ports[1] if args.ports else free_port()
        dev = bench_scale.start_dev(env, state, port)
        try:
            rows += measure("dev", f"127.0.0.1:{port}", pages, args)
        finally:
            bench_scale.stop(dev)

    print(
        f"Pages: {filled['traces']} traces, {filled['events']} ledger events, a trace of "
        f"{filled['trace_events']} events and one of {filled['pages']['small_events']}; "
        f"PostgreSQL {args.database}; {os.cpu_count()} CPU cores (shared with whatever else "
        "runs: load = 1-minute load average after each row)."
    )
    print(
        "stack = deploy/stack.py (gunicorn sync workers, WEB_CONCURRENCY default); "
        "dev = manage.py runserver --noreload (threaded), same settings and database"
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"sizes": filled, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
