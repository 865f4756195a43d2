"""The verification-key registry: HMAC secrets encrypted at rest, Ed25519 public keys.

Services (writes) and the database key ring (reads) for trace signatures. A revoked key
keeps verifying signatures the console witnessed inside its window.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import UTC, datetime

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.replay.signatures import ED25519, HMAC_SHA256, KeyMaterial
from replay.models import VerificationKey

DEMO_KEY_ID = "demo"

KEY_EXISTS = "a key with id {key_id!r} already exists; key ids are never reused"
KEY_UNKNOWN = "no key with id {key_id!r}"
KEY_ALREADY_REVOKED = "key {key_id!r} was already revoked at {at}"
KEY_BAD_PUBLIC = "not an Ed25519 public key (expected PEM, 64 hex characters or 32 raw bytes)"
KEY_SECRET_TOO_SHORT = "an HMAC secret needs at least 16 bytes"  # noqa: S105 - a message


class KeyRegistryError(ValueError):
    """A key-registry refusal with a message a person can act on."""


def _fernet() -> Fernet:
    digest = hashlib.sha256(settings.REPLAY_KEY_ENCRYPTION_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_secret(secret: bytes) -> bytes:
    return _fernet().encrypt(secret)


def decrypt_secret(token: bytes | memoryview | None) -> bytes:
    if token is None:  # the column allows it for Ed25519 keys; an HMAC key always has one
        raise KeyRegistryError("a stored HMAC key has no secret")
    try:
        return _fernet().decrypt(bytes(token))
    except InvalidToken:
        raise KeyRegistryError(
            "cannot decrypt a stored HMAC secret: REPLAY_KEY_ENCRYPTION_KEY is not the one "
            "it was stored under"
        ) from None


def parse_ed25519_public_key(data: bytes) -> bytes:
    """Raw 32 bytes from PEM, hex text or raw bytes."""
    text = data.strip()
    try:
        if text.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(text)
            if not isinstance(key, Ed25519PublicKey):
                raise KeyRegistryError(KEY_BAD_PUBLIC)
            return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        if len(text) == 64:
            raw = bytes.fromhex(text.decode())
        elif len(data) == 32:
            raw = data
        else:
            raise KeyRegistryError(KEY_BAD_PUBLIC)
        Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, KeyRegistryError):
            raise
        raise KeyRegistryError(KEY_BAD_PUBLIC) from None
    return raw


@transaction.atomic
def key_add_hmac(
    *,
    key_id: str,
    secret: bytes,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
) -> VerificationKey:
    if len(secret) < 16:
        raise KeyRegistryError(KEY_SECRET_TOO_SHORT)
    if VerificationKey.objects.filter(key_id=key_id).exists():
        raise KeyRegistryError(KEY_EXISTS.format(key_id=key_id))
    return VerificationKey.objects.create(
        key_id=key_id,
        alg=HMAC_SHA256,
        encrypted_secret=encrypt_secret(secret),
        valid_from=valid_from or timezone.now(),
        valid_until=valid_until,
    )


@transaction.atomic
def key_add_ed25519(
    *,
    key_id: str,
    public_key: bytes,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
) -> VerificationKey:
    raw = parse_ed25519_public_key(public_key)
    if VerificationKey.objects.filter(key_id=key_id).exists():
        raise KeyRegistryError(KEY_EXISTS.format(key_id=key_id))
    return VerificationKey.objects.create(
        key_id=key_id,
        alg=ED25519,
        public_key=raw,
        valid_from=valid_from or timezone.now(),
        valid_until=valid_until,
    )


@transaction.atomic
def key_revoke(*, key_id: str, at: datetime | None = None) -> VerificationKey:
    key = VerificationKey.objects.select_for_update().filter(key_id=key_id).first()
    if key is None:
        raise KeyRegistryError(KEY_UNKNOWN.format(key_id=key_id))
    if key.revoked_at is not None:
        raise KeyRegistryError(
            KEY_ALREADY_REVOKED.format(key_id=key_id, at=key.revoked_at.isoformat())
        )
    key.revoked_at = at or timezone.now()
    key.save(update_fields=["revoked_at"])
    return key


def key_demo_ensure() -> tuple[VerificationKey, bytes]:
    """The demo HMAC key (random, generated on this machine on first use) and its secret."""
    key = VerificationKey.objects.filter(key_id=DEMO_KEY_ID).first()
    if key is None:
        key = key_add_hmac(
            key_id=DEMO_KEY_ID,
            secret=secrets.token_bytes(32),
            valid_from=datetime(2000, 1, 1, tzinfo=UTC),
        )
    return key, decrypt_secret(key.encrypted_secret)


def key_secret(*, key_id: str) -> bytes:
    """The HMAC secret of a registered key (what `record --key-id` signs with)."""
    key = VerificationKey.objects.filter(key_id=key_id).first()
    if key is None:
        raise KeyRegistryError(KEY_UNKNOWN.format(key_id=key_id))
    if key.alg != HMAC_SHA256:
        raise KeyRegistryError(
            f"key {key_id!r} is {key.alg}: the registry keeps only its public half, so it "
            "cannot sign; pass --private-key-file"
        )
    return decrypt_secret(key.encrypted_secret)


def material_of(key: VerificationKey) -> KeyMaterial:
    return KeyMaterial(
        key_id=key.key_id,
        alg=key.alg,
        secret=decrypt_secret(key.encrypted_secret) if key.alg == HMAC_SHA256 else None,
        public_key=bytes(key.public_key) if key.public_key is not None else None,
        valid_from=key.valid_from,
        valid_until=key.valid_until,
        revoked_at=key.revoked_at,
    )


class DatabaseKeyRing:
    """Looks keys up in the registry, once per key per replay."""

    def __init__(self) -> None:
        self._cache: dict[str, KeyMaterial | None] = {}

    def lookup(self, key_id: str) -> KeyMaterial | None:
        if key_id not in self._cache:
            key = VerificationKey.objects.filter(key_id=key_id).first()
            self._cache[key_id] = material_of(key) if key is not None else None
        return self._cache[key_id]
