"""A subject's personal values, decrypted only when the caller may reveal them."""

from __future__ import annotations

from collections.abc import Sequence

from core.privacy import crypto
from privacy.index import Hit, _hits, hit_of
from privacy.models import PersonalValue
from privacy.subjects import subject_key

REDACTED = "[redacted]"
ERASED = "[erased]"


def value_aad(trace_pk: int, start: int) -> bytes:
    return f"value:{trace_pk}:{start}".encode()


def raw_value(value: PersonalValue, key: bytes) -> bytes:
    """The value's bytes exactly as the file holds them (JSON string contents, escaped)."""
    if value.nonce is None or value.ciphertext is None:  # its bytes were shredded
        raise crypto.EnvelopeError(f"personal value {value.pk} holds no ciphertext")
    return open_value(key, value.trace_id, value.start, value.nonce, value.ciphertext)


def open_value(
    key: bytes, trace_pk: int, start: int, nonce: bytes | memoryview, ciphertext: bytes | memoryview
) -> bytes:
    """:func:`raw_value` from the value's columns (its ciphertext there)."""
    return crypto.open_sealed(key, bytes(nonce), bytes(ciphertext), value_aad(trace_pk, start))


def _decoded(raw: bytes) -> str:
    import json

    return json.loads(b'"' + raw + b'"')


def subject_values(refs: Sequence[str], *, reveal: bool) -> list[tuple[Hit, str]]:
    """Each indexed value: "[redacted]" unless `reveal`, "[erased]" once erased."""
    out: list[tuple[Hit, str]] = []
    keys: dict[int, bytes | None] = {}
    for value in _hits(refs).select_related("subject__key"):
        hit = hit_of(value)
        if value.ciphertext is None or value.subject.erased_at is not None:
            out.append((hit, ERASED))
            continue
        if not reveal:
            out.append((hit, REDACTED))
            continue
        if value.subject_id not in keys:
            keys[value.subject_id] = subject_key(value.subject)
        key = keys[value.subject_id]
        out.append((hit, ERASED if key is None else _decoded(raw_value(value, key))))
    return out


def trace_plain_values(trace_pk: int) -> list[str]:
    """The trace's personal values still readable (not erased), decrypted for a server-side
    comparison only: never shown, never logged (``governance.services.notes`` refuses a note
    quoting one)."""
    out: list[str] = []
    keys: dict[int, bytes | None] = {}
    rows = PersonalValue.objects.filter(trace_id=trace_pk, ciphertext__isnull=False)
    for value in rows.select_related("subject__key"):
        if value.subject.erased_at is not None:
            continue
        if value.subject_id not in keys:
            keys[value.subject_id] = subject_key(value.subject)
        key = keys[value.subject_id]
        if key is not None:
            out.append(_decoded(raw_value(value, key)))
    return out
