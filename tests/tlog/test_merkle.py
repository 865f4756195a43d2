"""RFC 9162 §2.1 against a second implementation written here straight from the RFC's
definitions (MTH, PATH, PROOF/SUBPROOF, recursive over the list of leaves), for every tree size
1-64, every leaf and every pair of sizes; and published vectors from other implementations."""

from __future__ import annotations

import base64
import hashlib

import pytest

from tlog import merkle

MAX = 64
LEAVES = [b"leaf %d" % i for i in range(MAX)]


# --- the reference: RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1, word for word ------------------------


def ref_mth(d: list[bytes]) -> bytes:
    n = len(d)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    n = len(d)
    if n == 1:
        return []
    k = ref_k(n)
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    n = len(d)
    if m == n:
        return [] if b else [ref_mth(d)]
    k = ref_k(n)
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def ref_proof(m: int, d: list[bytes]) -> list[bytes]:
    return ref_subproof(m, d, True)


TREE = merkle.MemoryTree(LEAVES)
ROOTS = {n: ref_mth(LEAVES[:n]) for n in range(MAX + 1)}


def getter(nodes: dict[tuple[int, int], bytes]) -> merkle.Get:
    return lambda level, index: nodes[(level, index)]


def flip(proof: list[bytes], i: int) -> list[bytes]:
    changed = bytearray(proof[i])
    changed[i % merkle.HASH_SIZE] ^= 0x01
    return [*proof[:i], bytes(changed), *proof[i + 1 :]]


# --- roots -----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", range(MAX + 1))
def test_it_computes_the_root_of_every_size_as_the_rfc_defines_it(size):
    assert TREE.root(size) == ROOTS[size]
    # a tree grown only to that size agrees with the bigger one's view of it
    assert merkle.MemoryTree(LEAVES[:size]).root() == ROOTS[size]


def test_it_hashes_leaves_and_nodes_with_their_domain_prefix():
    assert merkle.leaf_hash(b"") == bytes.fromhex(
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    )
    assert (
        merkle.node_hash(b"a" * 32, b"b" * 32)
        == hashlib.sha256(b"\x01" + b"a" * 32 + b"b" * 32).digest()
    )
    assert merkle.EMPTY_ROOT.hex() == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_it_stores_only_perfect_nodes_and_reads_a_root_from_at_most_log_n_of_them():
    # 64 leaves: 64 + 32 + 16 + 8 + 4 + 2 + 1 perfect nodes
    assert [len(level) for level in TREE.levels] == [64, 32, 16, 8, 4, 2, 1]
    assert merkle.root_nodes(63) == [(5, 0), (4, 2), (3, 6), (2, 14), (1, 30), (0, 62)]
    assert merkle.root_nodes(64) == [(6, 0)]


# --- inclusion -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", range(1, MAX + 1))
def test_it_proves_inclusion_of_every_leaf_as_the_rfc_defines_it(size):
    d = LEAVES[:size]
    for m in range(size):
        proof = TREE.inclusion_proof(m, size)
        assert proof == ref_path(m, d)
        assert merkle.verify_inclusion(m, size, merkle.leaf_hash(d[m]), proof, ROOTS[size])
        # the proof needs exactly the nodes inclusion_nodes names
        fetched = {key: TREE.get(*key) for key in merkle.inclusion_nodes(m, size)}
        assert merkle.inclusion_proof(m, size, getter(fetched)) == proof


@pytest.mark.parametrize("size", range(1, MAX + 1))
def test_it_refuses_every_tampered_inclusion_proof(size):
    d = LEAVES[:size]
    for m in range(size):
        proof = TREE.inclusion_proof(m, size)
        leaf = merkle.leaf_hash(d[m])
        root = ROOTS[size]
        for i in range(len(proof)):
            assert not merkle.verify_inclusion(m, size, leaf, flip(proof, i), root)
        assert not merkle.verify_inclusion(m, size, leaf, [*proof, root], root)
        if proof:
            assert not merkle.verify_inclusion(m, size, leaf, proof[:-1], root)
        if len(proof) > 1:
            assert not merkle.verify_inclusion(m, size, leaf, proof[::-1], root)
        assert not merkle.verify_inclusion(m, size, merkle.leaf_hash(b"other"), proof, root)
        assert not merkle.verify_inclusion(m, size, leaf, proof, ROOTS[size - 1])
        assert not merkle.verify_inclusion(size, size, leaf, proof, root)
        if size > 1:
            assert not merkle.verify_inclusion((m + 1) % size, size, leaf, proof, root)


def test_it_refuses_a_proof_for_a_leaf_outside_the_tree_and_malformed_hashes():
    assert not merkle.verify_inclusion(-1, 4, merkle.leaf_hash(b"x"), [], ROOTS[4])
    proof = TREE.inclusion_proof(1, 4)
    assert not merkle.verify_inclusion(
        1, 4, merkle.leaf_hash(LEAVES[1]), [*proof[:1], b"short"], ROOTS[4]
    )
    with pytest.raises(ValueError, match=r"^leaf 4 is not in a tree of size 4$"):
        merkle.inclusion_ranges(4, 4)


# --- consistency -----------------------------------------------------------------------------


@pytest.mark.parametrize("new", range(1, MAX + 1))
def test_it_proves_consistency_between_every_pair_of_sizes_as_the_rfc_defines_it(new):
    for old in range(1, new + 1):
        proof = TREE.consistency_proof(old, new)
        assert proof == ref_proof(old, LEAVES[:new])
        assert merkle.verify_consistency(old, new, ROOTS[old], ROOTS[new], proof)
        fetched = {key: TREE.get(*key) for key in merkle.consistency_nodes(old, new)}
        assert merkle.consistency_proof(old, new, getter(fetched)) == proof
    # from the empty tree: no proof needed
    assert TREE.consistency_proof(0, new) == []
    assert merkle.verify_consistency(0, new, merkle.EMPTY_ROOT, ROOTS[new], [])


@pytest.mark.parametrize("new", range(1, MAX + 1))
def test_it_refuses_every_tampered_consistency_proof(new):
    for old in range(1, new + 1):
        proof = TREE.consistency_proof(old, new)
        ok = (old, new, ROOTS[old], ROOTS[new])
        for i in range(len(proof)):
            assert not merkle.verify_consistency(*ok, flip(proof, i))
        assert not merkle.verify_consistency(*ok, [*proof, ROOTS[new]])
        if proof:
            assert not merkle.verify_consistency(*ok, proof[:-1])
        # another history: a root that is not the one at that size
        other = merkle.MemoryTree([*LEAVES[: old - 1], b"rewritten", *LEAVES[old:new]])
        assert not merkle.verify_consistency(old, new, ROOTS[old], other.root(), proof)
        assert not merkle.verify_consistency(old, new, other.root(old), ROOTS[new], proof)
        if old < new:
            assert not merkle.verify_consistency(old, new, ROOTS[old], ROOTS[new - 1], proof)
            assert not merkle.verify_consistency(old + 1, new, ROOTS[old + 1], ROOTS[new], proof)
            # a smaller tree is never consistent with a bigger one's root
            assert not merkle.verify_consistency(new, old, ROOTS[new], ROOTS[old], proof)


def test_it_settles_the_empty_tree_and_equal_sizes_as_tlog_witness_does():
    assert merkle.verify_consistency(5, 5, ROOTS[5], ROOTS[5], [])
    assert not merkle.verify_consistency(5, 5, ROOTS[5], ROOTS[4], [])
    assert not merkle.verify_consistency(5, 5, ROOTS[5], ROOTS[5], [ROOTS[5]])
    assert not merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, ROOTS[5], [ROOTS[5]])
    assert not merkle.verify_consistency(0, 5, ROOTS[1], ROOTS[5], [])
    assert merkle.verify_consistency(0, 0, merkle.EMPTY_ROOT, merkle.EMPTY_ROOT, [])
    with pytest.raises(ValueError, match=r"^no consistency proof from size 6 to size 5$"):
        merkle.consistency_ranges(6, 5)


# --- appending -------------------------------------------------------------------------------


def test_it_appends_by_reading_only_the_right_edge():
    assert merkle.append_nodes_needed(0) == []
    assert merkle.append_nodes_needed(7) == [(0, 6), (1, 2), (2, 0)]
    assert merkle.append_nodes_needed(8) == []
    tree = merkle.MemoryTree(LEAVES[:7])
    new = merkle.append_leaf(7, merkle.leaf_hash(LEAVES[7]), tree.get)
    assert [(level, index) for level, index, _ in new] == [(0, 7), (1, 3), (2, 1), (3, 0)]
    assert new[-1][2] == ROOTS[8]


def test_it_names_the_right_edge_every_later_append_reads():
    assert merkle.right_edge(0) == []
    assert merkle.right_edge(11) == [(0, 10), (1, 4), (2, 1), (3, 0)]
    for size in range(MAX):
        tree = merkle.MemoryTree(LEAVES[:size])
        # grow to MAX from the edge alone, as a store that loaded only these nodes does
        known = {key: tree.get(*key) for key in merkle.right_edge(size)}
        for i in range(size, MAX):
            for level, index, value in merkle.append_leaf(
                i, merkle.leaf_hash(LEAVES[i]), getter(known)
            ):
                known[(level, index)] = value
        assert known[(6, 0)] == ROOTS[MAX]


# --- other implementations' vectors ----------------------------------------------------------

# The RFC 6962 test tree used by Trillian and transparency-dev/merkle (its eight leaves and
# root at size 8 are in their testonly package).
RFC6962_LEAVES = [
    b"",
    b"\x00",
    b"\x10",
    b"\x20\x21",
    b"\x30\x31",
    b"\x40\x41\x42\x43",
    bytes(range(0x50, 0x58)),
    bytes(range(0x60, 0x70)),
]


def test_it_matches_the_rfc6962_test_tree_of_trillian():
    tree = merkle.MemoryTree(RFC6962_LEAVES)
    assert tree.root().hex() == "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"


def test_it_verifies_the_consistency_proof_of_the_transparency_dev_witness_tests():
    # github.com/transparency-dev/witness, witness/witness_test.go: mInit (size 5), mNext
    # (size 8) and consProof between them, made by transparency-dev/merkle.
    old = base64.b64decode("41smjBUiAU70EtKlT6lIOIYtRTYxYXsDB+XHfcvu/BE=")
    new = base64.b64decode("V8K9aklZ4EPB+RMOk1/8VsJUdFZR77GDtZUQq84vSbo=")
    proof = [
        bytes.fromhex("b9e1d62618f7fee8034e4c5010f727ab24d8e4705cb296c374bf2025a87a10d2"),
        bytes.fromhex("aac66cd7a79ce4012d80762fe8eec3a77f22d1ca4145c3f4cee022e7efcd599d"),
        bytes.fromhex("89d0f753f66a290c483b39cd5e9eafb12021293395fad3d4a2ad053cfbcfdc9e"),
        bytes.fromhex("29e40bb79c966f4c6fe96aff6f30acfce5f3e8d84c02215175d6e018a5dee833"),
    ]
    assert merkle.verify_consistency(5, 8, old, new, proof)
    for i in range(4):
        assert not merkle.verify_consistency(5, 8, old, new, flip(proof, i))


def test_the_streamed_root_is_the_tree_root_at_every_size():
    """RootBuilder (O(log n) memory) against the stored-node tree, sizes 0..130."""
    tree, streamed = merkle.MemoryTree(), merkle.RootBuilder()
    assert streamed.root() == merkle.EMPTY_ROOT
    for i in range(130):
        hashed = merkle.leaf_hash(b"leaf %d" % i)
        tree.append_hash(hashed)
        streamed.append_hash(hashed)
        assert (streamed.size, streamed.root()) == (tree.size, tree.root()), i
