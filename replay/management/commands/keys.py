from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from replay.keys import KeyRegistryError, key_add_ed25519, key_add_hmac, key_revoke
from replay.models import VerificationKey


class Command(BaseCommand):
    help = "The verification-key registry: add-hmac, add-ed25519, list, revoke."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        hm = sub.add_parser("add-hmac", help="register an HMAC-SHA256 secret (stored encrypted)")
        hm.add_argument("key_id")
        hm.add_argument("--secret-file", required=True)
        ed = sub.add_parser("add-ed25519", help="register an Ed25519 public key")
        ed.add_argument("key_id")
        ed.add_argument("--public-key-file", required=True)
        sub.add_parser("list", help="every key with its window")
        rv = sub.add_parser("revoke", help="end a key's window now")
        rv.add_argument("key_id")

    def handle(self, *args, action, **options):
        try:
            if action == "add-hmac":
                # a text secret file ends with a newline; only line endings are removed
                secret = _read(options["secret_file"]).rstrip(b"\r\n")
                key = key_add_hmac(key_id=options["key_id"], secret=secret)
                self.stdout.write(f"added {key.alg} key {key.key_id}")
            elif action == "add-ed25519":
                key = key_add_ed25519(
                    key_id=options["key_id"], public_key=_read(options["public_key_file"])
                )
                self.stdout.write(f"added {key.alg} key {key.key_id}")
            elif action == "revoke":
                key = key_revoke(key_id=options["key_id"])
                self.stdout.write(f"revoked {key.key_id} at {key.revoked_at.isoformat()}")
            else:
                for key in VerificationKey.objects.all():
                    state = f"revoked {key.revoked_at.isoformat()}" if key.revoked_at else "active"
                    until = key.valid_until.isoformat() if key.valid_until else "-"
                    self.stdout.write(
                        f"{key.key_id}\t{key.alg}\tfrom {key.valid_from.isoformat()}\t"
                        f"until {until}\t{state}"
                    )
        except KeyRegistryError as exc:
            raise CommandError(str(exc), returncode=1) from None


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"{path}: {exc.strerror}", returncode=2) from None
