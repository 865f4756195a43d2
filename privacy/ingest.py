"""Indexing a stored file's personal values, and keeping them apart from its bytes at rest.

When a trace is stored (``replay.signals.trace_stored``) its personal values are found
(``privacy.rules``), each encrypted under its subject's key into a ``PersonalValue`` row,
and the stored blob is rewritten with those byte spans cut out (``SealedBlob``). Reading the
blob (``replay.storage.blob_open``) puts them back and checks the file's SHA-256; once a
subject is erased its spans read as a marker of the same length (``[erased]___``), so every
offset of the file (and its page index) still holds.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
from typing import IO, Any

from django.conf import settings
from django.core.files.base import ContentFile

from privacy import crypto, rules
from privacy.models import PersonalValue, SealedBlob, Subject
from privacy.spans import SpanError
from privacy.splice import Spliced
from privacy.subjects import ref_for, subject_key
from privacy.values import raw_value, value_aad

log = logging.getLogger("privacy")

GZIP_MAGIC = b"\x1f\x8b"
ERASED_MARK = b"[erased]"


def erased_mark(length: int) -> bytes:
    """What an erased value's span reads as: same length, so offsets hold."""
    return (ERASED_MARK + b"_" * length)[:length]


def _stored_snapshots() -> dict[str, Any]:
    from replay.models import Snapshot

    return {s.snapshot_id: s.body for s in Snapshot.objects.filter(kind="privacy")}


def found_in(trace: Any, plain: bytes) -> list[rules.Found]:
    """The personal values of a stored file's (decompressed) bytes, by the rules."""
    try:
        if trace.format == rules.NATIVE:
            jsonl = trace.encoding.startswith("jsonl")
            header = json.loads(plain.split(b"\n", 1)[0] if jsonl else plain)
            policy = rules.policy_of(header, _stored_snapshots())
            return rules.native_found(
                plain, "jsonl" if jsonl else "json", policy, settings.PRIVACY_SUBJECT_POINTERS
            )
        subject, personal = rules.rule_of(settings.PRIVACY_PATH_RULES, trace.format)
        if not personal:
            return []
        return rules.ruled_found(plain, subject, personal)
    except (SpanError, ValueError) as exc:
        # a stored file the rules cannot read holds nothing they name; say so, not what
        log.warning("privacy: trace %s not indexed: %s", trace.blob.sha256, type(exc).__name__)
        return []


def index_trace(trace: Any) -> int:
    """Index (and seal at rest) one stored trace; how many values. Once per blob."""
    from replay.storage import blob_storage

    sha = trace.blob.sha256
    if SealedBlob.objects.filter(sha256=sha).exists():
        return 0
    storage = blob_storage()
    name = trace.blob.storage_name
    with storage.open(name, "rb") as fh:
        raw = fh.read()
    is_gzip = raw[:2] == GZIP_MAGIC
    plain = gzip.decompress(raw) if is_gzip else raw
    found = found_in(trace, plain)
    if not found:
        return 0
    rows = []
    keys: dict[str, tuple[Subject, bytes]] = {}
    for f in found:
        ref = ref_for(f.identifier)
        if ref not in keys:
            subject = Subject.objects.select_related("key").get(ref=ref)
            keys[ref] = (subject, subject_key(subject))  # type: ignore[assignment]
        subject, key = keys[ref]
        nonce, ct = crypto.seal(key, plain[f.start : f.end], value_aad(trace.pk, f.start))
        rows.append(
            PersonalValue(
                subject=subject,
                trace=trace,
                location=f.location[:64],
                path=f.path[:512],
                start=f.start,
                end=f.end,
                nonce=nonce,
                ciphertext=ct,
            )
        )
    PersonalValue.objects.bulk_create(rows)
    SealedBlob.objects.create(
        sha256=sha,
        gzip=is_gzip,
        plain_sha256=hashlib.sha256(plain).hexdigest(),
        plain_size=len(plain),
    )
    cut = io.BytesIO()
    pos = 0
    for f in sorted(found, key=lambda f: f.start):
        cut.write(plain[pos : f.start])
        pos = f.end
    cut.write(plain[pos:])
    storage.delete(name)
    saved = storage.save(name, ContentFile(cut.getvalue()))
    if saved != name:  # pragma: no cover - the name was just freed
        raise OSError(f"the blob store kept the sealed file as {saved}, not {name}")
    return len(rows)


def on_trace_stored(sender: Any, trace: Any, **kwargs: Any) -> None:
    index_trace(trace)


def on_trace_expired(sender: Any, trace: Any, **kwargs: Any) -> None:
    """Retention expired the trace: its personal values' ciphertexts go with its content (the
    index rows stay, as the tombstone does; a value then reads as erased)."""
    PersonalValue.objects.filter(trace=trace).update(nonce=None, ciphertext=None)


def reassemble(name: str, fh: IO[bytes]) -> IO[bytes]:
    """The stored file as uploaded (decompressed when it was gzip), personal values put back
    (streaming, seekable); an erased value reads as its marker. A file not sealed is
    returned as it is."""
    sha = name.rsplit("/", 1)[-1]
    sealed = SealedBlob.objects.filter(sha256=sha).first()
    if sealed is None:
        return fh
    values = list(
        PersonalValue.objects.filter(trace__blob__sha256=sha)
        .select_related("subject__key")
        .order_by("start")
    )
    cut_size = sealed.plain_size - sum(v.end - v.start for v in values)
    stored_size = fh.seek(0, io.SEEK_END)
    fh.seek(0)
    if stored_size != cut_size:  # not cut (yet): the original bytes
        return fh
    pieces: list[tuple[int, bytes]] = []
    erased = False
    keys: dict[int, bytes | None] = {}
    for v in values:
        if v.subject_id not in keys:
            keys[v.subject_id] = None if v.subject.erased_at is not None else subject_key(v.subject)
        key = keys[v.subject_id]
        if key is None or v.ciphertext is None:
            pieces.append((v.start, erased_mark(v.end - v.start)))
            erased = True
        else:
            pieces.append((v.start, raw_value(v, key)))
    expected = None if erased else sealed.plain_sha256
    return io.BufferedReader(Spliced(fh, pieces, sealed.plain_size, expected), 1 << 16)


def erased_fields(sha256: str) -> list[dict[str, str]]:
    """The fields of a stored file whose values are erased: [{location, path}]."""
    return [
        {"location": v.location, "path": v.path}
        for v in PersonalValue.objects.filter(
            trace__blob__sha256=sha256, subject__erased_at__isnull=False
        ).order_by("start")
    ]


def install_reader() -> None:
    from replay import storage

    if reassemble not in storage.BLOB_READERS:
        storage.BLOB_READERS.append(reassemble)
    if erased_fields not in storage.ERASED_FIELDS:
        storage.ERASED_FIELDS.append(erased_fields)
