"""Evidence bundle build and offline verification for one subject found in many traces.

Run: ``.venv/bin/python bench/bench_dsr_bundle.py [--traces N] [--repeat R] [--quick]``

Synthetic inputs (no database): N traces (1,000 by default; 100 with ``--quick``), each with
five of the subject's values, an audit-mode replay report with ten checks, and three signed
ledger events (a linked chain of 3N events, made with the real ``core.ledger.chain`` code).
Prints the bundle's size, the best of R timings of ``build_bundle`` and ``verify_bundle``
(wall time; the machine is shared, so the best pass is the least disturbed one) with their
MB/s, and raw SHA-256 over the same bytes as the floor a verifier cannot beat.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core import bundle
from core.ledger import chain, signing

PRIVATE = bytes(range(32))  # a benchmark key, not a secret
PUBLIC = signing.public_key_of(PRIVATE)
KEY_ID = signing.key_id_for(PUBLIC, "server")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SUBJECT = "subj_BENCHBENCHBENCHBENCHBENCHB"


def sign(message: bytes) -> tuple[str, str, str]:
    return KEY_ID, PUBLIC.hex(), signing.sign(PRIVATE, message)


def ledger(n: int) -> list[dict]:
    events, prev = [], ""
    for seq in range(1, n + 1):
        trace = (seq - 1) // 3
        code, type_, payload = 101, "REPLAY_RESULT", {"trace_sha256": f"sha256:{trace:064x}"}
        if seq == 1:
            code, type_ = 400, "KEY_ADDED"
            payload = {"registry": "server", "key_id": KEY_ID, "public_key": PUBLIC.hex()}
        at = T0 + timedelta(seconds=seq)
        body = chain.event_body(
            seq=seq,
            code=code,
            type=type_,
            created_at=at,
            actor_id=None,
            actor_label="system",
            payload=payload,
            idempotency_key=None,
            server_key_id=KEY_ID,
            actor_key_id=None,
            actor_signature=None,
        )
        digest = chain.event_hash(prev, body)
        row = {
            **dict.fromkeys(chain.FIELDS),
            "seq": seq,
            "code": code,
            "type": type_,
            "created_at": at,
            "actor_label": "system",
            "payload": payload,
            "server_key_id": KEY_ID,
            "prev_hash": prev,
            "hash": digest,
            "server_signature": signing.sign(PRIVATE, digest.encode()),
        }
        events.append(bundle.event_record(tuple(row[f] for f in chain.FIELDS)))
        prev = digest
    return events


def inputs(n: int) -> bundle.BundleInputs:
    traces = []
    for i in range(n):
        trace_id = f"{i:032x}"
        traces.append(
            bundle.TraceEvidence(
                trace_id=trace_id,
                file_sha256=f"sha256:{i:064x}",
                format="replay-trace",
                verdict="ok",
                values=[
                    {
                        "subject_ref": SUBJECT,
                        "location": f"event {j}",
                        "path": f"/events/{j}/payload/email",
                        "value": "[redacted]",
                        "released": False,
                    }
                    for j in range(5)
                ],
                report={
                    "trace_id": trace_id,
                    "format": "replay-trace",
                    "mode": "audit",
                    "status": "ok",
                    "error_code": None,
                    "authoritative": True,
                    "checks": [
                        {"name": f"check {k}", "ok": True, "detail": "verified " * 4}
                        for k in range(10)
                    ],
                    "divergences": [],
                    "broke_at": None,
                    "expected": None,
                    "observed": None,
                },
            )
        )
    return bundle.BundleInputs(
        request_ref="dsr_bench",
        subject_refs=(SUBJECT,),
        created_at="2026-02-01T00:00:00.000000Z",
        traces=traces,
        events=ledger(3 * n),
        server_keys=[bundle.server_key_record(chain.ServerKey(KEY_ID, PUBLIC, valid_from=T0))],
    )


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100 traces, one pass")
    args = parser.parse_args()
    n, repeat = (100, 1) if args.quick else (args.traces, args.repeat)

    data_in = inputs(n)
    build_s, data = best(lambda: bundle.build_bundle(data_in, sign), repeat)
    assert isinstance(data, bytes)
    verify_s, check = best(lambda: bundle.verify_bundle(data, [PUBLIC.hex()]), repeat)
    assert check.ok, check  # type: ignore[attr-defined]
    sha_s, _ = best(lambda: hashlib.sha256(data).digest(), max(repeat, 3))
    mb = len(data) / 1e6
    print(f"python {platform.python_version()} on {platform.machine()}, best of {repeat}")
    print(f"subject in {n} traces, {3 * n} ledger events, bundle {mb:.2f} MB")
    print(f"{'operation':<22}{'seconds':>10}{'MB/s':>10}")
    for name, seconds in (
        ("build_bundle", build_s),
        ("verify_bundle", verify_s),
        ("sha256 (raw)", sha_s),
    ):
        print(f"{name:<22}{seconds:>10.3f}{mb / seconds:>10.1f}")
    print(f"verify / raw sha256: {verify_s / sha_s:.0f}x")


if __name__ == "__main__":
    main()
