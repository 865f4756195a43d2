"""The ledger's database machinery: serialised appends, the server key in use, streaming
(parallel) verification and checkpoints. Services and selectors call this module; the chain
rules themselves are in the pure ``governance.chain``.

Why appends cannot fork: every append runs inside a transaction that first takes one
ledger-wide lock and only then reads the head. On PostgreSQL that lock is a transaction-level
advisory lock (``pg_advisory_xact_lock``), held until commit, so the next writer reads the
head only after this one's event is visible. On SQLite the settings open every transaction
with ``BEGIN IMMEDIATE``, which takes the database write lock before the first read (a system
check refuses any other mode). ``seq`` is the primary key, so even a misconfigured writer
could only fail with an IntegrityError, never fork the chain.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db import connection
from django.db.models import Count, Field, Min, Model, Q
from django.dispatch import Signal
from django.utils import timezone

from governance import chain, codes, keystore, reconcile, signing, transparency
from governance.models import (
    KIND_FORCE_CONTINUE,
    KIND_HALT_CLEAR,
    KIND_PRODUCTION_REPLAY,
    KIND_ROLE_GRANT,
    ForceContinueRequest,
    GovernanceEvent,
    GovernedRequest,
    MemberKey,
    MerkleNode,
    ProductionReplayRequest,
    RoleGrantRequest,
    SigningKey,
    Vote,
)

#: an arbitrary constant naming the ledger's advisory lock ("gov-ledg")
ADVISORY_LOCK_ID: Final = 0x676F762D6C656467
SYSTEM_ACTOR: Final = "system"
SERVER_KEY_PREFIX: Final = "server"
#: below this many events verification stays in one process (spawning costs ~0.3 s)
PARALLEL_MIN_EVENTS: Final = 20_000

_private_keys: dict[str, bytes] = {}


def lock() -> None:
    """Take the ledger-wide append lock for the current transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("ledger appends must run inside transaction.atomic()")
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_ID])


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


def lock_and_head() -> Head | None:
    """Take the append lock, then read the head (one round trip on PostgreSQL, which also
    hands the tree's right edge after the head to ``transparency.edge_prefetched``)."""
    if connection.vendor != "postgresql":
        lock()
        return head_row()
    if not connection.in_atomic_block:
        raise RuntimeError("ledger appends must run inside transaction.atomic()")
    with connection.cursor() as cur:
        cur.execute(_LOCK_AND_HEAD_SQL)
        cur.cursor.nextset()
        found = cur.fetchone()
        cur.cursor.nextset()
        edge = cur.fetchall()
    head = Head(*found) if found else None
    transparency.edge_prefetched(head.seq if head else 0, head.hash if head else "", edge)
    return head


def head() -> GovernanceEvent | None:
    return GovernanceEvent.objects.order_by("-seq").first()


def server_key_current() -> SigningKey | None:
    return (
        SigningKey.objects.filter(valid_until__isnull=True, revoked_at__isnull=True)
        .order_by("-valid_from", "-id")
        .first()
    )


def private_key_of(key: SigningKey) -> bytes:
    raw = _private_keys.get(key.key_id)
    if raw is None:
        raw = keystore.decrypt_private_key(key.encrypted_private_key)
        _private_keys[key.key_id] = raw
    return raw


def server_key_create(*, valid_from: datetime) -> tuple[SigningKey, bytes]:
    """A new server key row (not yet announced in the ledger: the caller appends that)."""
    private = keystore.generate_private_key()
    public = signing.public_key_of(private)
    key = SigningKey.objects.create(
        key_id=signing.key_id_for(public, SERVER_KEY_PREFIX),
        public_key=public.hex(),
        fingerprint=signing.fingerprint(public),
        encrypted_private_key=keystore.encrypt_private_key(private),
        valid_from=valid_from,
    )
    _private_keys[key.key_id] = private
    return key, private


def server_key_payload(key: SigningKey, **extra: Any) -> dict[str, Any]:
    return {
        "registry": chain.SERVER_REGISTRY,
        "key_id": key.key_id,
        "public_key": key.public_key,
        "fingerprint": key.fingerprint,
        "valid_from": signing.format_time(key.valid_from),
        **extra,
    }


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


@dataclass(slots=True, eq=False)
class _Draft:
    """An event as far as it can be written before the lock is taken: its type checked, its
    actor named, its payload as JSON text and its body's canonical bytes but for the members
    the head decides (``chain.BodyTemplate``). Every waiting writer pays for what is done
    under the lock, so this is done outside it."""

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


def _draft(
    *,
    event_type: str,
    payload: Mapping[str, Any],
    actor: Any = None,
    actor_label: str | None = None,
    actor_key_id: str | None = None,
    actor_signature: str | None = None,
    idempotency_key: str | None = None,
) -> _Draft:
    """What an event is before it knows the head (no database access, no lock needed)."""
    if event_type not in codes.BY_NAME:
        raise codes.GovernanceError(
            codes.EVENT_TYPE_UNKNOWN, f"unknown governance event type {event_type!r}"
        )
    payload = dict(payload)
    label = actor_label or (actor.get_username() if actor is not None else SYSTEM_ACTOR)
    code = codes.code_of(event_type)
    actor_id = actor.pk if actor is not None else None
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
    return _Draft(
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


def _write(prepared: Sequence[_Prepared]) -> None:
    """INSERT the events and their nodes: on PostgreSQL in one statement (one round trip
    under the lock, however many events)."""
    if not prepared:
        return
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
                _unnest_sql[0],
                [*columns, payloads, *([node[i] for node in new_nodes] for i in range(3))],
            )
        return
    events_sql = (
        _INSERT_SQL.split(" VALUES ", 1)[0] + " VALUES " + ", ".join([_ROW_SQL] * len(prepared))
    )
    with connection.cursor() as cur:
        cur.execute(events_sql, [value for p in prepared for value in p.params()])
    transparency.insert_nodes(new_nodes)


def insert(
    *,
    prev: Any,
    event_type: str,
    payload: Mapping[str, Any],
    key: SigningKey,
    created_at: datetime,
    actor: Any = None,
    actor_label: str | None = None,
    actor_key_id: str | None = None,
    actor_signature: str | None = None,
    idempotency_key: str | None = None,
) -> GovernanceEvent:
    """Hash, sign and insert the event after ``prev`` (a Head or an event, None for the first).

    Call only with the lock held. One plain INSERT, and one for the Merkle nodes the event
    completes (``governance.transparency``): this is the hot path of every append.
    """
    draft = _draft(
        event_type=event_type,
        payload=payload,
        actor=actor,
        actor_label=actor_label,
        actor_key_id=actor_key_id,
        actor_signature=actor_signature,
        idempotency_key=idempotency_key,
    )
    prepared = _prepare(prev=prev, draft=draft, key=key, created_at=created_at)
    _write([prepared])
    return prepared.event()


def values_row(values: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(name) for name in chain.FIELDS)


#: sent with ``event=`` after each event ``append`` adds (not for an idempotent retry), inside
#: the appender's transaction: a receiver that acts outside it defers to ``on_commit``
#: (``governance.requests.notify`` mails the people a new request waits for)
event_appended = Signal()


def append(
    *,
    event_type: str,
    payload: Mapping[str, Any],
    actor: Any = None,
    actor_label: str | None = None,
    actor_key_id: str | None = None,
    actor_signature: str | None = None,
    idempotency_key: str | None = None,
) -> GovernanceEvent:
    """Append one event inside the caller's transaction (the lock is held until it commits).

    With an ``idempotency_key`` that is already in the ledger, the existing event is returned
    and nothing is appended: a retried task never appends twice.
    """
    draft = _draft(  # before the lock: every waiting writer pays for what is done under it
        event_type=event_type,
        payload=payload,
        actor=actor,
        actor_label=actor_label,
        actor_key_id=actor_key_id,
        actor_signature=actor_signature,
        idempotency_key=idempotency_key,
    )
    prev: Any = lock_and_head()
    if idempotency_key is not None:
        existing = GovernanceEvent.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    now = timezone.now()
    # timestamps never run backwards along the chain, whatever the writers' clocks say
    created_at = max(now, prev.created_at) if prev else now
    key = _signing_key_after(prev)
    prepared: list[_Prepared] = []
    if key is None:
        key, _ = server_key_create(valid_from=created_at)
        prev = _prepare(
            prev=prev,
            draft=_draft(event_type=codes.KEY_ADDED, payload=server_key_payload(key)),
            key=key,
            created_at=created_at,
        )
        prepared.append(prev)
    prepared.append(_prepare(prev=prev, draft=draft, key=key, created_at=created_at))
    _write(prepared)
    event = prepared[-1].event()
    event_appended.send(sender=GovernanceEvent, event=event)
    return event


_ENTRY_FIELDS: Final = frozenset(
    (
        "event_type",
        "payload",
        "actor",
        "actor_label",
        "actor_key_id",
        "actor_signature",
        "idempotency_key",
    )
)


def append_many(entries: Sequence[Mapping[str, Any]]) -> list[GovernanceEvent]:
    """Append several events, in the order given, in one hold of the lock inside the caller's
    transaction: what :func:`append` does for each (the same hashing, signing, signer choice
    and idempotency), but one round trip for the lock and the head and one INSERT for all the
    events and their Merkle nodes (PostgreSQL), so a caller with several events to record
    makes the other writers wait once. Each entry takes :func:`append`'s keyword arguments.
    Returns one event per entry: an entry whose ``idempotency_key`` is already in the
    ledger, or earlier in the batch, gets that event and appends nothing."""
    for entry in entries:
        unknown = set(entry) - _ENTRY_FIELDS
        if unknown or "event_type" not in entry or "payload" not in entry:
            raise TypeError(f"an append_many entry takes {sorted(_ENTRY_FIELDS)}: {dict(entry)}")
    drafts = [_draft(**entry) for entry in entries]  # before the lock, as append
    prev: Any = lock_and_head()
    if not entries:
        return []
    wanted = [e["idempotency_key"] for e in entries if e.get("idempotency_key") is not None]
    known: dict[str, GovernanceEvent | _Prepared] = (
        {e.idempotency_key: e for e in GovernanceEvent.objects.filter(idempotency_key__in=wanted)}
        if wanted
        else {}
    )
    now = timezone.now()
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
            prev = _prepare(
                prev=prev,
                draft=_draft(event_type=codes.KEY_ADDED, payload=server_key_payload(key)),
                key=key,
                created_at=created_at,
            )
            prepared.append(prev)
        prev = _prepare(prev=prev, draft=draft, key=key, created_at=created_at)
        prepared.append(prev)
        picked.append(prev)
        if idempotency_key is not None:
            known[idempotency_key] = prev
    _write(prepared)
    events = {p.seq: p.event() for p in prepared}
    asked = {id(p) for p in picked}
    for p in prepared:
        if id(p) in asked:  # not the server key's KEY_ADDED made on the way, as append
            event_appended.send(sender=GovernanceEvent, event=events[p.seq])
    return [events[p.seq] if isinstance(p, _Prepared) else p for p in picked]


# --- verification -----------------------------------------------------------------------------


def server_keys() -> dict[str, chain.ServerKey]:
    return {
        k.key_id: chain.ServerKey(
            key_id=k.key_id,
            public_key=bytes.fromhex(k.public_key),
            valid_from=k.valid_from,
            valid_until=k.valid_until,
            revoked_at=k.revoked_at,
        )
        for k in SigningKey.objects.all()
    }


def member_key_states(*, key_id: str | None = None) -> dict[str, chain.MemberKeyState]:
    """Member keys as the ledger's key events say they are (all of them, or one)."""
    events = GovernanceEvent.objects.filter(code__in=chain.MEMBER_KEY_CODES)
    if key_id is not None:
        events = events.filter(payload__key_id=key_id)
    keys = chain.MemberKeys()
    for seq, code, created_at, actor_id, payload in events.order_by("seq").values_list(
        "seq", "code", "created_at", "actor_id", "payload"
    ):
        keys.feed(seq, code, created_at, actor_id, payload)  # verify names what breaks a rule
    return keys.keys


def actor_keys() -> dict[str, bytes]:
    """Member public keys as the ledger announced them (not as the table holds them now)."""
    found: dict[str, bytes] = {}
    for key_id, state in member_key_states().items():
        try:
            found[key_id] = bytes.fromhex(state.public_key)
        except ValueError:
            continue  # an actor signature by this key is then named as unverifiable
    return found


def rows(
    *, chunk_size: int = 2000, after_seq: int = 0, upto_seq: int | None = None
) -> Iterator[tuple[Any, ...]]:
    """Every stored event (after ``after_seq``, through ``upto_seq``) as a tuple in
    ``chain.FIELDS`` order, streamed in seq order."""
    found = GovernanceEvent.objects.filter(seq__gt=after_seq)
    if upto_seq is not None:
        found = found.filter(seq__lte=upto_seq)
    return found.order_by("seq").values_list(*chain.FIELDS).iterator(chunk_size=chunk_size)


_SELECT_SQL: Final = (
    f"SELECT {', '.join(chain.FIELDS)} FROM governance_governanceevent ORDER BY seq"  # noqa: S608
)


def _raw_rows(chunk_size: int) -> Iterator[tuple[Any, ...]]:
    """PostgreSQL only: a server-side cursor with the payload left as JSON text.

    Half the cost per row of the ORM path; the payload is parsed by the worker processes
    (and here only for key events), so the streaming process stays out of their way.
    """
    from django.db import transaction

    with transaction.atomic():
        connection.ensure_connection()
        cur = connection.connection.cursor(name="governance_verify")
        cur.itersize = chunk_size
        try:
            cur.execute(_SELECT_SQL)
            yield from cur
        finally:
            cur.close()


def _counted(
    stream: Iterator[tuple[Any, ...]], progress: Callable[[int], None] | None, every: int
) -> Generator[tuple[Any, ...]]:
    """``stream`` as is, calling ``progress(rows so far)`` every ``every`` rows."""
    if progress is None:
        yield from stream
        return
    for seen, row in enumerate(stream, start=1):
        if seen % every == 0:
            progress(seen)
        yield row


def verify(
    *,
    workers: int | None = None,
    chunk_size: int = 2000,
    count: int | None = None,
    progress: Callable[[int], None] | None = None,
    progress_every: int | None = None,
    upto_seq: int | None = None,
    vouched: bool = True,
) -> chain.ChainResult:
    """Verify the whole stored ledger with the real rules of ``governance.chain``.

    Rows are streamed from the database; the in-order checks run here while the per-event
    checks (hash, signatures; the expensive part) run in ``workers`` processes. ``workers``
    defaults to the CPU count for ledgers of at least PARALLEL_MIN_EVENTS events, else 1, and
    is 1 in a daemonic process (a Celery worker's child). ``upto_seq`` (one process only)
    stops at that seq.

    With ``vouched`` (the default) the largest checkpoint that vouches for the server
    signatures it covers (``transparency.vouching_checkpoint``: its note and its signatures
    digest checked, one Ed25519 each) spares the Ed25519 check of every event it covers. That
    walk is believed only when the chain verifies, the checkpoint's key was announced in it,
    and the events streamed give the checkpoint's Merkle root and signatures digest
    (``chain.Vouch``); otherwise (a tamper anywhere, a checkpoint that disagrees) the ledger
    is verified again the old way, one server signature check per event, so every verdict,
    break and code is the old way's. ``progress`` then counts again from the start.
    """
    if upto_seq is not None:
        workers = 1
    keys, members = server_keys(), actor_keys()
    if workers is None:
        size = count if count is not None else GovernanceEvent.objects.count()
        workers = (os.cpu_count() or 1) if size >= PARALLEL_MIN_EVENTS else 1
    if workers > 1 and multiprocessing.current_process().daemon:
        # a Celery prefork child is daemonic and may not start processes ("daemonic processes
        # are not allowed to have children"): the background verification runs in this one
        workers = 1
    every = progress_every or chunk_size
    vouch = transparency.vouching_checkpoint(upto_seq) if vouched else None
    if vouch is not None:
        result, linker = _walk(
            keys,
            members,
            workers=workers,
            chunk_size=chunk_size,
            upto_seq=upto_seq,
            progress=progress,
            every=every,
            vouch=vouch,
        )
        if result.ok and vouch.agrees() and vouch.key_id in linker.announced:
            return result
    result, _linker = _walk(
        keys,
        members,
        workers=workers,
        chunk_size=chunk_size,
        upto_seq=upto_seq,
        progress=progress,
        every=every,
        vouch=None,
    )
    return result


def _walk(
    keys: Mapping[str, chain.ServerKey],
    members: Mapping[str, bytes],
    *,
    workers: int,
    chunk_size: int,
    upto_seq: int | None,
    progress: Callable[[int], None] | None,
    every: int,
    vouch: chain.Vouch | None,
) -> tuple[chain.ChainResult, chain.Linker]:
    """One verification pass (see :func:`verify`); with ``vouch``, the server signatures of
    the events it covers are left to it (the caller checks ``vouch.agrees()``)."""
    signed_through = vouch.size if vouch is not None else 0
    linker = chain.Linker(keys)
    if workers <= 1:
        for row in _counted(rows(chunk_size=chunk_size, upto_seq=upto_seq), progress, every):
            if vouch is not None:
                vouch.feed(row)
            if linker.feed(row) is not None:
                break
            local = chain.check_row(row, keys, members, signed_through)
            if local is not None:
                return linker.result(local), linker
        return linker.result(), linker
    first_local: chain.Break | None = None
    pending: deque[Future[chain.Break | None]] = deque()
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        workers,
        mp_context=context,
        initializer=chain.pool_init,
        initargs=(keys, members, signed_through),
    ) as pool:
        stream = (
            _raw_rows(chunk_size)
            if connection.vendor == "postgresql"
            else rows(chunk_size=chunk_size)
        )
        counted = _counted(stream, progress, every)
        with contextlib.closing(counted):  # an early stop must end the cursor's transaction
            while first_local is None and linker.broken is None:
                batch = list(itertools.islice(stream, chunk_size))
                if not batch:
                    break
                for row in batch:
                    if vouch is not None:
                        vouch.feed(row)
                    if linker.feed(row) is not None:
                        break
                pending.append(pool.submit(chain.pool_check, batch))
                while pending and (len(pending) > 2 * workers or pending[0].done()):
                    found = pending.popleft().result()
                    if found is not None:
                        first_local = found
                        break
        while first_local is None and pending:
            first_local = pending.popleft().result()
        for future in pending:
            future.cancel()
    return linker.result(first_local), linker


# --- the tables the decisions depend on --------------------------------------------------------


def _uuid_text(value: Any) -> str | None:
    return str(value) if value is not None else None


#: the column of ``reconcile.ApprovalRow`` a vote's request goes in, per kind
_VOTE_LINK = {
    KIND_FORCE_CONTINUE: "request_id",
    KIND_PRODUCTION_REPLAY: "production_id",
    KIND_ROLE_GRANT: "role_grant_id",
}


#: a kind of an app's whose votes name their subject as another request (a legal request's
#: approvals, ``legal-<purpose>``): the prefix before the purpose
_LEGAL_PREFIX = "legal-"


def _vote_row(r: tuple[Any, ...]) -> reconcile.ApprovalRow:
    request_id, kind, subject = _uuid_text(r[2]), r[3], r[4]
    links: dict[str, Any] = {"request_id": None, "production_id": None, "role_grant_id": None}
    halt_id = legal_request_id = purpose = None
    installed = installed_subject = None
    if kind in _VOTE_LINK:
        links[_VOTE_LINK[kind]] = request_id
    elif kind.startswith(_LEGAL_PREFIX):
        legal_request_id, purpose = subject, kind.removeprefix(_LEGAL_PREFIX)
    elif kind == KIND_HALT_CLEAR:
        halt_id = int(subject) if subject.isdigit() else subject
    else:  # an installed kind's (``installed_kinds``)
        installed, installed_subject = kind, subject
    return reconcile.ApprovalRow(
        id=r[0],
        event_id=r[1],
        halt_id=halt_id,
        approver_id=r[5],
        role=r[6],
        key_id=r[7],
        decision=r[8],
        payload=r[9],
        signature=r[10],
        legal_request_id=legal_request_id,
        purpose=purpose,
        kind=installed,
        subject=installed_subject,
        **links,
    )


def vote_rows(kinds: Iterable[str]) -> Iterator[reconcile.ApprovalRow]:
    """The votes on requests of these kinds, streamed in ``event_id`` order, as the table
    checks read them."""
    return (
        _vote_row(r)
        for r in Vote.objects.filter(request__kind__in=list(kinds))
        .order_by("event_id")
        .values_list(
            "id",
            "event_id",
            "request_id",
            "request__kind",
            "request__subject",
            "approver_id",
            "role",
            "key__key_id",
            "decision",
            "payload",
            "signature",
        )
        .iterator(chunk_size=2000)
    )


def installed_kinds() -> list[Any]:
    """The registered kinds of governed request that bring their own event types (an
    installed package's, ``KindCodes.event_types``): their filings, votes and approvals are
    events of those types, and their rows are checked here the one way every such kind is:

    - the filing (``codes.filed``) opens its ``governance_request`` row, whose subject is the
      filing payload's ``request_id`` and whose payload is the filing's;
    - each vote (``codes.vote``) has its ``governance_vote`` row, and names its request by
      its payload's ``request_id`` (with its ``decision`` and ``role``);
    - the row is approved exactly when an approval event (``codes.approved``, naming the
      request by ``request_id``) says so, with that event as its decision; else pending."""
    from governance.requests.builtin import kinds  # the kinds import the services

    return [kind for kind in kinds() if kind.codes.event_types]


def _approval_mismatches() -> Iterator[reconcile.Mismatch]:
    """The votes of every kind but the legal ones (which ``dsr`` checks) against the signed
    vote events."""
    installed = {codes.code_of(k.codes.vote): k.name for k in installed_kinds()}
    rows = vote_rows([*_VOTE_LINK, KIND_HALT_CLEAR, *installed.values()])
    events = vote_events([*reconcile.VOTE_CODES, *installed])
    yield from reconcile.approvals(rows, events, event_type_of, installed=installed)


def vote_events(codes_: Iterable[int]) -> Iterator[reconcile.VoteEvent]:
    """The events of these codes, streamed in seq order, as the table checks read them."""
    return (
        reconcile.VoteEvent(*e)
        for e in GovernanceEvent.objects.filter(code__in=list(codes_))
        .order_by("seq")
        .values_list(
            "seq", "code", "type", "actor_id", "actor_key_id", "actor_signature", "payload"
        )
        .iterator(chunk_size=2000)
    )


def event_type_of(seq: int) -> str | None:
    """The type of event ``seq``, or None when there is none."""
    return GovernanceEvent.objects.filter(seq=seq).values_list("type", flat=True).first()


def _member_key_mismatches() -> Iterator[reconcile.Mismatch]:
    rows = (
        reconcile.KeyRow(*r)
        for r in MemberKey.objects.order_by("id").values_list(
            "key_id",
            "user_id",
            "public_key",
            "fingerprint",
            "confirmed_at",
            "confirmed_by_id",
            "revoked_at",
            "revoked_by_id",
        )
    )
    yield from reconcile.member_keys(rows, member_key_states())


def _time_text(value: Any) -> str:
    return signing.format_time(value) if isinstance(value, datetime) else str(value)


def _as_text(value: Any) -> str:
    return str(value)


def _sorted(value: Any) -> Any:
    return sorted(value) if isinstance(value, list) else value


def _same(value: Any) -> Any:
    return value


#: per kind of council request, the terms its filing event signs besides expiry, reason and
#: requester: term (its payload key) -> (the row's column, how the row's value is spelled)
_RequestTerms = Mapping[str, tuple[str, Callable[[Any], Any]]]

_REQUEST_KINDS: Final[tuple[tuple[str, Any, _RequestTerms, str, str, str], ...]] = (
    (
        "force-continue",
        ForceContinueRequest,
        {
            "run_id": ("run_id", _as_text),
            "step": ("step", _same),
            "divergence_digest": ("divergence_digest", _same),
        },
        codes.FORCE_CONTINUE_REQUEST,
        codes.FORCE_CONTINUE_APPROVED,
        codes.FORCE_CONTINUE_REJECTED,
    ),
    (
        "production replay",
        ProductionReplayRequest,
        {"trace_sha256": ("trace__blob__sha256", _same)},
        codes.PRODUCTION_REPLAY_REQUEST,
        codes.PRODUCTION_REPLAY_APPROVED,
        codes.PRODUCTION_REPLAY_REJECTED,
    ),
    (
        "role grant",
        RoleGrantRequest,
        {"user_id": ("user_id", _same), "grant": ("roles", _sorted)},
        codes.ROLE_GRANT_REQUEST,
        codes.ROLE_GRANT_APPROVED,
        codes.ROLE_GRANT_REJECTED,
    ),
)


def _filed_terms(extra: _RequestTerms, actor_id: Any, payload: Any) -> dict[str, Any]:
    """What a filing event signed, in the shape of :func:`_request_rows`' terms."""
    p = payload if isinstance(payload, dict) else {}
    terms = {
        "expires_at": p.get("expires_at"),
        "reason": p.get("reason"),
        "requested_by": f"user {actor_id}",
        "payload": payload,
    }
    terms.update({term: p.get(term) for term in extra})
    return terms


def _request_rows(model: Any, extra: _RequestTerms) -> Iterator[reconcile.RequestRow]:
    """A council request table's rows with the terms their filing events signed."""
    columns = [column for column, _spell in extra.values()]
    for r in model.objects.order_by("created_at").values_list(
        "id",
        "state",
        "request_event_id",
        "decision_event_id",
        "expires_at",
        "reason",
        "requested_by_id",
        "payload",
        *columns,
    ):
        terms = {
            "expires_at": _time_text(r[4]),
            "reason": r[5],
            "requested_by": f"user {r[6]}",
            "payload": r[7],
        }
        terms.update(
            {
                term: spell(value)
                for (term, (_c, spell)), value in zip(extra.items(), r[8:], strict=True)
            }
        )
        yield reconcile.RequestRow(str(r[0]), r[1], r[2], r[3], terms)


def _request_mismatches() -> Iterator[reconcile.Mismatch]:
    for label, model, extra, filing, approved, rejected in _REQUEST_KINDS:
        filed: dict[str, reconcile.Filing] = {}
        decided: dict[str, tuple[int, str]] = {}
        outcome = {codes.code_of(approved): "approved", codes.code_of(rejected): "rejected"}
        wanted = [codes.code_of(filing), *outcome]
        for seq, code, actor_id, payload in (
            GovernanceEvent.objects.filter(code__in=wanted)
            .order_by("seq")
            .values_list("seq", "code", "actor_id", "payload")
            .iterator(chunk_size=2000)
        ):
            request_id = str(payload.get("request_id")) if isinstance(payload, dict) else ""
            if code in outcome:
                decided.setdefault(request_id, (seq, outcome[code]))
            elif request_id not in filed:
                filed[request_id] = reconcile.Filing(seq, _filed_terms(extra, actor_id, payload))
        yield from reconcile.requests(
            label=label,
            table=GovernedRequest._meta.db_table,  # what the filing and decision set
            rows=_request_rows(model, extra),
            filed=filed,
            decided=decided,
        )


def key_rows_through(seq: int) -> Iterator[tuple[Any, ...]]:
    """The key events up to ``seq``, in seq order: what checking later events depends on."""
    return (
        GovernanceEvent.objects.filter(seq__lte=seq, code__in=sorted(chain.KEY_EVENT_CODES))
        .order_by("seq")
        .values_list(*chain.FIELDS)
        .iterator(chunk_size=2000)
    )


def verify_after(
    *,
    through_seq: int,
    head_hash: str,
    genesis_hash: str,
    progress: Callable[[int], None] | None = None,
    chunk_size: int = 2000,
    progress_every: int | None = None,
    upto_seq: int | None = None,
) -> chain.ChainResult:
    """Verify only the events after ``through_seq`` (through ``upto_seq``, else the newest),
    whose hash a verification mark vouches for: the chain from that hash onward, with the
    key state the earlier key events set."""
    keys = server_keys()
    linker = chain.resume_linker(
        key_rows_through(through_seq),
        server_keys=keys,
        through_seq=through_seq,
        head_hash=head_hash,
        genesis_hash=genesis_hash,
    )
    return chain.verify_after(
        linker,
        _counted(
            rows(chunk_size=chunk_size, after_seq=through_seq, upto_seq=upto_seq),
            progress,
            progress_every or chunk_size,
        ),
        server_keys=keys,
        actor_keys=actor_keys(),
    )


#: table checks other apps add (``tables_register``): each yields its rows' mismatches
_TABLE_CHECKS: list[Callable[[], Iterable[reconcile.Mismatch]]] = []

#: the kinds of governed request whose row an event of another kind opens (no filing of their
#: own): kind -> the event type that opens it (other apps add theirs: ``opened_by_register``)
_OPENED_BY: dict[str, str] = {KIND_HALT_CLEAR: codes.FORCE_HALT_REPLAY}
_FILED_KINDS = (KIND_FORCE_CONTINUE, KIND_PRODUCTION_REPLAY, KIND_ROLE_GRANT)


def opened_by_register(kind: str, event_type: str) -> None:
    """An app's kind of governed request whose row ``event_type`` opens (a legal request's
    approvals: its ``DSR_OPENED``), so ``governance verify`` checks those rows too."""
    _OPENED_BY[kind] = event_type


#: the filed kinds' detail tables, joined 1:1 to ``governance_request``
_DETAIL_MODELS = {
    KIND_FORCE_CONTINUE: ForceContinueRequest,
    KIND_PRODUCTION_REPLAY: ProductionReplayRequest,
    KIND_ROLE_GRANT: RoleGrantRequest,
}


def _detail_mismatches() -> Iterator[reconcile.Mismatch]:
    """A filed kind's ``governance_request`` row with no row in its detail table: invisible
    to the filing check, which reads the two joined. One query for every kind."""
    table = GovernedRequest._meta.db_table
    orphaned = Q(pk__in=[])
    for kind, model in _DETAIL_MODELS.items():
        orphaned |= Q(kind=kind) & ~Q(pk__in=model.objects.values("pk"))
    for request_id, kind in (
        GovernedRequest.objects.filter(orphaned)
        .order_by("created_at", "id")
        .values_list("id", "kind")
    ):
        yield reconcile.Mismatch(
            codes.TABLE_REQUEST,
            table,
            str(request_id),
            f"{kind} request {request_id} is in the table but has no "
            f"{_DETAIL_MODELS[kind]._meta.db_table} row",
        )


#: vote event type -> how its payload names the governed request it votes on (kind, subject),
#: for the kinds whose row the first vote makes (no filing of their own)
_VOTED_ON: dict[str, Callable[[Mapping[str, Any]], tuple[str, str]]] = {
    codes.HALT_CLEAR_APPROVAL: lambda p: (KIND_HALT_CLEAR, str(p.get("halt_seq"))),
    codes.DSR_APPROVAL: lambda p: (f"legal-{p.get('purpose')}", str(p.get("request_id"))),
}


def _unrowed_votes(
    rows: Sequence[reconcile.GovernedRow],
    voted_on: Mapping[str, Callable[[Mapping[str, Any]], tuple[str, str]]],
) -> Iterator[reconcile.Mismatch]:
    """A signed vote on a halt clear, a legal approval or an installed kind's request whose
    request row is gone (``voted_on``: vote type -> how its payload names the request)."""
    have = {(r.kind, r.subject) for r in rows}
    named: set[tuple[str, str]] = set()
    for seq, type_, payload in (
        GovernanceEvent.objects.filter(code__in=[codes.code_of(t) for t in voted_on])
        .order_by("seq")
        .values_list("seq", "type", "payload")
        .iterator(chunk_size=2000)
    ):
        kind, subject = voted_on[type_](payload if isinstance(payload, dict) else {})
        if (kind, subject) in have or (kind, subject) in named:
            continue
        named.add((kind, subject))
        yield reconcile.Mismatch(
            codes.TABLE_REQUEST,
            GovernedRequest._meta.db_table,
            str(seq),
            f"ledger event {seq} ({type_}) is a vote on {kind} request {subject}, which is not "
            "in the table",
        )


def _unrowed_filings(
    rows: Sequence[reconcile.GovernedRow], installed: Sequence[Any]
) -> Iterator[reconcile.Mismatch]:
    """An installed kind's filing event whose request row is gone."""
    have = {(r.kind, r.subject) for r in rows}
    filed = {codes.code_of(k.codes.filed): k.name for k in installed}
    for seq, code, request_id in (
        GovernanceEvent.objects.filter(code__in=list(filed))
        .order_by("seq")
        .values_list("seq", "code", "payload__request_id")
        .iterator(chunk_size=2000)
    ):
        if (filed[code], str(request_id)) not in have:
            yield reconcile.Mismatch(
                codes.TABLE_REQUEST,
                GovernedRequest._meta.db_table,
                str(request_id),
                f"ledger event {seq} filed {filed[code]} request {request_id}, which is not in "
                "the table",
            )


def _voted_on_installed(name: str) -> Callable[[Mapping[str, Any]], tuple[str, str]]:
    return lambda p: (name, str(p.get("request_id")))


def _governed_mismatches() -> Iterator[reconcile.Mismatch]:
    """Every governed request row not filed by a request event of its own (halt clears, an
    app's kinds, an installed kind's, or a kind nothing files) against the event it names;
    every vote on such a request has its row; every filed kind's row has its detail row."""
    installed = installed_kinds()
    opened_by = {**_OPENED_BY, **{k.name: k.codes.filed for k in installed}}
    voted_on = {**_VOTED_ON, **{k.codes.vote: _voted_on_installed(k.name) for k in installed}}
    yield from _detail_mismatches()
    rows = [
        reconcile.GovernedRow(str(r[0]), *r[1:])
        for r in GovernedRequest.objects.exclude(kind__in=_FILED_KINDS)
        .order_by("created_at", "id")
        .values_list(
            "id", "kind", "subject", "payload", "state", "request_event_id", "decision_event_id"
        )
    ]
    yield from _unrowed_votes(rows, voted_on)
    yield from _unrowed_filings(rows, installed)
    if not rows:
        return
    openings = {
        seq: reconcile.Opening(seq, type_, payload)
        for seq, type_, payload in GovernanceEvent.objects.filter(
            seq__in={r.request_event_id for r in rows}
        ).values_list("seq", "type", "payload")
    }
    decided: dict[str, int] = {}
    for seq, halt_seq in (
        GovernanceEvent.objects.filter(code=codes.code_of(codes.FORCE_HALT_CLEAR))
        .order_by("seq")
        .values_list("seq", "payload__halt_seq")
    ):
        decided.setdefault(f"{KIND_HALT_CLEAR} {halt_seq}", seq)
    approvals = {codes.code_of(k.codes.approved): k.name for k in installed if k.codes.approved}
    for seq, code, request_id in (
        GovernanceEvent.objects.filter(code__in=list(approvals))
        .order_by("seq")
        .values_list("seq", "code", "payload__request_id")
    ):
        decided.setdefault(f"{approvals[code]} {request_id}", seq)
    yield from reconcile.governed_requests(
        rows=rows,
        openings=openings,
        opened_by=opened_by,
        decided=decided,
        table=GovernedRequest._meta.db_table,
    )


def tables_register(check: Callable[[], Iterable[reconcile.Mismatch]]) -> None:
    """Add an app's table check (its ``AppConfig.ready``): ``governance verify``, the ledger
    page's mark and the checkpoint check then name its rows too. Registered once."""
    if check not in _TABLE_CHECKS:
        _TABLE_CHECKS.append(check)


def _unknown_type_mismatches() -> Iterator[reconcile.Mismatch]:
    """One finding per event code neither this console nor an installed kind declares (the
    kind that appended them is not installed here): the chain verifies without knowing what
    an event means, but the rows such events decide cannot be reconciled, so it is named
    (its type, first seq and count) and the verdict is not ok. One query, on the code index."""
    for code, type_, first, count in (
        GovernanceEvent.objects.exclude(code__in=list(codes.BY_CODE))
        .values("code", "type")
        .annotate(first=Min("seq"), count=Count("seq"))
        .order_by("first")
        .values_list("code", "type", "first", "count")
    ):
        yield reconcile.Mismatch(
            codes.TABLE_EVENT_TYPE_UNKNOWN,
            GovernanceEvent._meta.db_table,
            str(first),
            f"{count} ledger event(s) from seq {first} are of type {type_} (code {code}), which "
            "neither this console nor an installed kind of governed request declares: the rows "
            "they decide are not reconciled",
        )


def tables_check() -> list[reconcile.Mismatch]:
    """Every row of the tables the decisions depend on that disagrees with the ledger, and
    every event type no installed kind declares."""
    found = [
        *_unknown_type_mismatches(),
        *_approval_mismatches(),
        *_member_key_mismatches(),
        *_request_mismatches(),
        *_governed_mismatches(),
    ]
    for check in _TABLE_CHECKS:
        found.extend(check())
    return found


def verify_all(*, workers: int | None = None) -> reconcile.Verdict:
    """The chain (:func:`verify`), then the tables checked against it."""
    return reconcile.Verdict(verify(workers=workers), tuple(tables_check()))


# --- checkpoints ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckpointVerdict:
    ok: bool
    code: str | None
    message: str
    checkpoint_size: int | None = None
    ledger_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "checkpoint_size": self.checkpoint_size,
            "ledger_size": self.ledger_size,
        }
