"""The evidence bundle of a Data Subject Request: build it, and check it offline.

Pure: no Django, no clock, no I/O, no randomness. The caller (the ``dsr`` app) gathers what
goes in, already redacted or released, and a ``sign`` function for the server key; anyone
with the file alone (and, to trust it, the server's public key or a ledger checkpoint) can
check it with :func:`verify_bundle` or ``python -m dsr.bundle_cli FILE``.

The file
--------

One JSON text in RFC 8785 canonical form (``replay.canonical.jcs``, the canonicalisation the
ledger, checkpoints and approvals already use)::

    {"format": "replay-audit-console/evidence-bundle/v1",
     "manifest": {"type": MANIFEST_TYPE, "request_ref": str, "subject_refs": [str],
                  "created_at": str, "nothing_held": bool,
                  "server_key": {"alg": "ed25519", "key_id": str, "public_key": hex},
                  "members": [{"name": str, "sha256": hex, "size": int}, ...]},
     "members": {"<name>": <JSON value>, ...},
     "signature": "<128 hex: Ed25519 by server_key over jcs(manifest)>"}

A member's ``sha256`` and ``size`` are those of ``jcs(value)``; the manifest lists them in a
fixed order (``summary.json``, then per trace ``traces/<file sha256>/data.json`` and
``report.json``, then ``ledger/keys.json``, ``ledger/events.json`` and, when given,
``ledger/checkpoint.json``, then, from bundles with proofs on, ``ledger/tlog.json``).
Subjects are named by opaque refs only, never by identifier.

Why canonical JSON rather than a zip: the bytes are a function of the content alone, so a
build is reproducible with nothing to pin (a zip carries timestamps, attributes, extra fields,
a comment and a central directory that readers ignore, so bytes could change unnoticed), and
the verifier insists the file *is* ``jcs`` of what it parsed: every byte is then either
structure, a signed manifest value or a hashed member value, and changing any single byte
fails (tested for every position). There is no decompression (no zip bomb) and no path
written to disk (no traversal); the size, nesting and key count are bounded before and while
parsing. A person reads it with any JSON viewer; the PDF (``dsr.pdf``) is the printable
summary.

Ledger events are stored as the ledger stores them (each event's body fields, ``prev_hash``,
``hash``, ``server_signature``) with the server keys' public halves and effective windows and
the member keys' public keys, so each event is checked exactly as ``governance verify``
checks it (``governance.chain.check_row``). A bundle holds the events concerning its traces,
not the whole ledger, so links are checked where two events are consecutive, and against the
ledger checkpoint when one is included (its genesis and head hashes); that events *between*
them were not removed is what ``governance check-checkpoint`` proves on the server.

Transparency log (``ledger/tlog.json``, versioned by its ``type`` :data:`TLOG_TYPE`; bundles
made before it have no such member and verify as before)::

    {"type": TLOG_TYPE,
     "checkpoint": "<C2SP signed note: origin, size, base64 root; one or more signature lines>",
     "vkeys": ["<name>+<hex id>+<base64 key>", ...],
     "inclusion": [{"seq": int, "proof": [base64 hash, ...]}, ...],
     "consistency": [{"old_size": int, "proof": [base64 hash, ...]}, ...]}

The leaf of event ``seq`` is its ``hash`` string (``docs/transparency.md``), recomputed from
its body and ``prev_hash`` by the event check above, so each event is proven in the
checkpoint's RFC 9162 tree with O(log n) hashes. The note is checked with the verifier keys
the auditor gives (``--vkey``; without one, with the ``vkeys`` the bundle carries, which says
only that it is intact). Signature lines of keys not given (a witness's cosignature) are
ignored by the check and kept in the note: that is where cosignatures go. ``consistency``
holds proofs that the checkpoint extends earlier ones (``--older-checkpoint``).

Checks run in this order and the first failure is named (codes in ``governance.codes``):
size and JSON (``BUNDLE_MALFORMED``), canonical form, the envelope and the manifest, the
signature over the manifest (``BUNDLE_SIGNATURE``), trust (``BUNDLE_UNTRUSTED_KEY``, only when
a trusted key or checkpoint is given), each listed member present (``BUNDLE_MEMBER_MISSING``)
with its hash and size (``BUNDLE_MEMBER_HASH``), no unlisted member
(``BUNDLE_MEMBER_EXTRA``), the members' shapes, each ledger event's hash
(``BUNDLE_EVENT_HASH``) and signatures (``BUNDLE_EVENT_SIGNATURE``), their order and links
(``BUNDLE_CHAIN``), then the transparency log: the checkpoint's signature
(``BUNDLE_CHECKPOINT``), each event's inclusion proof (``BUNDLE_INCLUSION``), and that it
extends an older checkpoint (``BUNDLE_CONSISTENCY``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from governance import chain, codes, signing
from replay.canonical import CanonicalError, jcs
from replay.errors import ReplayError
from replay.formats.jsonstrict import check_shape, loads_strict
from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes
from tlog import proof as proof_docs

BUNDLE_FORMAT: Final = "replay-audit-console/evidence-bundle/v1"
MANIFEST_TYPE: Final = "replay-audit-console/evidence-bundle-manifest/v1"
#: what ``build_bundle`` has ``sign`` sign first, to learn the key id and public key that the
#: manifest then names (a fixed text that is neither JSON nor a ledger hash, so it can never
#: be mistaken for anything else the server signs)
KEY_PROBE: Final = b"replay-audit-console/evidence-bundle/v1 signer probe"

SUMMARY: Final = "summary.json"
KEYS: Final = "ledger/keys.json"
EVENTS: Final = "ledger/events.json"
CHECKPOINT: Final = "ledger/checkpoint.json"
TLOG: Final = "ledger/tlog.json"
TLOG_TYPE: Final = "replay-audit-console/bundle-tlog/v1"
MAX_PROOF_HASHES: Final = 64

DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
MAX_DEPTH: Final = 200
MAX_MEMBERS: Final = 200_000
MAX_KEYS: Final = 5_000_000

Sign = Callable[[bytes], tuple[str, str, str]]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX128 = re.compile(r"[0-9a-f]{128}")
_NAME = re.compile(r"(summary\.json|traces/[0-9a-f]{64}/(data|report)\.json|ledger/[a-z]+\.json)")
_SHA = re.compile(r"(sha256:)?([0-9a-f]{64})")
_EVENT_FIELDS: Final = frozenset(
    ("actor" if f == "actor_label" else f) for f in chain.FIELDS
)  # the stored row's fields, ``actor_label`` spelled ``actor`` as in the hashed body
_VALUE_FIELDS: Final = ("subject_ref", "location", "path", "value", "released")
_CHAIN_TO_BUNDLE: Final = {
    codes.CHAIN_HASH: codes.BUNDLE_EVENT_HASH,
    codes.CHAIN_MALFORMED: codes.BUNDLE_EVENT_HASH,
    codes.CHAIN_KEY_UNKNOWN: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_KEY_WINDOW: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_SIGNATURE: codes.BUNDLE_EVENT_SIGNATURE,
    codes.CHAIN_ACTOR_SIGNATURE: codes.BUNDLE_EVENT_SIGNATURE,
}


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
    ``created_at`` is the caller's clock, in ``governance.signing.format_time`` form.
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


def tlog_section(
    checkpoint_note: str,
    vkeys: Sequence[str],
    inclusion: Mapping[int, Sequence[bytes]],
    consistency: Mapping[int, Sequence[bytes]] | None = None,
) -> dict[str, Any]:
    """``ledger/tlog.json``: the signed checkpoint, its verifier keys, each event's inclusion
    proof (seq -> hashes) and consistency proofs from earlier sizes (old size -> hashes)."""

    def b64(hashes: Sequence[bytes]) -> list[str]:
        return [base64.b64encode(h).decode("ascii") for h in hashes]

    return {
        "type": TLOG_TYPE,
        "checkpoint": checkpoint_note,
        "vkeys": list(vkeys),
        "inclusion": [{"seq": seq, "proof": b64(inclusion[seq])} for seq in sorted(inclusion)],
        "consistency": [
            {"old_size": size, "proof": b64(hashes)}
            for size, hashes in sorted((consistency or {}).items())
        ],
    }


def event_record(row: chain.Row) -> dict[str, Any]:
    """A stored ledger row (a tuple in ``governance.chain.FIELDS`` order) as a bundle event."""
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


_ENVELOPE_KEYS: Final = frozenset(("format", "manifest", "members", "signature"))


def _envelope(format_: Any, manifest: Any, members: Mapping[str, bytes], signature: Any) -> bytes:
    """``jcs`` of a bundle's value, from its members' canonical bytes (each written once).

    The envelope's keys are ASCII and so are member names (the caller checks), so ``sorted``
    is RFC 8785's order (UTF-16 code units).
    """
    body = b",".join(jcs(name) + b":" + members[name] for name in sorted(members))
    return b"".join(
        (
            b'{"format":',
            jcs(format_),
            b',"manifest":',
            jcs(manifest),
            b',"members":{',
            body,
            b'},"signature":',
            jcs(signature),
            b"}",
        )
    )


def _canonical(doc: Any) -> tuple[bytes, dict[str, bytes] | None]:
    """``jcs(doc)``, and each member's canonical bytes when ``doc`` has a bundle's shape."""
    if (
        isinstance(doc, dict)
        and set(doc) == _ENVELOPE_KEYS
        and isinstance(doc["members"], dict)
        and all(name.isascii() for name in doc["members"])
    ):
        members = {name: jcs(value) for name, value in doc["members"].items()}
        return _envelope(doc["format"], doc["manifest"], members, doc["signature"]), members
    return jcs(doc), None


# --- verify ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BundleCheck:
    """What checking a bundle found: ok, or the first failure's code, where and why.

    ``key_id``/``public_key``: the key that signed the manifest (when it could be read);
    ``trusted``: whether that key was checked against a trust anchor, and ``trust`` which one
    (``"trusted key"`` or ``"checkpoint"``; None when no anchor was given).
    """

    ok: bool
    code: str | None = None
    where: str | None = None
    message: str = ""
    key_id: str | None = None
    public_key: str | None = None
    trusted: bool = False
    trust: str | None = None
    manifest_sha256: str | None = None
    request_ref: str | None = None
    subject_refs: tuple[str, ...] = ()
    nothing_held: bool | None = None
    members: int = 0
    traces: int = 0
    events: int = 0
    tlog_size: int | None = None
    tlog_root: str | None = None
    tlog_trust: str | None = None
    proven: int = 0
    extends: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "code": self.code,
            "where": self.where,
            "message": self.message,
            "key_id": self.key_id,
            "public_key": self.public_key,
            "trusted": self.trusted,
            "trust": self.trust,
            "manifest_sha256": self.manifest_sha256,
            "request_ref": self.request_ref,
            "subject_refs": list(self.subject_refs),
            "nothing_held": self.nothing_held,
            "members": self.members,
            "traces": self.traces,
            "events": self.events,
            "tlog_size": self.tlog_size,
            "tlog_root": self.tlog_root,
            "tlog_trust": self.tlog_trust,
            "proven": self.proven,
            "extends": self.extends,
        }


class _Fail(Exception):
    def __init__(self, code: str, where: str, message: str) -> None:
        super().__init__(f"{code} at {where}: {message}")
        self.code, self.where, self.message = code, where, message


def _malformed(where: str, message: str) -> _Fail:
    return _Fail(codes.BUNDLE_MALFORMED, where, message)


def _need(cond: bool, where: str, message: str) -> None:
    if not cond:
        raise _malformed(where, message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse(data: bytes, max_bytes: int) -> tuple[Any, dict[str, bytes] | None]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _malformed("file", "a bundle is bytes")
    data = bytes(data)
    if len(data) > max_bytes:
        raise _malformed("file", f"{len(data)} bytes, more than the limit of {max_bytes}")
    try:
        doc = loads_strict(data, where="bundle", max_keys=MAX_KEYS)
        check_shape(doc, where="bundle", max_depth=MAX_DEPTH, max_string=max_bytes)
    except ReplayError as exc:
        raise _malformed("file", exc.message) from None
    try:
        canonical, member_bytes = _canonical(doc)
    except CanonicalError as exc:
        raise _malformed("file", f"not RFC 8785 canonical JSON: {exc}") from None
    if canonical != data:
        at = next(
            (i for i, (a, b) in enumerate(zip(canonical, data, strict=False)) if a != b),
            min(len(canonical), len(data)),
        )
        raise _malformed(
            f"byte {at}", "not in RFC 8785 canonical form (a bundle is exactly jcs of its value)"
        )
    return doc, member_bytes


def _manifest(doc: Any) -> dict[str, Any]:
    _need(isinstance(doc, dict), "file", "a bundle is a JSON object")
    expected = {"format", "manifest", "members", "signature"}
    _need(set(doc) == expected, "file", f"a bundle has exactly the members {sorted(expected)}")
    _need(doc["format"] == BUNDLE_FORMAT, "format", f"the format is not {BUNDLE_FORMAT}")
    _need(isinstance(doc["members"], dict), "members", "members is not an object")
    _need(
        isinstance(doc["signature"], str) and _HEX128.fullmatch(doc["signature"]) is not None,
        "signature",
        "the signature is not 128 lower-case hex digits",
    )
    m = doc["manifest"]
    _need(isinstance(m, dict), "manifest", "the manifest is not an object")
    fields_ = {
        "type",
        "request_ref",
        "subject_refs",
        "created_at",
        "nothing_held",
        "server_key",
        "members",
    }
    _need(set(m) == fields_, "manifest", f"a manifest has exactly the members {sorted(fields_)}")
    _need(m["type"] == MANIFEST_TYPE, "manifest.type", f"the type is not {MANIFEST_TYPE}")
    _need(
        isinstance(m["request_ref"], str) and bool(m["request_ref"]),
        "manifest.request_ref",
        "not a non-empty string",
    )
    refs = m["subject_refs"]
    _need(
        isinstance(refs, list) and bool(refs) and all(isinstance(r, str) and r for r in refs),
        "manifest.subject_refs",
        "not a list of subject refs",
    )
    _need(isinstance(m["created_at"], str), "manifest.created_at", "not a string")
    try:
        signing.parse_time(m["created_at"])
    except ValueError as exc:
        raise _malformed("manifest.created_at", f"not a time: {exc}") from None
    _need(isinstance(m["nothing_held"], bool), "manifest.nothing_held", "not a boolean")
    key = m["server_key"]
    _need(
        isinstance(key, dict) and set(key) == {"alg", "key_id", "public_key"},
        "manifest.server_key",
        "the server key is not {alg, key_id, public_key}",
    )
    _need(key["alg"] == signing.ALG, "manifest.server_key.alg", f"the alg is not {signing.ALG}")
    _need(isinstance(key["key_id"], str), "manifest.server_key.key_id", "not a string")
    _need(
        isinstance(key["public_key"], str) and _HEX64.fullmatch(key["public_key"]) is not None,
        "manifest.server_key.public_key",
        "not 64 lower-case hex digits",
    )
    listed = m["members"]
    _need(isinstance(listed, list), "manifest.members", "not a list")
    _need(len(listed) <= MAX_MEMBERS, "manifest.members", f"more than {MAX_MEMBERS} members")
    names: set[str] = set()
    for i, entry in enumerate(listed):
        where = f"manifest.members[{i}]"
        _need(
            isinstance(entry, dict) and set(entry) == {"name", "sha256", "size"},
            where,
            "a member entry is {name, sha256, size}",
        )
        name = entry["name"]
        _need(
            isinstance(name, str) and _NAME.fullmatch(name) is not None,
            where,
            f"the member name {str(name)[:80]!r} is not one a bundle uses",
        )
        _need(name not in names, where, f"the member {name} is listed twice")
        names.add(name)
        _need(
            isinstance(entry["sha256"], str) and _HEX64.fullmatch(entry["sha256"]) is not None,
            where,
            "sha256 is not 64 lower-case hex digits",
        )
        _need(_is_int(entry["size"]) and entry["size"] >= 0, where, "size is not a count")
    for required in (SUMMARY, KEYS, EVENTS):
        _need(required in names, "manifest.members", f"the manifest does not list {required}")
    return m


def _check_signature(doc: dict[str, Any], manifest: dict[str, Any]) -> None:
    key = manifest["server_key"]
    public = bytes.fromhex(key["public_key"])
    derived = signing.key_id_for(public, "server")
    if key["key_id"] != derived:
        raise _Fail(
            codes.BUNDLE_SIGNATURE,
            "manifest.server_key.key_id",
            f"the key id {key['key_id']!r} is not the id of the public key ({derived})",
        )
    if not signing.verify(public, jcs(manifest), doc["signature"]):
        raise _Fail(
            codes.BUNDLE_SIGNATURE,
            "signature",
            f"the signature over the manifest does not verify with key {key['key_id']}",
        )


def _trust(
    manifest: dict[str, Any],
    trusted_keys: Iterable[str | bytes] | None,
    checkpoint: Mapping[str, Any] | None,
) -> str | None:
    key = manifest["server_key"]
    if trusted_keys is not None:
        trusted = set()
        for k in trusted_keys:
            try:
                trusted.add(
                    k.hex() if isinstance(k, bytes) else signing.public_key_from_text(k).hex()
                )
            except signing.KeyFormatError as exc:
                raise ValueError(f"a trusted key is not an Ed25519 public key: {exc}") from None
        if key["public_key"] not in trusted:
            raise _Fail(
                codes.BUNDLE_UNTRUSTED_KEY,
                "manifest.server_key",
                f"signed by {key['key_id']} ({key['public_key']}), which is not a trusted key",
            )
        return "trusted key"
    if checkpoint is not None:
        body = checkpoint.get("checkpoint") if isinstance(checkpoint, Mapping) else None
        if not isinstance(body, dict) or body.get("type") != signing.CHECKPOINT_TYPE:
            raise ValueError(f"the trusted checkpoint is not a {signing.CHECKPOINT_TYPE}")
        if body.get("key_id") != key["key_id"] or not signing.verify(
            bytes.fromhex(key["public_key"]), jcs(body), str(checkpoint.get("signature"))
        ):
            raise _Fail(
                codes.BUNDLE_UNTRUSTED_KEY,
                "manifest.server_key",
                f"signed by {key['key_id']}, but the trusted checkpoint is signed by "
                f"{body.get('key_id')!r} (or its signature does not verify with this key)",
            )
        return "checkpoint"
    return None


def _check_members(
    doc: dict[str, Any], manifest: dict[str, Any], member_bytes: Mapping[str, bytes]
) -> None:
    present = doc["members"]
    for i, entry in enumerate(manifest["members"]):
        name = entry["name"]
        if name not in present:
            raise _Fail(
                codes.BUNDLE_MEMBER_MISSING, name, f"manifest.members[{i}] lists {name}; absent"
            )
        raw = member_bytes[name]
        digest = hashlib.sha256(raw).hexdigest()
        if digest != entry["sha256"] or len(raw) != entry["size"]:
            raise _Fail(
                codes.BUNDLE_MEMBER_HASH,
                name,
                f"sha256 {digest} and size {len(raw)}; the manifest says {entry['sha256']} and "
                f"{entry['size']}",
            )
    listed = {entry["name"] for entry in manifest["members"]}
    for name in present:
        if name not in listed:
            raise _Fail(codes.BUNDLE_MEMBER_EXTRA, str(name)[:200], "not listed in the manifest")


def _time(value: Any, where: str) -> datetime:
    _need(isinstance(value, str), where, "not a time string")
    try:
        return signing.parse_time(value)
    except ValueError as exc:
        raise _malformed(where, f"not a time: {exc}") from None


def _ledger_keys(members: dict[str, Any]) -> tuple[dict[str, chain.ServerKey], dict[str, bytes]]:
    keys = members[KEYS]
    _need(
        isinstance(keys, dict) and set(keys) == {"server_keys", "member_keys"},
        KEYS,
        "keys are {server_keys, member_keys}",
    )
    server: dict[str, chain.ServerKey] = {}
    _need(isinstance(keys["server_keys"], list), KEYS, "server_keys is not a list")
    for i, k in enumerate(keys["server_keys"]):
        where = f"{KEYS}: server_keys[{i}]"
        names = {"key_id", "public_key", "valid_from", "valid_until", "revoked_at"}
        _need(isinstance(k, dict) and set(k) == names, where, f"a server key is {sorted(names)}")
        _need(isinstance(k["key_id"], str), where, "key_id is not a string")
        _need(
            isinstance(k["public_key"], str) and _HEX64.fullmatch(k["public_key"]) is not None,
            where,
            "public_key is not 64 lower-case hex digits",
        )
        server[k["key_id"]] = chain.ServerKey(
            key_id=k["key_id"],
            public_key=bytes.fromhex(k["public_key"]),
            valid_from=_time(k["valid_from"], where),
            valid_until=None if k["valid_until"] is None else _time(k["valid_until"], where),
            revoked_at=None if k["revoked_at"] is None else _time(k["revoked_at"], where),
        )
    member: dict[str, bytes] = {}
    _need(isinstance(keys["member_keys"], dict), KEYS, "member_keys is not an object")
    for key_id, public in keys["member_keys"].items():
        _need(
            isinstance(public, str) and _HEX64.fullmatch(public) is not None,
            f"{KEYS}: member_keys.{key_id}",
            "not 64 lower-case hex digits",
        )
        member[key_id] = bytes.fromhex(public)
    return server, member


def _event_row(record: Any, where: str) -> tuple[Any, ...]:
    _need(
        isinstance(record, dict) and set(record) == _EVENT_FIELDS,
        where,
        f"an event has exactly the fields {sorted(_EVENT_FIELDS)}",
    )
    for name in ("seq", "code"):
        _need(_is_int(record[name]), where, f"{name} is not an integer")
    for name in ("type", "actor", "server_key_id", "prev_hash", "hash", "server_signature"):
        _need(isinstance(record[name], str), where, f"{name} is not a string")
    for name in ("idempotency_key", "actor_key_id", "actor_signature"):
        _need(record[name] is None or isinstance(record[name], str), where, f"{name} is not text")
    _need(record["actor_id"] is None or _is_int(record["actor_id"]), where, "actor_id is not an id")
    values = dict(record)
    values["actor_label"] = values.pop("actor")
    values["created_at"] = _time(record["created_at"], f"{where}.created_at")
    return tuple(values[f] for f in chain.FIELDS)


def _check_events(members: dict[str, Any]) -> list[tuple[Any, ...]]:
    server, member = _ledger_keys(members)
    events = members[EVENTS]
    _need(isinstance(events, list), EVENTS, "events are a list")
    rows = [_event_row(e, f"{EVENTS}[{i}]") for i, e in enumerate(events)]
    for row in rows:
        found = chain.check_row(row, server, member)
        if found is not None:
            raise _Fail(
                _CHAIN_TO_BUNDLE.get(found.code, codes.BUNDLE_EVENT_HASH),
                f"{EVENTS}: event seq {row[0]}",
                f"{found.code}: {found.reason}",
            )
    seq_i, prev_i, hash_i = (chain.FIELDS.index(f) for f in ("seq", "prev_hash", "hash"))
    previous: tuple[Any, ...] | None = None
    for row in rows:
        where = f"{EVENTS}: event seq {row[seq_i]}"
        if row[seq_i] < 1:
            raise _Fail(codes.BUNDLE_CHAIN, where, "a seq starts at 1")
        if row[seq_i] == 1 and row[prev_i] != chain.GENESIS_PREV_HASH:
            raise _Fail(codes.BUNDLE_CHAIN, where, "event 1's prev_hash is not empty")
        if previous is not None:
            if row[seq_i] <= previous[seq_i]:
                raise _Fail(
                    codes.BUNDLE_CHAIN, where, f"follows event {previous[seq_i]} (not in order)"
                )
            if row[seq_i] == previous[seq_i] + 1 and row[prev_i] != previous[hash_i]:
                raise _Fail(
                    codes.BUNDLE_CHAIN,
                    where,
                    f"its prev_hash is not event {previous[seq_i]}'s hash {previous[hash_i]}",
                )
        previous = row
    if CHECKPOINT in members:
        _check_checkpoint(members[CHECKPOINT], rows, server, seq_i, hash_i)
    return rows


def _check_checkpoint(
    document: Any,
    rows: list[tuple[Any, ...]],
    server: Mapping[str, chain.ServerKey],
    seq_i: int,
    hash_i: int,
) -> None:
    body: Any = document.get("checkpoint") if isinstance(document, dict) else None
    _need(
        isinstance(body, dict)
        and body.get("type") == signing.CHECKPOINT_TYPE
        and _is_int(body.get("size"))
        and isinstance(body.get("key_id"), str),
        CHECKPOINT,
        "not a signed ledger checkpoint",
    )
    key = server.get(body["key_id"])
    if key is None or not signing.verify(key.public_key, jcs(body), str(document.get("signature"))):
        raise _Fail(
            codes.BUNDLE_CHAIN,
            CHECKPOINT,
            f"the checkpoint's signature does not verify with server key {body['key_id']!r}",
        )
    for row in rows:
        where = f"{EVENTS}: event seq {row[seq_i]}"
        if row[seq_i] > body["size"]:
            raise _Fail(
                codes.BUNDLE_CHAIN, where, f"after the checkpoint's head (size {body['size']})"
            )
        if row[seq_i] == 1 and row[hash_i] != body.get("genesis_hash"):
            raise _Fail(codes.BUNDLE_CHAIN, where, "event 1 is not the checkpoint's genesis")
        if row[seq_i] == body["size"] and row[hash_i] != body.get("head_hash"):
            raise _Fail(codes.BUNDLE_CHAIN, where, "the head event is not the checkpoint's head")


def _proof_hashes(value: Any, where: str) -> list[bytes]:
    _need(
        isinstance(value, list) and len(value) <= MAX_PROOF_HASHES,
        where,
        f"a proof is a list of at most {MAX_PROOF_HASHES} hashes",
    )
    out = []
    for i, item in enumerate(value):
        try:
            raw = base64.b64decode(item, validate=True) if isinstance(item, str) else b""
        except (binascii.Error, ValueError):
            raw = b""
        _need(len(raw) == merkle.HASH_SIZE, f"{where}[{i}]", "not a base64 SHA-256 hash")
        out.append(raw)
    return out


def _verifiers(vkeys: Iterable[str]) -> list[notes.Verifier]:
    """Verifier key strings; ``ValueError`` (the caller's input) for one that does not parse."""
    out = []
    for vkey in vkeys:
        try:
            out.append(notes.parse_verifier(vkey))
        except notes.NoteError as exc:
            raise ValueError(f"the verifier key {vkey!r} does not parse: {exc}") from None
    return out


@dataclass(frozen=True, slots=True)
class _TlogFound:
    size: int
    root: str
    trust: str
    proven: int
    extends: int | None


def _check_tlog(
    members: dict[str, Any],
    rows: list[tuple[Any, ...]],
    vkeys: Sequence[str] | None,
    older: str | None,
    consistency: Mapping[str, Any] | None,
) -> _TlogFound | None:
    if TLOG not in members:
        if vkeys or older is not None:
            raise _Fail(
                codes.BUNDLE_CHECKPOINT,
                TLOG,
                "the bundle carries no transparency-log checkpoint (made before proofs were "
                "added), so --vkey and --older-checkpoint cannot be checked",
            )
        return None
    section = members[TLOG]
    fields_ = {"type", "checkpoint", "vkeys", "inclusion", "consistency"}
    _need(
        isinstance(section, dict) and set(section) == fields_,
        TLOG,
        f"the section has exactly the members {sorted(fields_)}",
    )
    _need(section["type"] == TLOG_TYPE, f"{TLOG}: type", f"the type is not {TLOG_TYPE}")
    _need(isinstance(section["checkpoint"], str), f"{TLOG}: checkpoint", "not a signed note")
    carried = section["vkeys"]
    _need(
        isinstance(carried, list) and all(isinstance(v, str) for v in carried),
        f"{TLOG}: vkeys",
        "not a list of verifier keys",
    )
    if vkeys:
        verifiers, trust = _verifiers(vkeys), "vkey"
    else:
        try:
            verifiers, trust = _verifiers(carried), "bundle vkeys"
        except ValueError as exc:
            raise _malformed(f"{TLOG}: vkeys", str(exc)) from None
    try:
        cp, _ = checkpoints.open_checkpoint(section["checkpoint"].encode("utf-8"), verifiers)
    except (notes.NoteError, checkpoints.CheckpointError) as exc:
        names = ", ".join(v.vkey for v in verifiers) or "none"
        raise _Fail(
            codes.BUNDLE_CHECKPOINT,
            f"{TLOG}: checkpoint",
            f"{exc} (verifier keys: {names})",
        ) from None
    root_b64 = base64.b64encode(cp.root_hash).decode("ascii")
    proofs: dict[int, list[bytes]] = {}
    _need(isinstance(section["inclusion"], list), f"{TLOG}: inclusion", "not a list")
    for i, entry in enumerate(section["inclusion"]):
        where = f"{TLOG}: inclusion[{i}]"
        _need(
            isinstance(entry, dict) and set(entry) == {"seq", "proof"} and _is_int(entry["seq"]),
            where,
            "an inclusion proof is {seq, proof}",
        )
        _need(entry["seq"] not in proofs, where, f"event {entry['seq']} has two proofs")
        proofs[entry["seq"]] = _proof_hashes(entry["proof"], f"{where}.proof")
    seq_i, hash_i = chain.FIELDS.index("seq"), chain.FIELDS.index("hash")
    for row in rows:
        seq, where = row[seq_i], f"{TLOG}: event seq {row[seq_i]}"
        if seq > cp.size:
            raise _Fail(codes.BUNDLE_INCLUSION, where, f"after the checkpoint (size {cp.size})")
        if seq not in proofs:
            raise _Fail(codes.BUNDLE_INCLUSION, where, "no inclusion proof for this event")
        leaf = merkle.leaf_hash(str(row[hash_i]).encode("utf-8"))
        if not merkle.verify_inclusion(seq - 1, cp.size, leaf, proofs[seq], cp.root_hash):
            raise _Fail(
                codes.BUNDLE_INCLUSION,
                where,
                f"its hash {row[hash_i]} is not leaf {seq - 1} of the checkpoint's tree (size "
                f"{cp.size}, root {root_b64})",
            )
    extends = None
    if older is not None:
        extends = _check_older(section, cp, older, verifiers, consistency)
    return _TlogFound(cp.size, root_b64, trust, len(rows), extends)


def _check_older(
    section: dict[str, Any],
    cp: checkpoints.Checkpoint,
    older: str,
    verifiers: Sequence[notes.Verifier],
    consistency: Mapping[str, Any] | None,
) -> int:
    where = "--older-checkpoint"
    try:
        old, _ = checkpoints.open_checkpoint(older.encode("utf-8"), verifiers)
    except (notes.NoteError, checkpoints.CheckpointError) as exc:
        raise _Fail(codes.BUNDLE_CONSISTENCY, where, f"the older checkpoint: {exc}") from None
    if old.origin != cp.origin:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the checkpoints name two logs: {old.origin!r}, {cp.origin!r}",
        )
    if old.size > cp.size:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the older checkpoint (size {old.size}) is larger than the bundle's (size {cp.size})",
        )
    if old.size == cp.size:
        if old.root_hash != cp.root_hash:
            raise _Fail(
                codes.BUNDLE_CONSISTENCY,
                where,
                f"two different roots at size {cp.size}: the log was forked or rewritten",
            )
        return old.size
    hashes: list[bytes] | None = None
    entries = section["consistency"]
    _need(isinstance(entries, list), f"{TLOG}: consistency", "not a list")
    for i, entry in enumerate(entries):
        at = f"{TLOG}: consistency[{i}]"
        _need(
            isinstance(entry, dict)
            and set(entry) == {"old_size", "proof"}
            and _is_int(entry["old_size"]),
            at,
            "a consistency proof is {old_size, proof}",
        )
        if entry["old_size"] == old.size:
            hashes = _proof_hashes(entry["proof"], f"{at}.proof")
    if hashes is None and consistency is not None:
        hashes = _fetched_consistency(consistency, old, cp)
    if hashes is None:
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"no consistency proof from size {old.size} to size {cp.size} in the bundle or the "
            "file given (--consistency)",
        )
    if not merkle.verify_consistency(old.size, cp.size, old.root_hash, cp.root_hash, hashes):
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"the bundle's checkpoint (size {cp.size}) does not extend the older checkpoint "
            f"(size {old.size})",
        )
    return old.size


def _fetched_consistency(
    doc: Mapping[str, Any], old: checkpoints.Checkpoint, cp: checkpoints.Checkpoint
) -> list[bytes]:
    """A consistency proof document (``GET /api/governance/tlog/consistency/``) from the older
    checkpoint to the bundle's: its sizes and roots must be the two checkpoints'."""
    where = "--consistency"
    root = base64.b64encode(cp.root_hash).decode("ascii")
    old_root = base64.b64encode(old.root_hash).decode("ascii")
    if (
        doc.get("type") != proof_docs.CONSISTENCY_TYPE
        or (doc.get("old_size"), doc.get("old_root")) != (old.size, old_root)
        or (doc.get("new_size"), doc.get("new_root")) != (cp.size, root)
    ):
        raise _Fail(
            codes.BUNDLE_CONSISTENCY,
            where,
            f"not a consistency proof from size {old.size} (root {old_root}) to the bundle's "
            f"checkpoint at size {cp.size} (root {root})",
        )
    return _proof_hashes(doc.get("proof"), f"{where}: proof")


def _check_summary(members: dict[str, Any], manifest: dict[str, Any]) -> int:
    summary = members[SUMMARY]
    _need(isinstance(summary, dict), SUMMARY, "the summary is not an object")
    for name in ("request_ref", "subject_refs", "created_at", "nothing_held"):
        _need(
            summary.get(name) == manifest[name], SUMMARY, f"its {name} differs from the manifest's"
        )
    traces = summary.get("traces")
    _need(isinstance(traces, list), SUMMARY, "traces is not a list")
    _need(
        manifest["nothing_held"] == (not traces),
        SUMMARY,
        "nothing_held disagrees with the traces listed",
    )
    refs = set(manifest["subject_refs"])
    for i, trace in enumerate(traces):
        where = f"{SUMMARY}: traces[{i}]"
        _need(isinstance(trace, dict), where, "not an object")
        data = trace.get("data")
        _need(isinstance(data, str) and data in members, where, "names no data member")
        report = trace.get("report")
        _need(
            report is None or (isinstance(report, str) and report in members),
            where,
            "names a report member not held",
        )
        values: Any = (
            members[data].get("subject_values") if isinstance(members[data], dict) else None
        )
        _need(isinstance(values, list), data, "subject_values is not a list")
        for j, value in enumerate(values):
            _need(
                isinstance(value, dict)
                and set(value) == set(_VALUE_FIELDS)
                and isinstance(value["subject_ref"], str)
                and value["subject_ref"] in refs,
                f"{data}: subject_values[{j}]",
                "not a value of one of the manifest's subjects",
            )
    return len(traces)


def verify_bundle(
    data: bytes,
    trusted_keys: Iterable[str | bytes] | None = None,
    *,
    checkpoint: Mapping[str, Any] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    vkeys: Sequence[str] | None = None,
    older_checkpoint: str | None = None,
    consistency: Mapping[str, Any] | None = None,
) -> BundleCheck:
    """Check a bundle offline; the first failure is named (see the module docstring).

    ``trusted_keys``: public keys (hex, PEM or base64; or raw bytes) the manifest's key must
    be one of; ``checkpoint``: a checkpoint document (``governance checkpoint``) whose signer
    must be the manifest's key. Without either, a valid bundle is ok with ``trusted=False``:
    it is intact and signed by the key it names, and nothing said whose key that is.
    ``vkeys``: verifier keys (``<name>+<id>+<key>``) the transparency-log checkpoint must be
    signed by; ``older_checkpoint``: a checkpoint note the auditor kept, which the bundle's
    must extend (proven by the bundle's ``consistency`` or the ``consistency`` document).
    Raises ``ValueError`` only for a bad trust anchor (the caller's input, not the bundle's).
    """
    if vkeys:
        _verifiers(vkeys)  # a bad key is the caller's, refused before anything is read
    found: dict[str, Any] = {}
    try:
        doc, member_bytes = _parse(data, max_bytes)
        manifest = _manifest(doc)
        found.update(
            key_id=manifest["server_key"]["key_id"],
            public_key=manifest["server_key"]["public_key"],
            request_ref=manifest["request_ref"],
            subject_refs=tuple(manifest["subject_refs"]),
            nothing_held=manifest["nothing_held"],
            members=len(manifest["members"]),
            manifest_sha256="sha256:" + hashlib.sha256(jcs(manifest)).hexdigest(),
        )
        _check_signature(doc, manifest)
        trust = _trust(manifest, trusted_keys, checkpoint)
        found.update(trusted=trust is not None, trust=trust)
        if member_bytes is None:  # a member name that is not ASCII: never one a bundle lists
            member_bytes = {name: jcs(value) for name, value in doc["members"].items()}
        _check_members(doc, manifest, member_bytes)
        found["traces"] = _check_summary(doc["members"], manifest)
        rows = _check_events(doc["members"])
        found["events"] = len(rows)
        tlog = _check_tlog(doc["members"], rows, vkeys, older_checkpoint, consistency)
        if tlog is not None:
            found.update(
                tlog_size=tlog.size,
                tlog_root=tlog.root,
                tlog_trust=tlog.trust,
                proven=tlog.proven,
                extends=tlog.extends,
            )
    except _Fail as fail:
        return BundleCheck(
            ok=False, code=fail.code, where=fail.where, message=fail.message, **found
        )
    return BundleCheck(ok=True, message="the bundle verifies", **found)


def read_members(data: bytes) -> dict[str, Any]:
    """The members of a bundle that :func:`verify_bundle` passed (ValueError otherwise)."""
    check = verify_bundle(data)
    if not check.ok:
        raise ValueError(f"{check.code} at {check.where}: {check.message}")
    return loads_strict(data, where="bundle", max_keys=MAX_KEYS)["members"]


def pdf_summary(data: bytes) -> dict[str, Any]:
    """What ``dsr.pdf.render_summary`` prints, read from a bundle that verifies."""
    check = verify_bundle(data)
    if not check.ok:
        raise ValueError(f"{check.code} at {check.where}: {check.message}")
    doc = loads_strict(data, where="bundle", max_keys=MAX_KEYS)
    summary = doc["members"][SUMMARY]
    return {
        "request_ref": check.request_ref,
        "subject_refs": list(check.subject_refs),
        "created_at": summary["created_at"],
        "nothing_held": check.nothing_held,
        "traces": summary["traces"],
        "events": check.events,
        "manifest_sha256": check.manifest_sha256,
        "key_id": check.key_id,
        "public_key": check.public_key,
        "signature": doc["signature"],
        "bundle_sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
        "tlog_size": check.tlog_size,
        "tlog_root": check.tlog_root,
        "proven": check.proven,
    }
