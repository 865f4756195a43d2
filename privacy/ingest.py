"""Indexing a stored file's personal values, and keeping them apart from its bytes at rest.

When a trace is stored (``replay.signals.trace_stored``) its personal values are found
(``core.privacy.rules``), each encrypted under its subject's key into a ``PersonalValue`` row,
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
import tempfile
from collections.abc import Callable
from typing import IO, Any

from django.conf import settings
from django.core.files import File

from core.errors import INTEGRITY_FAILURE, ReplayError
from core.privacy import crypto, rules
from core.privacy.spans import SpanError
from core.privacy.splice import Spliced
from privacy.models import PersonalValue, SealedBlob, Subject, values_of_file
from privacy.subjects import ref_for, subject_key, unwrap_key
from privacy.values import open_value, value_aad
from replay.prepared import Prepared

log = logging.getLogger("privacy")

GZIP_MAGIC = b"\x1f\x8b"
ERASED_MARK = b"[erased]"


def erased_mark(length: int) -> bytes:
    """What an erased value's span reads as: same length, so offsets hold."""
    return (ERASED_MARK + b"_" * length)[:length]


class _StoredSnapshots:
    """The stored snapshot bodies, read by id when a trace does not carry its own."""

    def get(self, snapshot_id: Any) -> Any:
        from replay.models import Snapshot

        row = Snapshot.objects.filter(snapshot_id=snapshot_id).only("body").first()
        return row.body if row is not None else None


def _stored_snapshots() -> Any:
    return _StoredSnapshots()


def found_in(trace: Any, plain: bytes) -> list[rules.Found]:
    """The personal values of a stored file's (decompressed) bytes, by the rules."""
    if trace.format == rules.NATIVE:
        jsonl = trace.encoding.startswith("jsonl")
        header = json.loads(plain.split(b"\n", 1)[0] if jsonl else plain)
        policy = rules.policy_of(header, _stored_snapshots())
        return rules.native_found(
            plain,
            "jsonl" if jsonl else "json",
            policy,
            settings.PRIVACY_SUBJECT_POINTERS,
            doc=None if jsonl else header,
        )
    subject, personal = rules.rule_of(settings.PRIVACY_PATH_RULES, trace.format)
    if not personal:
        return []
    return rules.ruled_found(plain, subject, personal)


def _scan_jsonl(source: IO[bytes], sink: IO[bytes]) -> tuple[list[rules.Found], Any, int]:
    """A native JSON Lines file, line by line (never whole in memory): its personal values,
    the cut file written to `sink`, and the whole file's SHA-256 and size."""
    digest = hashlib.sha256()
    offset = 0
    found: list[rules.Found] = []
    subject: list[str] = []
    personal: list[str] = []
    header_seen = False
    for line in source:
        digest.update(line)
        if not header_seen and line.strip():
            header_seen = True
            policy = rules.policy_of(json.loads(line), _stored_snapshots())
            subject, personal = rules.native_pointers(policy, settings.PRIVACY_SUBJECT_POINTERS)
        here = rules.native_line_found(line, offset, subject, personal) if personal else []
        pos = 0
        for f in sorted(here, key=lambda f: f.start):
            sink.write(line[pos : f.start - offset])
            pos = f.end - offset
        sink.write(line[pos:])
        found.extend(here)
        offset += len(line)
    return found, digest, offset


def _digest_of(opened: Callable[[], IO[bytes]]) -> str:
    digest = hashlib.sha256()
    with opened() as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def index_trace(trace: Any, opened: Callable[[], IO[bytes]] | None = None) -> int:
    """Index (and seal at rest) one stored trace; how many values. Once per blob.

    ``opened``: the uploaded bytes (at ingestion); without it the stored file is read, and
    one that does not hash to its name is left alone (logged)."""
    from replay.storage import blob_storage

    sha = trace.blob.sha256
    if SealedBlob.objects.filter(sha256=sha).exists():
        return 0
    storage = blob_storage()
    name = trace.blob.storage_name
    if opened is None:

        def opened() -> IO[bytes]:
            return storage.open(name, "rb")

        if _digest_of(opened) != sha:
            log.warning("privacy: trace %s not indexed: the stored file is not its digest", sha)
            return 0
    with tempfile.SpooledTemporaryFile(max_size=16 * 1024**2) as cut:
        with opened() as fh:
            is_gzip = fh.read(2) == GZIP_MAGIC
            fh.seek(0)
            source: IO[bytes] = gzip.GzipFile(fileobj=fh, mode="rb") if is_gzip else fh  # type: ignore[assignment]
            try:
                if trace.format == rules.NATIVE and trace.encoding.startswith("jsonl"):
                    found, digest, size = _scan_jsonl(source, cut)
                else:
                    plain = source.read()
                    found, digest, size = found_in(trace, plain), hashlib.sha256(plain), len(plain)
                    pos = 0
                    for f in sorted(found, key=lambda f: f.start):
                        cut.write(plain[pos : f.start])
                        pos = f.end
                    cut.write(plain[pos:])
            except (SpanError, ValueError) as exc:
                # a stored file the rules cannot read holds nothing they name; say so, not what
                log.warning("privacy: trace %s not indexed: %s", sha, type(exc).__name__)
                return 0
        if not found:
            return 0
        _store_values(trace, found)
        SealedBlob.objects.create(
            sha256=sha, gzip=is_gzip, plain_sha256=digest.hexdigest(), plain_size=size
        )
        cut.seek(0)
        if storage.exists(name):  # indexed after it was stored: replace it (needs deletes)
            storage.delete(name)
        saved = storage.save(name, File(cut))
    if saved != name:  # pragma: no cover - the name was just freed
        raise OSError(f"the blob store kept the sealed file as {saved}, not {name}")
    return len(found)


def _store_values(trace: Any, found: list[rules.Found]) -> None:
    """Each value sealed under its subject's key (the subject created on first sight)."""
    rows = []
    keys: dict[str, tuple[Subject, bytes]] = {}  # by identifier as found
    for f in found:
        if f.identifier not in keys:
            subject = Subject.objects.select_related("key").get(ref=ref_for(f.identifier))
            keys[f.identifier] = (subject, subject_key(subject))  # type: ignore[assignment]
        subject, key = keys[f.identifier]
        nonce, ct = crypto.seal(key, f.raw, value_aad(trace.pk, f.start))
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


def on_trace_stored(
    sender: Any, trace: Any, opened: Callable[[], IO[bytes]] | None = None, **kwargs: Any
) -> None:
    index_trace(trace, opened)


def on_trace_expired(sender: Any, trace: Any, **kwargs: Any) -> None:
    """Retention expired the trace: its personal values' ciphertexts go with its content (the
    index rows stay, as the tombstone does; a value then reads as erased)."""
    PersonalValue.objects.filter(trace=trace).update(nonce=None, ciphertext=None)


#: what reassembly reads, as tuples, compiled once (a page reads a file's values on every view)
_SEALED: Prepared[tuple[int, str]] = Prepared(
    lambda sha256: SealedBlob.objects.filter(sha256=sha256).values_list(
        "plain_size", "plain_sha256"
    )[:1],
    sha256=str,
)
_VALUES: Prepared[tuple[Any, ...]] = Prepared(
    lambda sha256: (
        values_of_file(sha256)
        .order_by("start")
        .values_list(
            "pk",
            "start",
            "end",
            "subject_id",
            "subject__erased_at",
            "subject__ref",
            "subject__key__wrapped",
            "trace_id",
            "nonce",
            "ciphertext",
        )
    ),
    sha256=str,
)


def reassemble(name: str, fh: IO[bytes]) -> IO[bytes]:
    """The stored file as uploaded (decompressed when it was gzip), personal values put back
    (streaming, seekable); an erased value reads as its marker. A file not sealed is
    returned as it is."""
    sha = name.rsplit("/", 1)[-1]
    sealed = _SEALED(sha256=sha)
    if not sealed:
        return fh
    plain_size, plain_sha256 = sealed[0]
    values = _VALUES(sha256=sha)
    cut_size = plain_size - sum(end - start for _pk, start, end, *_ in values)
    stored_size = fh.seek(0, io.SEEK_END)
    fh.seek(0)
    if stored_size != cut_size:  # not cut (yet): the original bytes
        return fh
    pieces: list[tuple[int, bytes]] = []
    erased = False
    keys: dict[int, bytes | None] = {}
    for pk, start, end, subject_id, erased_at, ref, wrapped, trace_pk, nonce, ciphertext in values:
        if subject_id not in keys:
            keys[subject_id] = None if erased_at is not None else unwrap_key(ref, wrapped)
        key = keys[subject_id]
        if key is None or ciphertext is None:
            pieces.append((start, erased_mark(end - start)))
            erased = True
        elif nonce is None:  # its bytes were shredded (values.raw_value's refusal)
            raise crypto.EnvelopeError(f"personal value {pk} holds no ciphertext")
        else:
            pieces.append((start, open_value(key, trace_pk, start, nonce, ciphertext)))
    expected = None if erased else plain_sha256

    def mismatch() -> Exception:
        return ReplayError(
            INTEGRITY_FAILURE,
            f"stored file {sha}: its bytes at rest changed (they no longer reassemble to the "
            "SHA-256 it was uploaded with)",
        )

    spliced = Spliced(fh, pieces, plain_size, expected, mismatch)
    return io.BufferedReader(spliced, 1 << 16)


def erased_fields(sha256: str) -> list[dict[str, str]]:
    """The fields of a stored file whose values are erased: [{location, path}]."""
    return [
        {"location": v.location, "path": v.path}
        for v in values_of_file(sha256).filter(subject__erased_at__isnull=False).order_by("start")
    ]


def install_reader() -> None:
    from replay import storage

    if reassemble not in storage.BLOB_READERS:
        storage.BLOB_READERS.append(reassemble)
    if erased_fields not in storage.ERASED_FIELDS:
        storage.ERASED_FIELDS.append(erased_fields)
