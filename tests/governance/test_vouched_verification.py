"""Full verification that scales (issue 21 item 5): a checkpoint signed with a running digest
of the server signatures it covers vouches for them, so verification checks one Ed25519
signature per checkpoint instead of one per event, and every tamper is still named exactly as
the old way names it (the digest disagrees, and the ledger is verified again the old way)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from core.ledger import chain, codes, signing
from governance import ledger, services, transparency
from governance.models import GovernanceEvent, SigningKey, TreeCheckpoint
from replay.dbguards import drop_append_only_sql
from tests.governance.test_tamper import CHANGES, TABLE, ledger_with_an_approval  # noqa: F401

pytestmark = pytest.mark.django_db


def _append(n: int) -> None:
    for i in range(n):
        services.event_append(event_type=codes.SECURITY_INCIDENT, payload={"n": i})


@pytest.fixture
def vouched(ledger_with_an_approval):  # noqa: F811 - the fixture imported above
    """The approval's ledger with a vouching checkpoint over it, and two events after it."""
    cp = transparency.checkpoint()
    assert cp.signatures_digest is not None
    assert cp.signatures_signature
    _append(2)
    return ledger_with_an_approval, cp


@pytest.fixture
def server_signature_checks(monkeypatch):
    """The messages chain's Ed25519 checks were asked about (in this process)."""
    seen: list[bytes] = []
    real = chain.verify

    def counting(public, message, signature):
        seen.append(bytes(message))
        return real(public, message, signature)

    monkeypatch.setattr(chain, "verify", counting)
    return seen


def _tamper(event: GovernanceEvent, field: str) -> tuple[str, object, object]:
    column = GovernanceEvent._meta.get_field(field if field != "actor_id" else "actor")
    value = CHANGES[field](event)
    sql = f"UPDATE {TABLE} SET {column.column} = %s WHERE seq = %s"  # noqa: S608
    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, TABLE):
            cur.execute(drop)
        cur.execute(sql, [column.get_db_prep_save(value, connection), event.seq])
    return sql, column.get_db_prep_save(getattr(event, column.attname), connection), value


def test_the_checkpoint_stores_the_digest_of_the_signatures_it_covers(vouched):
    _event, cp = vouched
    signatures = GovernanceEvent.objects.filter(seq__lte=cp.size).order_by("seq")
    expected = chain.signatures_digest(signatures.values_list("server_signature", flat=True))
    assert bytes(cp.signatures_digest) == expected
    key = SigningKey.objects.get(key_id=cp.key_id)
    assert chain.verify(
        bytes.fromhex(key.public_key),
        chain.signatures_message(cp.size, bytes(cp.root_hash), expected),
        cp.signatures_signature,
    )
    vouch = transparency.vouching_checkpoint()
    assert (vouch.size, vouch.root_hash, vouch.digest) == (cp.size, bytes(cp.root_hash), expected)


def test_covered_events_need_no_server_signature_check_of_their_own(
    vouched, server_signature_checks
):
    event, cp = vouched
    head = GovernanceEvent.objects.count()
    covered = {
        h.encode("ascii")
        for h in GovernanceEvent.objects.filter(seq__lte=cp.size).values_list("hash", flat=True)
    }
    after = {
        h.encode("ascii")
        for h in GovernanceEvent.objects.filter(seq__gt=cp.size).values_list("hash", flat=True)
    }

    result = ledger.verify(workers=1)

    assert result.ok
    assert result.size == head
    assert not covered & set(server_signature_checks)
    assert after <= set(server_signature_checks)  # the events after the checkpoint: old way
    # the member's signature on the vote is still checked
    assert chain.jcs(event.payload) in server_signature_checks

    server_signature_checks.clear()
    old = ledger.verify(workers=1, vouched=False)
    assert old == result
    assert covered <= set(server_signature_checks)


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_every_tamper_of_a_covered_event_gets_the_old_verdict(vouched, field):
    event, cp = vouched
    assert event.seq <= cp.size
    sql, original, value = _tamper(event, field)

    found = ledger.verify(workers=1)

    assert not found.ok
    assert found.broken is not None
    assert found.broken.seq == event.seq, found
    assert found == ledger.verify(workers=1, vouched=False)
    if field == "server_signature":
        assert found.broken.code == codes.CHAIN_SIGNATURE
        assert found.broken.observed == value
    where = value if field == "seq" else event.seq
    with connection.cursor() as cur:
        cur.execute(sql, [original, where])


def test_a_forged_server_signature_alone_is_caught_in_parallel_too(vouched):
    event, _cp = vouched
    assert ledger.verify(workers=2, chunk_size=3).ok
    sql, original, value = _tamper(event, "server_signature")

    found = ledger.verify(workers=2, chunk_size=3)

    assert found.broken == chain.Break(
        event.seq,
        codes.CHAIN_SIGNATURE,
        f"event {event.seq}'s server signature does not verify with key {event.server_key_id}",
        observed=value,
    )
    with connection.cursor() as cur:
        cur.execute(sql, [original, event.seq])


def test_a_forged_signature_after_the_checkpoint_is_checked_the_old_way(vouched):
    _event, cp = vouched
    last = GovernanceEvent.objects.get(seq=cp.size + 2)
    _sql, _original, _value = _tamper(last, "server_signature")

    found = ledger.verify(workers=1)

    assert (found.broken.seq, found.broken.code) == (last.seq, codes.CHAIN_SIGNATURE)


def test_a_checkpoint_over_a_bad_signature_vouches_for_nothing(ledger_with_an_approval):  # noqa: F811
    event = ledger_with_an_approval
    _tamper(event, "server_signature")

    cp = transparency.checkpoint()

    assert cp.signatures_digest is None
    assert cp.signatures_signature == ""
    assert transparency.vouching_checkpoint() is None
    assert ledger.verify(workers=1).broken.code == codes.CHAIN_SIGNATURE


def test_a_checkpoint_goes_on_from_the_last_vouching_one(vouched, monkeypatch):
    _event, first = vouched
    seen: list[bytes] = []
    real = signing.verify

    def counting(public, message, signature):
        seen.append(bytes(message))
        return real(public, message, signature)

    monkeypatch.setattr(signing, "verify", counting)
    second = transparency.checkpoint()

    assert second.size == first.size + 2
    # only the two new events' signatures were checked to sign it, and the first's digest
    new = GovernanceEvent.objects.filter(seq__gt=first.size).order_by("seq")
    assert seen == [
        chain.signatures_message(
            first.size, bytes(first.root_hash), bytes(first.signatures_digest)
        ),
        *(h.encode("ascii") for h in new.values_list("hash", flat=True)),
    ]
    everything = GovernanceEvent.objects.order_by("seq").values_list("server_signature", flat=True)
    assert bytes(second.signatures_digest) == chain.signatures_digest(everything)


def test_too_many_new_events_leave_the_checkpoint_without_a_digest(ledger_with_an_approval):  # noqa: F811
    cp = transparency.checkpoint(vouch_limit=1)

    assert cp.signatures_digest is None
    assert transparency.vouching_checkpoint() is None
    # asked again without the limit, the same size gets a vouching checkpoint
    again = transparency.checkpoint()
    assert again.pk != cp.pk
    assert again.signatures_digest is not None
    assert again.note == cp.note
    assert transparency.checkpoint().pk == again.pk


@pytest.mark.parametrize("what", ["digest", "signature", "root", "revoked"])
def test_a_checkpoint_that_does_not_check_out_is_not_believed(vouched, what):
    _event, cp = vouched
    digest, signature, root_hash = (
        bytes(cp.signatures_digest),
        cp.signatures_signature,
        bytes(cp.root_hash),
    )
    if what == "digest":
        digest = bytes(32)
    elif what == "signature":
        signature = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    elif what == "root":
        root_hash = bytes(32)
    forged = TreeCheckpoint.objects.create(
        size=cp.size,
        root_hash=root_hash,
        note=cp.note,
        key_id=cp.key_id,
        created_at=cp.created_at,
        signatures_digest=digest,
        signatures_signature=signature,
    )
    if what == "revoked":
        with connection.cursor() as cur:
            for drop in drop_append_only_sql(connection.vendor, "governance_signingkey"):
                cur.execute(drop)
        SigningKey.objects.filter(key_id=cp.key_id).update(revoked_at=cp.created_at)
        assert transparency.vouch_of(forged) is None
        return

    assert transparency.vouch_of(forged) is None
    # the genuine one, older, is what vouches
    assert transparency.vouching_checkpoint().digest == bytes(cp.signatures_digest)


def test_the_vouch_agrees_only_with_the_exact_events():
    rows = []
    prev = chain.GENESIS_PREV_HASH
    for seq in range(1, 6):
        h = f"sha256:{seq:064x}"
        row = [None] * len(chain.FIELDS)
        row[0], row[11], row[12], row[13] = seq, prev, h, f"{seq:0128x}"
        rows.append(tuple(row))
        prev = h
    from tlog import merkle

    tree = merkle.MemoryTree([r[12].encode() for r in rows[:4]])
    digest = chain.signatures_digest(r[13] for r in rows[:4])

    def fed(rows_):
        vouch = chain.Vouch(4, tree.root(), digest)
        for r in rows_:
            vouch.feed(r)
        return vouch.agrees()

    assert fed(rows)
    assert not fed(rows[:3])  # too few
    assert not fed([rows[0], rows[2], rows[1], rows[3]])  # out of order
    changed = list(rows[1])
    changed[13] = "0" * 128
    assert not fed([rows[0], tuple(changed), *rows[2:]])
    changed = list(rows[1])
    changed[12] = "sha256:" + "f" * 64
    assert not fed([rows[0], tuple(changed), *rows[2:]])


def test_the_command_vouches_for_a_large_ledger_s_first_checkpoint(
    ledger_with_an_approval,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setattr(transparency, "VOUCH_MAX_NEW", 1)
    call_command("governance", "tlog-checkpoint", stdout=StringIO())
    assert transparency.vouching_checkpoint() is None

    call_command("governance", "tlog-checkpoint", "--vouch-all", stdout=StringIO())

    vouch = transparency.vouching_checkpoint()
    assert vouch is not None
    assert vouch.size == GovernanceEvent.objects.count()
