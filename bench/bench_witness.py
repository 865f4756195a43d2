"""Witnesses co-signing the ledger's checkpoints (issue 21, item 4's figure): three local
``python -m witness serve`` processes, each with its own key and state, and the time from a
grown ledger to a checkpoint co-signed by all three (``governance.witnessing.push_all``: the
checkpoint signed, then for each witness the consistency proof from the size it holds, the
HTTP round trip, its cosignature verified and stored).

Used by ``bench/bench_tlog.py`` (``--witnesses 3``, on its stored ledger). Alone, on a scratch
database: ``.venv/bin/python bench/bench_witness.py [--events 10000] [--witnesses 3]
[--rounds 20] [--database-url postgres://postgres@127.0.0.1:5432/postgres]
[--database-name NAME]`` (a scratch database, dropped at the end; SQLite under a temporary
directory with ``--database-url sqlite``).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from witness import __main__ as witness_cli  # noqa: E402 - pure, no Django


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def witnesses(count: int, log_vkeys: list[str]) -> Iterator[list[dict[str, str]]]:
    """``count`` witness processes on free ports, their ``GOVERNANCE_WITNESSES`` entries."""
    tmp = tempfile.mkdtemp(prefix="witness-bench-")
    processes: list[subprocess.Popen[str]] = []
    config = []
    try:
        for i in range(count):
            key = os.path.join(tmp, f"w{i}.key")
            vkey = witness_cli.keygen(f"witness.bench/w{i}", key)
            port = free_port()
            argv = [sys.executable, "-m", "witness", "serve", "--key", key, "--quiet"]
            argv += ["--state", os.path.join(tmp, f"w{i}"), "--port", str(port)]
            for log in log_vkeys:
                argv += ["--log", log]
            process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
            processes.append(process)
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line.startswith("witness "):
                raise SystemExit(f"witness {i} did not start")
            config.append({"url": f"http://127.0.0.1:{port}", "vkey": vkey})
        yield config
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()


def cosign_times(count: int, rounds: int, grow: int = 10) -> dict[str, Any]:
    """With Django set up on a ledger: start ``count`` witnesses, push once (the first
    cosignature, from size 0), then ``rounds`` times append ``grow`` events and time
    ``push_all`` until each witness cosigned the new checkpoint."""
    from django.conf import settings

    from core.ledger import codes
    from governance import services, transparency, witnessing

    with witnesses(count, transparency.verifier_keys()) as config:
        settings.GOVERNANCE_WITNESSES = config
        settings.GOVERNANCE_WITNESS_QUORUM = count
        try:
            t0 = time.perf_counter()
            first = witnessing.push_all()
            first_seconds = time.perf_counter() - t0
            if [o.outcome for o in first] != ["cosigned"] * count:
                raise SystemExit(f"the first push was not cosigned by all: {first}")
            times = []
            for r in range(rounds):
                for n in range(grow):
                    services.event_append(
                        event_type=codes.REPLAY_REQUEST, payload={"n": n, "round": r}
                    )
                t0 = time.perf_counter()
                outcomes = witnessing.push_all()
                times.append(time.perf_counter() - t0)
                if [o.outcome for o in outcomes] != ["cosigned"] * count:
                    raise SystemExit(f"round {r} was not cosigned by all: {outcomes}")
            size = transparency.tree_size()
            witnessed = witnessing.summary()["witnessed_size"]
        finally:
            settings.GOVERNANCE_WITNESSES = []
    return {
        "witnesses": count,
        "first": first_seconds,
        "median": statistics.median(times),
        "max": max(times),
        "rounds": rounds,
        "size": size,
        "witnessed": witnessed,
    }


def report(found: dict[str, Any]) -> str:
    return (
        f"  checkpoint co-signed by {found['witnesses']} witnesses "
        f"{found['median'] * 1000:>8.1f} ms median, {found['max'] * 1000:.1f} ms max over "
        f"{found['rounds']} (first push from size 0: {found['first'] * 1000:.1f} ms; witnessed "
        f"through {found['witnessed']:,} of {found['size']:,})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--witnesses", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument(
        "--database-name", default=f"witness_bench_{os.getpid()}", help="the scratch database"
    )
    args = parser.parse_args()
    import bench_governance as gov_bench

    var = tempfile.mkdtemp(prefix="witness-bench-var-")
    sqlite = args.database_url == "sqlite"
    name = args.database_name
    url = (
        f"sqlite:///{var}/db.sqlite3"
        if sqlite
        else gov_bench.create_database(args.database_url, name)
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "REPLAY_VAR_DIR": var,
        "DATABASE_URL": url,
        "GOVERNANCE_WITNESSES": "[]",
    }
    try:
        gov_bench.migrate({**os.environ, **env, "PYTHONPATH": str(ROOT)})
        os.environ.update(env)
        import django

        django.setup()
        from core.ledger import codes
        from governance import services

        for n in range(args.events):
            services.event_append(event_type=codes.REPLAY_REQUEST, payload={"n": n})
        found = cosign_times(args.witnesses, args.rounds)
        print(f"witnesses ({'SQLite' if sqlite else 'PostgreSQL'}, {args.events:,} events)")
        print(report(found))
    finally:
        if not sqlite:
            from django.db import connections

            connections.close_all()
            gov_bench.drop_database(args.database_url, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
