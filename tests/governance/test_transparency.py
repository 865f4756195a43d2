"""The ledger as a transparency log: the Merkle tree grown with every append, backfilled for
events written around it, C2SP checkpoints signed by the server key, and inclusion and
consistency proofs checked with the pure tlog package only."""

from __future__ import annotations

import base64
import importlib

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from core.ledger import codes
from governance import ledger, services, transparency
from governance.models import GovernanceEvent, MerkleNode, TreeCheckpoint
from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes

pytestmark = pytest.mark.django_db


def append(n: int) -> None:
    for i in range(n):
        services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": i})


def expected_tree() -> merkle.MemoryTree:
    """The tree as the docs define it, built in memory from the stored events."""
    hashes = GovernanceEvent.objects.order_by("seq").values_list("hash", flat=True)
    return merkle.MemoryTree([h.encode("ascii") for h in hashes])


def stored_nodes() -> dict[tuple[int, int], bytes]:
    return {
        (lv, ix): bytes(h) for lv, ix, h in MerkleNode.objects.values_list("level", "index", "hash")
    }


def memory_nodes(tree: merkle.MemoryTree) -> dict[tuple[int, int], bytes]:
    return {(lv, ix): h for lv, level in enumerate(tree.levels) for ix, h in enumerate(level)}


def test_it_grows_the_tree_with_every_append():
    append(13)  # 14 events: the server key's KEY_ADDED first

    tree = expected_tree()
    assert transparency.tree_size() == tree.size == 14
    assert stored_nodes() == memory_nodes(tree)
    for size in range(15):
        assert transparency.root(size) == tree.root(size)


def test_it_proves_every_event_and_every_pair_of_sizes_offline():
    append(11)
    tree = expected_tree()
    size = tree.size

    for seq in range(1, size + 1):
        for at in (seq, size):
            proof = transparency.inclusion(seq, at)
            leaf = merkle.leaf_hash(proof.leaf.encode("ascii"))
            assert proof.leaf == GovernanceEvent.objects.get(seq=seq).hash
            assert proof.leaf_hash == leaf
            assert proof.root_hash == tree.root(at)
            assert merkle.verify_inclusion(seq - 1, at, leaf, proof.proof, tree.root(at))
    for new in range(size + 1):
        for old in range(new + 1):
            proof = transparency.consistency(old, new)
            assert proof.proof == tree.consistency_proof(old, new)
            assert merkle.verify_consistency(old, new, proof.old_root, proof.new_root, proof.proof)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's round trips")
def test_an_inclusion_proof_is_served_with_one_query_on_postgresql():
    """The nodes and the event's hash are read together: at 1M events the second round trip
    was most of the time a proof took to serve."""
    append(6)
    tree = expected_tree()

    with CaptureQueriesContext(connection) as captured:
        proof = transparency.inclusion(3, 7)

    assert len(captured.captured_queries) == 1, [q["sql"][:80] for q in captured]
    assert proof.leaf == GovernanceEvent.objects.get(seq=3).hash
    assert proof.proof == tree.inclusion_proof(2, 7)
    assert proof.root_hash == tree.root(7)


def test_it_refuses_proofs_the_tree_cannot_give():
    append(2)
    with pytest.raises(
        transparency.ProofError,
        match=r"^PROOF_RANGE: no inclusion proof for event 4 in a tree of size 4 \(of 3\)$",
    ):
        transparency.inclusion(4, 4)
    with pytest.raises(
        transparency.ProofError,
        match=r"^PROOF_RANGE: no inclusion proof for event 3 in a tree of size 2 \(of 3\)$",
    ):
        transparency.inclusion(3, 2)
    with pytest.raises(
        transparency.ProofError,
        match=r"^PROOF_RANGE: no consistency proof from size 3 to size 2 \(of 3\)$",
    ):
        transparency.consistency(3, 2)


def test_it_keeps_the_tree_right_after_a_rolled_back_append():
    append(3)

    def append_then_fail() -> None:
        with transaction.atomic():
            ledger.append(event_type=codes.SECURITY_INCIDENT, payload={"n": "rolled back"})
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        append_then_fail()
    assert transparency.tree_size() == 4
    append(3)

    assert stored_nodes() == memory_nodes(expected_tree())


def test_it_backfills_events_written_around_the_tree(monkeypatch):
    # events written in bulk (as the scale bench does) leave no nodes: sync and the
    # migration's backfill both build exactly the tree the docs define
    monkeypatch.setattr(transparency, "nodes_for_append", lambda **_: [])
    append(9)
    assert MerkleNode.objects.count() == 0

    migration = importlib.import_module("governance.migrations.0008_merkle_nodes")
    with transaction.atomic():
        sid = transaction.savepoint()
        migration.backfill(apps, None)
        assert stored_nodes() == memory_nodes(expected_tree())
        transaction.savepoint_rollback(sid)
    assert MerkleNode.objects.count() == 0

    assert transparency.sync() == 10
    assert stored_nodes() == memory_nodes(expected_tree())
    monkeypatch.undo()
    append(1)  # the next append goes on from there
    assert stored_nodes() == memory_nodes(expected_tree())


def test_an_append_catches_up_a_tree_left_behind(monkeypatch):
    monkeypatch.setattr(transparency, "nodes_for_append", lambda **_: [])
    append(5)
    monkeypatch.undo()
    transparency._edge.clear()

    append(1)

    assert stored_nodes() == memory_nodes(expected_tree())


# --- checkpoints ------------------------------------------------------------------------------


def test_it_signs_a_c2sp_checkpoint_that_verifies_with_the_published_vkey(settings):
    settings.GOVERNANCE_TLOG_ORIGIN = "console.example.org/ledger"
    append(4)

    cp = transparency.checkpoint()

    vkeys = transparency.verifier_keys()
    assert len(vkeys) == 1
    verifier = notes.parse_verifier(vkeys[0])
    assert verifier.name == "console.example.org/ledger"
    assert verifier.public_key == bytes.fromhex(ledger.server_key_current().public_key)
    parsed, note = checkpoints.open_checkpoint(
        cp.note.encode(), [verifier], origin="console.example.org/ledger"
    )
    assert parsed == checkpoints.Checkpoint("console.example.org/ledger", 5, expected_tree().root())
    assert cp.note.startswith(
        f"console.example.org/ledger\n5\n{base64.b64encode(expected_tree().root()).decode()}\n\n— "
        "console.example.org/ledger "
    )
    assert [s.key_id for s in note.sigs] == [verifier.key_id]
    # the same size again: the stored one
    assert transparency.checkpoint().pk == cp.pk
    assert transparency.open_checkpoint(cp.note).size == 5
    # a past size, signed now
    past = transparency.checkpoint(2)
    assert transparency.open_checkpoint(past.note) == checkpoints.Checkpoint(
        "console.example.org/ledger", 2, expected_tree().root(2)
    )
    assert TreeCheckpoint.objects.count() == 2


def test_a_checkpoint_under_another_name_or_key_is_refused(settings):
    append(1)
    cp = transparency.checkpoint()
    settings.GOVERNANCE_TLOG_ORIGIN = "another.example/ledger"

    with pytest.raises(notes.UnverifiedNote):
        transparency.open_checkpoint(cp.note)


def test_checkpoints_verify_across_a_server_key_rotation():
    append(2)
    before = transparency.checkpoint()

    services.signing_key_rotate()
    append(2)
    after = transparency.checkpoint()

    assert before.key_id != after.key_id
    assert len(transparency.verifier_keys()) == 2
    assert transparency.open_checkpoint(before.note).size == before.size
    assert transparency.open_checkpoint(after.note).size == after.size
    proof = transparency.consistency(before.size, after.size)
    assert merkle.verify_consistency(
        before.size, after.size, bytes(before.root_hash), bytes(after.root_hash), proof.proof
    )


def test_it_grows_the_tree_from_the_stored_edge_when_another_process_appended():
    # no edge kept between appends (as when writers are several processes)
    for i in range(19):
        transparency._edge.clear()
        services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": i})

    assert stored_nodes() == memory_nodes(expected_tree())


def _unguarded(sql: str, params=()) -> None:
    from django.db import connection

    from replay.dbguards import drop_append_only_sql

    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
            cur.execute(drop)
        cur.execute(sql, params)


def test_a_rolled_back_ledger_gets_no_checkpoint_and_no_proof():
    append(5)
    kept = transparency.checkpoint()
    _unguarded("DELETE FROM governance_governanceevent WHERE seq >= 4")  # an old backup
    append(4)  # life goes on: 7 events, the tree still holds the 6 it saw first

    assert GovernanceEvent.objects.count() == 7
    assert transparency.tree_size() == 6
    with pytest.raises(codes.GovernanceError) as info:
        transparency.checkpoint()
    assert (info.value.code, info.value.message) == (
        codes.LEDGER_BROKEN,
        transparency.TREE_DISAGREES_MESSAGE.format(seq=6, index=5),
    )
    with pytest.raises(codes.GovernanceError) as info:
        transparency.inclusion(4, 6)
    assert info.value.code == codes.LEDGER_BROKEN
    # what the auditor kept still proves the tree's own history
    assert transparency.open_checkpoint(kept.note).size == 6


def test_a_rewritten_event_gets_no_inclusion_proof():
    append(4)
    _unguarded(
        "UPDATE governance_governanceevent SET hash = %s WHERE seq = 3", ["sha256:" + "0" * 64]
    )

    with pytest.raises(codes.GovernanceError) as info:
        transparency.inclusion(3, 5)
    assert (info.value.code, info.value.message) == (
        codes.LEDGER_BROKEN,
        transparency.TREE_DISAGREES_MESSAGE.format(seq=3, index=2),
    )


# --- the command line, and the offline check of what it prints --------------------------------


def run(*args: str) -> tuple[int, str, str]:
    import io

    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("governance", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def offline(*args: str) -> tuple[int, str]:
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-m", "tlog", *args],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_command_prints_the_vkey_a_checkpoint_and_proofs_python_m_tlog_checks(tmp_path):
    import json

    append(9)
    code, out, _ = run("tlog-vkey")
    assert code == 0
    vkey = out.strip()
    assert vkey == transparency.verifier_keys()[0]

    assert run("tlog-checkpoint", "--size", "4", "--out", str(tmp_path / "kept.txt"))[0] == 0
    code, out, _ = run("tlog-checkpoint")
    assert code == 0
    assert transparency.open_checkpoint(out).size == 10

    code, out, _ = run("proof", "inclusion", "--seq", "7", "--out", str(tmp_path / "inc.json"))
    assert code == 0
    doc = json.loads((tmp_path / "inc.json").read_text())
    assert (doc["type"], doc["seq"], doc["tree_size"]) == (
        "replay-audit-console/inclusion-proof/v1",
        7,
        10,
    )
    assert offline("check-inclusion", str(tmp_path / "inc.json"), "--vkey", vkey) == (
        0,
        f"ok: event 7 is in {transparency.origin()} at size 10\n",
    )
    doc["leaf"] = GovernanceEvent.objects.get(seq=6).hash  # another event's leaf
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    assert offline("check-inclusion", str(tmp_path / "bad.json"), "--vkey", vkey) == (
        1,
        "FAILED: event 7 is not in the checkpoint's tree of size 10\n",
    )

    run("proof", "consistency", "--old", "4", "--out", str(tmp_path / "con.json"))
    kept = str(tmp_path / "kept.txt")
    assert offline(
        "check-consistency", str(tmp_path / "con.json"), "--kept", kept, "--vkey", vkey
    ) == (
        0,
        f"ok: {transparency.origin()} at size 10 extends size 4\n",
    )
    # a kept checkpoint that is not in this history
    other = notes.Signer.from_seed(transparency.origin(), bytes(32))
    forged = notes.sign_note(
        checkpoints.Checkpoint(transparency.origin(), 4, bytes(32)).body(), [other]
    )
    (tmp_path / "forged.txt").write_bytes(forged)
    code, out = offline(
        "check-consistency",
        str(tmp_path / "con.json"),
        "--kept",
        str(tmp_path / "forged.txt"),
        "--vkey",
        vkey,
        "--vkey",
        other.verifier.vkey,
    )
    assert (code, out) == (
        1,
        "FAILED: the checkpoint at size 10 does not extend the one at size 4\n",
    )


def test_the_command_refuses_a_proof_outside_the_tree():
    append(1)

    assert run("proof", "inclusion", "--seq", "9") == (
        1,
        "",
        "PROOF_RANGE: no inclusion proof for event 9 in a tree of size 2 (of 2)\n",
    )


# --- a witness co-signs the ledger's checkpoints ------------------------------------------------


def test_a_witness_cosigns_the_ledger_only_along_one_history(tmp_path):
    from witness.core import Witness
    from witness.state import FileStore

    append(4)
    log_key = notes.parse_verifier(transparency.verifier_keys()[0])
    witness_key = notes.Signer.from_seed("witness.test/w1", bytes(range(32)))
    witness = Witness(witness_key, {log_key.name: [log_key]}, FileStore(tmp_path), lambda: 1)

    def submit(doc_old: int, doc: dict) -> int:
        lines = "".join(p + "\n" for p in doc["proof"])
        body = f"old {doc_old}\n{lines}\n".encode() + doc["checkpoint"].encode()
        return witness.add_checkpoint(body).status

    first = transparency.consistency_document(0)
    assert submit(0, first) == 200
    append(3)
    assert submit(5, transparency.consistency_document(5)) == 200
    # the ledger replaced under its tree: no checkpoint to show the witness at all
    _unguarded("DELETE FROM governance_governanceevent WHERE seq >= 6")
    append(3)
    with pytest.raises(codes.GovernanceError):
        transparency.consistency_document(8)
    # and a checkpoint of another history, signed with the server key, is refused
    forged_tree = merkle.MemoryTree([b"forged"] * 9)
    forged = notes.sign_note(
        checkpoints.Checkpoint(log_key.name, 9, forged_tree.root()).body(),
        [transparency._signer(ledger.server_key_current())],
    )
    lines = "".join(base64.b64encode(p).decode() + "\n" for p in forged_tree.consistency_proof(8))
    response = witness.add_checkpoint(f"old 8\n{lines}\n".encode() + forged)
    assert (response.status, response.body) == (
        422,
        b"the consistency proof from size 8 to 9 does not verify\n",
    )
