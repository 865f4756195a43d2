"""End-to-end DSR figures through the dsr app (issue 14 D1's orchestration): the time to build
the evidence bundle of a subject held in N traces (subject index lookup, one governed AUDIT
replay per trace, the signed bundle, DSR_EXPORTED), and the time to execute the approved
erasure of that subject (shred, DSR_ERASED receipt, stored bundles dropped).

Run: ``.venv/bin/python bench/bench_dsr_flow.py [--traces 1000] [--quick] [--keep]``

N distinct native traces are recorded with the reference runtime
(``core.formats.native.demo``'s recorder, one seed each; each names the demo's people, Ada
among them) and ingested, which indexes
their personal values. With ``DATABASE_URL`` naming a PostgreSQL database, a scratch database
``<name>_dsr_flow_bench`` is used (dropped unless ``--keep``); otherwise SQLite in a temporary
directory. ``--quick``: 50 traces. The pure bundle build alone is ``bench/bench_dsr_bundle.py``;
lookup p95 and the shredding alone are ``bench/bench_dsr.py``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from bench_dsr import drop, scratch  # noqa: E402 - bench/ is on sys.path above

ADA = "ada.lovelace@example.org"


def log(message: str) -> None:
    print(f"[bench_dsr_flow] {message}", file=sys.stderr, flush=True)


def setup(database_url: str | None, var_dir: str) -> None:
    os.environ["REPLAY_VAR_DIR"] = var_dir
    os.environ["REPLAY_TASK_RUNNER"] = "eager"
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    else:
        os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run(n: int) -> dict[str, float]:
    from django.contrib.auth.models import User

    from core.canonical import jcs
    from core.formats import default_registry, native
    from core.formats.native.demo import _record
    from core.formats.native.recorder import signer_for
    from core.ledger import signing
    from core.replay.signatures import HMAC_SHA256
    from dsr import access, services
    from governance import keystore
    from governance import services as gov
    from replay.keys import key_add_hmac
    from replay.services import trace_ingest

    secret = b"bench dsr flow trace key, a test vector"
    from datetime import UTC, datetime

    key_add_hmac(key_id="bench-dsr", secret=secret, valid_from=datetime(2000, 1, 1, tzinfo=UTC))
    signer = signer_for("bench-dsr", HMAC_SHA256, secret)
    registry = default_registry()
    started = time.perf_counter()
    for i in range(n):
        document = _record(f"bench-dsr-{i}", signer, registry)
        trace_ingest(
            source=io.BytesIO(native.dumps_document(document)), filename=f"b{i}.trace.json"
        )
    log(f"recorded and ingested {n} traces in {time.perf_counter() - started:.1f} s")
    users = {
        name: User.objects.create_user(name, f"{name}@example.com", "pw")
        for name in ("lena", "adam", "sam", "cora")
    }
    gov.roles_install(
        admins=[users["adam"], users["sam"]],
        council=[users["cora"]],
        others=[(users["lena"], ["legal"])],
    )
    private = keystore.generate_private_key()
    key = gov.member_key_register(
        user=users["adam"], public_key=signing.public_key_of(private).hex()
    )
    key = gov.member_key_confirm(key=key, admin=users["sam"])
    legal = services.legal_request_open(
        actor=users["lena"], identifiers=[ADA], kind="both", legal_basis="GDPR Art. 15 and 17"
    )
    legal = services.legal_request_identity_verify(
        request=legal, actor=users["lena"], method="bench"
    )
    t0 = time.perf_counter()
    access.bundle_request(request=legal, actor=users["lena"], enqueue=False)
    legal = access.bundle_build(request_id=legal.id)
    build = time.perf_counter() - t0
    size = access.bundle_path(legal).stat().st_size
    log(f"bundle: {legal.bundle_total} traces, {size} bytes, {build:.2f} s")
    for purpose in (signing.DSR_RELEASE, signing.DSR_ERASURE):
        payload = services.approval_payload_for(request=legal, purpose=purpose)
        services.legal_request_approve(
            request=legal,
            purpose=purpose,
            approver=users["adam"],
            document={
                "payload": payload,
                "key_id": key.key_id,
                "signature": signing.sign(private, jcs(payload)),
            },
        )
    t0 = time.perf_counter()
    event = access.legal_request_erase(request=legal, actor=users["lena"])
    erase = time.perf_counter() - t0
    log(f"erasure: {event.payload['receipt']['fields']} fields, {erase:.3f} s")
    return {"traces": legal.bundle_total, "bundle_s": build, "bundle_bytes": size, "erase_s": erase}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    n = 50 if args.quick else args.traces
    url = os.environ.get("DATABASE_URL", "")
    name = None
    with tempfile.TemporaryDirectory() as tmp:
        if url.startswith("postgres"):
            name, scratch_url = scratch(url, "dsr_flow_bench")
            setup(scratch_url, tmp)
            engine = "PostgreSQL"
        else:
            setup(None, tmp)
            engine = "SQLite"
        try:
            figures = run(n)
        finally:
            if name and not args.keep:
                from django.db import connections

                connections.close_all()
                drop(url, name)
    print(f"DSR flow ({engine}), a subject in {figures['traces']} traces")
    print("| figure | value |")
    print("|---|---|")
    print(f"| bundle build (index, audit replays, signed bundle) | {figures['bundle_s']:.2f} s |")
    print(f"| per trace | {1000 * figures['bundle_s'] / max(1, figures['traces']):.1f} ms |")
    print(f"| bundle size | {figures['bundle_bytes'] / 1e6:.2f} MB |")
    print(f"| erasure (shred, receipt, bundles dropped) | {figures['erase_s']:.3f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
