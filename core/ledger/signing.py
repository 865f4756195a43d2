"""Ed25519 signatures for the governance ledger, approvals and checkpoints. Pure: no Django,
no clock, no randomness (key generation lives in ``governance.keystore``).

Encodings used everywhere in governance:

* a public key is its raw 32 bytes; in rows and JSON, 64 lower-case hex characters;
* a signature is its raw 64 bytes; in rows and JSON, 128 lower-case hex characters;
* a key's fingerprint is ``"sha256:" + hex(sha256(raw public key))``; its key id is a prefix
  (``server`` or ``member``), a dash and the first 16 hex digits of that digest.

What is signed:

* a ledger event: the ASCII bytes of its ``hash`` string (``core.ledger.chain``);
* an approval: ``jcs(payload)``, the payload built by :func:`force_continue_payload`,
  :func:`halt_clear_payload`, :func:`production_replay_payload`, :func:`role_grant_payload`
  or :func:`dsr_approval_payload`, whose ``type`` member separates their domains;
* a checkpoint: ``jcs(body)`` of :func:`checkpoint_body`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from core.canonical import jcs

ALG: Final = "ed25519"
_SIGNATURE_HEX: Final = re.compile(r"[0-9a-f]{128}")
FORCE_CONTINUE_APPROVAL_TYPE: Final = "replay-audit-console/force-continue-approval/v1"
HALT_CLEAR_APPROVAL_TYPE: Final = "replay-audit-console/halt-clear-approval/v1"
PRODUCTION_REPLAY_APPROVAL_TYPE: Final = "replay-audit-console/production-replay-approval/v1"
ROLE_GRANT_APPROVAL_TYPE: Final = "replay-audit-console/role-grant-approval/v1"
DSR_APPROVAL_TYPE: Final = "replay-audit-console/dsr-approval/v1"
#: what a DSR approval lets happen: hand over the evidence bundle, or crypto-shred the subjects
DSR_RELEASE: Final = "release"
DSR_ERASURE: Final = "erasure"
DSR_PURPOSES: Final = (DSR_RELEASE, DSR_ERASURE)
CHECKPOINT_TYPE: Final = "replay-audit-console/governance-checkpoint/v1"
VERIFICATION_MARK_TYPE: Final = "replay-audit-console/ledger-verified-through/v1"
APPROVE: Final = "approve"
DENY: Final = "deny"
DECISIONS: Final = (APPROVE, DENY)
ROLE_ADMIN: Final = "admin"
ROLE_COUNCIL: Final = "council"
SIGNING_ROLES: Final = (ROLE_ADMIN, ROLE_COUNCIL)


class KeyFormatError(ValueError):
    """Key or signature text that is not a valid Ed25519 key or signature encoding."""


# --- keys -------------------------------------------------------------------------------------


def public_key_of(private_raw: bytes) -> bytes:
    """The raw 32-byte public key of a raw 32-byte private key."""
    return (
        Ed25519PrivateKey.from_private_bytes(private_raw)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def fingerprint(public_raw: bytes) -> str:
    """``"sha256:" + hex(sha256(raw public key))``."""
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()


def key_id_for(public_raw: bytes, prefix: str) -> str:
    """A short stable key id: ``<prefix>-<first 16 hex digits of the fingerprint>``."""
    return f"{prefix}-{hashlib.sha256(public_raw).hexdigest()[:16]}"


def private_key_to_pem(private_raw: bytes) -> str:
    """PKCS#8 PEM (unencrypted) of a raw private key: what ``governance keygen`` writes."""
    key = Ed25519PrivateKey.from_private_bytes(private_raw)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")


def public_key_to_pem(public_raw: bytes) -> str:
    """SubjectPublicKeyInfo PEM of a raw public key (what WebCrypto exports as ``spki``)."""
    key = Ed25519PublicKey.from_public_bytes(public_raw)
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def _decode_32(text: str) -> bytes | None:
    text = text.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text)
        except ValueError:
            return None
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=False)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 32 else None


def private_key_from_text(data: bytes | str) -> bytes:
    """Raw private key from PKCS#8 PEM, 64 hex digits, or base64 of the 32 raw bytes."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if "-----BEGIN" in text:
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise KeyFormatError(f"not a readable PEM private key: {exc}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFormatError("the PEM private key is not an Ed25519 key")
        return key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    raw = _decode_32(text)
    if raw is None:
        raise KeyFormatError("an Ed25519 private key is PEM, 64 hex digits or base64 of 32 bytes")
    return raw


def public_key_from_text(data: bytes | str) -> bytes:
    """Raw public key from SPKI PEM, 64 hex digits, base64 of the 32 raw bytes or of SPKI DER."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if "-----BEGIN" in text:
        try:
            key = serialization.load_pem_public_key(text.encode())
        except (ValueError, TypeError) as exc:
            raise KeyFormatError(f"not a readable PEM public key: {exc}") from None
        if not isinstance(key, Ed25519PublicKey):
            raise KeyFormatError("the PEM public key is not an Ed25519 key")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raw = _decode_32(text)
    if raw is None:
        spki: object = None
        try:  # WebCrypto exportKey("spki") as base64: 44 bytes of DER
            der = base64.b64decode(text.strip(), validate=True)
            spki = serialization.load_der_public_key(der)
        except (binascii.Error, ValueError, TypeError):
            pass
        if not isinstance(spki, Ed25519PublicKey):
            raise KeyFormatError(
                "an Ed25519 public key is PEM, 64 hex digits, or base64 of raw or SPKI bytes"
            )
        return spki.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise KeyFormatError(f"not an Ed25519 public key: {exc}") from None
    return raw


# --- sign and verify --------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _private(private_raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(private_raw)


@lru_cache(maxsize=1024)
def _public(public_raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(public_raw)


def sign(private_raw: bytes, message: bytes) -> str:
    """Ed25519 signature of ``message``, as 128 lower-case hex digits."""
    return _private(private_raw).sign(message).hex()


def is_signature_hex(value: object) -> bool:
    """Whether ``value`` is a signature as rows and JSON carry it: 128 lower-case hex digits
    (an upper-case or mixed-case spelling of the same bytes is refused, not normalised)."""
    return isinstance(value, str) and _SIGNATURE_HEX.fullmatch(value) is not None


def verify(public_raw: bytes, message: bytes, signature_hex: str) -> bool:
    """True when ``signature_hex`` is a valid Ed25519 signature of ``message`` by the key.

    Never raises for bad input: a malformed key or signature simply does not verify.
    """
    if not is_signature_hex(signature_hex):
        return False
    try:
        signature = bytes.fromhex(signature_hex)
        _public(bytes(public_raw)).verify(signature, message)
    except (ValueError, InvalidSignature):
        return False
    return True


# --- payloads ---------------------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    """The one textual form of a moment in governance payloads: UTC, microseconds, ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("governance times must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """The inverse of :func:`format_time` (also accepts any ISO-8601 with an offset)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no timezone")
    return moment.astimezone(UTC)


def divergence_digest(divergences: Sequence[Mapping[str, Any]]) -> str:
    """``"sha256:" + hex(sha256(jcs(divergences)))``: binds an approval to the exact diff."""
    return "sha256:" + hashlib.sha256(jcs(list(divergences))).hexdigest()


#: what a signer chooses in an approval, and what each may be (checked in this order)
_CHOICES: Final = {"purpose": DSR_PURPOSES, "decision": DECISIONS, "role": SIGNING_ROLES}


def _approval_payload(type_: str, /, **members: Any) -> dict[str, Any]:
    """``{"type": type_, **members}`` in that order (the signed bytes are ``jcs`` of it), once
    each chosen member (see ``_CHOICES``) is one of its values; a ValueError names the first
    that is not."""
    for name, allowed in _CHOICES.items():
        if name in members and members[name] not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, not {members[name]!r}")
    return {"type": type_, **members}


def force_continue_payload(
    *,
    request_id: str,
    replay_id: str,
    trace_id: str,
    step: int,
    divergence_digest: str,
    decision: str,
    role: str,
    expires_at: str,
    reason: str = "",
) -> dict[str, Any]:
    """The payload a signer approves or denies a force-continue with (signed as jcs bytes).

    ``expires_at`` is the request's expiry in :func:`format_time` form; ``step`` is the seq of
    the diverged step the resumed replay continues past; ``role`` is the capacity the signer
    signs in (``admin`` or ``council``) and must be a role they hold.
    """
    return _approval_payload(
        FORCE_CONTINUE_APPROVAL_TYPE,
        request_id=request_id,
        replay_id=replay_id,
        trace_id=trace_id,
        step=step,
        divergence_digest=divergence_digest,
        decision=decision,
        role=role,
        expires_at=expires_at,
        reason=reason,
    )


def halt_clear_payload(
    *, halt_seq: int, halt_hash: str, target_kind: str, target_id: str, reason: str = ""
) -> dict[str, Any]:
    """The payload a council member signs to clear a halt: bound to the halt's ledger event."""
    return _approval_payload(
        HALT_CLEAR_APPROVAL_TYPE,
        halt_seq=halt_seq,
        halt_hash=halt_hash,
        target_kind=target_kind,
        target_id=target_id,
        decision=APPROVE,
        role=ROLE_COUNCIL,
        reason=reason,
    )


def production_replay_payload(
    *,
    request_id: str,
    trace_id: str,
    trace_sha256: str,
    requested_by: str,
    decision: str,
    expires_at: str,
    reason: str = "",
) -> dict[str, Any]:
    """The payload a council member approves or denies a production replay with.

    Bound to one stored file (``trace_sha256``, the content address of the exact bytes that
    will be replayed), to the person the run will be started for, and to the request's
    expiry; council members sign it in the ``council`` capacity only.
    """
    return _approval_payload(
        PRODUCTION_REPLAY_APPROVAL_TYPE,
        request_id=request_id,
        trace_id=trace_id,
        trace_sha256=trace_sha256,
        mode="production",
        requested_by=requested_by,
        decision=decision,
        role=ROLE_COUNCIL,
        expires_at=expires_at,
        reason=reason,
    )


def role_grant_payload(
    *,
    request_id: str,
    user_id: int,
    username: str,
    grant: Sequence[str],
    requested_by: str,
    decision: str,
    expires_at: str,
    reason: str = "",
) -> dict[str, Any]:
    """The payload a council member approves or denies a grant of admin or council with.

    Bound to the person (id and name), the exact roles to add, who asked and the request's
    expiry; council members sign it in the ``council`` capacity only.
    """
    return _approval_payload(
        ROLE_GRANT_APPROVAL_TYPE,
        request_id=request_id,
        user_id=user_id,
        username=username,
        grant=sorted(grant),
        requested_by=requested_by,
        decision=decision,
        role=ROLE_COUNCIL,
        expires_at=expires_at,
        reason=reason,
    )


def signed_document(*, payload: Mapping[str, Any], key_id: str, private_raw: bytes) -> dict:
    """A signed approval as the console and API accept it: payload, key id, alg, signature."""
    return {
        "payload": dict(payload),
        "key_id": key_id,
        "alg": ALG,
        "signature": sign(private_raw, jcs(dict(payload))),
    }


def dsr_approval_payload(
    *,
    request_id: str,
    purpose: str,
    kind: str,
    subjects: Sequence[str],
    legal_basis: str,
    due_date: str,
    requested_by: str,
    identity_seq: int,
    role: str,
    reason: str = "",
    values: Sequence[Mapping[str, Any]] | None = None,
    plan: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The payload an approver signs to release a legal request's bundle or to execute its
    erasure (``purpose``). It names the subjects by their opaque refs only (never personal
    data), and binds the approval to the ledger event that recorded the identity check.

    What it covers, exactly: a release signs ``values``, the fields whose values the bundle
    hands over (subject ref, trace, location, path; never the value), an erasure signs
    ``plan``, what it destroys (subjects, traces, fields). Each member is present only when
    given: approvals recorded before they existed signed neither, and verify as they were."""
    covers: dict[str, Any] = {}
    if values is not None:
        covers["values"] = [dict(v) for v in values]
    if plan is not None:
        covers["plan"] = dict(plan)
    return _approval_payload(
        DSR_APPROVAL_TYPE,
        request_id=request_id,
        purpose=purpose,
        kind=kind,
        subjects=sorted(subjects),
        legal_basis=legal_basis,
        due_date=due_date,
        requested_by=requested_by,
        identity_seq=identity_seq,
        decision=APPROVE,
        role=role,
        reason=reason,
        **covers,
    )


def checkpoint_body(
    *, size: int, head_hash: str, genesis_hash: str, created_at: str, key_id: str
) -> dict[str, Any]:
    """A ledger checkpoint: how many events, the head's hash, the first event's hash."""
    return {
        "type": CHECKPOINT_TYPE,
        "size": size,
        "head_hash": head_hash,
        "genesis_hash": genesis_hash,
        "created_at": created_at,
        "key_id": key_id,
    }


def verification_mark_body(
    *, through_seq: int, head_hash: str, genesis_hash: str, verified_at: str, key_id: str
) -> dict[str, Any]:
    """A verification mark: the server verified the chain from seq 1 through ``through_seq``,
    whose hash is ``head_hash``; signed by server key ``key_id`` over its JCS bytes."""
    return {
        "type": VERIFICATION_MARK_TYPE,
        "through_seq": through_seq,
        "head_hash": head_hash,
        "genesis_hash": genesis_hash,
        "verified_at": verified_at,
        "key_id": key_id,
    }
