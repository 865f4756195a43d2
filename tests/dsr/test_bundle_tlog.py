"""A bundle's transparency-log section (``ledger/tlog.json``): each cited event proven in a
signed checkpoint with O(log n) hashes, checked offline (``core.bundle`` and
``python -m dsr.bundle_cli --vkey``), every single tamper refused with its exact message, an
older checkpoint extended or not, and bundles made before proofs still verifying.

Pure: the ledger, the tree and the note are made by the real ``core.ledger.chain``,
``tlog.merkle`` and ``tlog.note`` code, as ``tests/dsr/bundles.py`` makes the rest."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from core import bundle
from core.bundle import cli as bundle_cli
from core.bundle import pdf
from core.canonical import jcs
from core.ledger import chain, codes
from tests.dsr import bundles as b
from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "console.example/ledger"
SIGNER = notes.Signer.from_seed(ORIGIN, b.PRIVATE)
VKEY = SIGNER.verifier.vkey
OTHER_VKEY = notes.Signer.from_seed(ORIGIN, b.OTHER_PRIVATE).verifier.vkey
_HASH = chain.FIELDS.index("hash")


def _ledger(n: int = 7) -> list[tuple]:
    rows = b.ledger()
    while len(rows) < n:
        rows.append(b.row(len(rows) + 1, rows[-1][_HASH]))
    return rows


LEDGER = _ledger()


def _tree(rows: list[tuple]) -> dict[tuple[int, int], bytes]:
    store: dict[tuple[int, int], bytes] = {}
    for size, r in enumerate(rows):
        leaf = merkle.leaf_hash(r[_HASH].encode())
        for level, index, value in merkle.append_leaf(size, leaf, lambda lv, ix: store[(lv, ix)]):
            store[(level, index)] = value
    return store


TREE = _tree(LEDGER)


def _get(level: int, index: int) -> bytes:
    return TREE[(level, index)]


def note_at(size: int, signer: notes.Signer = SIGNER) -> str:
    body = checkpoints.Checkpoint(ORIGIN, size, merkle.root(size, _get)).body()
    return notes.sign_note(body, [signer]).decode()


CITED = LEDGER[1:5]  # events 2..5 of a ledger of 7: not all of it, not from its start
SIZE = len(LEDGER)


def section(**over) -> dict:
    inclusion = {r[0]: merkle.inclusion_proof(r[0] - 1, SIZE, _get) for r in CITED}
    consistency = {3: merkle.consistency_proof(3, SIZE, _get)}
    out = bundle.tlog_section(note_at(SIZE), [VKEY], inclusion, consistency)
    out.update(over)
    return out


def build(tlog: dict | None = None, rows: list[tuple] = CITED) -> bytes:
    inputs = b.inputs(rows=rows, with_checkpoint=False)
    inputs = bundle.BundleInputs(
        **{
            **{f: getattr(inputs, f) for f in bundle.BundleInputs.__dataclass_fields__},
            "tlog": section() if tlog is None else tlog,
        }
    )
    return bundle.build_bundle(inputs, b.signer())


BUNDLE = build()
ROOT_B64 = base64.b64encode(merkle.root(SIZE, _get)).decode()


def test_a_bundle_with_proofs_verifies_with_the_vkey():
    check = bundle.verify_bundle(BUNDLE, vkeys=[VKEY])

    assert check.ok, check
    assert (check.tlog_size, check.tlog_root, check.tlog_trust) == (SIZE, ROOT_B64, "vkey")
    assert (check.proven, check.events, check.extends) == (4, 4, None)
    members = json.loads(BUNDLE)["members"]
    assert members["ledger/tlog.json"]["type"] == "replay-audit-console/bundle-tlog/v1"
    # O(log n): each proof is at most ceil(log2 7) = 3 hashes
    assert [len(p["proof"]) for p in members["ledger/tlog.json"]["inclusion"]] == [3, 3, 3, 3]


def test_without_a_vkey_it_checks_with_the_bundles_own_vkeys_and_says_so():
    check = bundle.verify_bundle(BUNDLE)

    assert check.ok, check
    assert check.tlog_trust == "bundle vkeys"


def _refused(data: bytes, **kwargs) -> tuple[str | None, str | None, str]:
    check = bundle.verify_bundle(data, **kwargs)
    assert not check.ok
    return check.code, check.where, check.message


def test_an_event_body_byte_changed_is_refused():
    rows = [*CITED]
    record = bundle.event_record(rows[1])
    data = build(rows=rows)
    tampered = data.replace(jcs(record["payload"]), jcs({**record["payload"], "n": 4}), 1)
    assert tampered != data

    events = jcs(json.loads(tampered)["members"]["ledger/events.json"])
    listed = next(
        m for m in json.loads(data)["manifest"]["members"] if m["name"] == "ledger/events.json"
    )
    assert _refused(tampered, vkeys=[VKEY]) == (
        codes.BUNDLE_MEMBER_HASH,
        "ledger/events.json",
        f"sha256 {hashlib.sha256(events).hexdigest()} and size {len(events)}; the manifest says "
        f"{listed['sha256']} and {listed['size']}",
    )


def test_an_event_body_changed_and_the_manifest_resigned_is_refused_by_its_hash():
    rows = [*CITED]
    forged = list(rows[1])
    forged[chain.FIELDS.index("payload")] = {"trace_sha256": b.FILE_A, "n": 4}
    rows[1] = tuple(forged)

    code, where, message = _refused(build(rows=rows), vkeys=[VKEY])
    assert (code, where) == (codes.BUNDLE_EVENT_HASH, "ledger/events.json: event seq 3")
    assert message.startswith("CHAIN_HASH: ")


def _flip(text: str, at: int = 0) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[at] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def test_a_proof_hash_changed_is_refused():
    tlog = section()
    tlog["inclusion"][2]["proof"][1] = _flip(tlog["inclusion"][2]["proof"][1])

    assert _refused(build(tlog), vkeys=[VKEY]) == (
        codes.BUNDLE_INCLUSION,
        "ledger/tlog.json: event seq 4",
        f"its hash {CITED[2][_HASH]} is not leaf 3 of the checkpoint's tree (size 7, root "
        f"{ROOT_B64})",
    )


def test_an_event_without_a_proof_is_refused():
    tlog = section()
    del tlog["inclusion"][0]

    assert _refused(build(tlog), vkeys=[VKEY]) == (
        codes.BUNDLE_INCLUSION,
        "ledger/tlog.json: event seq 2",
        "no inclusion proof for this event",
    )


def test_a_root_changed_in_the_note_is_refused_by_its_signature():
    note = note_at(SIZE)
    tlog = section(checkpoint=note.replace(ROOT_B64, _flip(ROOT_B64)))

    code, where, message = _refused(build(tlog), vkeys=[VKEY])
    assert (code, where) == (codes.BUNDLE_CHECKPOINT, "ledger/tlog.json: checkpoint")
    assert message == (
        f"invalid signature for key {ORIGIN}+{SIGNER.key_id:08x} (verifier keys: {VKEY})"
    )


def test_a_checkpoint_of_another_root_signed_by_the_key_fails_the_proofs():
    body = checkpoints.Checkpoint(ORIGIN, SIZE, bytes(32)).body()
    tlog = section(checkpoint=notes.sign_note(body, [SIGNER]).decode())

    code, where, _ = _refused(build(tlog), vkeys=[VKEY])
    assert (code, where) == (codes.BUNDLE_INCLUSION, "ledger/tlog.json: event seq 2")


def test_a_note_signature_changed_is_refused():
    note = note_at(SIZE)
    head, sig = note.rsplit(" ", 1)
    tlog = section(checkpoint=f"{head} {_flip(sig.strip(), -1)}\n")  # the key id kept

    assert _refused(build(tlog), vkeys=[VKEY]) == (
        codes.BUNDLE_CHECKPOINT,
        "ledger/tlog.json: checkpoint",
        f"invalid signature for key {ORIGIN}+{SIGNER.key_id:08x} (verifier keys: {VKEY})",
    )


def test_a_checkpoint_signed_by_another_key_than_the_vkey_is_refused():
    assert _refused(BUNDLE, vkeys=[OTHER_VKEY]) == (
        codes.BUNDLE_CHECKPOINT,
        "ledger/tlog.json: checkpoint",
        f"note has no verifiable signatures (verifier keys: {OTHER_VKEY})",
    )


def test_a_vkey_that_does_not_parse_is_the_callers_error():
    with pytest.raises(ValueError, match=r"the verifier key 'nope' does not parse: "):
        bundle.verify_bundle(BUNDLE, vkeys=["nope"])


def test_a_witness_cosignature_line_in_the_note_is_carried_and_ignored():
    witness = notes.Signer.from_seed("witness.example/w1", bytes(range(5, 37))).as_cosigner()
    body = checkpoints.Checkpoint(ORIGIN, SIZE, merkle.root(SIZE, _get)).body()
    cosigned = notes.sign_note(body, [SIGNER]).decode()
    extra = notes.sign_note(body, [witness], timestamp=1_700_000_000).decode()
    note = cosigned + extra.split("\n\n", 1)[1]

    assert bundle.verify_bundle(build(section(checkpoint=note)), vkeys=[VKEY]).ok


def test_an_older_checkpoint_extended_by_the_proof_in_the_bundle():
    check = bundle.verify_bundle(BUNDLE, vkeys=[VKEY], older_checkpoint=note_at(3))

    assert check.ok, check
    assert check.extends == 3


def test_an_older_checkpoint_at_the_same_size_is_extended():
    assert bundle.verify_bundle(BUNDLE, vkeys=[VKEY], older_checkpoint=note_at(SIZE)).extends == 7


def test_an_older_checkpoint_extended_by_a_fetched_consistency_document():
    doc = {
        "type": "replay-audit-console/consistency-proof/v1",
        "checkpoint": note_at(SIZE),
        "old_size": 5,
        "new_size": SIZE,
        "old_root": base64.b64encode(merkle.root(5, _get)).decode(),
        "new_root": ROOT_B64,
        "proof": [base64.b64encode(h).decode() for h in merkle.consistency_proof(5, SIZE, _get)],
    }

    check = bundle.verify_bundle(BUNDLE, vkeys=[VKEY], older_checkpoint=note_at(5), consistency=doc)
    assert check.ok, check
    assert check.extends == 5


def test_an_older_checkpoint_without_a_proof_is_refused():
    assert _refused(BUNDLE, vkeys=[VKEY], older_checkpoint=note_at(5)) == (
        codes.BUNDLE_CONSISTENCY,
        "--older-checkpoint",
        "no consistency proof from size 5 to size 7 in the bundle or the file given "
        "(--consistency)",
    )


def test_an_older_checkpoint_of_another_history_is_not_extended():
    forked = _ledger(3)
    forked[2] = b.row(3, forked[1][_HASH], payload={"n": "rewritten"})
    fork_tree = _tree(forked)
    body = checkpoints.Checkpoint(
        ORIGIN, 3, merkle.root(3, lambda lv, ix: fork_tree[(lv, ix)])
    ).body()
    older = notes.sign_note(body, [SIGNER]).decode()

    assert _refused(BUNDLE, vkeys=[VKEY], older_checkpoint=older) == (
        codes.BUNDLE_CONSISTENCY,
        "--older-checkpoint",
        "the bundle's checkpoint (size 7) does not extend the older checkpoint (size 3)",
    )


def test_an_older_checkpoint_larger_than_the_bundles_is_refused():
    big = _tree(_ledger(9))
    body = checkpoints.Checkpoint(ORIGIN, 9, merkle.root(9, lambda lv, ix: big[(lv, ix)])).body()
    older = notes.sign_note(body, [SIGNER]).decode()

    assert _refused(BUNDLE, vkeys=[VKEY], older_checkpoint=older) == (
        codes.BUNDLE_CONSISTENCY,
        "--older-checkpoint",
        "the older checkpoint (size 9) is larger than the bundle's (size 7)",
    )


def test_a_bundle_made_before_proofs_still_verifies():
    old = b.build()

    check = bundle.verify_bundle(old)
    assert check.ok, check
    assert (check.tlog_size, check.proven) == (None, 0)
    assert "ledger/tlog.json" not in json.loads(old)["members"]


def test_a_bundle_made_before_proofs_is_refused_when_a_vkey_is_asked_for():
    assert _refused(b.build(), vkeys=[VKEY]) == (
        codes.BUNDLE_CHECKPOINT,
        "ledger/tlog.json",
        "the bundle carries no transparency-log checkpoint (made before proofs were added), so "
        "--vkey, --witness and --older-checkpoint cannot be checked",
    )


def test_a_future_section_version_is_refused_as_malformed():
    assert _refused(build(section(type="replay-audit-console/bundle-tlog/v2"))) == (
        codes.BUNDLE_MALFORMED,
        "ledger/tlog.json: type",
        "the type is not replay-audit-console/bundle-tlog/v1",
    )


# --- the command line ------------------------------------------------------------------------


def _cli(tmp_path, *args: str) -> tuple[int, str]:
    path = tmp_path / "b.json"
    path.write_bytes(BUNDLE)
    out = io.StringIO()
    status = bundle_cli.verify_bundle_file(str(path), out, **dict(_kw(tmp_path, *args)), err=out)
    return status, out.getvalue()


def _kw(tmp_path, *args: str):
    i = 0
    while i < len(args):
        name, value = args[i], args[i + 1]
        if name == "--vkey":
            yield "vkeys", [value]
        elif name == "--older-checkpoint":
            kept = tmp_path / "kept.note"
            kept.write_text(value)
            yield "older_path", str(kept)
        i += 2


def test_the_cli_prints_the_checkpoint_and_the_events_proven(tmp_path):
    status, text = _cli(tmp_path, "--vkey", VKEY, "--older-checkpoint", note_at(3))

    assert status == bundle_cli.OK
    assert (
        f"checkpoint: size 7, root {ROOT_B64}, signed by the verifier key given; 4 event(s) "
        "proven in it\nit extends the older checkpoint (size 3)\n"
    ) in text


def test_the_cli_refuses_another_vkey_with_exit_1(tmp_path):
    status, text = _cli(tmp_path, "--vkey", OTHER_VKEY)

    assert status == bundle_cli.FAILED
    assert (
        "FAIL BUNDLE_CHECKPOINT at ledger/tlog.json: checkpoint: note has no verifiable "
        f"signatures (verifier keys: {OTHER_VKEY})\n"
    ) in text


def test_the_module_runs_without_django_with_vkey_and_older_checkpoint(tmp_path):
    path = tmp_path / "b.json"
    path.write_bytes(BUNDLE)
    kept = tmp_path / "kept.json"
    kept.write_text(json.dumps({"checkpoint": note_at(3)}))
    code = (
        "import sys, runpy; sys.modules['django'] = None; "
        "sys.argv = ['bundle_cli', *sys.argv[1:]]; "
        "runpy.run_module('dsr.bundle_cli', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), "--vkey", VKEY, "--older-checkpoint", str(kept)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "it extends the older checkpoint (size 3)\n" in done.stdout


def test_the_cli_reads_the_note_of_an_exported_ledger_checkpoint_as_the_older_one(tmp_path):
    path, kept = tmp_path / "b.json", tmp_path / "ledger-checkpoint-3.json"
    path.write_bytes(BUNDLE)
    kept.write_text(json.dumps({"checkpoint": {"size": 3}, "tlog": {"checkpoint": note_at(3)}}))
    out = io.StringIO()

    status = bundle_cli.verify_bundle_file(
        str(path), out, vkeys=[VKEY], older_path=str(kept), err=out
    )
    assert status == bundle_cli.OK, out.getvalue()
    assert "it extends the older checkpoint (size 3)\n" in out.getvalue()


def test_the_printable_summary_prints_the_checkpoint_and_where_the_proofs_are():
    from tests.dsr.test_pdf import page_text

    text = page_text(pdf.render_summary(bundle.pdf_summary(BUNDLE)))

    assert "Transparency log" in text.splitlines()
    assert "7" in text.splitlines()
    assert ROOT_B64 in text.replace("\n", "")
    assert "ledger/tlog.json" in text.replace("\n", " ")


# --- a quorum of named witnesses (--witness VKEY ... --quorum K) ----------------------------

WITNESSES = [
    notes.Signer.from_seed(f"witness.example/w{i}", bytes([i]) * 32).as_cosigner()
    for i in (1, 2, 3)
]
WITNESS_VKEYS = [w.verifier.vkey for w in WITNESSES]
LABELS = [f"witness.example/w{i}+{w.key_id:08x}" for i, w in zip((1, 2, 3), WITNESSES, strict=True)]
_BODY = checkpoints.Checkpoint(ORIGIN, SIZE, merkle.root(SIZE, _get)).body()


def _cosigned(signers=WITNESSES, body: bytes = _BODY) -> str:
    """The log's note with one cosignature/v1 line per signer, as the console exports it."""
    lines = [
        notes.signature_line(w, body, timestamp=1_700_000_000 + i) for i, w in enumerate(signers)
    ]
    return note_at(SIZE) + "".join(lines)


def _forge(line: str) -> str:
    """The same witness's line with the last byte of its Ed25519 signature changed."""
    name, b64 = line.rstrip("\n")[2:].split(" ")
    raw = bytearray(base64.b64decode(b64))
    raw[-1] ^= 1
    return f"— {name} {base64.b64encode(bytes(raw)).decode()}\n"


def test_a_checkpoint_cosigned_by_the_quorum_of_named_witnesses_verifies():
    check = bundle.verify_bundle(
        build(section(checkpoint=_cosigned())), vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=2
    )

    assert check.ok, check
    assert (check.quorum, check.witnesses_signed, check.witnesses_missing) == (
        2,
        tuple(LABELS),
        (),
    )


def test_the_quorum_is_all_witnesses_named_when_not_given():
    note = _cosigned(WITNESSES[:2])
    check = bundle.verify_bundle(
        build(section(checkpoint=note)), vkeys=[VKEY], witnesses=WITNESS_VKEYS
    )

    assert not check.ok
    assert (check.code, check.where) == ("BUNDLE_WITNESS_QUORUM", "ledger/tlog.json: checkpoint")


def test_one_witness_cosignature_removed_is_refused_naming_who_signed_and_who_did_not():
    note = _cosigned([WITNESSES[0], WITNESSES[2]])
    data = build(section(checkpoint=note))

    code, where, message = _refused(data, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=3)

    assert (code, where) == (codes.BUNDLE_WITNESS_QUORUM, "ledger/tlog.json: checkpoint")
    assert message == (
        f"checkpoint of size 7: 2 of the 3 witness cosignatures required; signed: "
        f"{LABELS[0]}, {LABELS[2]}; not signed: {LABELS[1]}"
    )
    # two of three still make a quorum of two
    check = bundle.verify_bundle(data, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=2)
    assert check.ok, check
    assert check.witnesses_missing == (LABELS[1],)


def test_a_forged_witness_cosignature_is_refused_and_named_as_not_verifying():
    head, _, lines = _cosigned().partition("\n\n")
    log_line, w1, w2, w3 = lines.splitlines(keepends=True)
    note = head + "\n\n" + log_line + w1 + _forge(w2) + w3
    data = build(section(checkpoint=note))

    code, _, message = _refused(data, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=3)

    assert code == codes.BUNDLE_WITNESS_QUORUM
    assert message.endswith(
        f"signed: {LABELS[0]}, {LABELS[2]}; not signed: {LABELS[1]} (its cosignature does not "
        "verify)"
    )


def test_a_witness_cosignature_of_another_checkpoint_does_not_count():
    other_body = checkpoints.Checkpoint(ORIGIN, 3, merkle.root(3, _get)).body()
    stolen = notes.signature_line(WITNESSES[0], other_body, timestamp=1_700_000_000)
    note = _cosigned(WITNESSES[1:]) + stolen
    data = build(section(checkpoint=note))

    code, _, message = _refused(data, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=3)

    assert code == codes.BUNDLE_WITNESS_QUORUM
    assert f"not signed: {LABELS[0]} (its cosignature does not verify)" in message


def test_a_cosignature_of_a_witness_not_named_does_not_count():
    stranger = notes.Signer.from_seed("witness.example/w9", bytes([9]) * 32).as_cosigner()
    note = _cosigned([WITNESSES[0], stranger])

    code, _, message = _refused(
        build(section(checkpoint=note)), vkeys=[VKEY], witnesses=WITNESS_VKEYS[:2], quorum=2
    )

    assert code == codes.BUNDLE_WITNESS_QUORUM
    assert message.endswith(f"signed: {LABELS[0]}; not signed: {LABELS[1]}")


def test_a_witness_named_by_its_ed25519_vkey_is_read_as_its_cosigner():
    ed25519 = [
        notes.Verifier.from_public_key(w.name, w.public_key, notes.ALG_ED25519).vkey
        for w in WITNESSES
    ]

    check = bundle.verify_bundle(
        build(section(checkpoint=_cosigned())), vkeys=[VKEY], witnesses=ed25519, quorum=3
    )

    assert check.ok, check


@pytest.mark.parametrize(
    ("witnesses", "quorum", "error"),
    [
        (WITNESS_VKEYS, 4, "the quorum 4 is not between 1 and the 3 witnesses"),
        (WITNESS_VKEYS, 0, "the quorum 0 is not between 1 and the 3 witnesses"),
        ([], 1, "a quorum needs the witnesses it counts (--witness)"),
        ([WITNESS_VKEYS[0]] * 2, 1, f"the witness {WITNESS_VKEYS[0]!r} is given twice"),
        (["nope"], 1, "the verifier key 'nope' does not parse: malformed verifier id"),
    ],
)
def test_a_bad_witness_list_or_quorum_is_the_callers_error(witnesses, quorum, error):
    with pytest.raises(ValueError, match=f"^{re.escape(error)}$"):
        bundle.verify_bundle(BUNDLE, vkeys=[VKEY], witnesses=witnesses, quorum=quorum)


def test_a_bundle_made_before_proofs_is_refused_when_witnesses_are_asked_for():
    code, where, _ = _refused(b.build(), witnesses=WITNESS_VKEYS, quorum=1)

    assert (code, where) == (codes.BUNDLE_CHECKPOINT, "ledger/tlog.json")


def test_the_cli_names_the_witnesses_and_refuses_below_the_quorum_with_exit_1(tmp_path):
    path = tmp_path / "b.json"
    path.write_bytes(build(section(checkpoint=_cosigned(WITNESSES[:2]))))
    out = io.StringIO()

    status = bundle_cli.verify_bundle_file(
        str(path), out, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=2, err=out
    )
    assert status == bundle_cli.OK, out.getvalue()
    assert (
        f"witnessed: 2 of the 2 cosignatures required; signed: {LABELS[0]}, {LABELS[1]}; "
        f"not signed: {LABELS[2]}\n"
    ) in out.getvalue()

    out = io.StringIO()
    status = bundle_cli.verify_bundle_file(
        str(path), out, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=3, err=out
    )
    assert status == bundle_cli.FAILED
    assert (
        "FAIL BUNDLE_WITNESS_QUORUM at ledger/tlog.json: checkpoint: checkpoint of size 7: 2 "
        in (out.getvalue())
    )

    out = io.StringIO()
    status = bundle_cli.verify_bundle_file(
        str(path), out, vkeys=[VKEY], witnesses=WITNESS_VKEYS, quorum=5, err=out
    )
    assert (status, out.getvalue()) == (
        bundle_cli.USAGE,
        "error: the quorum 5 is not between 1 and the 3 witnesses\n",
    )


def test_the_module_checks_a_quorum_without_django(tmp_path):
    path = tmp_path / "b.json"
    path.write_bytes(build(section(checkpoint=_cosigned([WITNESSES[0], WITNESSES[2]]))))
    code = (
        "import sys, runpy; sys.modules['django'] = None; "
        "sys.argv = ['bundle_cli', *sys.argv[1:]]; "
        "runpy.run_module('dsr.bundle_cli', run_name='__main__')"
    )
    argv = [str(path), "--vkey", VKEY, "--quorum", "3"]
    for vkey in WITNESS_VKEYS:
        argv += ["--witness", vkey]

    done = subprocess.run(
        [sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )

    assert done.returncode == 1, done.stderr
    assert f"not signed: {LABELS[1]}\n" in done.stdout
    assert "FAIL BUNDLE_WITNESS_QUORUM" in done.stdout
