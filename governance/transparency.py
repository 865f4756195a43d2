"""The ledger as a transparency log: its RFC 9162 Merkle tree kept in ``MerkleNode`` rows,
C2SP checkpoints signed by the server key, inclusion and consistency proofs. The hashing and
the proof algorithms are the pure ``tlog`` package; this module stores and reads.

The leaf of event ``seq`` (leaf index ``seq - 1``) is the ASCII of the event's ``hash`` string
(``"sha256:" + 64 hex``, ``core.ledger.chain``): that hash is SHA-256 over the previous event's
hash and ``jcs`` of the event's body, so the leaf commits to every stored field of the event
and to its place in the chain. Leaf hash: ``SHA-256(0x00 || leaf)``.

Nodes are written by :func:`record_append`, which ``governance.ledger.insert`` calls with the
ledger lock held, so the tree grows with the chain in the same transaction: only the perfect
subtrees the new leaf completes are inserted (one INSERT), reading only the right edge, which
this process keeps between appends (keyed by the head's seq and hash, so a rolled back or
foreign append is never mistaken for ours). Events written in bulk around the service (a
migration backfill, the scale bench) are caught up by :func:`sync`.

A checkpoint (``tlog-checkpoint``) names the installation in its origin line
(``GOVERNANCE_TLOG_ORIGIN``) and is signed as a ``signed-note`` by the server key in use under
that same name: its verifier key string is :func:`verifier_keys`.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from core.ledger import chain, codes, signing
from governance import conf
from governance.models import GovernanceEvent, MerkleNode, SigningKey, TreeCheckpoint
from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes
from tlog import proof as proof_docs

DEFAULT_ORIGIN: Final = conf.DEFAULT_TLOG_ORIGIN
_INSERT_SQL: Final = 'INSERT INTO governance_merklenode ("level", "index", "hash") VALUES '

#: the right edge after the last append this process made: (seq, hash) -> {level: (index, hash)}
_edge: dict[tuple[int, str], dict[int, tuple[int, bytes]]] = {}
#: the nodes ``ledger.lock_and_head`` read with the head, under the lock: (seq, hash) ->
#: {(level, index): hash} (the right edge of a tree of ``seq`` leaves, and leaf ``seq`` if the
#: tree is longer than the chain); used once, by the append that follows
_prefetched: dict[tuple[int, str], dict[tuple[int, int], bytes]] = {}

#: the third statement of ``ledger.lock_and_head`` (PostgreSQL): with n the head's seq, the
#: nodes (level, (n >> level) - 1) of the right edge, and leaf n (present only when the tree
#: is longer than the chain)
EDGE_AFTER_HEAD_SQL: Final = (
    'SELECT m.level, m."index", m.hash FROM '
    "(SELECT coalesce(max(seq), 0) AS n FROM governance_governanceevent) AS h "
    "CROSS JOIN generate_series(0, 62) AS lv "
    'JOIN governance_merklenode m ON m.level = lv AND m."index" = (h.n >> lv) - 1 '
    "WHERE (h.n >> lv) > 0 "
    'UNION ALL SELECT m.level, m."index", m.hash FROM governance_merklenode m '
    'WHERE m.level = 0 AND m."index" = '
    "(SELECT coalesce(max(seq), 0) FROM governance_governanceevent)"
)


def edge_prefetched(seq: int, event_hash: str, rows: Iterable[tuple[int, int, Any]]) -> None:
    """Keep the nodes read with the head (see :data:`EDGE_AFTER_HEAD_SQL`) for the append
    after event ``seq``/``event_hash``."""
    _prefetched.clear()
    _prefetched[(seq, event_hash)] = {(level, index): bytes(h) for level, index, h in rows}


#: a new checkpoint checks the server signatures of at most this many events that no earlier
#: vouching checkpoint covers (the first checkpoint of a large ledger made before the digest
#: existed would otherwise take minutes): beyond it, it is stored without a digest and those
#: events keep verifying the old way until a checkpoint is made with a larger ``vouch_limit``
VOUCH_MAX_NEW: Final = 50_000

TREE_DISAGREES_MESSAGE = (
    "event {seq} is not leaf {index} of the Merkle tree: the ledger was rewritten or rolled "
    "back under its tree"
)


class ProofError(codes.GovernanceError):
    """A proof asked for sizes or a seq the tree does not have (``PROOF_RANGE``)."""

    def __init__(self, message: str) -> None:
        super().__init__(codes.PROOF_RANGE, message)


def origin() -> str:
    return conf.tlog_origin()


def leaf_of(event_hash: str) -> bytes:
    return event_hash.encode("ascii")


# --- the stored tree --------------------------------------------------------------------------


_NODES_SQL: Final = (
    'SELECT m.level, m."index", m.hash FROM unnest(%s::smallint[], %s::bigint[]) AS k(lv, ix) '
    'JOIN governance_merklenode m ON m.level = k.lv AND m."index" = k.ix'
)


def nodes(keys: Iterable[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
    """The stored nodes at ``keys`` (one query: on PostgreSQL one index lookup per key, no
    planning of a long OR)."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(_NODES_SQL, [[k[0] for k in wanted], [k[1] for k in wanted]])
            return {(level, index): bytes(value) for level, index, value in cur.fetchall()}
    query = Q()
    for level, index in wanted:
        query |= Q(level=level, index=index)
    return {
        (level, index): bytes(value)
        for level, index, value in MerkleNode.objects.filter(query).values_list(
            "level", "index", "hash"
        )
    }


def _getter(found: dict[tuple[int, int], bytes]) -> merkle.Get:
    def get(level: int, index: int) -> bytes:
        try:
            return found[(level, index)]
        except KeyError:
            raise ProofError(f"the Merkle tree has no node {level}/{index}") from None

    return get


def tree_size() -> int:
    last = (
        MerkleNode.objects.filter(level=0)
        .order_by("-index")
        .values_list("index", flat=True)
        .first()
    )
    return 0 if last is None else last + 1


def _insert(new: Sequence[tuple[int, int, bytes]]) -> None:
    if not new:
        return
    with connection.cursor() as cur:
        cur.execute(insert_sql(len(new)), [value for node in new for value in node])


def _edge_from_db(size: int) -> dict[int, tuple[int, bytes]]:
    """The right edge of the stored tree of ``size`` leaves: the nodes an append reads."""
    keys = merkle.right_edge(size)
    found = nodes(keys)
    return {
        level: (index, found[(level, index)]) for level, index in keys if (level, index) in found
    }


def _append(
    size: int, leaf_hash: bytes, edge: dict[int, tuple[int, bytes]]
) -> list[tuple[int, int, bytes]]:
    def get(level: int, index: int) -> bytes:
        at = edge.get(level)
        if at is None or at[0] != index:
            raise ProofError(f"the Merkle tree's right edge has no node {level}/{index}")
        return at[1]

    new = merkle.append_leaf(size, leaf_hash, get)
    for level, index, value in new:
        edge[level] = (index, value)
    return new


def record_append(*, prev_seq: int, prev_hash: str, seq: int, event_hash: str) -> None:
    """Add event ``seq`` (whose predecessor is ``prev_seq``/``prev_hash``) to the tree. Call
    with the ledger lock held, in the append's transaction."""
    insert_nodes(
        nodes_for_append(prev_seq=prev_seq, prev_hash=prev_hash, seq=seq, event_hash=event_hash)
    )


def insert_nodes(new: Sequence[tuple[int, int, bytes]]) -> None:
    _insert(new)


def insert_sql(count: int) -> str:
    """``INSERT`` of ``count`` nodes (``%s`` placeholders for level, index, hash each)."""
    return _INSERT_SQL + ", ".join(["(%s, %s, %s)"] * count)


def nodes_for_append(
    *, prev_seq: int, prev_hash: str, seq: int, event_hash: str
) -> list[tuple[int, int, bytes]]:
    """The nodes appending event ``seq`` (after ``prev_seq``/``prev_hash``) completes, for the
    caller to insert with the event (``governance.ledger.insert``: one round trip on
    PostgreSQL). Empty when the tree does not follow the chain (see below). Reads the database
    only when this process did not make the previous append."""
    edge = _edge.pop((prev_seq, prev_hash), None)
    read = _prefetched.pop((prev_seq, prev_hash), None)
    _prefetched.clear()
    if edge is None and read is not None and (0, prev_seq) not in read:
        keys = merkle.right_edge(prev_seq)
        if not prev_seq or (0, prev_seq - 1) in read:  # the tree is as long as the chain
            edge = {lv: (ix, read[(lv, ix)]) for lv, ix in keys if (lv, ix) in read}
            if prev_seq and edge.get(0) != (prev_seq - 1, merkle.leaf_hash(leaf_of(prev_hash))):
                _edge.clear()
                return []  # the history was replaced under the tree (as below)
    if edge is None:
        size = tree_size()
        if size > prev_seq:
            # the tree is longer than the chain: events were removed under it (a restored
            # backup, guards dropped). The append goes on; the tree, append-only, keeps the
            # longer history, and every proof or checkpoint now refuses (LEDGER_BROKEN).
            _edge.clear()
            return []
        if size < prev_seq:
            try:
                sync(upto_seq=prev_seq)
            except codes.GovernanceError:
                _edge.clear()
                return []  # the tree disagrees with the chain before the gap (see sync)
        edge = _edge_from_db(prev_seq)
        if prev_seq and edge.get(0) != (prev_seq - 1, merkle.leaf_hash(leaf_of(prev_hash))):
            # the tree's last leaf is not the chain's head: the same, the history was
            # replaced under the tree; it is not extended with the replacement
            _edge.clear()
            return []
    new = _append(seq - 1, merkle.leaf_hash(leaf_of(event_hash)), edge)
    _edge.clear()
    _edge[(seq, event_hash)] = edge
    return new


def sync(*, upto_seq: int | None = None, batch: int = 5000) -> int:
    """Add to the tree every event it does not have yet (through ``upto_seq``), in seq order.
    Returns how many leaves were added. Call inside a transaction that holds the ledger lock
    (or where nothing else appends, as in a migration). Refused (``LEDGER_BROKEN``) when the
    tree's last leaf is not the chain's event at that seq."""
    size = tree_size()
    _check_agrees(size)  # never extend a tree whose history is not the chain's
    edge = _edge_from_db(size)
    events = GovernanceEvent.objects.filter(seq__gt=size)
    if upto_seq is not None:
        events = events.filter(seq__lte=upto_seq)
    added = 0
    pending: list[tuple[int, int, bytes]] = []
    for seq, event_hash in (
        events.order_by("seq").values_list("seq", "hash").iterator(chunk_size=batch)
    ):
        if seq != size + added + 1:
            raise ProofError(f"the ledger has no event {size + added + 1}: cannot grow the tree")
        pending.extend(_append(seq - 1, merkle.leaf_hash(leaf_of(event_hash)), edge))
        added += 1
        if len(pending) >= batch:
            _insert(pending)
            pending = []
    _insert(pending)
    _edge.clear()
    return added


def root(size: int) -> bytes:
    if not 0 <= size <= tree_size():
        raise ProofError(f"the tree has no size {size}")
    return merkle.root(size, _getter(nodes(merkle.root_nodes(size))))


# --- proofs -----------------------------------------------------------------------------------


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


@dataclass(frozen=True)
class InclusionProof:
    seq: int
    tree_size: int
    leaf: str
    leaf_hash: bytes
    proof: list[bytes]
    root_hash: bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "leaf_index": self.seq - 1,
            "tree_size": self.tree_size,
            "leaf": self.leaf,
            "leaf_hash": b64(self.leaf_hash),
            "proof": [b64(p) for p in self.proof],
            "root_hash": b64(self.root_hash),
        }


@dataclass(frozen=True)
class ConsistencyProof:
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    proof: list[bytes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": b64(self.old_root),
            "new_root": b64(self.new_root),
            "proof": [b64(p) for p in self.proof],
        }


# PostgreSQL: the nodes and the event's hash in one round trip (level -1 marks the hash)
_NODES_AND_HASH_SQL: Final = (
    f"{_NODES_SQL} UNION ALL SELECT -1, e.seq, convert_to(e.hash, 'UTF8') "  # noqa: S608
    "FROM governance_governanceevent e WHERE e.seq = %s"
)


def _event_hash(seq: int) -> str:
    return str(GovernanceEvent.objects.filter(seq=seq).values_list("hash", flat=True).get())


def _nodes_and_hash(
    keys: Iterable[tuple[int, int]], seq: int
) -> tuple[dict[tuple[int, int], bytes], str | None]:
    """:func:`nodes`, and on PostgreSQL event ``seq``'s hash read with them (else None: the
    caller reads it). A proof served is then one query."""
    if connection.vendor != "postgresql":
        return nodes(keys), None
    wanted = sorted(set(keys))
    with connection.cursor() as cur:
        cur.execute(_NODES_AND_HASH_SQL, [[k[0] for k in wanted], [k[1] for k in wanted], seq])
        found = {(level, index): bytes(value) for level, index, value in cur.fetchall()}
    raw = found.pop((-1, seq), None)
    return found, raw.decode("ascii") if raw is not None else None


def inclusion(seq: int, size: int) -> InclusionProof:
    """Event ``seq`` is leaf ``seq - 1`` of the tree of ``size`` leaves."""
    # one query for every node, the tree's leaf size - 1 among them: there iff size <= the
    # tree's size (the tree is asked its size only to word a refusal)
    found, found_hash = (
        _nodes_and_hash(
            [*merkle.inclusion_nodes(seq - 1, size), *merkle.root_nodes(size), (0, size - 1)],
            seq,
        )
        if 1 <= seq <= size
        else ({}, None)
    )
    if (0, size - 1) not in found:
        have = tree_size()
        raise ProofError(f"no inclusion proof for event {seq} in a tree of size {size} (of {have})")
    index = seq - 1
    get = _getter(found)
    event_hash = found_hash if found_hash is not None else _event_hash(seq)
    leaf_hash = get(0, index)
    if leaf_hash != merkle.leaf_hash(leaf_of(event_hash)):
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN, TREE_DISAGREES_MESSAGE.format(seq=seq, index=index)
        )
    return InclusionProof(
        seq,
        size,
        event_hash,
        leaf_hash,
        merkle.inclusion_proof(index, size, get),
        merkle.root(size, get),
    )


def consistency(old_size: int, new_size: int) -> ConsistencyProof:
    found = (
        nodes(
            [
                *merkle.consistency_nodes(old_size, new_size),
                *merkle.root_nodes(old_size),
                *merkle.root_nodes(new_size),
                *([(0, new_size - 1)] if new_size else []),
            ]
        )
        if 0 <= old_size <= new_size
        else {}
    )
    if not 0 <= old_size <= new_size or (new_size and (0, new_size - 1) not in found):
        have = tree_size()
        raise ProofError(
            f"no consistency proof from size {old_size} to size {new_size} (of {have})"
        )
    get = _getter(found)
    return ConsistencyProof(
        old_size,
        new_size,
        merkle.root(old_size, get),
        merkle.root(new_size, get),
        merkle.consistency_proof(old_size, new_size, get),
    )


# --- checkpoints ------------------------------------------------------------------------------


def _signer(key: SigningKey) -> notes.Signer:
    from governance.ledger.keys import private_key_of

    return notes.Signer.from_seed(origin(), private_key_of(key))


def verifier_key(key: SigningKey) -> str:
    """The vkey of a server key under this installation's name."""
    return notes.Verifier.from_public_key(origin(), bytes.fromhex(key.public_key)).vkey


def verifier_keys() -> list[str]:
    """The vkeys of every server key still usable (the current one first)."""
    keys = SigningKey.objects.filter(revoked_at__isnull=True).order_by("-valid_from", "-id")
    return [verifier_key(k) for k in keys]


def _check_agrees(size: int) -> None:
    """The tree's leaf ``size - 1`` is event ``size``'s: the chain (each hash commits to all
    before it) and the tree then hold the same history up to ``size``."""
    if size == 0:
        return
    leaf = nodes([(0, size - 1)]).get((0, size - 1))
    event_hash = GovernanceEvent.objects.filter(seq=size).values_list("hash", flat=True).first()
    if leaf is None or event_hash is None or leaf != merkle.leaf_hash(leaf_of(event_hash)):
        raise codes.GovernanceError(
            codes.LEDGER_BROKEN, TREE_DISAGREES_MESSAGE.format(seq=size, index=size - 1)
        )


def checkpoint(
    size: int | None = None, *, vouch_limit: int | None = VOUCH_MAX_NEW
) -> TreeCheckpoint:
    """The signed checkpoint at ``size`` (the tree's whole size when None): the one stored, or
    a new one signed now by the server key in use and stored, with its signatures digest
    (:func:`signatures_digest`, checking at most ``vouch_limit`` newly covered signatures)."""
    from governance.ledger.keys import private_key_of, server_key_current
    from governance.ledger.lock import head_row, lock

    with transaction.atomic():
        if size is None:
            lock()
            head = head_row()
            if head is not None and tree_size() != head.seq:
                sync(upto_seq=head.seq)
            size = tree_size()
        have = tree_size()
        if not 0 <= size <= have:
            raise ProofError(f"no checkpoint at size {size}: the tree has {have} leaves")
        _check_agrees(size)
        root_hash = root(size)
        found = TreeCheckpoint.objects.filter(size=size).order_by("-id").first()
        if (
            found is not None
            and bytes(found.root_hash) == root_hash
            and (found.signatures_digest is not None or size == 0)
        ):
            return found
        key = server_key_current()
        if key is None:
            raise ProofError("no server key to sign a checkpoint with")
        body = checkpoints.Checkpoint(origin(), size, root_hash).body()
        note = notes.sign_note(body, [_signer(key)])
        digest = signatures_digest(size, limit=vouch_limit) if size else None
        if found is not None and bytes(found.root_hash) == root_hash and digest is None:
            return found  # nothing more to vouch for than the stored one does
        return TreeCheckpoint.objects.create(
            size=size,
            root_hash=root_hash,
            note=note.decode("utf-8"),
            key_id=key.key_id,
            created_at=timezone.now(),
            signatures_digest=digest,
            signatures_signature=(
                ""
                if digest is None
                else signing.sign(
                    private_key_of(key), chain.signatures_message(size, root_hash, digest)
                )
            ),
        )


# --- the checkpoint vouching for the server signatures (full verification) --------------------

#: how many of the newest checkpoints with a digest verification looks through
VOUCHES_LOOKED_AT: Final = 20


def vouch_of(cp: TreeCheckpoint, keys: dict[str, SigningKey] | None = None) -> chain.Vouch | None:
    """``cp`` as a :class:`chain.Vouch` when its note and its signatures digest verify with
    the (unrevoked) server key it names, else None. Two Ed25519 checks."""
    if cp.signatures_digest is None or not cp.signatures_signature:
        return None
    if keys is None:
        keys = {k.key_id: k for k in SigningKey.objects.filter(key_id=cp.key_id)}
    key = keys.get(cp.key_id)
    if key is None or key.revoked_at is not None:
        return None
    public = bytes.fromhex(key.public_key)
    try:
        opened, _ = checkpoints.open_checkpoint(
            cp.note.encode("utf-8"),
            [notes.Verifier.from_public_key(origin(), public)],
            origin=origin(),
        )
    except (notes.NoteError, checkpoints.CheckpointError):
        return None
    root_hash, digest = bytes(cp.root_hash), bytes(cp.signatures_digest)
    if opened.size != cp.size or opened.root_hash != root_hash:
        return None
    if not signing.verify(
        public, chain.signatures_message(cp.size, root_hash, digest), cp.signatures_signature
    ):
        return None
    return chain.Vouch(cp.size, root_hash, digest, cp.key_id)


def vouching_checkpoint(upto_size: int | None = None) -> chain.Vouch | None:
    """The largest checkpoint (of at most ``upto_size``) that vouches for the server
    signatures it covers, checked (:func:`vouch_of`); None when there is none."""
    keys = {k.key_id: k for k in SigningKey.objects.all()}
    found = TreeCheckpoint.objects.filter(signatures_digest__isnull=False, size__gt=0)
    if upto_size is not None:
        found = found.filter(size__lte=upto_size)
    for cp in found.order_by("-size", "-id")[:VOUCHES_LOOKED_AT]:
        vouch = vouch_of(cp, keys)
        if vouch is not None:
            return vouch
    return None


def signatures_digest(size: int, *, limit: int | None = VOUCH_MAX_NEW) -> bytes | None:
    """The running digest of the server signatures of events 1..``size``, going on from the
    largest vouching checkpoint below it and checking each newly covered signature (Ed25519,
    with the key it names, once in the event's life); None when one does not verify, an
    event is missing, or more than ``limit`` are new."""
    from governance.ledger.keys import server_keys

    start = vouching_checkpoint(size)
    done, digest = (start.size, start.digest) if start is not None else (0, None)
    if digest is None:
        digest = chain.SIGNATURES_DIGEST_START
    if limit is not None and size - done > limit:
        return None
    keys = server_keys()
    expected = done + 1
    for seq, event_hash, key_id, signature in (
        GovernanceEvent.objects.filter(seq__gt=done, seq__lte=size)
        .order_by("seq")
        .values_list("seq", "hash", "server_key_id", "server_signature")
        .iterator(chunk_size=5000)
    ):
        key = keys.get(key_id)
        if (
            seq != expected
            or key is None
            or not signing.verify(key.public_key, event_hash.encode("ascii"), signature)
        ):
            return None
        digest = chain.signatures_digest_step(digest, signature)
        expected += 1
    return digest if expected == size + 1 else None


def open_checkpoint(note: str | bytes) -> checkpoints.Checkpoint:
    """A checkpoint note verified with this installation's server keys."""
    raw = note.encode("utf-8") if isinstance(note, str) else note
    verifiers = [
        notes.Verifier.from_public_key(origin(), bytes.fromhex(k.public_key))
        for k in SigningKey.objects.all()
    ]
    cp, _ = checkpoints.open_checkpoint(raw, verifiers, origin=origin())
    return cp


# --- proof documents (checked offline by tlog.proof / python -m tlog) -------------------------


def inclusion_document(seq: int, size: int | None = None) -> dict[str, Any]:
    """Event ``seq``'s inclusion proof in the signed checkpoint at ``size`` (the newest)."""
    cp = checkpoint(size)
    return {
        "type": proof_docs.INCLUSION_TYPE,
        "checkpoint": cp.note,
        **inclusion(seq, cp.size).as_dict(),
    }


def consistency_document(old_size: int, new_size: int | None = None) -> dict[str, Any]:
    """The consistency proof from ``old_size`` to the signed checkpoint at ``new_size``."""
    cp = checkpoint(new_size)
    return {
        "type": proof_docs.CONSISTENCY_TYPE,
        "checkpoint": cp.note,
        **consistency(old_size, cp.size).as_dict(),
    }
