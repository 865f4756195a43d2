"""Proof documents checked offline (tlog.proof): each way one can be wrong, named."""

from __future__ import annotations

import base64

import pytest

from tlog import checkpoint as checkpoints
from tlog import merkle, proof
from tlog import note as notes

LOG = notes.Signer.from_seed("console.example/ledger", bytes(range(32)))
TREE = merkle.MemoryTree([b"sha256:%064d" % i for i in range(13)])


def signed(size: int) -> str:
    body = checkpoints.Checkpoint(LOG.name, size, TREE.root(size)).body()
    return notes.sign_note(body, [LOG]).decode()


def inclusion(seq: int, size: int) -> dict:
    return {
        "type": proof.INCLUSION_TYPE,
        "checkpoint": signed(size),
        "seq": seq,
        "tree_size": size,
        "leaf": (b"sha256:%064d" % (seq - 1)).decode(),
        "proof": [base64.b64encode(p).decode() for p in TREE.inclusion_proof(seq - 1, size)],
    }


def consistency(old: int, new: int) -> dict:
    return {
        "type": proof.CONSISTENCY_TYPE,
        "checkpoint": signed(new),
        "old_size": old,
        "new_size": new,
        "proof": [base64.b64encode(p).decode() for p in TREE.consistency_proof(old, new)],
    }


def test_it_checks_an_inclusion_proof():
    cp = proof.check_inclusion(inclusion(5, 13), [LOG.verifier], origin=LOG.name)
    assert (cp.origin, cp.size) == (LOG.name, 13)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "x"}, "not an inclusion proof (type 'x')"),
        ({"tree_size": 12}, "the proof is for size 12, the checkpoint for 13"),
        ({"seq": 6}, "event 6 is not in the checkpoint's tree of size 13"),
        ({"proof": ["AAAA"]}, "event 5 is not in the checkpoint's tree of size 13"),
        ({"proof": ["%%"]}, "proof[0] is not base64"),
        ({"seq": -1}, "seq is not a non-negative integer"),
        ({"checkpoint": signed(13).replace("13\n", "12\n", 1)}, None),
    ],
)
def test_it_names_what_is_wrong_with_an_inclusion_proof(change, message):
    doc = {**inclusion(5, 13), **change}
    with pytest.raises(proof.ProofCheckError) as info:
        proof.check_inclusion(doc, [LOG.verifier])
    if message is not None:
        assert str(info.value) == message
    else:
        assert str(info.value).startswith("checkpoint: invalid signature for key")


def test_it_refuses_a_checkpoint_of_another_key_or_log():
    stranger = notes.Signer.from_seed(LOG.name, bytes(32))
    with pytest.raises(
        proof.ProofCheckError, match=r"^checkpoint: note has no verifiable signatures$"
    ):
        proof.check_inclusion(inclusion(5, 13), [stranger.verifier])
    with pytest.raises(
        proof.ProofCheckError,
        match=r"^checkpoint: checkpoint origin is 'console.example/ledger', not 'other'$",
    ):
        proof.check_inclusion(inclusion(5, 13), [LOG.verifier], origin="other")


def test_it_checks_that_a_newer_checkpoint_extends_a_kept_one():
    kept = signed(6)
    cp = proof.check_consistency(consistency(6, 13), kept, [LOG.verifier])
    assert cp.size == 13
    with pytest.raises(
        proof.ProofCheckError,
        match=r"^the proof is from size 5 to 13, the checkpoints are at 6 and 13$",
    ):
        proof.check_consistency(consistency(5, 13), kept, [LOG.verifier])
    forked = merkle.MemoryTree([b"other"] * 6)
    other = notes.sign_note(
        checkpoints.Checkpoint(LOG.name, 6, forked.root()).body(), [LOG]
    ).decode()
    with pytest.raises(
        proof.ProofCheckError,
        match=r"^the checkpoint at size 13 does not extend the one at size 6$",
    ):
        proof.check_consistency(consistency(6, 13), other, [LOG.verifier])
