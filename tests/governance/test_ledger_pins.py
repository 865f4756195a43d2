"""Pins of what the ledger's append says and writes, byte for byte: the refusals it raises
itself (not the services' checks in front of it), and the exact hash, signature and Merkle
leaf of events written with a fixed server key at fixed times."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import transaction

from core.ledger import chain, codes, signing
from governance import keystore, ledger
from governance.models import GovernanceEvent, MerkleNode, SigningKey
from tlog import merkle

pytestmark = pytest.mark.django_db

#: a test vector, not a secret: the server key of these pins
SEED = bytes(range(32))
AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _fixed_key() -> SigningKey:
    public = signing.public_key_of(SEED)
    return SigningKey.objects.create(
        key_id=signing.key_id_for(public, ledger.SERVER_KEY_PREFIX),
        public_key=public.hex(),
        fingerprint=signing.fingerprint(public),
        encrypted_private_key=keystore.encrypt_private_key(SEED),
        valid_from=AT,
    )


def test_append_refuses_an_unknown_type_with_its_code_and_message():
    with pytest.raises(codes.GovernanceError) as refused, transaction.atomic():
        ledger.append(event_type="NOPE", payload={})

    assert refused.value.code == codes.EVENT_TYPE_UNKNOWN
    assert refused.value.message == "unknown governance event type 'NOPE'"
    assert GovernanceEvent.objects.count() == 0


def test_append_many_refuses_an_unknown_type_before_anything_is_written():
    with pytest.raises(codes.GovernanceError) as refused, transaction.atomic():
        ledger.append_many(
            [
                {"event_type": codes.SECURITY_INCIDENT, "payload": {}},
                {"event_type": "NOPE", "payload": {}},
            ]
        )

    assert refused.value.code == codes.EVENT_TYPE_UNKNOWN
    assert refused.value.message == "unknown governance event type 'NOPE'"
    assert GovernanceEvent.objects.count() == 0


def test_append_many_names_the_fields_an_entry_takes():
    entry = {"event_type": codes.SECURITY_INCIDENT, "payload": {}, "x": 1}
    with pytest.raises(TypeError) as refused, transaction.atomic():
        ledger.append_many([entry])

    assert str(refused.value) == (
        "an append_many entry takes ['actor', 'actor_key_id', 'actor_label', "
        "'actor_signature', 'event_type', 'idempotency_key', 'payload']: "
        "{'event_type': 'SECURITY_INCIDENT', 'payload': {}, 'x': 1}"
    )


def test_inserted_events_hash_and_sign_exactly_these_bytes():
    key = _fixed_key()
    with transaction.atomic():
        ledger.lock()
        events = [
            ledger.insert(
                prev=None,
                event_type=codes.KEY_ADDED,
                payload=ledger.server_key_payload(key),
                key=key,
                created_at=AT,
            )
        ]
        events.append(
            ledger.insert(
                prev=events[-1],
                event_type=codes.SECURITY_INCIDENT,
                payload={"reason": "pin", "n": 1, "nested": {"b": [1, 2], "a": "é"}},
                key=key,
                created_at=AT,
                actor_label="pinner",
                idempotency_key="pin-1",
            )
        )
        events.append(
            ledger.insert(
                prev=events[-1],
                event_type=codes.SECURITY_INCIDENT,
                payload={},
                key=key,
                created_at=AT,
            )
        )

    assert key.key_id == "server-56475aa75463474c"
    assert [(e.seq, e.prev_hash) for e in events] == [
        (1, chain.GENESIS_PREV_HASH),
        (2, events[0].hash),
        (3, events[1].hash),
    ]
    assert [e.actor_label for e in events] == ["system", "pinner", "system"]
    assert [(e.hash, e.server_signature) for e in events] == [
        (
            "sha256:c58bb2cce56e77a0258f070dcdfb4b5c2e04e0345e203229858d40f4e71675f4",
            "8d68d74a0f03d7d39265750e54c503832216aa55ce5563802c380debe4163fce"
            "c702ba2642b2eb54ae4280a0ddc677e007bcf56f0f41cfacdfe5cf568153520e",
        ),
        (
            "sha256:25262a78be434fb9dad9d0c030502ac20dde0614d0ff65726fc755c9eaaf67a7",
            "0659c047be8d4530e050dd2ad30be9a01a1cf7275608187a71124366aaac4b00"
            "52fa9001c3bde0d13dd5a820cacdc73a1aa81726525569aaf379ac78188ff709",
        ),
        (
            "sha256:9299645804427aca64320ededc41d90ee663d61e7fe0a883ee5b3e3f9065fb85",
            "2c26afa567d8596254f9545eed52911fb8d8c413302bd388a47c264231ecbe33"
            "937af7d4454a07e169943ac310dd132dbe2a59275b17a7cace4ebf7475c56d08",
        ),
    ]
    stored = list(GovernanceEvent.objects.order_by("seq").values_list(*chain.FIELDS))
    assert stored == [ledger.values_row(_fields(e)) for e in events]
    tree = merkle.MemoryTree([e.hash.encode("ascii") for e in events])
    assert {(n.level, n.index): bytes(n.hash) for n in MerkleNode.objects.all()} == {
        (level, index): value
        for level, nodes in enumerate(tree.levels)
        for index, value in enumerate(nodes)
    }
    assert ledger.verify().ok


def _fields(event: GovernanceEvent) -> dict:
    return {name: getattr(event, name) for name in chain.FIELDS}
