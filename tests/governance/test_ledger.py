from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from core.ledger import chain, codes, signing
from governance import ledger, services
from governance.models import GovernanceEvent, SigningKey
from replay.models import AppendOnlyError

pytestmark = pytest.mark.django_db


def test_it_introduces_the_first_server_key_in_the_first_event():
    alice = User.objects.create_user("alice")  # no roles: nothing in the ledger yet
    event = services.event_append(
        event_type=codes.PII_REVEALED, payload={"trace_id": "t"}, actor=alice
    )
    first = GovernanceEvent.objects.get(seq=1)
    key = SigningKey.objects.get()
    assert (first.type, first.code, first.actor_label) == (codes.KEY_ADDED, 400, "system")
    assert first.payload == {
        "registry": "server",
        "key_id": key.key_id,
        "public_key": key.public_key,
        "fingerprint": key.fingerprint,
        "valid_from": signing.format_time(key.valid_from),
    }
    assert first.prev_hash == ""
    assert (event.seq, event.code, event.actor_label, event.actor_id) == (2, 500, "alice", alice.pk)
    assert event.prev_hash == first.hash
    assert event.server_key_id == key.key_id


def test_it_hashes_prev_hash_and_the_jcs_body():
    event = services.event_append(event_type=codes.PII_REVEALED, payload={"b": 1, "a": "é"})
    body = chain.row_body([getattr(event, f) for f in chain.FIELDS])
    assert chain.event_hash(event.prev_hash, body) == event.hash
    import hashlib

    from core.canonical import jcs

    assert (
        event.hash == "sha256:" + hashlib.sha256(event.prev_hash.encode() + jcs(body)).hexdigest()
    )
    key = SigningKey.objects.get()
    assert signing.verify(
        bytes.fromhex(key.public_key), event.hash.encode(), event.server_signature
    )


def test_it_appends_once_per_idempotency_key():
    one = services.event_append(
        event_type=codes.REPLAY_RESULT, payload={"run": 1}, idempotency_key="replay-result:1"
    )
    two = services.event_append(
        event_type=codes.REPLAY_RESULT, payload={"run": 1}, idempotency_key="replay-result:1"
    )
    assert one.seq == two.seq
    assert GovernanceEvent.objects.filter(code=101).count() == 1


def test_it_refuses_an_unknown_event_type():
    with pytest.raises(codes.GovernanceError) as caught:
        services.event_append(event_type="NOT_A_TYPE", payload={})
    assert caught.value.code == codes.EVENT_TYPE_UNKNOWN
    assert caught.value.message == services.EVENT_TYPE_UNKNOWN_MESSAGE.format(
        event_type="NOT_A_TYPE"
    )
    assert not GovernanceEvent.objects.exists()


def test_it_verifies_a_ledger_it_wrote():
    for n in range(5):
        services.event_append(event_type=codes.PII_REVEALED, payload={"n": n})
    result = ledger.verify()
    assert result.ok
    assert result.size == 6
    assert result.head_hash == GovernanceEvent.objects.get(seq=6).hash
    assert result.genesis_hash == GovernanceEvent.objects.get(seq=1).hash


def test_it_refuses_orm_rewrites_of_events():
    event = services.event_append(event_type=codes.PII_REVEALED, payload={})
    event.payload = {"x": 1}
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        GovernanceEvent.objects.filter(seq=event.seq).update(payload={})
    with pytest.raises(AppendOnlyError):
        GovernanceEvent.objects.all().delete()
