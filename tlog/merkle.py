"""RFC 9162 §2.1 Merkle tree hashing, inclusion proofs and consistency proofs. Pure: no
Django, no I/O, no clock.

Hashes (SHA-256, 32 bytes):

* leaf: ``SHA-256(0x00 || leaf)``;
* node: ``SHA-256(0x01 || left || right)``;
* the empty tree: ``SHA-256()`` (the hash of the empty string).

Storage model. The only nodes ever stored are the roots of *perfect* subtrees: node
``(level, index)`` is the hash of leaves ``[index * 2**level, (index + 1) * 2**level)``; level 0
holds the leaf hashes. Such a node never changes once its last leaf is appended, so an
append-only store keeps them as they come (:func:`append_leaf` says which nodes an append
completes; it reads only the right edge of the tree). Every hash a root, an inclusion proof or
a consistency proof needs is a range of leaves that RFC 9162's recursion produces, and each
such range is a perfect node or a short right-to-left fold of perfect nodes
(:func:`range_nodes`), so a proof reads O(log n) stored nodes and never rebuilds the tree.

The functions that need hashes take a ``get(level, index) -> bytes`` callable; a database
store first fetches :func:`inclusion_nodes` / :func:`consistency_nodes` in one query and passes
``dict.__getitem__``.

Verification follows RFC 9162 §2.1.3.2 (inclusion) and §2.1.4.2 (consistency) step by step;
both take the proof as given and never raise on bad input, they return ``False``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Final

HASH_SIZE: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()

Get = Callable[[int, int], bytes]
NodeKey = tuple[int, int]


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def _check_range(start: int, end: int) -> None:
    if not 0 <= start < end:
        raise ValueError(f"not a non-empty range of leaves: [{start}, {end})")


# --- which stored nodes a range, a root or a proof needs ----------------------------------------


def range_nodes(start: int, end: int) -> list[NodeKey]:
    """The perfect nodes whose fold (as :func:`hash_range` does it) is ``MTH(D[start:end])``,
    left to right. RFC 9162 splits a range at the largest power of two smaller than its size,
    so every range its proofs use is a perfect node or a left perfect node and a shorter
    right range: O(log n) nodes. Any other range is folded the same way, down to leaves."""
    _check_range(start, end)
    n = end - start
    level = n.bit_length() - 1
    if n == 1 << level and start % n == 0:
        return [(level, start >> level)]
    k = _split(n)
    return range_nodes(start, start + k) + range_nodes(start + k, end)


def hash_range(start: int, end: int, get: Get) -> bytes:
    """``MTH(D[start:end])`` from stored perfect nodes."""
    _check_range(start, end)
    n = end - start
    level = n.bit_length() - 1
    if n == 1 << level and start % n == 0:
        return get(level, start >> level)
    k = _split(n)
    return node_hash(hash_range(start, start + k, get), hash_range(start + k, end, get))


def root(size: int, get: Get) -> bytes:
    """The tree hash of the first ``size`` leaves (``EMPTY_ROOT`` for 0)."""
    if size < 0:
        raise ValueError(f"a tree size is not negative: {size}")
    return EMPTY_ROOT if size == 0 else hash_range(0, size, get)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make ``PATH(index, D[0:size])``, in proof order (RFC 9162
    §2.1.3.1: the sibling nearest the leaf first)."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    ranges: list[tuple[int, int]] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    ranges.reverse()
    return ranges


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose hashes make ``PROOF(old_size, D[0:new_size])``, in proof order
    (RFC 9162 §2.1.4.1). Empty when ``old_size`` is 0 or equals ``new_size``."""
    if not 0 <= old_size <= new_size:
        raise ValueError(f"no consistency proof from size {old_size} to size {new_size}")
    if old_size in (0, new_size):
        return []
    ranges: list[tuple[int, int]] = []
    m, start, end, complete = old_size, 0, new_size, True
    while True:
        n = end - start
        if m == n:
            if not complete:
                ranges.append((start, end))
            break
        k = _split(n)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            m -= k
            start += k
            complete = False
    ranges.reverse()
    return ranges


def _nodes_of(ranges: Sequence[tuple[int, int]]) -> list[NodeKey]:
    seen: dict[NodeKey, None] = {}
    for start, end in ranges:
        for key in range_nodes(start, end):
            seen[key] = None
    return list(seen)


def inclusion_nodes(index: int, size: int) -> list[NodeKey]:
    """Every stored node :func:`inclusion_proof` reads (and the leaf itself)."""
    return _nodes_of([*inclusion_ranges(index, size), (index, index + 1)])


def consistency_nodes(old_size: int, new_size: int) -> list[NodeKey]:
    """Every stored node :func:`consistency_proof` reads."""
    return _nodes_of(consistency_ranges(old_size, new_size))


def root_nodes(size: int) -> list[NodeKey]:
    return [] if size == 0 else range_nodes(0, size)


# --- proofs ----------------------------------------------------------------------------------


def inclusion_proof(index: int, size: int, get: Get) -> list[bytes]:
    return [hash_range(start, end, get) for start, end in inclusion_ranges(index, size)]


def consistency_proof(old_size: int, new_size: int, get: Get) -> list[bytes]:
    return [hash_range(start, end, get) for start, end in consistency_ranges(old_size, new_size)]


def verify_inclusion(
    index: int, size: int, leaf_hash_: bytes, proof: Sequence[bytes], root_hash: bytes
) -> bool:
    """RFC 9162 §2.1.3.2."""
    if not 0 <= index < size or any(len(p) != HASH_SIZE for p in proof):
        return False
    fn, sn = index, size - 1
    r = leaf_hash_
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root_hash


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2, with the two cases it leaves to the caller settled as C2SP
    tlog-witness does: from size 0 the proof is empty (the empty tree is consistent with any
    tree), and between equal sizes it is empty and the roots are equal."""
    if not 0 <= old_size <= new_size or any(len(p) != HASH_SIZE for p in proof):
        return False
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # an exact power of two
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0


# --- appending -------------------------------------------------------------------------------


def append_leaf(size: int, leaf_hash_: bytes, get: Get) -> list[tuple[int, int, bytes]]:
    """The nodes ``(level, index, hash)`` that appending the leaf hash as leaf number ``size``
    (0-based) completes: the leaf itself, then each perfect node it closes. Reads only the
    left siblings on the right edge (at most log2(size) nodes)."""
    if size < 0:
        raise ValueError(f"a tree size is not negative: {size}")
    new = [(0, size, leaf_hash_)]
    level, index, current = 0, size, leaf_hash_
    while index & 1:
        current = node_hash(get(level, index - 1), current)
        level += 1
        index >>= 1
        new.append((level, index, current))
    return new


def append_nodes_needed(size: int) -> list[NodeKey]:
    """The stored nodes :func:`append_leaf` reads when appending leaf number ``size``."""
    keys: list[NodeKey] = []
    level, index = 0, size
    while index & 1:
        keys.append((level, index - 1))
        level += 1
        index >>= 1
    return keys


def right_edge(size: int) -> list[NodeKey]:
    """The last complete node of every level of a tree of ``size`` leaves: every node that
    appending leaves ``size``, ``size + 1``, ... reads before it writes the next one there."""
    return [(level, (size >> level) - 1) for level in range(size.bit_length())]


class MemoryTree:
    """A Merkle tree held in memory: the perfect nodes by level, grown one leaf at a time.
    For tools, tests and benches; the ledger keeps the same nodes in its database."""

    def __init__(self, leaves: Sequence[bytes] = ()) -> None:
        self.levels: list[list[bytes]] = [[]]
        for leaf in leaves:
            self.append(leaf)

    @property
    def size(self) -> int:
        return len(self.levels[0])

    def get(self, level: int, index: int) -> bytes:
        return self.levels[level][index]

    def append(self, leaf: bytes) -> None:
        self.append_hash(leaf_hash(leaf))

    def append_hash(self, hashed: bytes) -> None:
        for level, index, value in append_leaf(self.size, hashed, self.get):
            if level == len(self.levels):
                self.levels.append([])
            assert len(self.levels[level]) == index
            self.levels[level].append(value)

    def root(self, size: int | None = None) -> bytes:
        return root(self.size if size is None else size, self.get)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        return inclusion_proof(index, self.size if size is None else size, self.get)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        return consistency_proof(old_size, self.size if new_size is None else new_size, self.get)


class RootBuilder:
    """The root of a tree grown one leaf hash at a time, keeping only the roots of its perfect
    subtrees (O(log n) memory): how a verifier recomputes a checkpoint's root from a stream
    of leaves without storing the tree."""

    __slots__ = ("_stack", "size")

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[bytes] = []

    def append_hash(self, hashed: bytes) -> None:
        self._stack.append(hashed)
        self.size += 1
        # one merge per trailing one bit of the new size: the subtrees it completes
        merges = (self.size & -self.size).bit_length() - 1
        for _ in range(merges):
            right = self._stack.pop()
            self._stack[-1] = node_hash(self._stack[-1], right)

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        value = self._stack[-1]
        for left in reversed(self._stack[:-1]):
            value = node_hash(left, value)
        return value
