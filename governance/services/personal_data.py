"""Personal data: every reveal of unredacted personal data is logged in the ledger first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.ledger import codes
from governance import ledger
from governance.models import GovernanceEvent


def pii_access_record(
    *,
    actor: Any,
    trace_id: str,
    fields: Sequence[str],
    reason: str,
    context: str = "",
) -> GovernanceEvent:
    """Log that ``actor`` was shown unredacted personal data (call before showing it), as a
    transaction of its own (durable)."""
    entry = ledger.Entry(
        event_type=codes.PII_REVEALED,
        payload={
            "trace_id": trace_id,
            "fields": list(fields),
            "reason": reason,
            "context": context,
        },
        actor=actor,
    )
    (event,) = ledger.append_and_commit([entry])
    return event
