"""MACE's HMAC-SHA256 signatures: the log's over its immutable sub-payload, each snapshot
file's over the file without its signature, checked against the verification-key registry
(:func:`_signature_problem`: an unregistered key, MACE's development fallback secret, a
placeholder, a key outside its window, a wrong signature). What MACE's writer does
(:func:`sign_log`, :func:`make_snapshot`) and what its signature leaves unprotected
(:func:`unprotected_fields`).

Pure: no Django.
"""

from __future__ import annotations

import functools
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core import errors
from core.formats.mace.ids import (
    SNAPSHOT_GENERATOR,
    _canonical,
    config_hash_of,
    snapshot_id_of,
)
from core.formats.mace.reader import SNAPSHOT_SCHEMA_VERSION
from core.replay.signatures import HMAC_SHA256, KeyRing

try:  # accelerator for snapshot_signed_bytes; mace-v1 itself decides without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _orjson = None  # type: ignore[assignment]

#: the sub-payload MACE's writer signs: key -> where in the log its value comes from
SUBPAYLOAD_SOURCES: dict[str, tuple[str, ...]] = {
    "log_id": ("log_id",),
    "percept_text": ("percept", "text"),
    "final_output_text": ("final_output", "text"),
    "router_decision_id": ("router_decision", "decision_id"),
}
#: MACE's development fallback when no key is configured (``test_secret_for_<key_id>``):
#: a signature made with it is a placeholder, whatever key id it names
FALLBACK_SECRET = "test_secret_for_{key_id}"  # noqa: S105 - the placeholder MACE uses, refused
_HEX64 = re.compile(r"[0-9a-f]{64}")
SIGNED_FIELDS = frozenset({"immutable_subpayload", "signature", "signature_key_id"})


def hmac_hex(secret: bytes, value: Any, *, where: str = "payload") -> str:
    """MACE's ``sign_payload``: hex HMAC-SHA256 over the mace-v1 bytes of ``value`` (or over
    ``value`` itself when it is those bytes already)."""
    message = value if isinstance(value, bytes) else _canonical(value, where)
    return hmac.digest(secret, message, "sha256").hex()


_I64 = 2**63


def snapshot_signed_bytes(snapshot: Mapping[str, Any], body_bytes: bytes | None = None) -> bytes:
    """mace-v1 of :func:`snapshot_signed_part`. With the body's own mace-v1 bytes (already
    made for its config_hash), the body is not serialised twice: canonical bytes of a value
    do not depend on where it sits, and the other fields (ASCII strings, small integers)
    need no transform, so orjson with sorted keys writes what mace-v1 would. Anything else
    takes mace-v1 itself."""
    part = snapshot_signed_part(snapshot)
    if body_bytes is not None and _orjson is not None:
        plain = True
        for k, v in part.items():
            t = type(v)
            if k == "body" or (t is str and v.isascii()) or (t is int and -_I64 <= v < _I64):
                continue
            plain = False
            break
        if plain:
            part["body"] = _orjson.Fragment(body_bytes)
            return _orjson.dumps(part, option=_orjson.OPT_SORT_KEYS)
    return _canonical(part, "snapshot")


def _at(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def subpayload_of(document: Mapping[str, Any]) -> dict[str, Any]:
    """The immutable sub-payload MACE's writer builds from a log's own fields (None for a
    field the log lacks)."""
    return {key: _at(document, path) for key, path in SUBPAYLOAD_SOURCES.items()}


def _subpayload_of_parsed(doc: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`subpayload_of` for a parsed log (its percept, final_output and router_decision
    are objects)."""
    return {
        "log_id": doc["log_id"],
        "percept_text": doc["percept"].get("text"),
        "final_output_text": doc["final_output"].get("text"),
        "router_decision_id": doc["router_decision"].get("decision_id"),
    }


def snapshot_signed_part(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot file without its signature and signature_key_id: what is signed."""
    part = dict(snapshot)
    part.pop("signature", None)
    part.pop("signature_key_id", None)
    return part


def make_snapshot(
    kind: str,
    body: Any,
    *,
    seed_namespace: str,
    key_id: str,
    secret: bytes,
    schema_version: int = SNAPSHOT_SCHEMA_VERSION,
) -> dict[str, Any]:
    """A snapshot file as seed 003 §5 derives it, signed (demo data, tests, the bench)."""
    config_hash = config_hash_of(body)
    snapshot: dict[str, Any] = {
        "snapshot_id": snapshot_id_of(config_hash, schema_version, seed_namespace),
        "kind": kind,
        "schema_version": schema_version,
        "seed_namespace": seed_namespace,
        "config_hash": config_hash,
        "generator": SNAPSHOT_GENERATOR,
        "body": body,
    }
    snapshot["signature"] = hmac_hex(secret, snapshot)
    snapshot["signature_key_id"] = key_id
    return snapshot


def sign_log(document: dict[str, Any], *, key_id: str, secret: bytes) -> dict[str, Any]:
    """What MACE's writer does to a log before persisting it: the sub-payload, signed."""
    subpayload = subpayload_of(document)
    document["immutable_subpayload"] = subpayload
    document["signature"] = hmac_hex(secret, subpayload)
    document["signature_key_id"] = key_id
    return document


def unprotected_fields(document: Mapping[str, Any]) -> list[str]:
    """The log's fields the signature does not protect (everything but the sub-payload's
    sources and the signature itself)."""
    return list(_unprotected(tuple(document)))


@functools.lru_cache(maxsize=256)
def _unprotected(names: tuple[str, ...]) -> tuple[str, ...]:
    signed_roots = {path[0] for path in SUBPAYLOAD_SOURCES.values()}
    out = []
    for name in names:
        if name in SIGNED_FIELDS:
            continue
        if name in signed_roots and name != "log_id":
            out.append(f"{name} (except {'.'.join(SUBPAYLOAD_SOURCES_BY_ROOT[name])})")
        elif name != "log_id":
            out.append(name)
    return tuple(out)


SUBPAYLOAD_SOURCES_BY_ROOT = {path[0]: path for path in SUBPAYLOAD_SOURCES.values()}


@dataclass(frozen=True)
class _SignatureProblem:
    code: str
    message: str
    expected: str | None
    observed: str | None


def _signature_problem(
    *,
    what: str,
    value: Any,
    key_id: str,
    payload: Any,
    keys: KeyRing | None,
    at: datetime | None,
) -> _SignatureProblem | None:
    """Why a MACE HMAC signature does not verify (None when it does). ``what`` names the
    field (``signature``, ``router snapshot signature``)."""
    key = keys.lookup(key_id) if keys is not None else None
    if key is None or key.alg != HMAC_SHA256 or key.secret is None:
        return _SignatureProblem(
            errors.UNKNOWN_KEY,
            f"{what}: no HMAC-SHA256 key {key_id!r} in the verification-key registry; "
            f"register MACE's secret with `keys add-hmac {key_id} --secret-file F`",
            None,
            value if isinstance(value, str) else None,
        )
    expected = hmac_hex(key.secret, payload, where=what)
    fallback = _fallback(key_id)
    if key.secret == fallback:
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: key {key_id!r} is MACE's development fallback secret "
            f"({FALLBACK_SECRET.format(key_id=key_id)!r}), a placeholder key",
            expected,
            value,
        )
    problem = key.window_problem(at)
    if problem:
        return _SignatureProblem(errors.INTEGRITY_FAILURE, f"{what}: {problem}", expected, value)
    if isinstance(value, str) and value.isascii() and hmac.compare_digest(expected, value):
        return None
    if not isinstance(value, str) or not _HEX64.fullmatch(value) or set(value) == {"0"}:
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: {value!r} is a placeholder, not an HMAC-SHA256 signature (64 lower-case hex)",
            expected,
            value if isinstance(value, str) else repr(value),
        )
    if hmac.compare_digest(hmac_hex(fallback, payload, where=what), value):
        return _SignatureProblem(
            errors.INTEGRITY_FAILURE,
            f"{what}: made with MACE's development fallback secret "
            f"({FALLBACK_SECRET.format(key_id=key_id)!r}), a placeholder key, not the "
            f"registered key {key_id!r}",
            expected,
            value,
        )
    return _SignatureProblem(
        errors.INTEGRITY_FAILURE,
        f"{what}: HMAC-SHA256 by {key_id} does not verify",
        expected,
        value,
    )


@functools.lru_cache(maxsize=64)
def _fallback(key_id: str) -> bytes:
    return FALLBACK_SECRET.format(key_id=key_id).encode()


def _snapshot_signature(
    kind: str,
    snap: Mapping[str, Any],
    body_bytes: bytes,
    *,
    keys: KeyRing | None,
    at: datetime | None,
) -> tuple[str, str, str, str | None, str | None] | None:
    problem = _signature_problem(
        what=f"{kind}_snapshot.signature",
        value=snap["signature"],
        key_id=snap["signature_key_id"],
        payload=snapshot_signed_bytes(snap, body_bytes),
        keys=keys,
        at=at,
    )
    if problem is None:
        return None
    return (
        problem.code,
        problem.message,
        f"{kind}_snapshot.signature",
        problem.expected,
        problem.observed,
    )
