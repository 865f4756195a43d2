"""Check a bundle offline: :func:`verify_bundle`, the first failure named (see the package
docstring for the order of the checks).

Pure: no Django (see the package docstring).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.bundle.format import (
    _CHAIN_TO_BUNDLE,
    _EVENT_FIELDS,
    _HEX64,
    _HEX128,
    _NAME,
    _VALUE_FIELDS,
    BUNDLE_FORMAT,
    CHECKPOINT,
    DEFAULT_MAX_BYTES,
    EVENTS,
    KEYS,
    MANIFEST_TYPE,
    MAX_DEPTH,
    MAX_KEYS,
    MAX_MEMBERS,
    SUMMARY,
    _canonical,
    _Fail,
    _is_int,
    _malformed,
    _need,
)
from core.bundle.tlogsection import _check_tlog, _verifiers
from core.canonical import CanonicalError, jcs
from core.errors import ReplayError
from core.formats.jsonstrict import check_shape, loads_strict
from core.ledger import chain, codes, signing
from tlog import quorum as quorums


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
    quorum: int | None = None
    witnesses_signed: tuple[str, ...] = ()
    witnesses_missing: tuple[str, ...] = ()

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
            "quorum": self.quorum,
            "witnesses_signed": list(self.witnesses_signed),
            "witnesses_missing": list(self.witnesses_missing),
        }


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
    witnesses: Sequence[str] | None = None,
    quorum: int | None = None,
) -> BundleCheck:
    """Check a bundle offline; the first failure is named (see the module docstring).

    ``trusted_keys``: public keys (hex, PEM or base64; or raw bytes) the manifest's key must
    be one of; ``checkpoint``: a checkpoint document (``governance checkpoint``) whose signer
    must be the manifest's key. Without either, a valid bundle is ok with ``trusted=False``:
    it is intact and signed by the key it names, and nothing said whose key that is.
    ``vkeys``: verifier keys (``<name>+<id>+<key>``) the transparency-log checkpoint must be
    signed by; ``older_checkpoint``: a checkpoint note the auditor kept, which the bundle's
    must extend (proven by the bundle's ``consistency`` or the ``consistency`` document).
    ``witnesses``: the verifier keys of witnesses of whom at least ``quorum`` (all of them
    when None) must have cosigned the checkpoint (``BUNDLE_WITNESS_QUORUM`` otherwise).
    Raises ``ValueError`` only for a bad trust anchor, witness key or quorum (the caller's
    input, not the bundle's).
    """
    if vkeys:
        _verifiers(vkeys)  # a bad key is the caller's, refused before anything is read
    cosigners = quorums.witness_verifiers(witnesses or ())
    needed = quorums.required(cosigners, quorum)
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
        tlog = _check_tlog(
            doc["members"],
            rows,
            vkeys,
            older_checkpoint,
            consistency,
            witnesses=cosigners,
            quorum=needed,
        )
        if tlog is not None:
            found.update(
                tlog_size=tlog.size,
                tlog_root=tlog.root,
                tlog_trust=tlog.trust,
                proven=tlog.proven,
                extends=tlog.extends,
            )
            if tlog.quorum is not None:
                found.update(
                    quorum=tlog.quorum.quorum,
                    witnesses_signed=tlog.quorum.signed,
                    witnesses_missing=tlog.quorum.missing(),
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
    """What ``core.bundle.pdf.render_summary`` prints, read from a bundle that verifies."""
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
