"""The ledger-wide lock every append (and a checkpoint of the whole tree) takes, and the
head: the newest event. On PostgreSQL the lock is a transaction-level advisory lock, held
until commit; on SQLite every transaction is ``BEGIN IMMEDIATE`` (see
:mod:`governance.ledger.append`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from django.db import connection

from governance.models import GovernanceEvent

#: an arbitrary constant naming the ledger's advisory lock ("gov-ledg")
ADVISORY_LOCK_ID: Final = 0x676F762D6C656467


def lock() -> None:
    """Take the ledger-wide append lock for the current transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("ledger appends must run inside transaction.atomic()")
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_ID])


def head() -> GovernanceEvent | None:
    return GovernanceEvent.objects.order_by("-seq").first()


@dataclass(frozen=True, slots=True)
class Head:
    """What an append needs to know about the newest event."""

    seq: int
    hash: str
    created_at: datetime
    code: int
    server_key_id: str


def head_row() -> Head | None:
    found = (
        GovernanceEvent.objects.order_by("-seq")
        .values_list("seq", "hash", "created_at", "code", "server_key_id")
        .first()
    )
    return Head(*found) if found else None
