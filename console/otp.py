"""TOTP seeds encrypted at rest under REPLAY_KEY_ENCRYPTION_KEY.

django-otp keeps a TOTP device's seed as hex in `otp_totp_totpdevice.key` (80 characters at
most). The console's device model (console.models.EncryptedTOTPDevice) stores it sealed
instead: AES-256-GCM under a key derived from REPLAY_KEY_ENCRYPTION_KEY as the other secrets
at rest are (SHA-256 of a purpose-specific prefix and the setting), the owner's user id bound
as associated data so a sealed seed copied onto another person's row does not open. Fernet,
used for the HMAC and server signing keys, does not fit the column (a 20-byte seed becomes 120
characters); a sealed seed here is 69: `enc1:` + base64url(nonce || ciphertext || tag).
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEALED_MARK = "enc1:"
COLUMN_MAX = 80  # django-otp's TOTPDevice.key max_length
_CONTEXT = b"replay-audit-console/totp-seed/v1:"
_NONCE = 12
MESSAGE_CANNOT_DECRYPT = (
    "a TOTP seed cannot be decrypted: REPLAY_KEY_ENCRYPTION_KEY is not the one it was stored under"
)


class TotpKeyError(Exception):
    """A sealed TOTP seed does not open (another key-encryption key, or another owner's row)."""


def _aead(secret: str | None) -> AESGCM:
    if secret is None:
        from django.conf import settings

        secret = settings.REPLAY_KEY_ENCRYPTION_KEY
    return AESGCM(hashlib.sha256(_CONTEXT + str(secret).encode("utf-8")).digest())


def _owner(user_id: object) -> bytes:
    return f"user:{user_id}".encode()


def is_sealed(value: str | None) -> bool:
    return bool(value) and str(value).startswith(SEALED_MARK)


def seal_totp_key(hex_key: str, *, user_id: object, secret: str | None = None) -> str:
    """The hex seed sealed for storage (a fresh nonce each time)."""
    nonce = os.urandom(_NONCE)
    sealed = _aead(secret).encrypt(nonce, bytes.fromhex(hex_key), _owner(user_id))
    text = SEALED_MARK + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
    if len(text) > COLUMN_MAX:
        raise ValueError(f"a {len(hex_key) // 2}-byte TOTP seed does not fit sealed in the column")
    return text


def unseal_totp_key(value: str, *, user_id: object, secret: str | None = None) -> bytes:
    """The raw seed of a sealed value; TotpKeyError when it does not open."""
    body = value[len(SEALED_MARK) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        return _aead(secret).decrypt(raw[:_NONCE], raw[_NONCE:], _owner(user_id))
    except (InvalidTag, ValueError):
        raise TotpKeyError(MESSAGE_CANNOT_DECRYPT) from None


def code_already_used(device: object, token: str) -> bool:
    """Whether `token` is a right code of a time step this device has already accepted.

    django-otp refuses such a code (a TOTP code is good once: the device's `last_t` must be
    older than the step matched) exactly as it refuses a wrong one; telling the two apart lets
    the page say "wait for the next code" rather than "your code is wrong".
    """
    import time

    from django_otp.oath import TOTP

    try:
        number = int(token)
    except ValueError:
        return False
    last_t = getattr(device, "last_t", -1)
    if last_t < 0:
        return False
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)  # type: ignore[attr-defined]
    totp.time = time.time()
    tolerance = int(device.tolerance)  # type: ignore[attr-defined]
    base_drift = totp.drift
    for offset in range(-tolerance, tolerance + 1):
        totp.drift = base_drift + offset
        if totp.t() <= last_t and totp.token() == number:
            return True
    return False
