"""Build a bundle: what goes in (:class:`BundleInputs`) and :func:`build_bundle`.

Pure: no Django, no clock, no I/O, no randomness (see the package docstring).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from core.bundle.format import (
    _SHA,
    _VALUE_FIELDS,
    BUNDLE_FORMAT,
    CHECKPOINT,
    EVENTS,
    KEY_PROBE,
    KEYS,
    MANIFEST_TYPE,
    SUMMARY,
    TLOG,
    Sign,
    _envelope,
)
from core.canonical import CanonicalError, jcs
from core.ledger import chain, signing

# --- what goes in ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceEvidence:
    """One trace's part of a bundle, as the caller gathered it.

    ``values``: the subject's values in this trace, each a mapping with ``subject_ref``,
    ``location`` (e.g. ``"event 12"``), ``path`` (a JSON pointer), ``value`` (already
    ``"[redacted]"`` or ``"[erased]"`` unless an admin released it) and ``released`` (bool).
    ``report``: the audit-mode replay report (``ReplayReport.as_dict()``), or None.
    """

    trace_id: str
    file_sha256: str
    format: str
    values: Sequence[Mapping[str, Any]] = ()
    report: Mapping[str, Any] | None = None
    verdict: str | None = None


@dataclass(frozen=True, slots=True)
class BundleInputs:
    """Everything a bundle holds besides its signature.

    ``events``: ledger events as :func:`event_record` writes them, in seq order;
    ``server_keys``: :func:`server_key_record` of every server key that signed one of them;
    ``member_keys``: member key id -> public key hex, for events with an actor signature;
    ``checkpoint``: a signed checkpoint document (``governance checkpoint``), or None.
    ``created_at`` is the caller's clock, in ``core.ledger.signing.format_time`` form.
    """

    request_ref: str
    subject_refs: Sequence[str]
    created_at: str
    traces: Sequence[TraceEvidence] = ()
    events: Sequence[Mapping[str, Any]] = ()
    server_keys: Sequence[Mapping[str, Any]] = ()
    member_keys: Mapping[str, str] = field(default_factory=dict)
    checkpoint: Mapping[str, Any] | None = None
    tlog: Mapping[str, Any] | None = None


def event_record(row: chain.Row) -> dict[str, Any]:
    """A stored ledger row (a tuple in ``core.ledger.chain.FIELDS`` order) as a bundle event."""
    values = dict(zip(chain.FIELDS, row, strict=True))
    values["actor"] = values.pop("actor_label")
    created = values["created_at"]
    if isinstance(created, datetime):
        values["created_at"] = signing.format_time(created)
    return values


def server_key_record(key: chain.ServerKey) -> dict[str, Any]:
    """A server key's public half and effective window, as a bundle's ``ledger/keys.json``."""

    def moment(value: datetime | None) -> str | None:
        return None if value is None else signing.format_time(value)

    return {
        "key_id": key.key_id,
        "public_key": key.public_key.hex(),
        "valid_from": moment(key.valid_from),
        "valid_until": moment(key.valid_until),
        "revoked_at": moment(key.revoked_at),
    }


# --- build ----------------------------------------------------------------------------------


def _file_hex(value: str) -> str:
    match = _SHA.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"file_sha256 {value!r} is not sha256:<64 lower-case hex>")
    return match.group(2)


def _check_values(trace: TraceEvidence) -> list[dict[str, Any]]:
    out = []
    for i, item in enumerate(trace.values):
        if set(item) != set(_VALUE_FIELDS):
            raise ValueError(f"trace {trace.trace_id} value {i}: fields must be {_VALUE_FIELDS}")
        if not isinstance(item["released"], bool):
            raise ValueError(f"trace {trace.trace_id} value {i}: released must be a bool")
        out.append({k: item[k] for k in _VALUE_FIELDS})
    return out


def _members(inputs: BundleInputs) -> list[tuple[str, Any]]:
    traces_summary = []
    members: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for trace in inputs.traces:
        hex_ = _file_hex(trace.file_sha256)
        if hex_ in seen:
            raise ValueError(f"trace file {hex_} is given twice")
        seen.add(hex_)
        values = _check_values(trace)
        base = f"traces/{hex_}"
        data = {
            "trace_id": trace.trace_id,
            "file_sha256": "sha256:" + hex_,
            "format": trace.format,
            "subject_values": values,
        }
        members.append((f"{base}/data.json", data))
        report = dict(trace.report) if trace.report is not None else None
        if report is not None:
            members.append((f"{base}/report.json", report))
        traces_summary.append(
            {
                "trace_id": trace.trace_id,
                "file_sha256": "sha256:" + hex_,
                "format": trace.format,
                "verdict": trace.verdict,
                "replay_mode": report.get("mode") if report else None,
                "replay_status": report.get("status") if report else None,
                "replay_error_code": report.get("error_code") if report else None,
                "fields": len(values),
                "released": sum(1 for v in values if v["released"]),
                "data": f"{base}/data.json",
                "report": f"{base}/report.json" if report is not None else None,
            }
        )
    summary = {
        "request_ref": inputs.request_ref,
        "subject_refs": list(inputs.subject_refs),
        "created_at": inputs.created_at,
        "nothing_held": not inputs.traces,
        "traces": traces_summary,
        "events": len(inputs.events),
    }
    keys = {
        "server_keys": [dict(k) for k in inputs.server_keys],
        "member_keys": dict(sorted(inputs.member_keys.items())),
    }
    tail: list[tuple[str, Any]] = [(KEYS, keys), (EVENTS, [dict(e) for e in inputs.events])]
    if inputs.checkpoint is not None:
        tail.append((CHECKPOINT, dict(inputs.checkpoint)))
    if inputs.tlog is not None:
        tail.append((TLOG, dict(inputs.tlog)))
    return [(SUMMARY, summary), *members, *tail]


def build_bundle(inputs: BundleInputs, sign: Sign) -> bytes:
    """The bundle's bytes: the same inputs and key always give the same bytes.

    ``sign(message) -> (key_id, public_key_hex, signature_hex)`` signs with the server key;
    it is called twice, first on :data:`KEY_PROBE` to learn the key the manifest names, then
    on ``jcs(manifest)``. Raises ``ValueError`` for inputs a bundle cannot hold (refs that are
    not strings, a file hash that is not sha256 hex, values that are not JSON).
    """
    if not isinstance(inputs.request_ref, str) or not inputs.request_ref:
        raise ValueError("request_ref must be a non-empty string")
    refs = list(inputs.subject_refs)
    if not refs or not all(isinstance(r, str) and r for r in refs):
        raise ValueError("subject_refs must be non-empty strings")
    signing.parse_time(inputs.created_at)
    members = _members(inputs)
    encoded: dict[str, bytes] = {}
    listed = []
    for name, value in members:
        try:
            raw = jcs(value)
        except CanonicalError as exc:
            raise ValueError(f"member {name} is not canonical JSON: {exc}") from None
        encoded[name] = raw
        listed.append({"name": name, "sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)})
    key_id, public_hex, _ = sign(KEY_PROBE)
    manifest = {
        "type": MANIFEST_TYPE,
        "request_ref": inputs.request_ref,
        "subject_refs": refs,
        "created_at": inputs.created_at,
        "nothing_held": not inputs.traces,
        "server_key": {"alg": signing.ALG, "key_id": key_id, "public_key": public_hex},
        "members": listed,
    }
    signed_key_id, signed_public, signature = sign(jcs(manifest))
    if (signed_key_id, signed_public) != (key_id, public_hex):
        raise ValueError("the signer changed keys between its two calls")
    return _envelope(BUNDLE_FORMAT, manifest, encoded, signature)
