"""Server-side cost of each page of bench_pages, robust to the machine's load: the view run
in this process through Django's test client against a database bench_pages filled, one
request at a time. Per page: the queries (count, and their time as the database reports it
to this client), the CPU time of this process (``time.process_time``: the view, the
templates, the driver; not the database server's), and the wall time, each the median of
``--repeat`` runs after a warm-up. ``--profile LABEL`` prints a cProfile of that page.

Run: ``.venv/bin/python bench/profile_pages.py [--database bench_pages] [--repeat 5]
[--pg postgres://postgres@127.0.0.1:5432] [--profile LABEL [--sort KEY] [--lines N]]
[--only SUBSTRING] [--sql]``
(after ``bench_pages.py --fill-only`` or any full run on the same database).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_pages  # noqa: E402 - bench/ on sys.path
import bench_scale  # noqa: E402


class Queries:
    """Every query the connection runs: its SQL and its time."""

    def __init__(self) -> None:
        self.found: list[tuple[str, float]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.found.append((sql, time.perf_counter() - t0))


def one(client: Any, path: str) -> tuple[int, float, float, list[tuple[str, float]]]:
    from django.db import connection

    queries = Queries()
    with connection.execute_wrapper(queries):
        c0, w0 = time.process_time(), time.perf_counter()
        response = client.get(path)
        if hasattr(response, "streaming_content"):
            b"".join(response.streaming_content)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return response.status_code, cpu * 1000, wall * 1000, queries.found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="bench_pages")
    parser.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", help="a cProfile of the page whose label holds this")
    parser.add_argument("--sort", default="cumulative", help="the profile's order (tottime, ...)")
    parser.add_argument("--lines", type=int, default=40, help="the profile's rows")
    parser.add_argument("--only", help="only the pages whose label holds this")
    parser.add_argument("--callers", help="also who calls the functions this names (pstats)")
    parser.add_argument("--sql", action="store_true", help="print each page's queries")
    args = parser.parse_args()
    state = ROOT / "var" / f"{args.database}-state" / "prod"
    env = bench_scale.state_env(args, state)
    bench_scale.django_setup(env)
    filled = bench_scale.database_filled(args)
    if filled is None:
        raise SystemExit(f"{args.database} is not filled: run bench_pages.py --fill-only")
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    call_command("collectstatic", "--noinput", verbosity=0)  # the stack's manifest

    pages = bench_pages.targets(filled, filled["pages"], bench_pages.deep_cursor(filled["traces"]))
    clients = {}
    for name in ("alice", bench_pages.LEGAL_USER):
        clients[name] = Client(HTTP_HOST="127.0.0.1")
        clients[name].force_login(User.objects.get(username=name))
    print(f"{'page':<34} {'status':>6} {'queries':>7} {'db ms':>7} {'cpu ms':>7} {'wall ms':>8}")
    for label, path in pages:
        if args.only and args.only not in label:
            continue
        client = clients[bench_pages.LEGAL_USER if path.startswith("/dsr/") else "alice"]
        one(client, path)  # warm-up
        runs = [one(client, path) for _ in range(args.repeat)]
        status, _, _, found = runs[-1]
        db = statistics.median(sum(t for _, t in r[3]) for r in runs) * 1000
        cpu = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        print(f"{label:<34} {status:>6} {len(found):>7} {db:>7.1f} {cpu:>7.1f} {wall:>8.1f}")
        if args.sql:
            for sql, seconds in found:
                print(f"    {seconds * 1000:7.1f} ms  {sql[:160]}")
        if args.profile and args.profile in label:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.repeat):
                client.get(path)
            profiler.disable()
            stats = pstats.Stats(profiler).sort_stats(args.sort)
            stats.print_stats(args.lines)
            if args.callers:
                stats.print_callers(args.callers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
