"""A quorum of named witnesses checked offline (``tlog.quorum``, ``python -m tlog ...
--witness VKEY --quorum K``): counted one witness at a time, a missing and a forged
cosignature each named."""

from __future__ import annotations

import base64
import json

import pytest

from core.ledger import codes
from tlog import __main__ as cli
from tlog import checkpoint as checkpoints
from tlog import merkle, proof, quorum
from tlog import note as notes

ORIGIN = "console.example/ledger"
LOG = notes.Signer.from_seed(ORIGIN, bytes([7]) * 32)
TREE = merkle.MemoryTree()
for i in range(5):
    TREE.append(b"event %d" % i)
BODY = checkpoints.Checkpoint(ORIGIN, 5, TREE.root()).body()
WITNESSES = [
    notes.Signer.from_seed(f"witness.example/w{i}", bytes([i]) * 32).as_cosigner()
    for i in (1, 2, 3)
]
VKEYS = [w.verifier.vkey for w in WITNESSES]
LABELS = [f"witness.example/w{i + 1}+{w.key_id:08x}" for i, w in enumerate(WITNESSES)]


def cosigned(signers, body: bytes = BODY) -> str:
    lines = [notes.signature_line(w, body, timestamp=1_700_000_000) for w in signers]
    return notes.sign_note(BODY, [LOG]).decode() + "".join(lines)


def forge(line: str) -> str:
    name, b64 = line.rstrip("\n")[2:].split(" ")
    raw = bytearray(base64.b64decode(b64))
    raw[-1] ^= 1
    return f"— {name} {base64.b64encode(bytes(raw)).decode()}\n"


def test_the_code_is_the_one_the_codes_module_names():
    assert quorum.CODE == codes.WITNESS_QUORUM == "WITNESS_QUORUM"


def test_each_witness_is_counted_as_signed_unsigned_or_forged():
    note = cosigned(WITNESSES[:2])
    head, w2 = (
        note[: note.rindex("— witness.example/w2")],
        note[note.rindex("— witness.example/w2") :],
    )
    note = head + forge(w2)
    verifiers = quorum.witness_verifiers(VKEYS)

    found = quorum.check_quorum(note.encode(), verifiers, 2)

    assert (found.signed, found.unsigned, found.forged, found.ok) == (
        (LABELS[0],),
        (LABELS[2],),
        (LABELS[1],),
        False,
    )
    assert found.describe() == (
        f"1 of the 2 witness cosignatures required; signed: {LABELS[0]}; not signed: "
        f"{LABELS[2]}, {LABELS[1]} (its cosignature does not verify)"
    )


def run(tmp_path, capsys, command: str, content: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / "in"
    path.write_text(content)
    status = cli.main([command, str(path), "--vkey", LOG.verifier.vkey, *extra])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def witness_args(vkeys=VKEYS) -> list[str]:
    return [arg for vkey in vkeys for arg in ("--witness", vkey)]


def test_check_checkpoint_accepts_a_quorum_and_names_who_did_not_sign(tmp_path, capsys):
    status, out = run(
        tmp_path,
        capsys,
        "check-checkpoint",
        cosigned(WITNESSES[:2]),
        *witness_args(),
        "--quorum",
        "2",
    )

    assert status == 0, out
    assert out == (
        f"ok: {ORIGIN} at size 5 is signed by the verifier key given\n"
        f"witnessed: 2 of the 2 witness cosignatures required; signed: {LABELS[0]}, "
        f"{LABELS[1]}; not signed: {LABELS[2]}\n"
    )


def test_check_checkpoint_refuses_one_cosignature_removed_with_exit_1(tmp_path, capsys):
    status, out = run(
        tmp_path,
        capsys,
        "check-checkpoint",
        cosigned([WITNESSES[0], WITNESSES[2]]),
        *witness_args(),
    )

    assert status == 1
    assert out.endswith(
        f"FAILED: WITNESS_QUORUM: checkpoint of size 5: 2 of the 3 witness cosignatures "
        f"required; signed: {LABELS[0]}, {LABELS[2]}; not signed: {LABELS[1]}\n"
    )


def test_check_checkpoint_reads_an_exported_ledger_checkpoint(tmp_path, capsys):
    exported = {"checkpoint": {"size": 5}, "tlog": {"checkpoint": cosigned(WITNESSES), "vkeys": []}}

    status, out = run(
        tmp_path, capsys, "check-checkpoint", json.dumps(exported), *witness_args(), "--quorum", "3"
    )

    assert status == 0, out


def test_a_witness_signature_over_another_checkpoint_is_forged(tmp_path, capsys):
    other = checkpoints.Checkpoint(ORIGIN, 4, TREE.root(4)).body()
    stolen = notes.signature_line(WITNESSES[2], other, timestamp=1_700_000_000)

    status, out = run(
        tmp_path, capsys, "check-checkpoint", cosigned(WITNESSES[:2]) + stolen, *witness_args()
    )

    assert status == 1
    assert out.endswith(f"not signed: {LABELS[2]} (its cosignature does not verify)\n")


def test_check_inclusion_checks_the_quorum_on_the_proofs_checkpoint(tmp_path, capsys):
    doc = {
        "type": proof.INCLUSION_TYPE,
        "checkpoint": cosigned(WITNESSES[:1]),
        "seq": 2,
        "tree_size": 5,
        "leaf": "event 1",
        "proof": [base64.b64encode(h).decode() for h in TREE.inclusion_proof(1, 5)],
    }

    status, out = run(tmp_path, capsys, "check-inclusion", json.dumps(doc), *witness_args())

    assert status == 1, out
    assert out.startswith(f"ok: event 2 is in {ORIGIN} at size 5\n")
    assert "FAILED: WITNESS_QUORUM: checkpoint of size 5: 1 of the 3" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--quorum", "1"], "tlog: a quorum needs the witnesses it counts (--witness)\n"),
        (
            [*witness_args(VKEYS[:1]), "--quorum", "2"],
            "tlog: the quorum 2 is not between 1 and the 1 witnesses\n",
        ),
    ],
)
def test_a_quorum_that_cannot_be_met_is_a_usage_error(tmp_path, capsys, extra, message):
    assert run(tmp_path, capsys, "check-checkpoint", cosigned(WITNESSES), *extra) == (2, message)
