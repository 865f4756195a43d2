"""Data Subject Request figures: subject lookup p95 over a large subject index, and the time
to erase a subject held in many traces.

Run: ``.venv/bin/python bench/bench_dsr.py [--traces 100000] [--values 1000000]
[--erase-traces 1000] [--lookups 1000] [--quick] [--keep]``

With ``DATABASE_URL`` naming a PostgreSQL database, a scratch database ``<name>_dsr_bench``
is created on that server (dropped at the end unless ``--keep``); without it, a SQLite
file in a temporary directory. Either is migrated with ``manage.py migrate``.

1. LOOKUP: ``--traces`` trace rows (with their blob rows) and ``--values`` indexed personal
   values spread over ``--values / 10`` subjects, written in bulk with the real crypto
   (each subject's AES-256-GCM key wrapped under the master key, its identifier sealed
   under it, its HMAC lookup digest; each value sealed under its subject's key). Then
   ``--lookups`` random identifiers are each looked up the way a request does it:
   ``privacy.subjects.lookup(identifier)`` (the keyed digest, one indexed query) and
   ``privacy.index.find([ref])`` (every trace, location and path). Reported: p50/p95/max.
2. ERASE: one more subject with two values in each of ``--erase-traces`` traces;
   ``privacy.erasure.plan`` then ``privacy.erasure.shred`` are timed (keys, identifiers and
   ciphertexts destroyed in one transaction), and a second ``shred`` (nothing destroyed).
``--quick``: 2,000 traces, 20,000 values, 100 erase traces, 200 lookups.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BATCH = 5000


def log(message: str) -> None:
    print(f"[bench_dsr] {message}", file=sys.stderr, flush=True)


def scratch(url: str, suffix: str = "dsr_bench") -> tuple[str, str]:
    """A fresh scratch database beside the one `url` names: (its name, its URL)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    scratch_name = f"{name.split('?')[0]}_{suffix}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{scratch_name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{scratch_name}"')
    return scratch_name, f"{base}/{scratch_name}"


def drop(url: str, name: str) -> None:
    import psycopg

    base = url.rsplit("/", 1)[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(database_url: str | None, var_dir: str) -> None:
    os.environ["REPLAY_VAR_DIR"] = var_dir
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def identifier_of(n: int) -> str:
    return f"person{n:07d}@example.org"


def build(traces: int, values: int) -> list[int]:
    """Trace rows and an index of `values` values over values/10 subjects; the trace pks."""
    from django.db import transaction

    from core.privacy import crypto
    from privacy.models import PersonalValue, Subject, SubjectKey
    from privacy.subjects import _identifier_aad, _master, _secret, _wrap, new_ref
    from privacy.values import value_aad
    from replay.models import Blob, Trace

    t0 = time.perf_counter()
    pks: list[int] = []
    for start in range(0, traces, BATCH):
        with transaction.atomic():
            blobs = Blob.objects.bulk_create(
                [
                    Blob(sha256=f"{n:064x}", size=1, storage_name=f"bench/{n:064x}")
                    for n in range(start, min(traces, start + BATCH))
                ]
            )
            made = Trace.objects.bulk_create(
                [
                    Trace(
                        trace_id=f"t{b.sha256[-12:]}",
                        format="replay-trace",
                        schema_version=1,
                        blob=b,
                        filename="bench.trace.json",
                        encoding="json",
                    )
                    for b in blobs
                ]
            )
        pks.extend(t.pk for t in made)
    log(f"{traces:,} traces in {time.perf_counter() - t0:.1f} s")
    _ = _master(), _secret()
    t0 = time.perf_counter()
    n_subjects = max(1, values // 10)
    rng = random.Random(7)
    for start in range(0, n_subjects, BATCH // 5):
        chunk = range(start, min(n_subjects, start + BATCH // 5))
        with transaction.atomic():
            keys, refs, plain = [], [], []
            for _n in chunk:
                ref = new_ref()
                key = crypto.new_key()
                keys.append(SubjectKey(wrapped=_wrap(key, b"key:" + ref.encode())))
                refs.append(ref)
                plain.append(key)
            keys = SubjectKey.objects.bulk_create(keys)
            subjects = []
            for n, ref, key, row in zip(chunk, refs, plain, keys, strict=True):
                ident = identifier_of(n)
                nonce, ct = crypto.seal(key, ident.encode(), _identifier_aad(ref))
                subjects.append(
                    Subject(
                        ref=ref,
                        lookup_digest=crypto.lookup_digest(_secret(), ident),
                        key=row,
                        identifier_nonce=nonce,
                        identifier_ciphertext=ct,
                    )
                )
            subjects = Subject.objects.bulk_create(subjects)
            rows = []
            for subject, key in zip(subjects, plain, strict=True):
                for i in range(10):
                    trace_pk = pks[rng.randrange(len(pks))]
                    at = 100 + 64 * i + rng.randrange(1 << 30) * 1024
                    nonce, ct = crypto.seal(key, b"value", value_aad(trace_pk, at))
                    rows.append(
                        PersonalValue(
                            subject=subject,
                            trace_id=trace_pk,
                            location=f"event {i}",
                            path="/user/email" if i % 2 else "/user/name",
                            start=at,
                            end=at + 5,
                            nonce=nonce,
                            ciphertext=ct,
                        )
                    )
            PersonalValue.objects.bulk_create(rows, ignore_conflicts=True)
    log(f"{n_subjects:,} subjects, {n_subjects * 10:,} values in {time.perf_counter() - t0:.1f} s")
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    return pks


def lookups(n_subjects: int, count: int) -> list[float]:
    from privacy import index, subjects

    rng = random.Random(11)
    times = []
    for _ in range(count):
        ident = identifier_of(rng.randrange(n_subjects))
        t0 = time.perf_counter()
        ref = subjects.lookup(ident)
        hits = index.find([ref])
        times.append(time.perf_counter() - t0)
        assert ref is not None, ident
        assert hits, ident
    return times


def erase(pks: list[int], traces: int) -> dict[str, float]:
    from django.db import transaction

    from core.privacy import crypto
    from privacy import erasure, subjects
    from privacy.models import PersonalValue, Subject
    from privacy.values import value_aad

    ref = subjects.ref_for("erase.me@example.org")
    subject = Subject.objects.select_related("key").get(ref=ref)
    key = subjects.subject_key(subject)
    rows = []
    for trace_pk in pks[:traces]:
        for i, at in enumerate((1, 40)):
            nonce, ct = crypto.seal(key, b"Erase Me", value_aad(trace_pk, at))
            rows.append(
                PersonalValue(
                    subject=subject,
                    trace_id=trace_pk,
                    location="event 0",
                    path=("/user/name", "/user/email")[i],
                    start=at,
                    end=at + 8,
                    nonce=nonce,
                    ciphertext=ct,
                )
            )
    with transaction.atomic():
        PersonalValue.objects.bulk_create(rows, ignore_conflicts=True)
    t0 = time.perf_counter()
    plan = erasure.plan([ref])
    t_plan = time.perf_counter() - t0
    t0 = time.perf_counter()
    outcome = erasure.shred([ref])
    t_shred = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = erasure.shred([ref])
    t_again = time.perf_counter() - t0
    assert len(plan.traces) == min(traces, len(pks)), plan.fields
    assert outcome.first_time
    assert not again.first_time
    return {"plan": t_plan, "shred": t_shred, "again": t_again, "fields": outcome.fields}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--values", type=int, default=1_000_000)
    parser.add_argument("--erase-traces", type=int, default=1000)
    parser.add_argument("--lookups", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.traces, args.values, args.erase_traces, args.lookups = 2000, 20_000, 100, 200
    url = os.environ.get("DATABASE_URL", "")
    name = None
    with tempfile.TemporaryDirectory(prefix="bench-dsr-") as var_dir:
        if url.startswith("postgres"):
            name, db_url = scratch(url)
            log(f"PostgreSQL scratch database {name}")
        else:
            db_url = None
            log("SQLite (set DATABASE_URL to a PostgreSQL database for the real figures)")
        try:
            setup_django(db_url, var_dir)
            from django.db import connection

            pks = build(args.traces, args.values)
            times = sorted(lookups(max(1, args.values // 10), args.lookups))
            erased = erase(pks, args.erase_traces)
            vendor = connection.vendor
            connection.close()
        finally:
            if name is not None and not args.keep:
                drop(url, name)
    p50 = statistics.median(times)
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    print(f"DSR figures ({vendor}): {args.traces:,} traces, {args.values:,} indexed fields")
    print(f"{'figure':<48} {'value':>12}")
    print(f"{'subject lookup + find, p50 (ms)':<48} {p50 * 1000:>12.2f}")
    print(f"{'subject lookup + find, p95 (ms)':<48} {p95 * 1000:>12.2f}")
    print(f"{'subject lookup + find, max (ms)':<48} {times[-1] * 1000:>12.2f}")
    label = f"erasure plan, subject in {args.erase_traces:,} traces (ms)"
    print(f"{label:<48} {erased['plan'] * 1000:>12.1f}")
    label = f"erasure shred, {int(erased['fields']):,} fields (ms)"
    print(f"{label:<48} {erased['shred'] * 1000:>12.1f}")
    print(f"{'second shred, nothing destroyed (ms)':<48} {erased['again'] * 1000:>12.1f}")


if __name__ == "__main__":
    main()
