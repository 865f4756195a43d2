"""The server key in use: the registry's current key, its private half (decrypted once per
process), a new key's row and its announcement payload, and every server key as the chain's
rules read them. The append signs with these; checkpoints and verification read them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from core.ledger import chain, signing
from governance import keystore
from governance.models import SigningKey

SERVER_KEY_PREFIX: Final = "server"


_private_keys: dict[str, bytes] = {}


def server_key_current() -> SigningKey | None:
    return (
        SigningKey.objects.filter(valid_until__isnull=True, revoked_at__isnull=True)
        .order_by("-valid_from", "-id")
        .first()
    )


def private_key_of(key: SigningKey) -> bytes:
    raw = _private_keys.get(key.key_id)
    if raw is None:
        raw = keystore.decrypt_private_key(key.encrypted_private_key)
        _private_keys[key.key_id] = raw
    return raw


def server_key_create(*, valid_from: datetime) -> tuple[SigningKey, bytes]:
    """A new server key row (not yet announced in the ledger: the caller appends that)."""
    private = keystore.generate_private_key()
    public = signing.public_key_of(private)
    key = SigningKey.objects.create(
        key_id=signing.key_id_for(public, SERVER_KEY_PREFIX),
        public_key=public.hex(),
        fingerprint=signing.fingerprint(public),
        encrypted_private_key=keystore.encrypt_private_key(private),
        valid_from=valid_from,
    )
    _private_keys[key.key_id] = private
    return key, private


def server_key_payload(key: SigningKey, **extra: Any) -> dict[str, Any]:
    return {
        "registry": chain.SERVER_REGISTRY,
        "key_id": key.key_id,
        "public_key": key.public_key,
        "fingerprint": key.fingerprint,
        "valid_from": signing.format_time(key.valid_from),
        **extra,
    }


def server_keys() -> dict[str, chain.ServerKey]:
    return {
        k.key_id: chain.ServerKey(
            key_id=k.key_id,
            public_key=bytes.fromhex(k.public_key),
            valid_from=k.valid_from,
            valid_until=k.valid_until,
            revoked_at=k.revoked_at,
        )
        for k in SigningKey.objects.all()
    }
