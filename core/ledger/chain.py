"""The governance ledger's hash chain: how an event is hashed and signed, and how a sequence
of stored events is verified. Pure: no Django, no clock, no I/O.

Definitions (the contract every stored event obeys)
---------------------------------------------------

An event's **body** is the JSON object of every stored field except the three that are derived
from it (``prev_hash``, ``hash``, ``server_signature``)::

    {"seq": int, "code": int, "type": str, "created_at": "YYYY-MM-DDTHH:MM:SS.ffffffZ",
     "actor_id": int | null, "actor": str, "payload": {...},
     "idempotency_key": str | null, "server_key_id": str,
     "actor_key_id": str | null, "actor_signature": str | null}

* ``hash = "sha256:" + hex(sha256(prev_hash_bytes + jcs(body)))`` where ``prev_hash_bytes`` is
  the ASCII of the previous event's ``hash`` string, and the empty string for ``seq`` 1
  (:data:`GENESIS_PREV_HASH`). ``jcs`` is RFC 8785 (``core.canonical.jcs``).
* ``server_signature`` is the Ed25519 signature, by the server key ``server_key_id``, of the
  ASCII bytes of ``hash`` (hex). The key must be effective at ``created_at``:
  ``valid_from <= created_at``, ``created_at <= valid_until`` (inclusive: the rotation event is
  the old key's last signature) and ``created_at < revoked_at``.
* ``actor_signature``, when present, is the Ed25519 signature by the member key
  ``actor_key_id`` of ``jcs(payload)`` (an approval: the payload *is* the signed approval).
* ``seq`` runs 1, 2, 3, ... with no gap, and ``prev_hash`` of each event equals the ``hash``
  of the one before.
* Server keys are introduced in the chain itself: the first server key announces itself in
  the ledger's first key event (``KEY_ADDED`` with ``payload.registry == "server"``); every
  later key is announced (``KEY_ADDED``/``KEY_ROTATED``) in an event signed by an already
  announced key, and the announced public key must equal the registry's. After
  ``KEY_ROTATED`` the old key signs nothing more; after ``KEY_REVOKED`` the revoked key
  signs nothing more. So swapping the registry's key for one of an attacker's fails.
* Member keys (admins' and council members' public keys) are announced in the chain too:
  ``KEY_ADDED`` with ``payload.registry == "member"`` names the key, its owner and its public
  key; a ``KEY_CONFIRMED`` by someone other than the owner makes it usable; after
  ``KEY_REVOKED`` it signs nothing more. An event's ``actor_key_id`` must be such a key of
  the event's actor, added and confirmed (and not revoked) by earlier events
  (:class:`MemberKeys`), and its ``actor_signature`` verifies with the public key the ledger
  announced, not with whatever the member key table holds now.

Every stored field is either in the body or derived from it, so changing any single field of
any event breaks verification at that event's ``seq`` (or, for ``seq`` itself, at the seq
that went missing).

Verification is split in two so it can run in parallel: :func:`check_row` needs only the row
and the keys (hash recomputation, key window, signatures); :class:`Linker` walks the rows in
order (gapless seq, prev_hash links, key announcements). The first broken seq is the smallest
seq either reports; at one seq the linker's finding is reported first.

A signed checkpoint can stand in for the server signatures it covers (:class:`Vouch`,
``check_row(signed_through=...)``): the caller believes such a walk only when the chain
verifies and the streamed events give the checkpoint's Merkle root and signatures digest, and
otherwise verifies again without it (docs/transparency.md).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from core.canonical import jcs
from core.ledger import codes
from core.ledger.signing import format_time, verify
from tlog import merkle

GENESIS_PREV_HASH: Final = ""
SERVER_REGISTRY: Final = "server"

#: the order of a stored row's fields, as the verifier reads them
FIELDS: Final = (
    "seq",
    "code",
    "type",
    "created_at",
    "actor_id",
    "actor_label",
    "payload",
    "idempotency_key",
    "server_key_id",
    "actor_key_id",
    "actor_signature",
    "prev_hash",
    "hash",
    "server_signature",
)
(
    _SEQ,
    _CODE,
    _TYPE,
    _CREATED,
    _ACTOR_ID,
    _ACTOR,
    _PAYLOAD,
    _IDEM,
    _SKEY,
    _AKEY,
    _ASIG,
    _PREV,
    _HASH,
    _SSIG,
) = range(len(FIELDS))

Row = Sequence[Any]

_KEY_ADDED = codes.code_of(codes.KEY_ADDED)
_KEY_ROTATED = codes.code_of(codes.KEY_ROTATED)
_KEY_REVOKED = codes.code_of(codes.KEY_REVOKED)
_KEY_CONFIRMED = codes.code_of(codes.KEY_CONFIRMED)
_KEY_CODES = frozenset((_KEY_ADDED, _KEY_ROTATED, _KEY_REVOKED, _KEY_CONFIRMED))
MEMBER_REGISTRY: Final = "member"
#: the events that make a member key's state: added, confirmed, revoked
MEMBER_KEY_CODES: Final = frozenset((_KEY_ADDED, _KEY_CONFIRMED, _KEY_REVOKED))
#: every key event: the earlier events that checking a later one depends on
KEY_EVENT_CODES: Final = _KEY_CODES


@dataclass(frozen=True, slots=True)
class ServerKey:
    """A server signing key as verification needs it (public half and effective window)."""

    key_id: str
    public_key: bytes
    valid_from: datetime
    valid_until: datetime | None = None
    revoked_at: datetime | None = None

    def window_problem(self, at: datetime) -> str | None:
        """Why this key cannot vouch for an event created at ``at``, or None if it can."""
        if at < self.valid_from:
            return f"key {self.key_id} is effective only from {format_time(self.valid_from)}"
        if self.valid_until is not None and at > self.valid_until:
            return f"key {self.key_id} was retired at {format_time(self.valid_until)}"
        if self.revoked_at is not None and at >= self.revoked_at:
            return f"key {self.key_id} was revoked at {format_time(self.revoked_at)}"
        return None


@dataclass(slots=True)
class MemberKeyState:
    """A member key as the ledger's key events say it is (never as its table row says)."""

    key_id: str
    user_id: int | None
    public_key: str
    fingerprint: str
    added_seq: int
    added_at: datetime
    confirmed_seq: int | None = None
    confirmed_at: datetime | None = None
    confirmed_by: int | None = None
    revoked_seq: int | None = None
    revoked_at: datetime | None = None
    revoked_by: int | None = None


@dataclass(slots=True)
class MemberKeys:
    """Member keys' states, fed the ledger's member key events in seq order.

    A key is announced by ``KEY_ADDED`` (``payload.registry == "member"``), usable once a
    ``KEY_CONFIRMED`` by someone other than its owner follows, and signs nothing after a
    ``KEY_REVOKED``. :meth:`feed` says what is wrong with an event that breaks these rules.
    """

    keys: dict[str, MemberKeyState] = field(default_factory=dict)

    def feed(
        self, seq: int, code: int, created_at: datetime, actor_id: int | None, payload: Any
    ) -> str | None:
        if not isinstance(payload, Mapping) or payload.get("registry") != MEMBER_REGISTRY:
            return None
        key_id = str(payload.get("key_id"))
        known = self.keys.get(key_id)
        if code == _KEY_ADDED:
            if known is not None:
                first = known.added_seq
                return f"event {seq} adds member key {key_id} again (added by event {first})"
            user_id = payload.get("user_id")
            self.keys[key_id] = MemberKeyState(
                key_id=key_id,
                user_id=user_id if isinstance(user_id, int) else None,
                public_key=str(payload.get("public_key", "")),
                fingerprint=str(payload.get("fingerprint", "")),
                added_seq=seq,
                added_at=created_at,
            )
            return None
        if code not in (_KEY_CONFIRMED, _KEY_REVOKED):
            return None
        action = "confirms" if code == _KEY_CONFIRMED else "revokes"
        if known is None:
            return f"event {seq} {action} member key {key_id}, which no earlier KEY_ADDED announced"
        if known.revoked_seq is not None:
            return f"event {seq} {action} member key {key_id}, revoked by event {known.revoked_seq}"
        if code == _KEY_REVOKED:
            known.revoked_seq, known.revoked_at, known.revoked_by = seq, created_at, actor_id
            return None
        if known.confirmed_seq is not None:
            return f"event {seq} confirms member key {key_id} again (event {known.confirmed_seq})"
        if actor_id is not None and actor_id == known.user_id:
            return f"event {seq} confirms member key {key_id} by its own owner"
        known.confirmed_seq, known.confirmed_at, known.confirmed_by = seq, created_at, actor_id
        return None

    def signer_problem(self, seq: int, key_id: str, actor_id: int | None) -> str | None:
        """Why member key ``key_id`` could not sign event ``seq`` for ``actor_id``, or None."""
        known = self.keys.get(key_id)
        signed = f"event {seq} is signed by member key {key_id}"
        if known is None:
            return f"{signed}, which no earlier KEY_ADDED announced"
        if known.user_id != actor_id:
            return f"{signed}, which event {known.added_seq} added for user {known.user_id}"
        if known.revoked_seq is not None:
            return f"{signed}, revoked by event {known.revoked_seq}"
        if known.confirmed_seq is None:
            return f"{signed}, which no earlier KEY_CONFIRMED confirmed"
        return None


@dataclass(frozen=True, slots=True)
class Break:
    """Where and why the chain is broken."""

    seq: int
    code: str
    reason: str
    expected: str | None = None
    observed: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "broke_at": self.seq,
            "code": self.code,
            "reason": self.reason,
            "expected": self.expected,
            "observed": self.observed,
        }


@dataclass(frozen=True, slots=True)
class ChainResult:
    ok: bool
    size: int
    head_hash: str
    genesis_hash: str
    broken: Break | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "size": self.size,
            "head_hash": self.head_hash,
            "genesis_hash": self.genesis_hash,
            "broke_at": None,
            "code": None,
            "reason": None,
            "expected": None,
            "observed": None,
        }
        if self.broken is not None:
            out.update(self.broken.as_dict())
        return out


def event_body(
    *,
    seq: int,
    code: int,
    type: str,
    created_at: datetime,
    actor_id: int | None,
    actor_label: str,
    payload: Mapping[str, Any],
    idempotency_key: str | None,
    server_key_id: str,
    actor_key_id: str | None,
    actor_signature: str | None,
) -> dict[str, Any]:
    """The hashed body of an event (see the module docstring)."""
    return {
        "seq": seq,
        "code": code,
        "type": type,
        "created_at": format_time(created_at),
        "actor_id": actor_id,
        "actor": actor_label,
        "payload": payload,
        "idempotency_key": idempotency_key,
        "server_key_id": server_key_id,
        "actor_key_id": actor_key_id,
        "actor_signature": actor_signature,
    }


#: the members of an event body that depend on the ledger's head (the event before it):
#: everything else can be written before the append lock is taken
HEAD_MEMBERS: Final = ("created_at", "seq", "server_key_id")


@dataclass(frozen=True, slots=True)
class BodyTemplate:
    """An event body's canonical bytes with the head's members left out: ``parts`` are the
    bytes between them, in jcs member order (:data:`HEAD_MEMBERS` sorted as jcs sorts)."""

    parts: tuple[bytes, ...]
    order: tuple[str, ...]

    def fill(self, *, seq: int, created_at: datetime, server_key_id: str) -> bytes:
        """``canonical(event_body(...))`` for these head members (a jcs object is its
        members' bytes joined, so the bytes written ahead are the bytes a whole body gives)."""
        late = {
            "created_at": canonical(format_time(created_at)),
            "seq": canonical(seq),
            "server_key_id": canonical(server_key_id),
        }
        out = [self.parts[0]]
        for name, part in zip(self.order, self.parts[1:], strict=True):
            out.append(late[name])
            out.append(part)
        return b"".join(out)


def body_template(
    *,
    code: int,
    type: str,
    actor_id: int | None,
    actor_label: str,
    payload: Mapping[str, Any],
    idempotency_key: str | None,
    actor_key_id: str | None,
    actor_signature: str | None,
) -> BodyTemplate:
    """The canonical bytes of :func:`event_body` but for :data:`HEAD_MEMBERS` (raises what
    jcs raises for the payload, before anything is locked or stored)."""
    body = event_body(
        seq=0,
        code=code,
        type=type,
        created_at=datetime(2000, 1, 1, tzinfo=UTC),
        actor_id=actor_id,
        actor_label=actor_label,
        payload=payload,
        idempotency_key=idempotency_key,
        server_key_id="",
        actor_key_id=actor_key_id,
        actor_signature=actor_signature,
    )
    parts: list[bytes] = []
    order: list[str] = []
    current = b"{"
    for i, name in enumerate(sorted(body)):  # every member name is ASCII: jcs order is this
        current += (b"," if i else b"") + canonical(name) + b":"
        if name in HEAD_MEMBERS:
            parts.append(current)
            order.append(name)
            current = b""
        else:
            current += canonical(body[name])
    parts.append(current + b"}")
    return BodyTemplate(tuple(parts), tuple(order))


_MAX_SAFE: Final = 2**53


def _plain(o: Any) -> bool:
    """Whether ``o`` is in the subset of JSON where orjson writes jcs's bytes exactly: no
    floats (their spellings differ), integers within I-JSON's ±2**53 (jcs refuses others),
    ASCII object keys (sorted alike), exact built-in types; strings are escaped alike for
    every code point (tests/governance/test_canonical.py), and a lone surrogate makes orjson
    raise, which sends the value to jcs."""
    t = type(o)
    if t is str or o is None or t is bool:
        return True
    if t is int:
        return -_MAX_SAFE <= o <= _MAX_SAFE
    if t is dict:
        return all(type(k) is str and k.isascii() and _plain(v) for k, v in o.items())
    if t is list:
        return all(_plain(v) for v in o)
    return False


def canonical(value: Any) -> bytes:
    """``jcs(value)`` (RFC 8785), written by orjson when the value is in the subset where the
    two give the same bytes (:func:`_plain`; about 15 times faster), else by ``jcs`` itself,
    which also raises what it raises. Hashing an event body is the bulk of verifying one."""
    try:
        if _plain(value):
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, RecursionError):  # a lone surrogate, too deep: jcs decides
        pass
    return jcs(value)


def event_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    """``"sha256:" + hex(sha256(prev_hash.encode("ascii") + jcs(body)))``."""
    return "sha256:" + hashlib.sha256(prev_hash.encode("ascii") + canonical(body)).hexdigest()


def row_body(row: Row) -> dict[str, Any]:
    return event_body(
        seq=row[_SEQ],
        code=row[_CODE],
        type=row[_TYPE],
        created_at=row[_CREATED],
        actor_id=row[_ACTOR_ID],
        actor_label=row[_ACTOR],
        payload=row[_PAYLOAD],
        idempotency_key=row[_IDEM],
        server_key_id=row[_SKEY],
        actor_key_id=row[_AKEY],
        actor_signature=row[_ASIG],
    )


def check_row(
    row: Row,
    server_keys: Mapping[str, ServerKey],
    actor_keys: Mapping[str, bytes] | None = None,
    signed_through: int = 0,
) -> Break | None:
    """The checks one event needs no neighbour for: hash, server key and both signatures.

    ``actor_keys`` maps member key ids to raw public keys; when it is None, actor signatures
    are not checked (they are still covered by the hash). The server signature of an event
    at or below ``signed_through`` is not checked here: a signed checkpoint vouches for it
    (:class:`Vouch`; the caller must then see :meth:`Vouch.agrees` before believing it).
    """
    seq = row[_SEQ]
    if isinstance(row[_PAYLOAD], str):  # streamed as JSON text (parallel verification)
        try:
            row = (*row[:_PAYLOAD], json.loads(row[_PAYLOAD]), *row[_PAYLOAD + 1 :])
        except ValueError as exc:
            return Break(seq, codes.CHAIN_MALFORMED, f"event {seq}'s payload is not JSON: {exc}")
    try:
        recomputed = event_hash(row[_PREV], row_body(row))
    except (TypeError, ValueError, AttributeError, UnicodeError) as exc:
        return Break(seq, codes.CHAIN_MALFORMED, f"event {seq} cannot be hashed: {exc}")
    stored = row[_HASH]
    if recomputed != stored:
        return Break(
            seq, codes.CHAIN_HASH, f"event {seq}'s hash does not recompute", recomputed, stored
        )
    key = server_keys.get(row[_SKEY])
    if key is None:
        return Break(
            seq, codes.CHAIN_KEY_UNKNOWN, f"event {seq} is signed by unknown key {row[_SKEY]!r}"
        )
    problem = key.window_problem(row[_CREATED])
    if problem is not None:
        return Break(
            seq,
            codes.CHAIN_KEY_WINDOW,
            f"event {seq} created at {format_time(row[_CREATED])}: {problem}",
        )
    if seq > signed_through and not verify(key.public_key, stored.encode("ascii"), row[_SSIG]):
        return Break(
            seq,
            codes.CHAIN_SIGNATURE,
            f"event {seq}'s server signature does not verify with key {key.key_id}",
            observed=row[_SSIG],
        )
    actor_key_id, actor_signature = row[_AKEY], row[_ASIG]
    if (actor_key_id is None) != (actor_signature is None):
        return Break(
            seq,
            codes.CHAIN_ACTOR_SIGNATURE,
            f"event {seq} has an actor key id or an actor signature without the other",
        )
    if actor_keys is not None and actor_signature is not None:
        public = actor_keys.get(actor_key_id)
        if public is None:
            return Break(
                seq,
                codes.CHAIN_ACTOR_SIGNATURE,
                f"event {seq} is signed by unknown member key {actor_key_id!r}",
            )
        if not verify(public, canonical(row[_PAYLOAD]), actor_signature):
            return Break(
                seq,
                codes.CHAIN_ACTOR_SIGNATURE,
                f"event {seq}'s actor signature does not verify with key {actor_key_id}",
                observed=actor_signature,
            )
    return None


def check_rows(
    rows: Iterable[Row],
    server_keys: Mapping[str, ServerKey],
    actor_keys: Mapping[str, bytes] | None = None,
    signed_through: int = 0,
) -> Break | None:
    """The first :func:`check_row` break among ``rows`` (in the order given), or None."""
    for row in rows:
        found = check_row(row, server_keys, actor_keys, signed_through)
        if found is not None:
            return found
    return None


# A verification worker process holds one key set, set once by the pool's initializer: the
# functions below are what ``governance.ledger.verify`` runs in its worker processes (they
# live here, in the pure core, so a spawned worker never imports Django).
_pool_keys: tuple[Mapping[str, ServerKey], Mapping[str, bytes] | None, int] | None = None


def pool_init(
    server_keys: Mapping[str, ServerKey],
    actor_keys: Mapping[str, bytes] | None,
    signed_through: int = 0,
) -> None:
    global _pool_keys  # noqa: PLW0603 - one key set per worker process, set once
    _pool_keys = (server_keys, actor_keys, signed_through)


def pool_check(rows: Iterable[Row]) -> Break | None:
    """:func:`check_rows` with the keys :func:`pool_init` set in this worker process."""
    if _pool_keys is None:
        raise RuntimeError("pool_check runs only in a process set up by pool_init")
    return check_rows(rows, _pool_keys[0], _pool_keys[1], _pool_keys[2])


# --- a signed checkpoint vouching for the server signatures it covers ---------------------------

#: the running digest of no signature (``signatures_digest`` of size 0)
SIGNATURES_DIGEST_START: Final = bytes(32)
SIGNATURES_CONTEXT: Final = b"replay-audit-console/server-signatures/v1\n"


def signatures_digest_step(digest: bytes, server_signature: Any) -> bytes:
    """The running digest after one more event: ``SHA-256(digest || ASCII(signature))``."""
    return hashlib.sha256(digest + str(server_signature).encode("utf-8")).digest()


def signatures_digest(signatures: Iterable[Any], start: bytes = SIGNATURES_DIGEST_START) -> bytes:
    """The running digest of events' ``server_signature`` fields, in seq order."""
    digest = start
    for signature in signatures:
        digest = signatures_digest_step(digest, signature)
    return digest


def signatures_message(size: int, root_hash: bytes, digest: bytes) -> bytes:
    """What the server key signs next to a checkpoint: the running digest of the server
    signatures of events 1..size, tied to that size and Merkle root."""
    return SIGNATURES_CONTEXT + f"{size}\n{root_hash.hex()}\n{digest.hex()}\n".encode("ascii")


@dataclass(slots=True)
class Vouch:
    """A signed checkpoint of ``size`` events (its note and its signatures digest already
    checked with a server key): fed every event through ``size`` in seq order, it says whether
    the events streamed are the ones the checkpoint covers, i.e. their hashes give its Merkle
    root and their server signatures give its digest. Only then do those events' server
    signatures need no Ed25519 check of their own (``check_row(signed_through=size)``)."""

    size: int
    root_hash: bytes
    digest: bytes
    key_id: str = ""
    _tree: merkle.RootBuilder = field(default_factory=merkle.RootBuilder)
    _seen: bytes = SIGNATURES_DIGEST_START

    def feed(self, row: Row) -> None:
        if self._tree.size >= self.size or row[_SEQ] != self._tree.size + 1:
            return  # past the checkpoint, or out of order (then it never agrees)
        event_hash = row[_HASH]
        leaf = event_hash.encode("utf-8") if isinstance(event_hash, str) else b""
        self._tree.append_hash(merkle.leaf_hash(leaf))
        self._seen = signatures_digest_step(self._seen, row[_SSIG])

    def agrees(self) -> bool:
        return (
            self._tree.size == self.size
            and self._tree.root() == self.root_hash
            and self._seen == self.digest
        )


@dataclass(slots=True)
class Linker:
    """The in-order checks: gapless seq, prev_hash links and server-key announcements."""

    server_keys: Mapping[str, ServerKey]
    next_seq: int = 1
    prev_hash: str = GENESIS_PREV_HASH
    genesis_hash: str = ""
    announced: dict[str, str] = field(default_factory=dict)
    retired: dict[str, int] = field(default_factory=dict)
    members: MemberKeys = field(default_factory=MemberKeys)
    broken: Break | None = None

    def feed(self, row: Row) -> Break | None:
        """Check the next row; the first break is kept and returned (later rows are ignored)."""
        if self.broken is not None:
            return self.broken
        seq = row[_SEQ]
        if seq != self.next_seq:
            self.broken = Break(
                self.next_seq,
                codes.CHAIN_SEQ,
                f"event {self.next_seq} is missing: the next stored event has seq {seq}",
                str(self.next_seq),
                str(seq),
            )
            return self.broken
        if row[_PREV] != self.prev_hash:
            self.broken = Break(
                seq,
                codes.CHAIN_PREV_HASH,
                f"event {seq}'s prev_hash is not event {seq - 1}'s hash",
                self.prev_hash,
                row[_PREV],
            )
            return self.broken
        payload = row[_PAYLOAD]
        if row[_CODE] in _KEY_CODES:
            if isinstance(payload, str):
                try:
                    payload = json.loads(payload)
                except ValueError:
                    payload = {}  # check_row reports the malformed payload at this seq
            if not isinstance(payload, dict):
                payload = {}
        self.broken = self._keys(row, payload) or self._member_keys(row, payload)
        if self.broken is not None:
            return self.broken
        if seq == 1:
            self.genesis_hash = row[_HASH]
        self.prev_hash = row[_HASH]
        self.next_seq = seq + 1
        return None

    def _member_keys(self, row: Row, payload: Any) -> Break | None:
        """Member key events follow their rules, and an actor signature is by a key that was
        added for that actor, confirmed by someone else and not revoked, all before it."""
        seq = row[_SEQ]
        problem = None
        if row[_CODE] in MEMBER_KEY_CODES:
            problem = self.members.feed(seq, row[_CODE], row[_CREATED], row[_ACTOR_ID], payload)
        if problem is None and row[_AKEY] is not None:
            problem = self.members.signer_problem(seq, row[_AKEY], row[_ACTOR_ID])
        return Break(seq, codes.CHAIN_MEMBER_KEY, problem) if problem is not None else None

    def _keys(self, row: Row, payload: Any) -> Break | None:
        seq, signer, code = row[_SEQ], row[_SKEY], row[_CODE]
        if not isinstance(payload, dict):
            payload = {}
        server_event = payload.get("registry") == SERVER_REGISTRY
        introduces = payload.get("key_id") if server_event and code == _KEY_ADDED else None
        if server_event and code == _KEY_ROTATED:
            introduces = payload.get("new_key_id")
        if signer in self.retired:
            return Break(
                seq,
                codes.CHAIN_KEY_UNANNOUNCED,
                f"event {seq} is signed by key {signer}, retired by event {self.retired[signer]}",
            )
        if signer not in self.announced and not (not self.announced and introduces == signer):
            return Break(
                seq,
                codes.CHAIN_KEY_UNANNOUNCED,
                f"event {seq} is signed by key {signer}, which no earlier key event introduced",
            )
        if introduces is not None:
            announced_public = str(payload.get("public_key", ""))
            registered = self.server_keys.get(str(introduces))
            if registered is None or registered.public_key.hex() != announced_public:
                return Break(
                    seq,
                    codes.CHAIN_KEY_UNANNOUNCED,
                    f"event {seq} announces key {introduces} with another public key than the"
                    " registry's",
                    registered.public_key.hex() if registered else None,
                    announced_public,
                )
            self.announced[str(introduces)] = announced_public
        if server_event and code == _KEY_ROTATED:
            self.retired[str(payload.get("old_key_id"))] = seq
        if server_event and code == _KEY_REVOKED:
            self.retired[str(payload.get("key_id"))] = seq
        return None

    def absorb(self, row: Row) -> None:
        """Take in an event verified earlier (before a verification mark) without checking it
        again: only what later events are checked against, its key and member key events."""
        payload = row[_PAYLOAD]
        if isinstance(payload, str):
            try:
                payload = json.loads(payload)
            except ValueError:
                payload = {}
        if not isinstance(payload, dict):
            payload = {}
        self._keys(row, payload)
        if row[_CODE] in MEMBER_KEY_CODES:
            self.members.feed(row[_SEQ], row[_CODE], row[_CREATED], row[_ACTOR_ID], payload)

    def result(self, first_local: Break | None = None) -> ChainResult:
        """The verdict, combining this walk with the first break :func:`check_row` found."""
        broken = self.broken
        if first_local is not None and (broken is None or first_local.seq < broken.seq):
            broken = first_local
        if broken is None:
            return ChainResult(True, self.next_seq - 1, self.prev_hash, self.genesis_hash)
        return ChainResult(False, self.next_seq - 1, self.prev_hash, self.genesis_hash, broken)


def verify_chain(
    rows: Iterable[Row],
    *,
    server_keys: Mapping[str, ServerKey],
    actor_keys: Mapping[str, bytes] | None = None,
) -> ChainResult:
    """Verify a whole ledger, rows in seq order, in one process; stops at the first break."""
    linker = Linker(server_keys)
    for row in rows:
        if linker.feed(row) is not None:
            break
        local = check_row(row, server_keys, actor_keys)
        if local is not None:
            return linker.result(local)
    return linker.result()


def resume_linker(
    key_rows: Iterable[Row],
    *,
    server_keys: Mapping[str, ServerKey],
    through_seq: int,
    head_hash: str,
    genesis_hash: str,
) -> Linker:
    """A :class:`Linker` that goes on after ``through_seq``, an event whose hash a signed
    verification mark vouches for: ``key_rows`` are the key events up to it (in seq order),
    the only earlier events the checks of later ones depend on."""
    linker = Linker(server_keys)
    for row in key_rows:
        linker.absorb(row)
    linker.next_seq = through_seq + 1
    linker.prev_hash = head_hash
    linker.genesis_hash = genesis_hash
    return linker


def verify_after(
    linker: Linker,
    rows: Iterable[Row],
    *,
    server_keys: Mapping[str, ServerKey],
    actor_keys: Mapping[str, bytes] | None = None,
) -> ChainResult:
    """Verify the events after a resumed linker's mark (rows in seq order); stops at the
    first break. ``result().size`` is the newest seq checked."""
    for row in rows:
        if linker.feed(row) is not None:
            break
        local = check_row(row, server_keys, actor_keys)
        if local is not None:
            return linker.result(local)
    return linker.result()
