"""C2SP signed-note and tlog-checkpoint against other implementations' published notes and keys:
the example of c2sp.org/signed-note, the tests of Go's golang.org/x/mod/sumdb/note
(note_test.go), a real checkpoint of sum.golang.org (as transparency-dev/formats's
log/note_test.go keeps it) and the checkpoints of transparency-dev/witness's tests."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from tlog import checkpoint as checkpoints
from tlog import note as notes

# golang.org/x/mod/sumdb/note, note_test.go
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = (
    b"If you think cryptography is the answer to your problem,\n"
    b"then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZ"
    "b6KE6RyyBwJnAM=\n"
).encode()
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox3"
    "3WWd1RvMc+QQ=\n"
).encode()
PETER_NOTE = TEXT + b"\n" + PETER_SIG

# c2sp.org/signed-note, "Verifier keys", example
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ON"
    "ncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
).encode()

# a checkpoint of the Go checksum database (sum.golang.org) at size 6476701, with its key
# (golang.org/x/mod gosumcheck's default key; transparency-dev/formats log/note_test.go)
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_CHECKPOINT = (
    "go.sum database tree\n6476701\nmb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n\n"
    "— sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYf"
    "vimWEPWL+o3GeoWwOoAw=\n"
).encode()

# transparency-dev/witness, witness/witness_test.go
MONKEYS_VKEY = "monkeys+db4d9f7e+AULaJMvTtDLHPUcUrjdDad9vDlh/PTfC2VV60JUtCfWT"
WITNESS_SKEY = "PRIVATE+KEY+witness+f13a86db+AaLa/dfyBhyo/m0Z7WCi98ENVZWtrP8pxgRNrx7tIWiA"
WITNESS_VKEY = "witness+f13a86db+AdYV1Ztajd9BvyjP2HgpwrqYL6TjOwIjGMOq8Bu42xbN"
MONKEYS_5 = (
    "monkeys\n5\n41smjBUiAU70EtKlT6lIOIYtRTYxYXsDB+XHfcvu/BE=\n\n— monkeys 202fftzGl3LVoqjXfwCFZ"
    "ZXs8I+5G22+Ek2K0AOyBuSJ/8/CZawNF+6fNlTKOCd622pbzJNkkJFWuw9DbicZCkEx9AY=\n"
).encode()

EXAMPLES = [
    (PETER_VKEY, PETER_NOTE),
    (C2SP_VKEY, C2SP_NOTE),
    (SUMDB_VKEY, SUMDB_CHECKPOINT),
    (MONKEYS_VKEY, MONKEYS_5),
]


# --- verifier keys ---------------------------------------------------------------------------


def test_it_reads_a_verifier_key_and_computes_its_id_as_the_spec_says():
    verifier = notes.parse_verifier(PETER_VKEY)

    public = base64.b64decode("ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")[1:]
    expected = hashlib.sha256(b"PeterNeumann\n\x01" + public).digest()[:4]
    assert (verifier.name, verifier.key_id, verifier.alg) == ("PeterNeumann", 0xC74F20A3, 1)
    assert verifier.key_id.to_bytes(4, "big") == expected
    assert verifier.public_key == public
    assert verifier.vkey == PETER_VKEY


def test_it_refuses_every_mangling_of_a_verifier_key_as_go_does():
    # note_test.go TestNewVerifier: every proper substring, every byte incremented
    b = PETER_VKEY.encode()
    mangled = [b[i:j] for i in range(len(b) + 1) for j in range(i + 1, len(b) + 1)]
    mangled = [m for m in mangled if m != b]
    mangled += [b[:i] + bytes([b[i] + 1]) + b[i + 1 :] for i in range(len(b))]
    for key in mangled:
        with pytest.raises(notes.KeyFormatError):
            notes.parse_verifier(key.decode("utf-8", "replace"))


@pytest.mark.parametrize(
    ("vkey", "message"),
    [
        # wrong length key, with adjusted key hash (note_test.go)
        (
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
            "malformed verifier id",
        ),
        # unknown algorithm, with adjusted key hash (note_test.go)
        (
            "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "unknown verifier algorithm",
        ),
        # a key id that is not the name's
        (
            "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "invalid verifier hash",
        ),
        (
            "PeterNeuman+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "invalid verifier hash",
        ),
        (
            "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "malformed verifier id",
        ),
        (
            "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "malformed verifier id",
        ),
    ],
)
def test_it_names_why_a_verifier_key_is_refused(vkey, message):
    with pytest.raises(notes.KeyFormatError, match=f"^{message}$"):
        notes.parse_verifier(vkey)


def test_it_reads_go_signer_keys_and_signs_byte_for_byte_as_go_does():
    signer = notes.parse_signer(PETER_SKEY)

    assert signer.verifier.vkey == PETER_VKEY
    assert signer.skey == PETER_SKEY
    # note_test.go TestSign: Ed25519 is deterministic, so the same bytes
    assert notes.sign_note(TEXT, [signer]) == PETER_NOTE
    # an older signature of the same key is replaced, others kept before the new ones
    enoch = notes.Signature("EnochRoot", 0xAF0CFE78, ENOCH_SIG.decode().split(" ")[2].strip())
    stale = notes.Signature("PeterNeumann", 0xC74F20A3, "BADSIGN=")
    resigned = notes.sign_note(TEXT, [signer], keep=[stale, enoch])
    assert resigned == TEXT + b"\n" + ENOCH_SIG + PETER_SIG


def test_it_refuses_every_mangling_of_a_signer_key():
    b = PETER_SKEY.encode()
    mangled = [b[i:j] for i in range(len(b) + 1) for j in range(i + 1, len(b) + 1)]
    mangled = [m for m in mangled if m != b]
    mangled += [b[:i] + bytes([b[i] + 1]) + b[i + 1 :] for i in range(len(b))]
    for key in mangled:
        with pytest.raises(notes.KeyFormatError):
            notes.parse_signer(key.decode("utf-8", "replace"))


def test_it_refuses_to_sign_text_that_is_not_a_note_text():
    signer = notes.parse_signer(PETER_SKEY)
    with pytest.raises(notes.MalformedNote, match=r"^malformed note$"):
        notes.sign_note(b"abc", [signer])
    with pytest.raises(notes.MalformedNote, match=r"^malformed note$"):
        notes.sign_note(b"a\x01b\n", [signer])


# --- opening notes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("vkey", "msg"), EXAMPLES, ids=["go", "c2sp", "sumdb", "witness"])
def test_it_verifies_other_implementations_notes(vkey, msg):
    note = notes.open_note(msg, [notes.parse_verifier(vkey)])

    assert msg.startswith(note.text)
    assert [s.name for s in note.sigs] == [vkey.split("+")[0]]
    assert note.unverified == []


@pytest.mark.parametrize(("vkey", "msg"), EXAMPLES, ids=["go", "c2sp", "sumdb", "witness"])
def test_it_refuses_each_note_with_any_single_byte_changed(vkey, msg):
    verifier = notes.parse_verifier(vkey)
    for i in range(len(msg)):
        for delta in (1, 0x20):
            changed = msg[:i] + bytes([msg[i] ^ delta]) + msg[i + 1 :]
            with pytest.raises(notes.NoteError):
                notes.open_note(changed, [verifier])


@pytest.mark.parametrize(("vkey", "msg"), EXAMPLES, ids=["go", "c2sp", "sumdb", "witness"])
def test_it_refuses_each_note_under_an_unknown_key(vkey, msg):
    with pytest.raises(notes.UnverifiedNote, match=r"^note has no verifiable signatures$") as info:
        notes.open_note(msg, [notes.parse_verifier(ENOCH_VKEY)])
    assert [s.name for s in info.value.note.unverified] == [vkey.split("+")[0]]


def test_it_refuses_a_signature_line_of_another_key():
    peter = notes.parse_verifier(PETER_VKEY)
    # Enoch's line, and Peter's name and id over Enoch's signature
    with pytest.raises(notes.UnverifiedNote):
        notes.open_note(TEXT + b"\n" + ENOCH_SIG, [peter])
    enoch_raw = base64.b64decode(ENOCH_SIG.decode().split(" ")[2])
    forged = base64.b64encode(b"\xc7\x4f\x20\xa3" + enoch_raw[4:]).decode()
    with pytest.raises(
        notes.InvalidNoteSignature, match=r"^invalid signature for key PeterNeumann\+c74f20a3$"
    ):
        notes.open_note(TEXT + b"\n" + f"— PeterNeumann {forged}\n".encode(), [peter])


def test_it_ignores_a_key_whose_id_does_not_match_the_name():
    peter = notes.parse_verifier(PETER_VKEY)
    # Peter's signature under another name, or under Peter's name with another id: unknown
    misnamed = PETER_SIG.replace(b"PeterNeumann", b"CarmenSandiego")
    with pytest.raises(notes.UnverifiedNote):
        notes.open_note(TEXT + b"\n" + misnamed, [peter])
    raw = base64.b64decode(PETER_SIG.decode().split(" ")[2])
    other_id = base64.b64encode(b"\xc7\x4f\x20\xa4" + raw[4:]).decode()
    with pytest.raises(notes.UnverifiedNote):
        notes.open_note(TEXT + b"\n" + f"— PeterNeumann {other_id}\n".encode(), [peter])


def test_it_opens_notes_as_go_open_does():
    # note_test.go TestOpen
    peter = notes.parse_verifier(PETER_VKEY)
    enoch = notes.parse_verifier(ENOCH_VKEY)
    both = TEXT + b"\n" + PETER_SIG + ENOCH_SIG

    one = notes.open_note(both, [peter])
    assert one.text == TEXT
    assert [(s.name, s.key_id) for s in one.sigs] == [("PeterNeumann", 0xC74F20A3)]
    assert [(s.name, s.key_id) for s in one.unverified] == [("EnochRoot", 0xAF0CFE78)]

    two = notes.open_note(both, [peter, enoch])
    assert [s.name for s in two.sigs] == ["PeterNeumann", "EnochRoot"]
    assert two.unverified == []

    with pytest.raises(notes.UnverifiedNote) as info:
        notes.open_note(both, [])
    assert [s.name for s in info.value.note.unverified] == ["PeterNeumann", "EnochRoot"]

    with pytest.raises(notes.AmbiguousKey, match=r"^ambiguous key EnochRoot\+af0cfe78$"):
        notes.open_note(TEXT + b"\n" + ENOCH_SIG, [enoch, peter, enoch])
    assert notes.open_note(TEXT + b"\n" + PETER_SIG, [enoch, peter, enoch]).sigs

    with pytest.raises(notes.MalformedNote, match=r"^malformed note$"):
        notes.open_note(TEXT + b"\n" + PETER_SIG * 101, [peter])

    bad = PETER_SIG[:60] + b"ABCD" + PETER_SIG[60:]
    with pytest.raises(
        notes.InvalidNoteSignature, match=r"^invalid signature for key PeterNeumann\+c74f20a3$"
    ):
        notes.open_note(TEXT + b"\n" + bad, [peter])

    # duplicated verified and unverified signatures are read once
    enoch_bad = ENOCH_SIG[:60] + b"ABCD" + ENOCH_SIG[60:]
    dup = notes.open_note(
        TEXT + b"\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_bad, [peter]
    )
    assert len(dup.sigs) == 1
    assert len(dup.unverified) == 2


@pytest.mark.parametrize(
    "msg",
    [
        TEXT,
        TEXT + b"\n",
        TEXT + b"\n" + PETER_SIG[:-1],
        b"\x01" + TEXT + b"\n" + PETER_SIG,
        b"\xff" + TEXT + b"\n" + PETER_SIG,
        TEXT + b"\n" + PETER_SIG.replace(b"PeterNeumann", b"Bad Name"),
        TEXT + b"\n" + PETER_SIG + b"Unexpected line.\n",
    ],
)
def test_it_refuses_malformed_notes_as_go_does(msg):
    with pytest.raises(notes.MalformedNote, match=r"^malformed note$"):
        notes.open_note(msg, [notes.parse_verifier(PETER_VKEY)])


# --- cosignatures ----------------------------------------------------------------------------


def test_it_cosigns_as_cosignature_v1_with_the_witness_key_of_transparency_dev():
    witness = notes.parse_signer(WITNESS_SKEY).as_cosigner()
    assert notes.parse_signer(WITNESS_SKEY).verifier.vkey == WITNESS_VKEY
    public = base64.b64decode(WITNESS_VKEY.split("+")[2])[1:]
    assert (
        witness.key_id.to_bytes(4, "big") == hashlib.sha256(b"witness\n\x04" + public).digest()[:4]
    )
    body = MONKEYS_5.split(b"\n\n")[0] + b"\n"

    line = notes.signature_line(witness, body, timestamp=1679315147)

    name, b64 = line.removeprefix("— ").removesuffix("\n").split(" ")
    raw = base64.b64decode(b64)
    assert name == "witness"
    assert raw[:4] == witness.key_id.to_bytes(4, "big")
    assert int.from_bytes(raw[4:12], "big") == 1679315147
    # the signed message, checked with the raw Ed25519 key
    Ed25519PublicKey.from_public_bytes(public).verify(
        raw[12:], b"cosignature/v1\ntime 1679315147\n" + body
    )
    cosigned = MONKEYS_5 + line.encode()
    log = notes.parse_verifier(MONKEYS_VKEY)
    note = notes.open_note(cosigned, [log, witness.verifier])
    assert [s.name for s in note.sigs] == ["monkeys", "witness"]
    assert notes.cosignature_timestamp(note.sigs[1]) == 1679315147
    # a cosigner verifier (0x04) does not verify a plain signature of the same key, and the
    # plain verifier (0x01) ignores the cosignature: different key ids
    plain = notes.parse_verifier(WITNESS_VKEY)
    with pytest.raises(notes.UnverifiedNote):
        notes.open_note(body + b"\n" + line.encode(), [plain])
    changed_time = raw[:4] + (1679315148).to_bytes(8, "big") + raw[12:]
    forged = f"— witness {base64.b64encode(changed_time).decode()}\n".encode()
    with pytest.raises(notes.InvalidNoteSignature):
        notes.open_note(body + b"\n" + forged, [witness.verifier])


def test_it_writes_a_cosigner_vkey_with_type_0x04():
    witness = notes.parse_signer(WITNESS_SKEY).as_cosigner()
    vkey = witness.verifier.vkey

    assert vkey.startswith("witness+")
    assert base64.b64decode(vkey.split("+", 2)[2])[0] == 0x04
    assert notes.parse_verifier(vkey) == witness.verifier


# --- checkpoints -----------------------------------------------------------------------------


def test_it_reads_a_real_checkpoint_of_the_go_checksum_database():
    cp, note = checkpoints.open_checkpoint(
        SUMDB_CHECKPOINT, [notes.parse_verifier(SUMDB_VKEY)], origin="go.sum database tree"
    )

    assert cp == checkpoints.Checkpoint(
        "go.sum database tree",
        6476701,
        base64.b64decode("mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk="),
    )
    assert cp.body() == note.text
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"^checkpoint origin is 'go.sum database tree', not 'sum.golang.org'$",
    ):
        checkpoints.open_checkpoint(
            SUMDB_CHECKPOINT, [notes.parse_verifier(SUMDB_VKEY)], origin="sum.golang.org"
        )


def test_it_writes_and_reads_extension_lines():
    cp = checkpoints.Checkpoint("example.com/log", 3, b"\x07" * 32, ("ext one", "ext two"))
    assert (
        cp.body()
        == b"example.com/log\n3\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\next one\next two\n"
    )
    assert checkpoints.parse_checkpoint(cp.body()) == cp


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"origin\n5\n", "fewer than three lines"),
        (b"\n5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", "the origin line is empty"),
        (b"o\n05\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", "tree size '05'"),
        (b"o\n-5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", "tree size '-5'"),
        (b"o\n0x5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n", "tree size '0x5'"),
        (b"o\n5\nBwcHBw==\n", "root hash 'BwcHBw=='"),
        (
            b"o\n5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd=\n",
            "root hash 'BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwd='",
        ),
        (
            b"o\n5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=",
            "the text does not end in a newline",
        ),
        (b"o\n5\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n\n", "an extension line is empty"),
    ],
)
def test_it_refuses_a_malformed_checkpoint_with_its_reason(text, message):
    with pytest.raises(
        checkpoints.CheckpointError, match=f"^malformed checkpoint: {message}$".replace("+", r"\+")
    ):
        checkpoints.parse_checkpoint(text)
