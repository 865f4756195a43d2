"""Key generation and the server's private keys at rest (the impure half of signing).

Server signing keys are stored encrypted with Fernet under a key derived from
``settings.REPLAY_KEY_ENCRYPTION_KEY`` (SHA-256 of a governance-specific prefix and the
setting, so the same setting never yields the same Fernet key as another use of it).
Council and admin private keys never come here: ``governance keygen`` writes them to a file
on the member's machine, and the server stores only public keys.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

_CONTEXT = b"replay-audit-console/governance-signing-key/v1:"


class KeyDecryptionError(Exception):
    """The stored server key cannot be decrypted (REPLAY_KEY_ENCRYPTION_KEY changed?)."""


def generate_private_key() -> bytes:
    """A new random Ed25519 private key, raw 32 bytes."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )


def _fernet(secret: str | None = None) -> Fernet:
    if secret is None:
        from django.conf import settings

        secret = settings.REPLAY_KEY_ENCRYPTION_KEY
    digest = hashlib.sha256(_CONTEXT + str(secret).encode("utf-8")).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_private_key(private_raw: bytes, *, secret: str | None = None) -> bytes:
    return _fernet(secret).encrypt(private_raw)


def decrypt_private_key(token: bytes, *, secret: str | None = None) -> bytes:
    try:
        return _fernet(secret).decrypt(bytes(token))
    except InvalidToken:
        raise KeyDecryptionError(
            "a server signing key cannot be decrypted with REPLAY_KEY_ENCRYPTION_KEY"
        ) from None
