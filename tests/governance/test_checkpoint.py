"""Signed checkpoints: a later ledger must extend them. Truncation, rollback and a rewritten
past are each detected, even when the rewrite is re-hashed and re-signed with the server key."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from core.ledger import chain, codes, signing
from governance import ledger, selectors, services
from governance.models import GovernanceEvent
from replay.dbguards import drop_append_only_sql

pytestmark = pytest.mark.django_db

TABLE = "governance_governanceevent"


def _append(n: int) -> None:
    for i in range(n):
        services.pii_access_record(actor=None, trace_id=f"t{i}", fields=["email"], reason="DSR")


@pytest.fixture
def checkpoint(tmp_path):
    """A ledger of 6 events and the checkpoint file exported over it."""
    _append(5)
    path = tmp_path / "checkpoint.json"
    call_command("governance", "checkpoint", "--out", str(path), stdout=io.StringIO())
    return path


def _check(path) -> tuple[int, dict]:
    out = io.StringIO()
    try:
        call_command("governance", "check-checkpoint", str(path), "--json", stdout=out)
    except SystemExit as exc:
        return int(exc.code), json.loads(out.getvalue())
    return 0, json.loads(out.getvalue())


def _unguarded(sql: str, params=()) -> None:
    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, TABLE):
            cur.execute(drop)
        cur.execute(sql, params)


def test_a_checkpoint_is_the_signed_head(checkpoint):
    document = json.loads(checkpoint.read_text())
    body = document["checkpoint"]
    head = GovernanceEvent.objects.get(seq=6)
    key = ledger.server_key_current()
    assert body == {
        "type": signing.CHECKPOINT_TYPE,
        "size": 6,
        "head_hash": head.hash,
        "genesis_hash": GovernanceEvent.objects.get(seq=1).hash,
        "created_at": body["created_at"],
        "key_id": key.key_id,
    }
    from core.canonical import jcs

    assert signing.verify(bytes.fromhex(key.public_key), jcs(body), document["signature"])


def test_a_ledger_that_grew_extends_its_checkpoint(checkpoint):
    _append(3)
    services.signing_key_rotate()
    _append(1)
    assert _check(checkpoint) == (
        0,
        {
            "ok": True,
            "code": None,
            "message": selectors.CHECKPOINT_OK_MESSAGE.format(ledger=11, size=6),
            "checkpoint_size": 6,
            "ledger_size": 11,
        },
    )


def test_it_detects_truncation(checkpoint):
    _unguarded(f"DELETE FROM {TABLE} WHERE seq >= 5")  # noqa: S608
    code, verdict = _check(checkpoint)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_TRUNCATED)
    assert verdict["message"] == selectors.CHECKPOINT_TRUNCATED_MESSAGE.format(ledger=4, size=6)


def test_it_detects_a_rollback_that_was_appended_to_again(checkpoint):
    before = GovernanceEvent.objects.get(seq=6).hash
    _unguarded(f"DELETE FROM {TABLE} WHERE seq >= 5")  # noqa: S608 (a restored old backup)
    _append(4)  # and life went on: the ledger is longer than the checkpoint again
    assert ledger.verify().ok  # on its own the forked ledger verifies
    code, verdict = _check(checkpoint)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_FORKED)
    assert verdict["message"] == selectors.CHECKPOINT_FORKED_MESSAGE.format(
        size=6, observed=GovernanceEvent.objects.get(seq=6).hash, expected=before
    )


def test_it_detects_a_rewritten_past_even_re_hashed_and_re_signed(checkpoint):
    """An attacker with the database and the server key rewrites event 3 and recomputes every
    hash and signature after it: the chain verifies, but not against the checkpoint."""
    key = ledger.server_key_current()
    private = ledger.private_key_of(key)
    prev_hash = GovernanceEvent.objects.get(seq=2).hash
    with connection.cursor() as cur:
        for drop in drop_append_only_sql(connection.vendor, TABLE):
            cur.execute(drop)
    for event in GovernanceEvent.objects.filter(seq__gte=3).order_by("seq"):
        payload = event.payload
        if event.seq == 3:
            payload = {**payload, "reason": "nothing to see"}
        row = [getattr(event, f) for f in chain.FIELDS]
        row[chain.FIELDS.index("payload")] = payload
        digest = chain.event_hash(prev_hash, chain.row_body(row))
        payload_field = GovernanceEvent._meta.get_field("payload")
        with connection.cursor() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET payload = %s, prev_hash = %s, hash = %s,"  # noqa: S608
                " server_signature = %s WHERE seq = %s",
                [
                    payload_field.get_db_prep_save(payload, connection),
                    prev_hash,
                    digest,
                    signing.sign(private, digest.encode()),
                    event.seq,
                ],
            )
        prev_hash = digest
    assert ledger.verify().ok
    code, verdict = _check(checkpoint)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_FORKED)


def test_it_names_the_broken_seq_of_a_past_changed_underneath(checkpoint):
    _unguarded(
        f"UPDATE {TABLE} SET actor_label = 'mallory' WHERE seq = 3"  # noqa: S608
    )
    code, verdict = _check(checkpoint)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_LEDGER_BROKEN)
    assert verdict["message"].startswith("the ledger is broken at seq 3: ")


def test_it_refuses_a_checkpoint_whose_signature_does_not_verify(checkpoint):
    document = json.loads(checkpoint.read_text())
    document["checkpoint"]["size"] = 3  # "it was only this long"
    checkpoint.write_text(json.dumps(document))
    code, verdict = _check(checkpoint)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_SIGNATURE)
    assert verdict["message"] == selectors.CHECKPOINT_SIGNATURE_MESSAGE.format(
        key_id=document["checkpoint"]["key_id"]
    )


def test_it_refuses_a_file_that_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"checkpoint": {"type": "something else"}}')
    code, verdict = _check(path)
    assert (code, verdict["code"]) == (1, codes.CHECKPOINT_MALFORMED)
    assert verdict["message"] == selectors.CHECKPOINT_MALFORMED_MESSAGE.format(
        problem=f"its checkpoint.type is not {signing.CHECKPOINT_TYPE}"
    )


def test_it_refuses_to_checkpoint_a_broken_ledger(checkpoint):
    _unguarded(f"UPDATE {TABLE} SET actor_label = 'mallory' WHERE seq = 4")  # noqa: S608
    err = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("governance", "checkpoint", stdout=io.StringIO(), stderr=err)
    assert exited.value.code == 1
    assert err.getvalue().strip() == (
        f"{codes.LEDGER_BROKEN}: " + selectors.CHECKPOINT_BROKEN_MESSAGE.format(seq=4)
    )
