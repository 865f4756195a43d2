"""Auditors' notes on a stored trace: TRACE_NOTE, append-only, in the ledger.

A note is one ledger event, so it is as append-only as the ledger (the database refuses an
update or a delete of an event; there is no service, view or endpoint that edits or removes a
note: a correction is a new note). Its payload names the trace by ``trace_id`` and
``file_sha256`` (``governance.evidence.REFERENCE_KEYS``), so retention never expires a noted
trace and the trace's evidence (``dsr.evidence.ledger_evidence``, the legal bundles)
carries its notes.

Personal data: the ledger cannot be erased, so the note text must never hold personal data.
The text goes in the payload (an auditor's note is evidence, and an evidence bundle checked
offline must carry what was written, not only a digest of it), and a note that quotes any
personal value of its trace still on record (the subject index, ``privacy.values``: the
values are decrypted on the server for the comparison only, never shown) is refused with
``NOTE_PERSONAL_DATA``: the auditor names the subject by its opaque ref (``subj_...``), as
every other payload does. Keeping the text in an erasable side table instead would leave the
ledger and the bundles with a digest nobody can read once erased, and the subject index could
still not tell whose data a free-text note holds; refusing keeps the design's one rule (a
payload never holds a personal value) checkable.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.ledger import codes
from governance import ledger
from governance.models import GovernanceEvent
from privacy.values import trace_plain_values
from replay.models import Trace

#: the longest note, in characters (after surrounding whitespace is stripped)
NOTE_MAX_CHARS = 2000
#: a personal value shorter than this is not looked for (a one-letter value would refuse
#: every note)
NOTE_VALUE_MIN_CHARS = 3

# --- messages (asserted verbatim in tests) ----------------------------------------------------
NOTE_EMPTY_MESSAGE = "a note needs some text"
NOTE_TOO_LONG_MESSAGE = "a note holds at most {limit} characters; this one has {length}"
NOTE_PERSONAL_DATA_MESSAGE = (
    "this note quotes a personal value of the trace, and the ledger cannot be erased: name "
    "the subject by their opaque ref (subj_...) instead"
)


def _quotes_personal_value(trace: Trace, text: str) -> bool:
    folded = text.casefold()
    values = {v.casefold() for v in trace_plain_values(trace.pk)}  # one e-mail, many events
    return any(len(value) >= NOTE_VALUE_MIN_CHARS and value in folded for value in values)


def note_text_check(*, trace: Trace, text: str) -> str:
    """The note's text as it would be recorded (stripped), or a ``GovernanceError``."""
    text = (text or "").strip()
    if not text:
        raise codes.GovernanceError(codes.NOTE_INVALID, NOTE_EMPTY_MESSAGE)
    if len(text) > NOTE_MAX_CHARS:
        raise codes.GovernanceError(
            codes.NOTE_INVALID,
            NOTE_TOO_LONG_MESSAGE.format(limit=NOTE_MAX_CHARS, length=len(text)),
        )
    if _quotes_personal_value(trace, text):
        raise codes.GovernanceError(codes.NOTE_PERSONAL_DATA, NOTE_PERSONAL_DATA_MESSAGE)
    return text


@transaction.atomic(durable=True)
def trace_note_add(*, trace: Trace, actor: Any, text: str) -> GovernanceEvent:
    """Append a TRACE_NOTE by ``actor`` on ``trace`` (the caller checked the roles matrix)."""
    text = note_text_check(trace=trace, text=text)
    return ledger.append(
        event_type=codes.TRACE_NOTE,
        payload={
            "trace_id": trace.trace_id,
            "file_sha256": trace.blob.sha256,
            "text": text,
        },
        actor=actor,
    )
