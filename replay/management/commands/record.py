from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management.base import BaseCommand, CommandError

from core.formats import default_registry, native
from core.formats.native.recorder import record, signer_for
from core.replay.runtime import RecordOptions
from core.replay.signatures import ED25519, HMAC_SHA256
from replay.keys import DEMO_KEY_ID, KeyRegistryError, key_demo_ensure, key_secret


class Command(BaseCommand):
    help = "Run the reference runtime and write the native trace it produces, signed."

    def add_arguments(self, parser):
        parser.add_argument("--seed", required=True)
        parser.add_argument("--out", default=None, help=".trace.json, .trace.jsonl, or + .gz")
        parser.add_argument("--key-id", default=DEMO_KEY_ID)
        parser.add_argument(
            "--private-key-file",
            default=None,
            help="raw 32-byte or hex Ed25519 private key (the registry keeps only public keys)",
        )
        parser.add_argument("--iterations", type=int, default=3)
        parser.add_argument("--events", type=int, default=8, help="filler events")
        parser.add_argument("--no-persist-outputs", action="store_true")
        parser.add_argument("--started-at", default="2026-01-01T00:00:00Z")

    def handle(self, *args, **o):
        try:
            if o["private_key_file"]:
                raw = Path(o["private_key_file"]).read_bytes()
                # 32 bytes are the raw key, whatever they are (never strip them); else hex
                secret = raw if len(raw) == 32 else bytes.fromhex(raw.strip().decode())
                Ed25519PrivateKey.from_private_bytes(secret)  # refuse a bad key here, not midway
                signer = signer_for(o["key_id"], ED25519, secret)
            elif o["key_id"] == DEMO_KEY_ID:
                signer = signer_for(DEMO_KEY_ID, HMAC_SHA256, key_demo_ensure()[1])
            else:
                signer = signer_for(o["key_id"], HMAC_SHA256, key_secret(key_id=o["key_id"]))
        except (KeyRegistryError, OSError, ValueError) as exc:
            raise CommandError(str(exc), returncode=2) from None
        opts = RecordOptions(
            seed=o["seed"],
            iterations=o["iterations"],
            filler_events=o["events"],
            persist_outputs=not o["no_persist_outputs"],
            started_at=o["started_at"],
        )
        document = record(opts, default_registry(), signer)
        out = o["out"]
        if out is None:
            sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
            return
        path = Path(out)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "wb") as fh:
            if path.name.removesuffix(".gz").endswith(".jsonl"):
                for line in native.iter_jsonl(document):
                    fh.write(line)
            else:
                fh.write(native.dumps_document(document))
        self.stdout.write(f"{document['trace_id']} -> {path}")
