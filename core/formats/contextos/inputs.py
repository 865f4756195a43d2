"""A ContextOS trace's pinned inputs: the Context Pack and the Knowledge-Graph snapshot
files, read (:func:`parse_input`), matched to a trace by content (:func:`find_inputs`), their
content hashes and signatures.

Pure: no Django.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import errors
from core.canonical import js_sorted
from core.errors import ReplayError
from core.formats.contextos.reader import ContextosTrace, _malformed, _object, _string
from core.formats.jsonstrict import _DECODER, NumberOutOfRange, out_of_range
from core.replay.signatures import KeyRing, key_unknown
from core.replay.signatures import verify as verify_signature

PACK_KIND = "contextos-pack"
KG_KIND = "contextos-kg"
#: the file names of a trace's pinned inputs when uploaded beside it
PACK_SUFFIX = ".pack.json"
KG_SUFFIX = ".kg.json"
INPUT_SUFFIXES = (PACK_SUFFIX, KG_SUFFIX)
MAX_INPUT_BYTES = 64 * 1024**2  # a pack or a KG snapshot file


@dataclass
class Pack:
    name: str
    version: str
    loop: str
    body: dict[str, Any]
    envelope_hash: Any
    signature: Any
    document: dict[str, Any]


@dataclass
class KgSnapshot:
    snapshot_id: Any
    body: dict[str, Any]
    signature: Any
    document: dict[str, Any]


def pack_envelope_hash(pack: Any) -> str:
    """``"sha256:" + sha256(js-sorted(contextos_pack))``: what a pack file records and signs."""
    return "sha256:" + hashlib.sha256(js_sorted(pack)).hexdigest()


def kg_snapshot_id(body: Any) -> str:
    """A KG snapshot's content address: ``"sha256:" + sha256(js-sorted(body))``."""
    return "sha256:" + hashlib.sha256(js_sorted(body)).hexdigest()


def input_kind(data: bytes) -> str | None:
    """``PACK_KIND`` or ``KG_KIND`` for a pack or KG snapshot file, else None."""
    head = data[:4096]
    if b'"contextos_pack"' in head:
        return PACK_KIND
    if b'"contextos_kg_snapshot"' in head:
        return KG_KIND
    return None


def parse_input(data: bytes, where: str) -> Pack | KgSnapshot:
    """A pack file ``{"contextos_pack": {"name", "version", "loop", "body"},
    "envelope_hash", "signature"}`` or a KG snapshot file ``{"contextos_kg_snapshot": {...},
    "snapshot_id", "signature"}``; raises ``MALFORMED_TRACE``."""
    if len(data) > MAX_INPUT_BYTES:
        raise _malformed(f"{where}: larger than {MAX_INPUT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
        doc = _DECODER.decode(text)
    except NumberOutOfRange:
        raise out_of_range(text, where) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _malformed(f"{where}: not a JSON pack or KG snapshot ({exc})") from None
    doc = _object(doc, where)
    if "contextos_pack" in doc:
        pack = _object(doc["contextos_pack"], f"{where}.contextos_pack")
        for key in ("name", "version", "loop"):
            _string(pack, key, f"{where}.contextos_pack")
        body = _object(pack.get("body"), f"{where}.contextos_pack.body")
        return Pack(
            pack["name"],
            pack["version"],
            pack["loop"],
            body,
            doc.get("envelope_hash"),
            doc.get("signature"),
            doc,
        )
    if "contextos_kg_snapshot" in doc:
        body = _object(doc["contextos_kg_snapshot"], f"{where}.contextos_kg_snapshot")
        return KgSnapshot(doc.get("snapshot_id"), body, doc.get("signature"), doc)
    raise _malformed(f"{where}: neither contextos_pack nor contextos_kg_snapshot")


@dataclass
class Inputs:
    """The pinned inputs found for a trace: parsed, or why not (per input)."""

    pack: Pack | None = None
    kg: KgSnapshot | None = None
    pack_text: str | None = None
    kg_text: str | None = None
    problems: list[str] = field(default_factory=list)


def find_inputs(trace: ContextosTrace, files: Mapping[str, bytes]) -> Inputs:
    """Among ``files`` (name -> bytes), the pack ``pack_version`` pins and the KG snapshot
    ``kg_snapshot_id`` pins, matched by content (a pack by its name@version, a snapshot by the
    id it records)."""
    found = Inputs()
    pinned_pack = trace.head["pack_version"]
    pinned_kg = trace.head["kg_snapshot_id"]
    for name, data in files.items():
        if input_kind(data) is None:
            continue
        try:
            item = parse_input(data, name)
        except ReplayError as exc:
            found.problems.append(exc.message)
            continue
        text = data.decode("utf-8")
        if isinstance(item, Pack) and f"{item.name}@{item.version}" == pinned_pack:
            found.pack, found.pack_text = item, text
        elif isinstance(item, KgSnapshot) and item.snapshot_id == pinned_kg:
            found.kg, found.kg_text = item, text
    return found


UNSIGNED = "is unsigned"
SIGNED_BY_UNKNOWN_KEY = "is signed by a key the console does not know: {reason}"


def _signed(sig: Any, message: bytes, keys: KeyRing, at: Any) -> tuple[str | None, str | None]:
    """(problem, code): (None, None) when the signature verifies. The code: MISSING_SNAPSHOT
    for an unsigned input, UNKNOWN_KEY for one signed by a key the registry does not have
    (nothing was verified), else INTEGRITY_FAILURE (a registered key whose signature does not
    verify, or a key outside its window)."""
    if sig is None:
        return UNSIGNED, errors.MISSING_SNAPSHOT
    verdict = verify_signature(sig, message, keys, at=at)
    if verdict.ok:
        return None, None
    if verdict.unknown_key is not None:
        return SIGNED_BY_UNKNOWN_KEY.format(reason=verdict.reason), errors.UNKNOWN_KEY
    return f"signature does not verify: {verdict.reason}", errors.INTEGRITY_FAILURE


def unknown_key(held: Pack | KgSnapshot, keys: KeyRing) -> str | None:
    """Why a pinned input is signed by a key the registry does not have, or None (its key is
    there, it is unsigned or its signature is malformed: the replay's input check says those)."""
    verdict = key_unknown(held.signature, keys) if held.signature is not None else None
    return None if verdict is None else SIGNED_BY_UNKNOWN_KEY.format(reason=verdict.reason)
