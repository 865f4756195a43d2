"""What the decisions depend on is what the signed ledger says.

An owner of the database can drop the append-only triggers (``DROP TRIGGER`` on SQLite; on
PostgreSQL as the tables' owner) and rewrite an approval row, or write to the member key and
request tables that the application role may update anyway. None of that may change a tally,
let a key sign, or pass ``governance verify`` / ``check-checkpoint`` unnamed. These tests run
on whichever database is configured (SQLite by default, PostgreSQL with DATABASE_URL).
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from core.ledger import codes, signing
from core.ledger.codes import GovernanceError
from governance import keystore, ledger, services
from governance.models import ForceContinueRequest, GovernanceEvent, MemberKey, Vote
from replay.dbguards import drop_append_only_sql
from tests.governance.factories import Signer, approve, enrol, filed_request, person

pytestmark = pytest.mark.django_db


def _drop_triggers(table: str) -> None:
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, table):
            cur.execute(sql)


def _sql(statement: str, params: list) -> None:
    with connection.cursor() as cur:
        cur.execute(statement, params)


def _verify() -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("governance", "verify", "--json", stdout=out)
    except SystemExit as exited:
        return int(exited.code), json.loads(out.getvalue())
    return 0, json.loads(out.getvalue())


def _verify_text() -> tuple[int, list[str]]:
    out = StringIO()
    try:
        call_command("governance", "verify", stdout=out)
    except SystemExit as exited:
        return int(exited.code), out.getvalue().splitlines()
    return 0, out.getvalue().splitlines()


def _unannounced_key(name: str) -> Signer:
    """A key row written straight into governance_memberkey, 'confirmed', never in the ledger."""
    private = keystore.generate_private_key()
    public = signing.public_key_of(private)
    now = timezone.now()
    key = MemberKey.objects.create(
        key_id=signing.key_id_for(public, "member"),
        user=person(name),
        public_key=public.hex(),
        fingerprint=signing.fingerprint(public),
        registered_at=now,
        confirmed_at=now,
        confirmed_by=person("grace"),
    )
    return Signer(key.user, key, private)


@pytest.fixture
def admin_approved():
    """bob's signed admin approval on alice's request (still pending: the council has not).
    The council members who sign later hold their role before the request is filed."""
    bob = enrol("bob")
    person("carol"), person("dave")
    request = filed_request()
    approval = services.approval_record(
        request=request,
        approver=bob.user,
        document=approve(bob, request, role=signing.ROLE_ADMIN),
    )
    return request, approval


def _flip_to_deny(approval: Vote) -> None:
    _drop_triggers("governance_vote")
    _sql("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])


# --- approval rows --------------------------------------------------------------------------


def test_it_verifies_when_every_table_agrees_with_the_ledger(admin_approved):
    code, result = _verify()

    assert (code, result["ok"], result["tables"]) == (0, True, [])


def test_it_names_an_approval_row_whose_decision_was_flipped_underneath(admin_approved):
    _, approval = admin_approved
    _flip_to_deny(approval)

    code, result = _verify()

    assert code == 1
    assert result["ok"] is False
    assert result["broke_at"] is None  # the chain itself is intact
    assert result["tables"] == [
        {
            "code": "TABLE_APPROVAL",
            "table": "governance_vote",
            "row": str(approval.id),
            "message": f"approval row {approval.id} says decision deny, its ledger event "
            f"{approval.event_id} says approve",
        }
    ]


def test_the_words_name_the_flipped_row_too(admin_approved):
    _, approval = admin_approved
    _flip_to_deny(approval)

    code, lines = _verify_text()

    assert code == 1
    assert lines[-1] == (
        f"TABLE_APPROVAL: approval row {approval.id} says decision deny, its ledger event "
        f"{approval.event_id} says approve"
    )


def test_check_checkpoint_fails_on_a_flipped_approval_row(admin_approved, tmp_path):
    _, approval = admin_approved
    checkpoint = tmp_path / "head.json"
    call_command("governance", "checkpoint", "--out", str(checkpoint), stdout=StringIO())
    _flip_to_deny(approval)

    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("governance", "check-checkpoint", str(checkpoint), "--json", stdout=out)

    verdict = json.loads(out.getvalue())
    assert exited.value.code == 1
    assert verdict["code"] == "CHECKPOINT_LEDGER_BROKEN"
    assert verdict["message"] == (
        f"a table disagrees with the ledger: approval row {approval.id} says decision deny, "
        f"its ledger event {approval.event_id} says approve"
    )


def test_no_checkpoint_is_signed_over_a_table_that_disagrees(admin_approved):
    _, approval = admin_approved
    _flip_to_deny(approval)

    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("governance", "checkpoint", stdout=StringIO(), stderr=err)

    assert exited.value.code == 1
    assert err.getvalue().strip() == (
        f"LEDGER_BROKEN: a table disagrees with the ledger (approval row {approval.id} says "
        f"decision deny, its ledger event {approval.event_id} says approve): no checkpoint"
    )


def test_the_quorum_follows_the_ledger_not_a_flipped_row(admin_approved):
    request, approval = admin_approved
    _flip_to_deny(approval)
    carol, dave = enrol("carol"), enrol("dave")

    services.approval_record(request=request, approver=carol.user, document=approve(carol, request))
    request.refresh_from_db()
    assert request.state == "pending"  # the row's "deny" would have rejected it
    services.approval_record(request=request, approver=dave.user, document=approve(dave, request))
    request.refresh_from_db()

    assert request.state == "approved"
    assert request.decision_event.payload["admins"] == 1
    assert request.decision_event.payload["denials"] == 0


def test_it_names_an_approval_event_whose_row_was_deleted(admin_approved):
    _, approval = admin_approved
    _drop_triggers("governance_vote")
    _sql("DELETE FROM governance_vote WHERE id = %s", [approval.id])

    code, result = _verify()

    assert code == 1
    assert result["tables"] == [
        {
            "code": "TABLE_APPROVAL_MISSING",
            "table": "governance_vote",
            "row": str(approval.event_id),
            "message": f"ledger event {approval.event_id} (FORCE_CONTINUE_APPROVAL) has no "
            "approval row",
        }
    ]


def test_it_names_an_approval_row_without_a_ledger_vote(admin_approved):
    request, _ = admin_approved
    carol = enrol("carol")
    other = services.pii_access_record(actor=person("bob"), trace_id="t", fields=["e"], reason="x")
    forged = Vote.objects.create(
        request=request,
        approver=carol.user,
        role="council",
        key=carol.key,
        decision="approve",
        payload=approve(carol, request)["payload"],
        signature="00",
        event=other,
        created_at=other.created_at,
    )

    code, result = _verify()

    assert code == 1
    assert [m["message"] for m in result["tables"]] == [
        f"approval row {forged.id} has no ledger event (event {other.seq} is PII_REVEALED)"
    ]


def test_a_production_replay_decision_follows_the_ledger_not_a_flipped_row(stored_traces):
    from tests.governance.conftest import ingest

    carol, dave = enrol("carol"), enrol("dave")
    asked = services.production_replay_request_file(
        trace=ingest("ok"), actor=person("alice"), reason="drill"
    )

    def vote(signer):
        payload = services.production_replay_payload_for(request=asked, decision="approve")
        return services.production_replay_approval_record(
            request=asked, approver=signer.user, document=signer.sign(payload)
        )

    _flip_to_deny(vote(carol))
    vote(dave)
    asked.refresh_from_db()

    assert asked.state == "approved"  # the row's "deny" would have rejected it
    assert (asked.decision_event.payload["council"], asked.decision_event.payload["denials"]) == (
        2,
        0,
    )


def test_a_halt_clears_on_the_ledgers_signatures_when_a_row_was_deleted():
    from governance.selectors import halts_active

    carol, dave = enrol("carol"), enrol("dave")
    services.security_incident_record(
        actor=person("bob"), targets=[("trace", "a" * 32)], reason="leaked key"
    )
    halt = halts_active().get()
    payload = services.halt_clear_payload_for(halt=halt, reason="rotated")
    first = services.halt_clear_approval_record(
        halt_seq=halt.seq, approver=carol.user, document=carol.sign(payload)
    )
    _drop_triggers("governance_vote")
    _sql("DELETE FROM governance_vote WHERE id = %s", [first.id])

    with pytest.raises(GovernanceError) as again:
        services.halt_clear_approval_record(
            halt_seq=halt.seq, approver=carol.user, document=carol.sign(payload)
        )
    assert again.value.code == "APPROVAL_DUPLICATE_KEY"
    services.halt_clear_approval_record(
        halt_seq=halt.seq, approver=dave.user, document=dave.sign(payload)
    )

    assert not halts_active().exists()
    cleared = GovernanceEvent.objects.get(code=codes.code_of(codes.FORCE_HALT_CLEAR))
    assert cleared.payload["approval_seqs"] == [first.event_id, cleared.seq - 1]


# --- member keys ----------------------------------------------------------------------------


def test_it_refuses_a_vote_signed_with_a_key_inserted_into_its_table():
    carol = _unannounced_key("carol")
    request = filed_request()

    with pytest.raises(GovernanceError) as refused:
        services.approval_record(
            request=request, approver=carol.user, document=approve(carol, request)
        )

    assert refused.value.code == "APPROVAL_KEY_UNKNOWN"
    assert refused.value.message == services.APPROVAL_KEY_UNKNOWN_MESSAGE.format(
        key_id=carol.key.key_id, user="carol"
    )
    assert not Vote.objects.exists()


def test_verify_names_a_key_inserted_into_its_table():
    carol = _unannounced_key("carol")
    filed_request()

    code, result = _verify()

    assert code == 1
    assert result["tables"] == [
        {
            "code": "TABLE_MEMBER_KEY",
            "table": "governance_memberkey",
            "row": carol.key.key_id,
            "message": f"member key {carol.key.key_id} is in the table but no ledger event "
            "added it",
        }
    ]


def test_verify_names_an_approval_already_signed_with_an_unannounced_key():
    """What the old signing check let through: the event is chained and signed, but its key
    was never announced in the ledger."""
    carol = _unannounced_key("carol")
    request = filed_request()
    document = approve(carol, request)
    with transaction.atomic():
        event = ledger.append(
            event_type=codes.FORCE_CONTINUE_APPROVAL,
            payload=document["payload"],
            actor=carol.user,
            actor_key_id=carol.key.key_id,
            actor_signature=document["signature"],
        )

    code, result = _verify()

    assert code == 1
    assert (result["broke_at"], result["code"]) == (event.seq, "CHAIN_MEMBER_KEY")
    assert result["reason"] == (
        f"event {event.seq} is signed by member key {carol.key.key_id}, which no earlier "
        "KEY_ADDED announced"
    )


def test_a_key_confirmed_only_in_its_table_cannot_sign():
    carol = enrol("carol", confirm=False)
    _sql(
        "UPDATE governance_memberkey SET confirmed_at = %s, confirmed_by_id = %s WHERE id = %s",
        [timezone.now(), person("grace").pk, carol.key.pk],
    )
    request = filed_request()

    with pytest.raises(GovernanceError) as refused:
        services.approval_record(
            request=request, approver=carol.user, document=approve(carol, request)
        )

    assert refused.value.code == "APPROVAL_KEY_UNCONFIRMED"
    code, result = _verify()
    assert code == 1
    assert [m["message"] for m in result["tables"]] == [
        f"member key {carol.key.key_id} is confirmed in the table but not in the ledger"
    ]


def test_a_key_revoked_in_the_ledger_cannot_sign_after_its_revoked_at_is_nulled():
    carol = enrol("carol")
    services.member_key_revoke(key=carol.key, actor=carol.user, reason="laptop stolen")
    revoked = GovernanceEvent.objects.filter(code=codes.code_of(codes.KEY_REVOKED)).get()
    # the documented grants leave UPDATE on governance_memberkey to the application role
    _sql("UPDATE governance_memberkey SET revoked_at = NULL WHERE id = %s", [carol.key.pk])
    request = filed_request()

    with pytest.raises(GovernanceError) as refused:
        services.approval_record(
            request=request, approver=carol.user, document=approve(carol, request)
        )

    assert refused.value.code == "APPROVAL_KEY_REVOKED"
    assert refused.value.message == services.APPROVAL_KEY_REVOKED_MESSAGE.format(
        key_id=carol.key.key_id, revoked_at=signing.format_time(revoked.created_at)
    )
    code, result = _verify()
    assert code == 1
    assert [m["message"] for m in result["tables"]] == [
        f"member key {carol.key.key_id} is revoked in the ledger (event {revoked.seq}) but "
        "not in the table"
    ]


def test_a_key_the_ledger_never_added_cannot_be_confirmed():
    carol = _unannounced_key("carol")
    _sql("UPDATE governance_memberkey SET confirmed_at = NULL WHERE id = %s", [carol.key.pk])

    with pytest.raises(GovernanceError) as refused:
        services.member_key_confirm(key=carol.key, admin=person("grace"))

    assert refused.value.code == "KEY_STATE"
    assert refused.value.message == services.KEY_UNANNOUNCED_MESSAGE.format(key_id=carol.key.key_id)


def test_the_usable_keys_a_page_offers_are_the_ledgers():
    from governance.selectors import member_keys

    carol = enrol("carol")
    services.member_key_revoke(key=carol.key, actor=carol.user, reason="lost")
    _sql("UPDATE governance_memberkey SET revoked_at = NULL WHERE id = %s", [carol.key.pk])

    assert list(member_keys(user=carol.user, usable=True)) == []


# --- requests -------------------------------------------------------------------------------


def test_it_names_a_request_whose_state_was_changed_in_its_table(admin_approved):
    request, _ = admin_approved
    _drop_triggers("governance_request")  # as the owner of the database could
    _sql(
        "UPDATE governance_request SET state = 'approved' WHERE id = %s",
        [request.id.hex if connection.vendor == "sqlite" else request.id],
    )

    code, result = _verify()

    assert code == 1
    assert result["tables"] == [
        {
            "code": "TABLE_REQUEST",
            "table": "governance_request",
            "row": str(request.id),
            "message": f"force-continue request {request.id} is approved in the table, the "
            "ledger says pending",
        }
    ]
    assert ForceContinueRequest.objects.get().state == "approved"


def _row_id(value):
    return value.hex if connection.vendor == "sqlite" else value


def test_the_tally_follows_the_ledger_when_a_request_row_names_a_later_filing(admin_approved):
    from governance.selectors import force_continue_tally

    request, approval = admin_approved
    filed_at = request.request_event_id
    # the owner drops the guard and points the filing past bob's vote
    _drop_triggers("governance_request")  # as the owner of the database could
    _sql(
        "UPDATE governance_request SET request_event_id = %s WHERE id = %s",
        [approval.event_id, _row_id(request.id)],
    )
    request.refresh_from_db()

    assert force_continue_tally(request=request).admins == 1
    code, result = _verify()
    assert code == 1
    assert [m["message"] for m in result["tables"]] == [
        f"force-continue request {request.id} names event {approval.event_id} as its filing, "
        f"but the ledger filed it at event {filed_at}"
    ]


def test_an_expiry_extended_in_the_table_does_not_extend_the_vote():
    import time
    from datetime import timedelta

    from tests.governance.factories import diverged_run

    carol = enrol("carol")
    request = services.force_continue_request_file(
        run=diverged_run(),
        actor=person("alice"),
        reason="hot fix",
        expires_at=timezone.now() + timedelta(seconds=1),
    )
    filed = request.expires_at
    time.sleep(1.1)
    later = filed + timedelta(days=1)
    _drop_triggers("governance_request")  # as the owner of the database could
    _sql(
        "UPDATE governance_request SET expires_at = %s WHERE id = %s",
        [later, _row_id(request.id)],
    )
    request.refresh_from_db()

    with pytest.raises(GovernanceError) as refused:
        services.approval_record(
            request=request, approver=carol.user, document=approve(carol, request)
        )

    assert refused.value.code == "APPROVAL_EXPIRED"
    assert refused.value.message == services.APPROVAL_EXPIRED_MESSAGE.format(
        request=request.id, expires_at=signing.format_time(filed)
    )
    code, result = _verify()
    assert code == 1
    assert [m["message"] for m in result["tables"]] == [
        f"force-continue request {request.id} has expires_at {signing.format_time(later)} in "
        f"the table, but its filing event {request.request_event_id} says "
        f"{signing.format_time(filed)}"
    ]


def test_a_request_approved_only_in_its_table_resumes_nothing(admin_approved):
    from core import errors
    from core.errors import ReplayError
    from tests.governance.factories import diverged_run

    request, _ = admin_approved
    elsewhere = diverged_run()
    _drop_triggers("governance_request")  # as the owner of the database could
    _sql(
        "UPDATE governance_request SET state = 'approved' WHERE id = %s",
        [request.id.hex if connection.vendor == "sqlite" else request.id],
    )
    _drop_triggers("governance_forcecontinuerequest")
    _sql(
        "UPDATE governance_forcecontinuerequest SET resumed_run_id = %s "
        "WHERE governedrequest_ptr_id = %s",
        [
            elsewhere.id.hex if connection.vendor == "sqlite" else elsewhere.id,
            request.id.hex if connection.vendor == "sqlite" else request.id,
        ],
    )

    with pytest.raises(ReplayError) as refused:
        services.force_continue_resume(run=request.run, actor=person("alice"))

    assert refused.value.code == errors.FORCE_CONTINUE_REQUIRED
    assert str(refused.value.message) == services.FORCE_CONTINUE_REQUIRED_MESSAGE.format(
        run=request.run_id, step=3, quorum=2
    )


def test_every_verification_finding_is_explained_and_documented():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "error-codes.md").read_text()
    findings = {**codes.TABLE_MISMATCHES, codes.CHAIN_MEMBER_KEY: ""}
    assert all(text for text in codes.TABLE_MISMATCHES.values())
    assert [code for code in sorted(findings) if f"| `{code}` |" not in doc] == []


# --- PostgreSQL: the owner disables the trigger instead of dropping it -----------------------


@pytest.mark.postgres
@pytest.mark.skipif(connection.vendor != "postgresql", reason="ALTER TABLE ... DISABLE TRIGGER")
def test_it_names_a_row_flipped_with_the_trigger_disabled_on_postgresql(admin_approved):
    _, approval = admin_approved
    _sql("SET CONSTRAINTS ALL IMMEDIATE", [])  # no deferred foreign key checks pending
    _sql("ALTER TABLE governance_vote DISABLE TRIGGER USER", [])
    _sql("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])
    _sql("ALTER TABLE governance_vote ENABLE TRIGGER USER", [])

    code, result = _verify()

    assert code == 1
    assert [m["row"] for m in result["tables"]] == [str(approval.id)]


# --- every governed request row, of every kind ----------------------------------------------


@pytest.fixture
def halt_with_a_vote():
    """A halt with carol's vote toward clearing it: its ``halt-clear`` request row exists."""
    from governance.models import GovernedRequest
    from governance.selectors import halts_active

    carol = enrol("carol")
    services.security_incident_record(
        actor=person("bob"), targets=[("trace", "a" * 32)], reason="leaked key"
    )
    halt = halts_active().get()
    payload = services.halt_clear_payload_for(halt=halt, reason="rotated")
    services.halt_clear_approval_record(
        halt_seq=halt.seq, approver=carol.user, document=carol.sign(payload)
    )
    return halt, GovernedRequest.objects.get(kind="halt-clear")


def test_a_halt_clear_request_row_is_what_its_halt_says(halt_with_a_vote):
    halt, row = halt_with_a_vote

    assert (row.subject, row.request_event_id, row.state, row.payload) == (
        str(halt.seq),
        halt.seq,
        "pending",
        halt.payload,
    )
    code, result = _verify()
    assert (code, result["tables"]) == (0, [])


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("state = 'approved'", "is approved in the table, the ledger says pending"),
        ("subject = '1'", "has subject 1, its filing event {seq} says {seq}"),
        ("payload = '{{}}'", "'s payload differs from its filing event {seq}'s"),
        (
            "request_event_id = 1",
            "names event 1 as its filing, which is {first}, not FORCE_HALT_REPLAY",
        ),
    ],
)
def test_a_rewritten_halt_clear_request_row_is_named(halt_with_a_vote, assignment, says):
    halt, row = halt_with_a_vote
    first = GovernanceEvent.objects.get(seq=1).type
    _drop_triggers("governance_request")
    _sql(
        f"UPDATE governance_request SET {assignment.format()} WHERE id = %s",  # noqa: S608
        [_row_id(row.id)],
    )

    code, result = _verify()

    assert code == 1
    separator = "" if says.startswith("'") else " "
    # (a rewritten subject also moves its votes to another halt: those are named as well,
    # and the halt they were signed for has no request row left)
    vote = Vote.objects.get(request_id=row.id)
    orphaned = [
        {
            "code": "TABLE_REQUEST",
            "table": "governance_request",
            "row": str(vote.event_id),
            "message": f"ledger event {vote.event_id} (HALT_CLEAR_APPROVAL) is a vote on "
            f"halt-clear request {halt.seq}, which is not in the table",
        }
    ]
    assert [m for m in result["tables"] if m["table"] == "governance_request"] == [
        *(orphaned if assignment.startswith("subject") else []),
        {
            "code": "TABLE_REQUEST",
            "table": "governance_request",
            "row": str(row.id),
            "message": f"halt-clear request {row.id}{separator}"
            + says.format(seq=halt.seq, first=first),
        },
    ]


def test_a_council_request_row_whose_payload_was_rewritten_is_named(admin_approved):
    request, _ = admin_approved
    _drop_triggers("governance_request")
    _sql("UPDATE governance_request SET payload = '{}' WHERE id = %s", [_row_id(request.id)])

    code, result = _verify()

    assert code == 1
    assert [(m["table"], m["row"]) for m in result["tables"]] == [
        ("governance_request", str(request.id))
    ]
    assert result["tables"][0]["message"].startswith(
        f"force-continue request {request.id} has payload {{}} in the table, but its filing "
        f"event {request.request_event_id} says "
    )


def test_a_request_row_of_a_kind_nothing_files_is_named(admin_approved):
    import uuid

    request, _ = admin_approved
    forged = uuid.uuid4()
    _sql(
        "INSERT INTO governance_request (id, kind, subject, payload, reason, state, created_at,"
        " request_event_id) VALUES (%s, 'launch-missiles', 'all', '{}', '', 'pending', %s, %s)",
        [_row_id(forged), timezone.now(), request.request_event_id],
    )

    code, result = _verify()

    assert code == 1
    assert result["tables"] == [
        {
            "code": "TABLE_REQUEST",
            "table": "governance_request",
            "row": str(forged),
            "message": f"governed request {forged} has kind 'launch-missiles', which no kind files",
        }
    ]
