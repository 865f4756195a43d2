"""The pure core: the event hash and signature definitions (fixed vectors), the verifier's
verdicts, the quorum rule, key encodings. No database."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import rfc8785

from core.canonical import jcs
from core.ledger import chain, codes, signing
from governance import council

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
PRIVATE = bytes(range(32))  # a test vector, not a secret
OTHER = bytes(range(1, 33))
PUBLIC = signing.public_key_of(PRIVATE)
KEY_ID = signing.key_id_for(PUBLIC, "server")

VECTOR_BODY = chain.event_body(
    seq=1,
    code=400,
    type="KEY_ADDED",
    created_at=T0,
    actor_id=None,
    actor_label="system",
    payload={"registry": "server", "key_id": "server-x", "é": [1, 2.5, True, None]},
    idempotency_key=None,
    server_key_id="server-x",
    actor_key_id=None,
    actor_signature=None,
)


def test_the_event_hash_is_sha256_of_prev_hash_and_the_jcs_body():
    assert jcs(VECTOR_BODY) == (
        b'{"actor":"system","actor_id":null,"actor_key_id":null,"actor_signature":null,'
        b'"code":400,"created_at":"2026-01-02T03:04:05.678901Z","idempotency_key":null,'
        b'"payload":{"key_id":"server-x","registry":"server","\xc3\xa9":[1,2.5,true,null]},'
        b'"seq":1,"server_key_id":"server-x","type":"KEY_ADDED"}'
    )
    assert jcs(VECTOR_BODY) == rfc8785.dumps(VECTOR_BODY)  # an independent RFC 8785 writer
    digest = "sha256:41bba357353269854546b9ee96162aa5cf33d98097d949c63cb6b61bd2b9bcd3"
    assert chain.event_hash("", VECTOR_BODY) == digest
    prev = "sha256:" + "ab" * 32
    assert chain.event_hash(prev, VECTOR_BODY) == (
        "sha256:" + hashlib.sha256(prev.encode() + jcs(VECTOR_BODY)).hexdigest()
    )


def test_the_server_signs_the_ascii_of_the_hash():
    digest = chain.event_hash("", VECTOR_BODY)
    assert PUBLIC.hex() == "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8"
    assert signing.sign(PRIVATE, digest.encode()) == (
        "b9ee940a00c9bd66e85f5da699520939d1c0e5a210d0a31bcc0958b7bc0a6e29"
        "a5f6f98e9dd2cf38e35c534a74a19f26999114bbc9a4f752ee8fd3dcc9ea6600"
    )
    assert KEY_ID == "server-56475aa75463474c"


# --- a synthetic ledger --------------------------------------------------------------------------


def _row(
    seq, prev, *, code=500, type_="PII_REVEALED", payload=None, key=(KEY_ID, PRIVATE), at=None
):
    body = chain.event_body(
        seq=seq,
        code=code,
        type=type_,
        created_at=at or T0 + timedelta(seconds=seq),
        actor_id=None,
        actor_label="system",
        payload=payload if payload is not None else {"n": seq},
        idempotency_key=None,
        server_key_id=key[0],
        actor_key_id=None,
        actor_signature=None,
    )
    digest = chain.event_hash(prev, body)
    values = {
        **dict.fromkeys(chain.FIELDS),
        "seq": seq,
        "code": code,
        "type": type_,
        "created_at": at or T0 + timedelta(seconds=seq),
        "actor_label": "system",
        "payload": body["payload"],
        "server_key_id": key[0],
        "prev_hash": prev,
        "hash": digest,
        "server_signature": signing.sign(key[1], digest.encode()),
    }
    return tuple(values[f] for f in chain.FIELDS)


def _announce(public: bytes, key_id: str) -> dict:
    return {"registry": "server", "key_id": key_id, "public_key": public.hex()}


def _ledger(n: int) -> list[tuple]:
    rows = [_row(1, "", code=400, type_="KEY_ADDED", payload=_announce(PUBLIC, KEY_ID))]
    for seq in range(2, n + 1):
        rows.append(_row(seq, rows[-1][chain.FIELDS.index("hash")]))
    return rows


KEYS = {KEY_ID: chain.ServerKey(KEY_ID, PUBLIC, valid_from=T0)}


def test_it_verifies_a_well_formed_ledger():
    rows = _ledger(5)
    result = chain.verify_chain(rows, server_keys=KEYS)
    assert result == chain.ChainResult(True, 5, rows[-1][12], rows[0][12])


def test_it_names_a_missing_seq():
    rows = _ledger(5)
    del rows[2]
    result = chain.verify_chain(rows, server_keys=KEYS)
    assert result.broken == chain.Break(
        3, codes.CHAIN_SEQ, "event 3 is missing: the next stored event has seq 4", "3", "4"
    )


def test_it_names_a_key_used_outside_its_window():
    rows = _ledger(3)
    keys = {KEY_ID: chain.ServerKey(KEY_ID, PUBLIC, valid_from=T0, revoked_at=T0 + timedelta(1))}
    late = _row(4, rows[-1][12], at=T0 + timedelta(days=2))
    result = chain.verify_chain([*rows, late], server_keys=keys)
    assert result.broken is not None
    assert (result.broken.seq, result.broken.code) == (4, codes.CHAIN_KEY_WINDOW)


def test_a_rotated_key_signs_nothing_after_the_rotation():
    rows = _ledger(2)
    other_public = signing.public_key_of(OTHER)
    other_id = signing.key_id_for(other_public, "server")
    keys = {**KEYS, other_id: chain.ServerKey(other_id, other_public, valid_from=T0)}
    rotation = {
        **_announce(other_public, other_id),
        "new_key_id": other_id,
        "old_key_id": KEY_ID,
    }
    rows.append(_row(3, rows[-1][12], code=401, type_="KEY_ROTATED", payload=rotation))
    rows.append(_row(4, rows[-1][12], key=(other_id, OTHER)))
    assert chain.verify_chain(rows, server_keys=keys).ok
    stale = _row(5, rows[-1][12])  # the old key again
    result = chain.verify_chain([*rows, stale], server_keys=keys)
    assert result.broken == chain.Break(
        5, codes.CHAIN_KEY_UNANNOUNCED, f"event 5 is signed by key {KEY_ID}, retired by event 3"
    )


def test_a_parallel_check_finds_the_same_first_break():
    rows = _ledger(6)
    forged = list(rows[4])
    forged[chain.FIELDS.index("server_signature")] = signing.sign(OTHER, forged[12].encode())
    rows[4] = tuple(forged)
    linker = chain.Linker(KEYS)
    for row in rows:
        linker.feed(row)
    local = chain.check_rows(rows, KEYS)
    assert linker.result(local).broken == chain.Break(
        5,
        codes.CHAIN_SIGNATURE,
        f"event 5's server signature does not verify with key {KEY_ID}",
        observed=forged[chain.FIELDS.index("server_signature")],
    )


# --- the quorum rule -----------------------------------------------------------------------------


def _tally(*votes):
    return council.tally(
        [council.Vote(*v) for v in votes], admins_required=1, council_required=2, deny_threshold=1
    )


def test_quorum_needs_an_admin_and_two_distinct_council_members():
    assert _tally((1, "k1", "admin", "approve"), (2, "k2", "council", "approve")).state == (
        council.PENDING
    )
    assert (
        _tally(
            (1, "k1", "admin", "approve"),
            (2, "k2", "council", "approve"),
            (3, "k3", "council", "approve"),
        ).state
        == council.APPROVED
    )


def test_quorum_counts_people_and_keys_not_rows():
    same_person = _tally(
        (1, "k1", "admin", "approve"),
        (2, "k2", "council", "approve"),
        (2, "k3", "council", "approve"),
    )
    same_key = _tally(
        (1, "k1", "admin", "approve"),
        (2, "k2", "council", "approve"),
        (3, "k2", "council", "approve"),
    )
    assert (same_person.council, same_person.state) == (1, council.PENDING)
    assert (same_key.council, same_key.state) == (1, council.PENDING)


def test_a_denial_wins_over_an_approval():
    assert (
        _tally(
            (1, "k1", "admin", "approve"),
            (2, "k2", "council", "approve"),
            (3, "k3", "council", "deny"),
        ).state
        == council.REJECTED
    )


# --- key encodings -------------------------------------------------------------------------------


def test_public_keys_are_read_from_every_encoding_a_member_may_paste():
    pem = signing.public_key_to_pem(PUBLIC)
    der = base64.b64decode("".join(pem.splitlines()[1:-1]))
    for text in (
        pem,
        PUBLIC.hex(),
        base64.b64encode(PUBLIC).decode(),
        base64.urlsafe_b64encode(PUBLIC).decode().rstrip("="),
        base64.b64encode(der).decode(),  # WebCrypto exportKey("spki")
    ):
        assert signing.public_key_from_text(text) == PUBLIC


def test_a_private_key_file_round_trips():
    pem = signing.private_key_to_pem(PRIVATE)
    assert pem.startswith("-----BEGIN PRIVATE KEY-----")
    assert signing.private_key_from_text(pem) == PRIVATE
    with pytest.raises(signing.KeyFormatError):
        signing.private_key_from_text(
            "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----"
        )


def test_a_malformed_signature_simply_does_not_verify():
    assert not signing.verify(PUBLIC, b"m", "zz" * 64)
    assert not signing.verify(PUBLIC, b"m", "00")
    assert signing.verify(PUBLIC, b"m", signing.sign(PRIVATE, b"m"))


def test_the_pure_core_imports_no_django():
    code = (
        "import sys; import core.ledger.chain, core.ledger.signing, governance.council, "
        "core.ledger.codes; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
