"""Trace signatures: HMAC-SHA256 and Ed25519, verified against keys with effective windows.

Pure: the caller passes the key material and the moment the signature must have been valid
at (the console uses the time it first witnessed the trace, so revoking a key later does not
un-sign what was verified while the key was good).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

HMAC_SHA256 = "hmac-sha256"
ED25519 = "ed25519"
ALGORITHMS = (HMAC_SHA256, ED25519)


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """What verifying needs to know about one key."""

    key_id: str
    alg: str
    secret: bytes | None = None  # HMAC
    public_key: bytes | None = None  # Ed25519, raw 32 bytes
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    revoked_at: datetime | None = None

    def window_problem(self, at: datetime | None) -> str | None:
        """Why this key cannot vouch for a signature made at `at`, or None if it can."""
        if at is None:
            return None
        if self.valid_from is not None and at < self.valid_from:
            return f"key {self.key_id} is valid only from {self.valid_from.isoformat()}"
        if self.revoked_at is not None and at >= self.revoked_at:
            return f"key {self.key_id} was revoked at {self.revoked_at.isoformat()}"
        if self.valid_until is not None and at >= self.valid_until:
            return f"key {self.key_id} expired at {self.valid_until.isoformat()}"
        return None


class KeyRing(Protocol):
    def lookup(self, key_id: str) -> KeyMaterial | None: ...


class StaticKeyRing:
    """A key ring over a fixed set of keys (tests, offline verification, the recorder)."""

    def __init__(self, keys: list[KeyMaterial] | tuple[KeyMaterial, ...] = ()) -> None:
        self._keys = {k.key_id: k for k in keys}

    def lookup(self, key_id: str) -> KeyMaterial | None:
        return self._keys.get(key_id)

    def add(self, key: KeyMaterial) -> None:
        self._keys[key.key_id] = key


@dataclass(frozen=True, slots=True)
class Verdict:
    ok: bool
    reason: str
    expected: str | None = None
    observed: str | None = None
    #: the key id the signature names when the key ring has no key of that id: nothing was
    #: verified (a format refuses it as UNKNOWN_KEY, not as a signature that does not verify)
    unknown_key: str | None = None


#: how a key of each algorithm is registered (``manage.py keys``), for the refusal's words
REGISTER_COMMANDS = {
    HMAC_SHA256: "manage.py keys add-hmac {key_id} --secret-file F",
    ED25519: "manage.py keys add-ed25519 {key_id} --public-key-file F",
}
UNKNOWN_KEY_REASON = (
    "no key {key_id!r} in the verification-key registry, so nothing was verified: register it "
    "with `{command}`"
)


def unknown_key_reason(key_id: str, alg: str) -> str:
    """Why a signature by ``key_id`` (of algorithm ``alg``) was not verified: the registry has
    no such key; and how to register it."""
    command = REGISTER_COMMANDS.get(alg, "manage.py keys add-hmac|add-ed25519 {key_id} ...")
    return UNKNOWN_KEY_REASON.format(key_id=key_id, command=command.format(key_id=key_id))


def _signature_fields(signature: object) -> tuple[str, str, str] | str:
    if not isinstance(signature, dict):
        return "the signature is not an object"
    alg, key_id, value = signature.get("alg"), signature.get("key_id"), signature.get("value")
    if alg not in ALGORITHMS:
        return f"unsupported signature algorithm {alg!r} (expected one of {', '.join(ALGORITHMS)})"
    if not isinstance(key_id, str) or not isinstance(value, str):
        return "the signature needs string key_id and value"
    return alg, key_id, value


def key_unknown(signature: object, keys: KeyRing) -> Verdict | None:
    """What :func:`verify` answers a well-formed signature whose key the ring does not have
    (``unknown_key`` set), without reading the message; None when the key is there, or the
    signature is not well formed (:func:`verify` then says why)."""
    fields = _signature_fields(signature)
    if isinstance(fields, str):
        return None
    alg, key_id, _ = fields
    if keys.lookup(key_id) is not None:
        return None
    return Verdict(False, unknown_key_reason(key_id, alg), unknown_key=key_id)


def verify(
    signature: object, message: bytes, keys: KeyRing, *, at: datetime | None = None
) -> Verdict:
    """Verify `signature` ({"alg", "key_id", "value": hex}) over `message`."""
    fields = _signature_fields(signature)
    if isinstance(fields, str):
        return Verdict(False, fields)
    alg, key_id, value = fields
    key = keys.lookup(key_id)
    if key is None:
        return Verdict(False, unknown_key_reason(key_id, alg), unknown_key=key_id)
    if key.alg != alg:
        return Verdict(False, f"key {key_id} is {key.alg}, the signature claims {alg}")
    problem = key.window_problem(at)
    if problem:
        return Verdict(False, problem)
    if alg == HMAC_SHA256:
        expected = hmac.new(key.secret or b"", message, hashlib.sha256).hexdigest()
        if hmac.compare_digest(expected, value.lower()):
            return Verdict(True, f"HMAC-SHA256 by {key_id} verifies")
        return Verdict(False, f"HMAC-SHA256 by {key_id} does not verify", expected, value)
    try:
        raw = bytes.fromhex(value)
        Ed25519PublicKey.from_public_bytes(key.public_key or b"").verify(raw, message)
    except (ValueError, InvalidSignature):
        return Verdict(False, f"Ed25519 signature by {key_id} does not verify", None, value)
    return Verdict(True, f"Ed25519 signature by {key_id} verifies")


def sign(message: bytes, *, key_id: str, alg: str, secret: bytes) -> dict[str, str]:
    """Sign `message`: `secret` is the HMAC secret or the raw 32-byte Ed25519 private key."""
    if alg == HMAC_SHA256:
        value = hmac.new(secret, message, hashlib.sha256).hexdigest()
    elif alg == ED25519:
        value = Ed25519PrivateKey.from_private_bytes(secret).sign(message).hex()
    else:
        raise ValueError(f"unsupported signature algorithm {alg!r}")
    return {"alg": alg, "key_id": key_id, "value": value}
