"""The events naming some traces (``governance.evidence.events_naming``: what the operations
page's retention panel, every retention plan and every evidence bundle ask the ledger),
through the reference indexes (migration 0012) against the scan of every event's reference
keys it replaced, A/B in one run on PostgreSQL.

Run: ``.venv/bin/python bench/bench_ops_retention.py [--events 500000] [--traces 1000]
[--repeat 5] [--database-url postgres://postgres@127.0.0.1:5432/replay_bench_retention]
[--keep]``

The database named by ``--database-url`` is created (dropped first when it exists, and at the
end unless ``--keep``) and migrated. ``--events`` ledger rows are written in one
``INSERT ... SELECT`` (not chained or signed: only their payloads matter here): one in ten
names a trace by id under one of the six reference keys (``trace_id``, ``run_id``, ...), the
others carry no reference. ``--traces`` in-memory traces are asked about (the panel's two
rounds read up to 1,000), one in five of them named by some event. Reported: p50 and min of
each way over ``--repeat`` runs, that both found the same events, and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _admin_url(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def _recreate(url: str, *, drop_only: bool = False) -> None:
    import psycopg

    admin, name = _admin_url(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')


def _fill(events: int, traces: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO governance_governanceevent
              (seq, code, type, created_at, actor_label, payload, server_key_id,
               prev_hash, hash, server_signature)
            SELECT g, 900, 'BENCH', now(), 'bench',
                   CASE WHEN g %% 10 = 0
                        THEN jsonb_build_object(
                               (ARRAY['trace_id', 'trace_sha256', 'file_sha256', 'target_id',
                                      'snapshot_id', 'run_id'])[1 + (g / 10) %% 6],
                               'trace-' || ((g / 10) %% %s), 'n', g)
                        ELSE jsonb_build_object('n', g, 'note', 'no reference') END,
                   'k', '', 'sha256:' || md5(g::text), 'sig'
            FROM generate_series(1, %s) AS g
            """,
            [traces * 5, events],
        )
        cursor.execute("ANALYZE governance_governanceevent")


def _traces(count: int) -> list:
    from replay.models import Blob, Trace

    return [
        Trace(
            pk=i + 1,
            trace_id=f"trace-{i}",
            blob=Blob(sha256=f"{i:064x}"),
            required_snapshot_ids=[{"kind": "selfrep", "snapshot_id": f"snap-{i}"}],
        )
        for i in range(count)
    ]


def _scan(traces, *, after_seq: int = 0) -> dict[int, set[int]]:
    """The replaced way: every event's six reference keys read, matched in Python, then the
    full rows of the events that matched (as ``events_naming`` reads them)."""
    from django.db.models.fields.json import KeyTextTransform

    from core.ledger import chain
    from governance.evidence import CHUNK, REFERENCE_KEYS, trace_names
    from governance.models import GovernanceEvent

    names = trace_names(traces)
    columns = {f"ref_{i}": KeyTextTransform(key, "payload") for i, key in enumerate(REFERENCE_KEYS)}
    values = (
        GovernanceEvent.objects.filter(seq__gt=after_seq)
        .annotate(**columns)
        .order_by("seq")
        .values_list("seq", *columns)
    )
    matched: dict[int, set[int]] = {}
    for seq, *refs in values.iterator(chunk_size=5000):
        named: set[int] = set()
        for ref in refs:
            if ref is not None and ref in names:
                named |= names[ref]
        if named:
            matched[seq] = named
    seqs = sorted(matched)
    for start in range(0, len(seqs), CHUNK):
        rows = GovernanceEvent.objects.filter(seq__in=seqs[start : start + CHUNK])
        list(rows.order_by("seq").values_list(*chain.FIELDS))
    return matched


def _indexed(traces) -> dict[int, set[int]]:
    from core.ledger import chain
    from governance.evidence import events_naming

    seq = chain.FIELDS.index("seq")
    return {row[seq]: pks for row, pks in events_naming(traces)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/replay_bench_retention"
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    _recreate(args.database_url)
    env = {**os.environ, "DATABASE_URL": args.database_url}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, check=True)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    django.setup()
    try:
        started = time.perf_counter()
        _fill(args.events, args.traces)
        print(f"fill: {args.events} events in {time.perf_counter() - started:.1f} s")
        # one in five traces named: the fill names trace-0 .. trace-(5 x traces - 1)
        traces = _traces(args.traces * 5)[::5][: args.traces]
        timings: dict[str, list[float]] = {"scan": [], "indexed": []}
        answers = {}
        for _ in range(args.repeat):  # alternately, so the load falls on both alike
            for way, run in (("scan", _scan), ("indexed", _indexed)):
                t0 = time.perf_counter()
                answers[way] = run(traces)
                timings[way].append((time.perf_counter() - t0) * 1000)
        assert answers["scan"] == answers["indexed"], "the two ways disagree"
        for way, ms in timings.items():
            print(
                f"{way:8} p50 {statistics.median(ms):8.1f} ms  min {min(ms):8.1f} ms  "
                f"({len(answers[way])} events name the {len(traces)} traces)"
            )
        ratio = statistics.median(timings["scan"]) / statistics.median(timings["indexed"])
        print(f"scan / indexed (p50): {ratio:.1f}x   load: {os.getloadavg()}")
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            _recreate(args.database_url, drop_only=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
