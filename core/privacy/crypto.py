"""The AES-256-GCM envelope of personal values and the keyed lookup digest of identifiers.

A subject's key is 32 random bytes; each value is sealed with a fresh 96-bit nonce and
associated data naming where it belongs (so a ciphertext moved to another row does not
open). Destroying the key is erasure: the ciphertexts stay, unreadable.

Pure: no Django.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32
NONCE_BYTES = 12


class EnvelopeError(Exception):
    """A ciphertext that does not open under the key (wrong key, row or bytes)."""


def new_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


def seal(key: bytes, plaintext: bytes, aad: bytes) -> tuple[bytes, bytes]:
    """(nonce, ciphertext with its 16-byte tag)."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce, AESGCM(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, nonce: bytes, ciphertext: bytes, aad: bytes) -> bytes:
    try:
        return AESGCM(key).decrypt(nonce, ciphertext, aad)
    except InvalidTag:
        raise EnvelopeError("the ciphertext does not open under this key") from None


def normalise(identifier: str) -> str:
    """Stripped; an e-mail address lower-cased."""
    value = identifier.strip()
    if "@" in value:
        value = value.lower()
    return value


def lookup_digest(secret: bytes, identifier: str) -> str:
    """HMAC-SHA256 of the normalised identifier under the server's secret (hex)."""
    return hmac.new(secret, normalise(identifier).encode(), hashlib.sha256).hexdigest()


def stretch(secret: str) -> bytes:
    """A settings string as 32 key bytes."""
    return hashlib.sha256(b"replay-audit-console/privacy/v1\x00" + secret.encode()).digest()
