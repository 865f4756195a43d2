"""The subject index: every trace, location and field that concerns a subject, by query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from privacy.models import PersonalValue


@dataclass(frozen=True)
class Hit:
    subject_ref: str
    trace_pk: int
    file_sha256: str
    trace_id: str
    format: str
    location: str  # "event 12", "document"
    path: str  # JSON pointer inside the location


def _hits(refs: Sequence[str]):
    return (
        PersonalValue.objects.filter(subject__ref__in=list(refs))
        .select_related("subject", "trace__blob")
        .order_by("trace_id", "start")
    )


def hit_of(value: PersonalValue) -> Hit:
    trace = value.trace
    return Hit(
        subject_ref=value.subject.ref,
        trace_pk=trace.pk,
        file_sha256=trace.blob.sha256,
        trace_id=trace.trace_id,
        format=trace.format,
        location=value.location,
        path=value.path,
    )


def find(refs: Sequence[str]) -> list[Hit]:
    """Every indexed field of the subjects `refs` name, by trace then place in the file;
    an erased subject's fields are still listed (their values are gone)."""
    if not refs:
        return []
    return [hit_of(v) for v in _hits(refs)]
