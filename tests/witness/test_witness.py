"""The witness (c2sp.org/tlog-witness add-checkpoint, c2sp.org/tlog-cosignature v1): what it
cosigns, every refusal with the status the spec gives, its record on disk, over HTTP and from
the command line."""

from __future__ import annotations

import base64
import http.client
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tlog import checkpoint as checkpoints
from tlog import merkle
from tlog import note as notes
from witness import __main__ as cli
from witness.core import Held, Witness, parse_request
from witness.server import make_server
from witness.state import FileStore, origin_hash

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "console.example/ledger"
LOG = notes.Signer.from_seed(ORIGIN, bytes(range(32)))
OTHER = notes.Signer.from_seed("console.example/other", bytes(range(1, 33)))
WITNESS = notes.Signer.from_seed("witness.example/w1", bytes(range(2, 34)))
NOW = 1_764_000_000
LEAVES = [b"event %d" % i for i in range(20)]
TREE = merkle.MemoryTree(LEAVES)


def signed(size: int, *, tree: merkle.MemoryTree = TREE, signer: notes.Signer = LOG) -> bytes:
    root = tree.root(size)
    return notes.sign_note(checkpoints.Checkpoint(signer.name, size, root).body(), [signer])


def request(old: int, proof: list[bytes], note: bytes) -> bytes:
    lines = "".join(base64.b64encode(p).decode() + "\n" for p in proof)
    return f"old {old}\n{lines}\n".encode() + note


@pytest.fixture
def store(tmp_path):
    return FileStore(tmp_path / "state")


@pytest.fixture
def witness(store):
    return Witness(
        WITNESS, {ORIGIN: [LOG.verifier], OTHER.name: [OTHER.verifier]}, store, lambda: NOW
    )


def add(witness, old, new, *, proof=None, note=None):
    proof = TREE.consistency_proof(old, new) if proof is None else proof
    return witness.add_checkpoint(request(old, proof, signed(new) if note is None else note))


def held_size(store):
    held = store.latest(ORIGIN)
    return None if held is None else held.size


# --- cosigning -------------------------------------------------------------------------------


def test_it_cosigns_a_first_checkpoint_and_then_one_consistent_with_it(witness, store):
    first = add(witness, 0, 5)

    assert (first.status, first.content_type) == (200, "text/plain; charset=utf-8")
    line = first.body.decode()
    assert line.startswith("— witness.example/w1 ")
    assert line.endswith("\n")
    cosigner = WITNESS.as_cosigner().verifier
    note = notes.open_note(signed(5) + first.body, [LOG.verifier, cosigner])
    assert [s.name for s in note.sigs] == [ORIGIN, "witness.example/w1"]
    assert notes.cosignature_timestamp(note.sigs[1]) == NOW
    assert held_size(store) == 5

    second = add(witness, 5, 13)
    assert second.status == 200
    notes.open_note(signed(13) + second.body, [cosigner])
    assert held_size(store) == 13
    # the same checkpoint again, with no proof: cosigned again
    assert add(witness, 13, 13).status == 200


def test_it_keeps_the_latest_checkpoint_owner_only_with_the_log_and_witness_signatures(
    witness, store
):
    response = add(witness, 0, 7)

    path = store.directory / f"{origin_hash(ORIGIN)}.checkpoint"
    assert path.read_bytes() == signed(7) + response.body
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    assert not list(store.directory.glob("*.tmp*"))
    # the monitoring endpoint serves it
    latest = witness.latest(origin_hash(ORIGIN))
    assert (latest.status, latest.body) == (200, signed(7) + response.body)
    assert witness.latest(origin_hash(OTHER.name)).status == 404


def test_it_cosigns_the_checkpoints_of_the_transparency_dev_witness_tests(tmp_path):
    # transparency-dev/witness witness/witness_test.go: the witness holds mInit (size 5) and
    # is given mNext (size 8) with consProof, all made by Go implementations.
    monkeys = notes.parse_verifier("monkeys+db4d9f7e+AULaJMvTtDLHPUcUrjdDad9vDlh/PTfC2VV60JUtCfWT")
    m_init = (
        "monkeys\n5\n41smjBUiAU70EtKlT6lIOIYtRTYxYXsDB+XHfcvu/BE=\n\n— monkeys 202fftzGl3LVoqjX"
        "fwCFZZXs8I+5G22+Ek2K0AOyBuSJ/8/CZawNF+6fNlTKOCd622pbzJNkkJFWuw9DbicZCkEx9AY=\n"
    ).encode()
    m_next = (
        "monkeys\n8\nV8K9aklZ4EPB+RMOk1/8VsJUdFZR77GDtZUQq84vSbo=\n\n— monkeys 202ffoUEboiQYpHz"
        "ICeaFmoy3RNviHTpAxYrq/eO4QQVQMvu9UebKBMX2MJC76NLthZaKsnKbCA8GxrjePZhvDCH7Ag=\n"
    ).encode()
    proof = [
        bytes.fromhex("b9e1d62618f7fee8034e4c5010f727ab24d8e4705cb296c374bf2025a87a10d2"),
        bytes.fromhex("aac66cd7a79ce4012d80762fe8eec3a77f22d1ca4145c3f4cee022e7efcd599d"),
        bytes.fromhex("89d0f753f66a290c483b39cd5e9eafb12021293395fad3d4a2ad053cfbcfdc9e"),
        bytes.fromhex("29e40bb79c966f4c6fe96aff6f30acfce5f3e8d84c02215175d6e018a5dee833"),
    ]
    store = FileStore(tmp_path)
    witness = Witness(WITNESS, {"monkeys": [monkeys]}, store, lambda: NOW)
    assert witness.add_checkpoint(request(0, [], m_init)).status == 200

    assert witness.add_checkpoint(request(5, proof, m_next)).status == 200
    assert witness.add_checkpoint(request(8, proof, m_init)).status == 400


# --- refusals, each with the spec's status ---------------------------------------------------


def test_it_answers_409_with_the_size_it_holds_when_the_old_size_is_wrong(witness, store):
    assert add(witness, 0, 5).status == 200

    for old in (0, 3, 6):
        response = add(witness, old, 9)
        assert (response.status, response.body, response.content_type) == (
            409,
            b"5\n",
            "text/x.tlog.size",
        )
    # never seen: it holds size 0
    response = add(witness, 4, 9, note=signed(9, signer=OTHER, tree=TREE))
    assert (response.status, response.body) == (409, b"0\n")
    assert held_size(store) == 5


def test_it_refuses_a_smaller_tree_with_400(witness, store):
    assert add(witness, 0, 9).status == 200

    response = add(witness, 9, 5, proof=[])

    assert (response.status, response.body) == (
        400,
        b"old size 9 is bigger than the checkpoint's 5\n",
    )
    assert held_size(store) == 9


def test_it_refuses_an_unknown_log_with_404(witness, store):
    stranger = notes.Signer.from_seed("stranger.example/log", bytes(range(3, 35)))

    response = add(witness, 0, 5, note=signed(5, signer=stranger))

    assert (response.status, response.body) == (404, b"unknown log 'stranger.example/log'\n")
    assert store.latest("stranger.example/log") is None


def test_it_refuses_a_bad_signature_with_403(witness, store):
    body = checkpoints.Checkpoint(ORIGIN, 5, TREE.root(5)).body()
    # signed by a key of the same name that is not the log's: an unknown key
    impostor = notes.Signer.from_seed(ORIGIN, bytes(range(4, 36)))
    response = add(witness, 0, 5, note=notes.sign_note(body, [impostor]))
    assert (response.status, response.body) == (
        403,
        b"checkpoint signature: note has no verifiable signatures\n",
    )
    # the log's name and key id over a signature that does not verify
    good = notes.sign_note(body, [LOG])
    raw = bytearray(base64.b64decode(good.split(b" ")[-1]))
    raw[10] ^= 1
    forged = body + f"\n— {ORIGIN} {base64.b64encode(bytes(raw)).decode()}\n".encode()
    response = add(witness, 0, 5, note=forged)
    assert (response.status, response.body) == (
        403,
        f"checkpoint signature: invalid signature for key {ORIGIN}+{LOG.key_id:08x}\n".encode(),
    )
    # the right signature over another root
    other = checkpoints.Checkpoint(ORIGIN, 5, TREE.root(4)).body()
    swapped = other + b"\n" + good.split(b"\n\n")[1]
    assert add(witness, 0, 5, note=swapped).status == 403
    assert held_size(store) is None


def test_it_refuses_an_inconsistent_checkpoint_with_422_and_records_it(witness, store):
    assert add(witness, 0, 8).status == 200
    forked = merkle.MemoryTree([*LEAVES[:3], b"rewritten", *LEAVES[4:]])

    # the forked log's own proof, validly signed: not consistent with what the witness holds
    response = add(
        witness, 8, 12, proof=forked.consistency_proof(8, 12), note=signed(12, tree=forked)
    )
    assert (response.status, response.body) == (
        422,
        b"the consistency proof from size 8 to 12 does not verify\n",
    )
    # the honest proof does not make the forked root consistent either
    assert add(witness, 8, 12, note=signed(12, tree=forked)).status == 422
    # same size, another root
    response = add(witness, 8, 8, proof=[], note=signed(8, tree=forked))
    assert (response.status, response.body) == (422, b"another root hash at size 8\n")
    assert held_size(store) == 8
    refused = (store.directory / f"{origin_hash(ORIGIN)}.refused").read_text().splitlines()
    assert len(refused) == 3
    assert (
        stat.S_IMODE((store.directory / f"{origin_hash(ORIGIN)}.refused").stat().st_mode) == 0o600
    )


def test_it_refuses_a_proof_from_size_0_and_a_bad_empty_tree_with_422(witness, store):
    response = add(witness, 0, 5, proof=[TREE.root(5)])
    assert (response.status, response.body) == (
        422,
        b"a consistency proof from size 0 must be empty\n",
    )
    empty_with_root = notes.sign_note(checkpoints.Checkpoint(ORIGIN, 0, TREE.root(1)).body(), [LOG])
    response = add(witness, 0, 0, proof=[], note=empty_with_root)
    assert (response.status, response.body) == (
        422,
        b"a checkpoint of size 0 must have the empty tree's root\n",
    )
    empty = notes.sign_note(checkpoints.Checkpoint(ORIGIN, 0, merkle.EMPTY_ROOT).body(), [LOG])
    assert add(witness, 0, 0, proof=[], note=empty).status == 200
    assert held_size(store) == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"old 0\n", "malformed request: no empty line before the checkpoint"),
        (b"new 0\n\n", "malformed request: the first line is not 'old <size>'"),
        (b"old 05\n\n", "malformed request: old size '05'"),
        (b"old -1\n\n", "malformed request: old size '-1'"),
        (
            b"old 1\nnot base64\n\n",
            "malformed request: proof line 'not base64' is not a base64 hash",
        ),
        (b"old 1\nAAAA\n\n", "malformed request: proof line 'AAAA' is not a base64 hash"),
        (b"old 1\n" + b"A" * 43 + b"=\n" * 1 + b"\n", None),
        (
            b"old 1\n" + (base64.b64encode(bytes(32)) + b"\n") * 64 + b"\n",
            "malformed request: more than 63 proof lines",
        ),
        (b"old \xff\n\n", "malformed request: the old size or proof lines are not ASCII"),
        (b"old 0\n\nnot a note\n", "malformed checkpoint: not a signed note"),
        (
            "old 0\n\norigin\n5\n\n— x AAAA\n".encode(),
            "malformed checkpoint: fewer than three lines",
        ),
        (b"x" * (64 * 1024 + 1), "malformed request: more than 65536 bytes"),
    ],
)
def test_it_refuses_a_malformed_request_with_400(witness, body, message):
    response = witness.add_checkpoint(body)

    if message is None:  # a well-formed head: parsed, then refused for its missing checkpoint
        assert parse_request(body).old_size == 1
        assert response.status == 400
    else:
        assert (response.status, response.body) == (400, (message + "\n").encode())


def test_it_refuses_a_note_with_a_malformed_signature_line_with_400(witness):
    note = checkpoints.Checkpoint(ORIGIN, 5, TREE.root(5)).body() + b"\n- not a signature\n"

    response = add(witness, 0, 5, note=note)

    assert (response.status, response.body) == (400, b"checkpoint note: malformed note\n")


def test_it_never_rolls_back_under_concurrent_requests(witness, store):
    assert add(witness, 0, 4).status == 200
    statuses: list[int] = []
    barrier = threading.Barrier(8)

    def submit(new):
        barrier.wait()
        statuses.append(add(witness, 4, new).status)

    threads = [threading.Thread(target=submit, args=(new,)) for new in range(5, 13)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(statuses) == [200] + [409] * 7
    assert held_size(store) in range(5, 13)


# --- over HTTP and from the command line -----------------------------------------------------


@pytest.fixture
def served(witness):
    server = make_server(witness, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def post(port, body, path="/add-checkpoint"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=body)
    response = conn.getresponse()
    result = (response.status, response.getheader("Content-Type"), response.read())
    conn.close()
    return result


def test_it_serves_add_checkpoint_over_http(served):
    status, content_type, body = post(served, request(0, [], signed(6)))
    assert (status, content_type) == (200, "text/plain; charset=utf-8")
    assert body.startswith("— witness.example/w1 ".encode())

    assert post(served, request(2, [], signed(9))) == (409, "text/x.tlog.size", b"6\n")
    assert post(served, b"old 0\n", path="/elsewhere")[0] == 404

    conn = http.client.HTTPConnection("127.0.0.1", served, timeout=10)
    conn.request("GET", f"/{origin_hash(ORIGIN)}/checkpoint")
    latest = conn.getresponse()
    assert (latest.status, latest.read()) == (200, signed(6) + body)
    conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_it_makes_an_owner_only_key_and_serves_from_the_command_line(tmp_path, capsys):
    key = tmp_path / "w.key"
    assert cli.main(["keygen", "--name", "witness.test/w9", "--out", str(key)]) == 0
    vkey = capsys.readouterr().out.strip()
    verifier = notes.parse_verifier(vkey)
    assert (verifier.name, verifier.alg) == ("witness.test/w9", notes.ALG_COSIGNATURE_V1)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("PRIVATE+KEY+witness.test/w9+")
    # never overwrites a key
    assert cli.main(["keygen", "--name", "witness.test/w9", "--out", str(key)]) == 2
    assert "File exists" in capsys.readouterr().err
    assert cli.main(["vkey", "--key", str(key)]) == 0
    assert capsys.readouterr().out.strip() == vkey

    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "witness",
            "serve",
            "--key",
            str(key),
            "--state",
            str(tmp_path / "state"),
            "--log",
            LOG.verifier.vkey,
            "--port",
            str(port),
            "--quiet",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == f"witness {vkey} on http://127.0.0.1:{port}\n"
        status, _, body = post(port, request(0, [], signed(3)))
        assert status == 200
        notes.open_note(signed(3) + body, [verifier])
        assert post(port, request(3, TREE.consistency_proof(3, 10), signed(10)))[0] == 200
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert (tmp_path / "state" / f"{origin_hash(ORIGIN)}.checkpoint").exists()


def test_it_refuses_to_start_with_a_bad_log_key(tmp_path, capsys):
    key = tmp_path / "w.key"
    cli.main(["keygen", "--name", "w", "--out", str(key)])
    capsys.readouterr()

    code = cli.main(
        [
            "serve",
            "--key",
            str(key),
            "--state",
            str(tmp_path),
            "--log",
            "x+00000000+AA==",
            "--port",
            "1",
        ]
    )

    assert code == 2
    assert capsys.readouterr().err == "witness: invalid verifier hash\n"


def test_held_is_read_back_from_the_file(store):
    note = signed(11) + b"\xe2\x80\x94 w AAAA\n"
    store.write(ORIGIN, Held(11, TREE.root(11), note))
    held = store.latest(ORIGIN)
    assert held == Held(11, TREE.root(11), note)
    assert os.listdir(store.directory) == [f"{origin_hash(ORIGIN)}.checkpoint"]
