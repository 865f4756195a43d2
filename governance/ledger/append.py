"""Serialised appends: an event drafted before the lock, sealed (hashed, signed, its Merkle
nodes worked out) under it, and written with its nodes in one statement.

Why appends cannot fork: every append runs inside a transaction that first takes one
ledger-wide lock and only then reads the head. On PostgreSQL that lock is a transaction-level
advisory lock (``pg_advisory_xact_lock``), held until commit, so the next writer reads the
head only after this one's event is visible. On SQLite the settings open every transaction
with ``BEGIN IMMEDIATE``, which takes the database write lock before the first read (a system
check refuses any other mode). ``seq`` is the primary key, so even a misconfigured writer
could only fail with an IntegrityError, never fork the chain.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Required, TypedDict, Unpack

from django.db import connection, transaction
from django.db.models import Field, Model
from django.dispatch import Signal
from django.utils import timezone

from core.ledger import chain, codes, signing
from governance import transparency
from governance.ledger.keys import (
    private_key_of,
    server_key_create,
    server_key_current,
    server_key_payload,
)
from governance.ledger.lock import ADVISORY_LOCK_ID, Head, head_row, lock
from governance.models import GovernanceEvent, MerkleNode, SigningKey

SYSTEM_ACTOR: Final = "system"

# PostgreSQL: the lock, the head and the Merkle tree's right edge read in one round trip (the
# simple query protocol runs the statements in order, and under READ COMMITTED each later one
# takes its snapshot after the first returned, i.e. after the lock was granted). Every round
# trip inside the lock is paid by every waiting writer, so this is the hot path worth
# shortening: with several writer processes, the edge this process kept from its own last
# append is stale for most appends, and reading it here saves the two queries
# ``transparency.nodes_for_append`` would make (the tree's size, then the edge).
_LOCK_AND_HEAD_SQL: Final = (
    f"SELECT pg_advisory_xact_lock({ADVISORY_LOCK_ID}); "  # noqa: S608 - a constant int
    "SELECT seq, hash, created_at, code, server_key_id FROM governance_governanceevent "
    "ORDER BY seq DESC LIMIT 1; "
    f"{transparency.EDGE_AFTER_HEAD_SQL}"
)


#: the fourth statement when an append carries idempotency keys: which are in the ledger
_KEYS_KNOWN_SQL: Final = (
    "; SELECT idempotency_key FROM governance_governanceevent WHERE idempotency_key = ANY(%s)"
)


def lock_and_head() -> Head | None:
    """Take the append lock, then read the head (one round trip on PostgreSQL, which also
    hands the tree's right edge after the head to ``transparency.edge_prefetched``)."""
    return _lock_head_and_keys([])[0]


def _lock_head_and_keys(
    keys: Sequence[str],
) -> tuple[Head | None, dict[str, GovernanceEvent]]:
    """:func:`lock_and_head`, and the events already in the ledger under these idempotency
    keys. On PostgreSQL which keys are known is read in the same round trip as the lock and
    the head (a retried append then reads its events in a second; a new one never does)."""
    if connection.vendor != "postgresql":
        lock()
        prev = head_row()
        return prev, _events_by_key(keys) if keys else {}
    if not connection.in_atomic_block:
        raise RuntimeError("ledger appends must run inside transaction.atomic()")
    with connection.cursor() as cur:
        if keys:
            cur.execute(_LOCK_AND_HEAD_SQL + _KEYS_KNOWN_SQL, [list(keys)])
        else:
            cur.execute(_LOCK_AND_HEAD_SQL)
        cur.cursor.nextset()
        found = cur.fetchone()
        cur.cursor.nextset()
        edge = cur.fetchall()
        known = []
        if keys:
            cur.cursor.nextset()
            known = [row[0] for row in cur.fetchall()]
    head = Head(*found) if found else None
    transparency.edge_prefetched(head.seq if head else 0, head.hash if head else "", edge)
    return head, _events_by_key(known) if known else {}


def _events_by_key(keys: Sequence[str]) -> dict[str, GovernanceEvent]:
    found = GovernanceEvent.objects.filter(idempotency_key__in=list(keys))
    return {str(e.idempotency_key): e for e in found}


_KEY_EVENTS: Final = frozenset(codes.code_of(t) for t in (codes.KEY_ADDED, codes.KEY_ROTATED))
_keys_by_id: dict[str, SigningKey] = {}


def _signing_key_after(prev: Head | None) -> SigningKey | None:
    """The key to sign the next event with: the head's signer, unless the head introduced a
    key (then ask the registry). Saves a query per append; keys are immutable once retired."""
    if prev is None or prev.code in _KEY_EVENTS:
        return server_key_current()
    key = _keys_by_id.get(prev.server_key_id)
    if key is None:
        key = SigningKey.objects.filter(key_id=prev.server_key_id).first()
        if key is None or key.valid_until is not None or key.revoked_at is not None:
            return server_key_current()
        _keys_by_id[key.key_id] = key
    return key


_COLUMNS: Final = chain.FIELDS
_INSERT_SQL: Final = (
    f"INSERT INTO governance_governanceevent ({', '.join(_COLUMNS)}) "  # noqa: S608
    f"VALUES ({', '.join(['%s'] * len(_COLUMNS))})"
)


_ROW_SQL: Final = f"({', '.join(['%s'] * len(_COLUMNS))})"


class Entry(TypedDict, total=False):
    """One event a caller asks for: the keyword arguments of :func:`append` and
    :func:`insert`, and each entry of :func:`append_many` (spelt here once)."""

    event_type: Required[str]
    payload: Required[Mapping[str, Any]]
    actor: Any
    actor_label: str | None
    actor_key_id: str | None
    actor_signature: str | None
    idempotency_key: str | None


_ENTRY_FIELDS: Final = frozenset(Entry.__annotations__)


@dataclass(frozen=True, slots=True, eq=False)
class _Draft:
    """An event as far as it can be written before the lock is taken: its type checked, its
    actor named, its payload as JSON text and its body's canonical bytes but for the members
    the head decides (``chain.BodyTemplate``). Every waiting writer pays for what is done
    under the lock, so this is done outside it, once per event (:meth:`of`)."""

    event_type: str
    code: int
    actor_id: int | None
    actor_label: str
    payload: dict[str, Any]
    payload_json: str
    idempotency_key: str | None
    actor_key_id: str | None
    actor_signature: str | None
    template: chain.BodyTemplate

    @classmethod
    def of(cls, entry: Mapping[str, Any], *, taker: str = "an append") -> _Draft:
        """What ``entry`` (an :class:`Entry`) is before it knows the head (no database
        access, no lock needed). ``taker`` names the caller in a refusal of its fields."""
        if set(entry) - _ENTRY_FIELDS or not Entry.__required_keys__ <= set(entry):
            raise TypeError(f"{taker} takes {sorted(_ENTRY_FIELDS)}: {dict(entry)}")
        event_type = entry["event_type"]
        if event_type not in codes.BY_NAME:
            raise codes.GovernanceError(
                codes.EVENT_TYPE_UNKNOWN, f"unknown governance event type {event_type!r}"
            )
        payload = dict(entry["payload"])
        actor = entry.get("actor")
        label = entry.get("actor_label") or (
            actor.get_username() if actor is not None else SYSTEM_ACTOR
        )
        code = codes.code_of(event_type)
        actor_id = actor.pk if actor is not None else None
        idempotency_key = entry.get("idempotency_key")
        actor_key_id = entry.get("actor_key_id")
        actor_signature = entry.get("actor_signature")
        # jcs refuses what it cannot write (NaN, huge integers...) before anything is stored
        template = chain.body_template(
            code=code,
            type=event_type,
            actor_id=actor_id,
            actor_label=label,
            payload=payload,
            idempotency_key=idempotency_key,
            actor_key_id=actor_key_id,
            actor_signature=actor_signature,
        )
        return cls(
            event_type=event_type,
            code=code,
            actor_id=actor_id,
            actor_label=label,
            payload=payload,
            payload_json=json.dumps(payload),  # what the JSONField would send
            idempotency_key=idempotency_key,
            actor_key_id=actor_key_id,
            actor_signature=actor_signature,
            template=template,
        )


@dataclass(slots=True, eq=False)
class _Prepared:
    """An event hashed and signed, ready to be written: its values, its payload as JSON text
    and the Merkle nodes it completes."""

    values: dict[str, Any]
    payload_json: str
    nodes: list[tuple[int, int, bytes]]

    @property
    def seq(self) -> int:
        return int(self.values["seq"])

    @property
    def hash(self) -> str:
        return str(self.values["hash"])

    @property
    def created_at(self) -> datetime:
        return self.values["created_at"]  # type: ignore[no-any-return]

    @property
    def code(self) -> int:
        return int(self.values["code"])

    @property
    def server_key_id(self) -> str:
        return str(self.values["server_key_id"])

    def params(self) -> list[Any]:
        """The INSERT parameters, as the model's fields prepare them."""
        return [
            _column(GovernanceEvent, name).get_db_prep_save(self.values[name], connection)
            for name in _COLUMNS
        ]

    def event(self) -> GovernanceEvent:
        event = GovernanceEvent(**self.values)
        event._state.adding = False
        event._state.db = connection.alias
        return event


def _prepare(*, prev: Any, draft: _Draft, key: SigningKey, created_at: datetime) -> _Prepared:
    """Hash and sign the drafted event after ``prev`` (a Head, an event or a _Prepared; None
    for the first) and work out the Merkle nodes it completes: only what depends on the
    head. Call only with the lock held."""
    seq = prev.seq + 1 if prev else 1
    prev_hash = prev.hash if prev else chain.GENESIS_PREV_HASH
    body = draft.template.fill(seq=seq, created_at=created_at, server_key_id=key.key_id)
    digest = "sha256:" + hashlib.sha256(prev_hash.encode("ascii") + body).hexdigest()
    values: dict[str, Any] = {
        "seq": seq,
        "code": draft.code,
        "type": draft.event_type,
        "created_at": created_at,
        "actor_id": draft.actor_id,
        "actor_label": draft.actor_label,
        "payload": draft.payload,
        "idempotency_key": draft.idempotency_key,
        "server_key_id": key.key_id,
        "actor_key_id": draft.actor_key_id,
        "actor_signature": draft.actor_signature,
        "prev_hash": prev_hash,
        "hash": digest,
        "server_signature": signing.sign(private_key_of(key), digest.encode("ascii")),
    }
    # the Merkle tree grows with the chain, in the same transaction, under the same lock
    new_nodes = transparency.nodes_for_append(
        prev_seq=seq - 1, prev_hash=prev_hash, seq=seq, event_hash=digest
    )
    return _Prepared(values, draft.payload_json, new_nodes)


def _column(model: type[Model], name: str) -> Field[Any, Any]:
    """The model field behind a column name (``actor_id`` is the ``actor`` foreign key)."""
    field = model._meta.get_field("actor" if name == "actor_id" else name)
    if not isinstance(field, Field):  # a relation's reverse side or a generic key
        raise TypeError(f"{model.__name__}.{name} is not a column")
    return field


def _unnest_insert_sql() -> str:
    """PostgreSQL: the events and their nodes inserted from one array per column (the
    payloads from one JSON array, joined on their position). One query text for any number
    of events and nodes: the driver parses and the server plans it once, where a VALUES list
    per batch size cost more than the rest of a batched append."""
    others = [name for name in _COLUMNS if name != "payload"]
    casts = ", ".join(
        f"%s::{_column(GovernanceEvent, name).db_type(connection)}[]" for name in others
    )
    picked = ", ".join("p.value" if name == "payload" else f"u.{name}" for name in _COLUMNS)
    node_casts = ", ".join(
        f"%s::{_column(MerkleNode, name).db_type(connection)}[]"
        for name in ("level", "index", "hash")
    )
    return (
        f"WITH event AS (INSERT INTO governance_governanceevent ({', '.join(_COLUMNS)}) "  # noqa: S608
        f"SELECT {picked} FROM unnest({casts}) WITH ORDINALITY AS u({', '.join(others)}, n) "
        "JOIN jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS p(value, n) USING (n)) "
        f'INSERT INTO governance_merklenode ("level", "index", "hash") '
        f"SELECT * FROM unnest({node_casts})"
    )


_unnest_sql: list[str] = []


def _write(prepared: Sequence[_Prepared], *, commit: bool = False) -> bool:
    """INSERT the events and their nodes: on PostgreSQL in one statement (one round trip
    under the lock, however many events). With ``commit`` (PostgreSQL, the caller's
    transaction being this append alone: :func:`append_and_commit`) the COMMIT goes in that
    round trip too. Returns whether it committed."""
    if not prepared:
        return False
    new_nodes = [node for p in prepared for node in p.nodes]
    if new_nodes and connection.vendor == "postgresql":
        if not _unnest_sql:
            _unnest_sql.append(_unnest_insert_sql())
        # the values as they are (what the fields would send on PostgreSQL: the driver adapts
        # ints, strings and aware datetimes); the payloads, JSON texts written before the
        # lock, as one JSON array: one string for the driver to quote, not an array of them
        # to escape element by element under the lock
        columns = [[p.values[name] for p in prepared] for name in _COLUMNS if name != "payload"]
        payloads = "[" + ",".join(p.payload_json for p in prepared) + "]"
        with connection.cursor() as cur:
            cur.execute(
                _unnest_sql[0] + ("; COMMIT" if commit else ""),
                [*columns, payloads, *([node[i] for node in new_nodes] for i in range(3))],
            )
        return commit
    events_sql = (
        _INSERT_SQL.split(" VALUES ", 1)[0] + " VALUES " + ", ".join([_ROW_SQL] * len(prepared))
    )
    with connection.cursor() as cur:
        cur.execute(events_sql, [value for p in prepared for value in p.params()])
    transparency.insert_nodes(new_nodes)
    return False


def insert(
    *, prev: Any, key: SigningKey, created_at: datetime, **entry: Unpack[Entry]
) -> GovernanceEvent:
    """Hash, sign and insert the event after ``prev`` (a Head or an event, None for the first).

    Call only with the lock held. One plain INSERT, and one for the Merkle nodes the event
    completes (``governance.transparency``): this is the hot path of every append.
    """
    draft = _Draft.of(entry, taker="insert")
    prepared = _prepare(prev=prev, draft=draft, key=key, created_at=created_at)
    _write([prepared])
    return prepared.event()


def values_row(values: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(name) for name in chain.FIELDS)


#: sent with ``event=`` after each event ``append`` adds (not for an idempotent retry), inside
#: the appender's transaction: a receiver that acts outside it defers to ``on_commit``
#: (``governance.requests.notify`` mails the people a new request waits for)
event_appended = Signal()


def append(**entry: Unpack[Entry]) -> GovernanceEvent:
    """Append one event inside the caller's transaction (the lock is held until it commits):
    :func:`append_many` with one entry.

    With an ``idempotency_key`` that is already in the ledger, the existing event is returned
    and nothing is appended: a retried task never appends twice.
    """
    # drafted before the lock: every waiting writer pays for what is done under it
    (event,) = _seal_and_write([_Draft.of(entry, taker="append")])
    return event


def append_many(entries: Sequence[Mapping[str, Any]]) -> list[GovernanceEvent]:
    """Append several events, in the order given, in one hold of the lock inside the caller's
    transaction: what :func:`append` does for each (the same hashing, signing, signer choice
    and idempotency), but one round trip for the lock and the head and one INSERT for all the
    events and their Merkle nodes (PostgreSQL), so a caller with several events to record
    makes the other writers wait once. Each entry takes :func:`append`'s keyword arguments.
    Returns one event per entry: an entry whose ``idempotency_key`` is already in the
    ledger, or earlier in the batch, gets that event and appends nothing."""
    drafts = [_Draft.of(entry, taker="an append_many entry") for entry in entries]
    return _seal_and_write(drafts)  # drafted before the lock, as append


def append_and_commit(entries: Sequence[Mapping[str, Any]]) -> list[GovernanceEvent]:
    """:func:`append_many` as a transaction of its own (durable: refused inside another), for
    a caller whose transaction is these appends and nothing else. On PostgreSQL the COMMIT
    then goes in the round trip of the INSERT, so the lock, released at commit, is held for
    one wake-up of this process less: every waiting writer waits that much less.
    ``event_appended`` is sent before that statement, inside the transaction as ever (the
    events are not yet in the table when a receiver runs; one that raises undoes them)."""
    drafts = [_Draft.of(entry, taker="an append_and_commit entry") for entry in entries]
    with transaction.atomic(durable=True):
        # not under a test's transaction: only a real outermost block commits here
        alone = connection.vendor == "postgresql" and len(connection.atomic_blocks) == 1
        return _seal_and_write(drafts, commit=alone)


def _seal_and_write(drafts: Sequence[_Draft], *, commit: bool = False) -> list[GovernanceEvent]:
    """Take the lock and read the head, then seal the drafts after it (each signed by the
    key :func:`_signing_key_after` picks, a new server key announced first when there is
    none) and write them; an idempotency key already in the ledger, or earlier in the batch,
    gets that event instead. ``event_appended`` is sent for each event appended (before the
    write when it commits too, so still inside the transaction)."""
    wanted = [d.idempotency_key for d in drafts if d.idempotency_key is not None]
    prev: Any
    prev, found = _lock_head_and_keys(wanted)
    if not drafts:
        return []
    known: dict[str, GovernanceEvent | _Prepared] = dict(found)
    now = timezone.now()
    # timestamps never run backwards along the chain, whatever the writers' clocks say
    created_at = max(now, prev.created_at) if prev else now
    prepared: list[_Prepared] = []
    picked: list[GovernanceEvent | _Prepared] = []
    for draft in drafts:
        idempotency_key = draft.idempotency_key
        if idempotency_key is not None and idempotency_key in known:
            picked.append(known[idempotency_key])
            continue
        key = _signing_key_after(prev)
        if key is None:
            key, _ = server_key_create(valid_from=created_at)
            announced = Entry(event_type=codes.KEY_ADDED, payload=server_key_payload(key))
            prev = _prepare(prev=prev, draft=_Draft.of(announced), key=key, created_at=created_at)
            prepared.append(prev)
        prev = _prepare(prev=prev, draft=draft, key=key, created_at=created_at)
        prepared.append(prev)
        picked.append(prev)
        if idempotency_key is not None:
            known[idempotency_key] = prev
    events = {p.seq: p.event() for p in prepared}
    if not commit:
        _write(prepared)
    asked = {id(p) for p in picked}
    for p in prepared:
        if id(p) in asked:  # not the server key's KEY_ADDED made on the way
            event_appended.send(sender=GovernanceEvent, event=events[p.seq])
    if commit:
        _write(prepared, commit=True)
    return [events[p.seq] if isinstance(p, _Prepared) else p for p in picked]
