"""Retention holds of the DSR workflow: a trace that concerns a subject of an open (or in
progress) legal request is never expired (``governance.retention.hold_register``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsr import subjects_port
from dsr.models import LegalRequest

HOLD_MESSAGE = "concerns a subject of open legal request {request}"


def open_legal_requests(traces: Sequence[Any]) -> Mapping[int, str]:
    """``traces -> {trace pk: why it is kept}`` for the traces under an open legal request."""
    open_requests = list(
        LegalRequest.objects.filter(
            state__in=(LegalRequest.State.OPEN, LegalRequest.State.IN_PROGRESS)
        )
        .order_by("created_at")
        .values_list("id", "subject_refs")
    )
    if not open_requests or not traces:
        return {}
    by_ref: dict[str, Any] = {}
    for request_id, refs in open_requests:
        for ref in refs:
            by_ref.setdefault(ref, request_id)
    concerned = subjects_port.traces_concerning(list(by_ref), [t.pk for t in traces])
    return {
        pk: HOLD_MESSAGE.format(request=by_ref[sorted(refs)[0]]) for pk, refs in concerned.items()
    }
