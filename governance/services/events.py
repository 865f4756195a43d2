"""Appending one event of any registered type to the ledger, signed by the server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.ledger import codes
from governance import ledger
from governance.models import GovernanceEvent
from governance.services.actors import _system_label

# --- messages (asserted verbatim in tests) ----------------------------------------------------
EVENT_TYPE_UNKNOWN_MESSAGE = "unknown governance event type {event_type!r}"


def event_append(
    *,
    event_type: str,
    payload: Mapping[str, Any],
    actor: Any = None,
    actor_label: str | None = None,
    idempotency_key: str | None = None,
) -> GovernanceEvent:
    """Append one event (signed by the server), as a transaction of its own (durable), and
    return it; idempotent per key."""
    if event_type not in codes.BY_NAME:
        raise codes.GovernanceError(
            codes.EVENT_TYPE_UNKNOWN, EVENT_TYPE_UNKNOWN_MESSAGE.format(event_type=event_type)
        )
    entry = ledger.Entry(
        event_type=event_type,
        payload=payload,
        actor=actor,
        actor_label=_system_label(actor, actor_label),
        idempotency_key=idempotency_key,
    )
    (event,) = ledger.append_and_commit([entry])
    return event


def events_append(entries: Sequence[Mapping[str, Any]]) -> list[GovernanceEvent]:
    """Append several events (each as :func:`event_append`'s keyword arguments) in one
    transaction of its own (durable) and one hold of the ledger lock
    (``ledger.append_and_commit``); idempotent per key."""
    checked = []
    for entry in entries:
        event_type = entry.get("event_type")
        if event_type not in codes.BY_NAME:
            raise codes.GovernanceError(
                codes.EVENT_TYPE_UNKNOWN, EVENT_TYPE_UNKNOWN_MESSAGE.format(event_type=event_type)
            )
        checked.append(
            {
                **entry,
                "actor_label": _system_label(entry.get("actor"), entry.get("actor_label")),
            }
        )
    return ledger.append_and_commit(checked)
