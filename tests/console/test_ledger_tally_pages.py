"""The tallies the pages show are the signed ledger's: an approval row rewritten underneath (the
append-only trigger dropped, as the table's owner could) changes nothing a page counts."""

from __future__ import annotations

import pytest
from django.db import connection

from core.canonical import jcs
from governance import services as gov_services
from governance.models import Vote
from replay.dbguards import drop_append_only_sql
from tests.console.personas import persona
from tests.console.test_force_continue_pages import payload_for, post_signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def fc(replayed, signers):
    run = replayed("diverged", by="alice")
    return gov_services.force_continue_request_file(
        run=run, actor=persona("alice"), reason="drift in the router is known"
    )


def test_the_force_continue_page_counts_the_ledgers_decision_not_a_flipped_row(
    as_persona, fc, member_key
):
    key, private = member_key("adam")
    assert post_signature(as_persona("adam"), fc, key, private, "admin").status_code == 303
    approval = Vote.objects.get()
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_vote"):
            cur.execute(sql)
        cur.execute("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])

    body = as_persona("cora").get(f"/requests/force-continue/{fc.id}/").content.decode()

    assert "Still needed: <strong>2 council approval(s)</strong> (1/1 admin, 0/2 council)" in body
    assert "adam as admin: <strong>approve</strong>" in body
    assert jcs(payload_for(fc, "council")).decode() in body.replace("&quot;", '"')


def test_the_list_counts_the_ledgers_decision_too(as_persona, fc, member_key):
    key, private = member_key("adam")
    post_signature(as_persona("adam"), fc, key, private, "admin")
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_vote"):
            cur.execute(sql)
        cur.execute("UPDATE governance_vote SET decision = 'deny'", [])

    body = as_persona("cora").get("/requests/force-continue/").content.decode()

    assert "2 council approval(s)" in body
    assert "1 admin approval(s)" not in body


def test_the_ledger_page_names_the_row_that_disagrees(
    as_persona, fc, member_key, django_capture_on_commit_callbacks
):
    key, private = member_key("adam")
    post_signature(as_persona("adam"), fc, key, private, "admin")
    approval = Vote.objects.get()
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_vote"):
            cur.execute(sql)
        cur.execute("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])

    client = as_persona("vera")
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/governance/verify/", {"scope": "new"})
    body = client.get("/governance/").content.decode()

    assert "but 1 table row(s) disagree with it." in body
    assert (
        f"<li><code>TABLE_APPROVAL</code> approval row {approval.id} says decision deny, its "
        f"ledger event {approval.event_id} says approve</li>"
    ) in body


def test_the_verification_api_names_a_key_whose_revocation_was_undone(as_persona, member_key):
    key, _ = member_key("cora")
    gov_services.member_key_revoke(key=key, actor=persona("cora"), reason="laptop stolen")
    revoked = key.__class__.objects.get(pk=key.pk)
    with connection.cursor() as cur:
        cur.execute("UPDATE governance_memberkey SET revoked_at = NULL WHERE id = %s", [key.pk])

    body = as_persona("vera").get("/api/governance/verification/").json()

    assert (body["ok"], body["broke_at"]) == (False, None)
    assert body["tables"] == [
        {
            "code": "TABLE_MEMBER_KEY",
            "table": "governance_memberkey",
            "row": key.key_id,
            "message": f"member key {key.key_id} is revoked in the ledger (event "
            f"{_revocation_seq(key.key_id)}) but not in the table",
        }
    ]
    assert revoked.revoked_at is not None


def _revocation_seq(key_id: str) -> int:
    from governance.models import GovernanceEvent

    return GovernanceEvent.objects.get(type="KEY_REVOKED", payload__key_id=key_id).seq


def test_the_request_api_lists_the_ledgers_votes_not_a_flipped_row(as_persona, fc, member_key):
    key, private = member_key("adam")
    post_signature(as_persona("adam"), fc, key, private, "admin")
    approval = Vote.objects.get()
    with connection.cursor() as cur:
        for sql in drop_append_only_sql(connection.vendor, "governance_vote"):
            cur.execute(sql)
        cur.execute("UPDATE governance_vote SET decision = 'deny' WHERE id = %s", [approval.id])

    body = as_persona("vera").get(f"/api/force-continue/{fc.id}/").json()

    assert [
        (a["seq"], a["approver"], a["role"], a["decision"], a["key_id"]) for a in body["approvals"]
    ] == [(approval.event_id, "adam", "admin", "approve", key.key_id)]


def test_the_keys_page_shows_the_ledgers_state_of_a_key(as_persona, member_key):
    key, _ = member_key("cora")
    gov_services.member_key_revoke(key=key, actor=persona("cora"), reason="laptop stolen")
    with connection.cursor() as cur:
        cur.execute("UPDATE governance_memberkey SET revoked_at = NULL WHERE id = %s", [key.pk])

    page = as_persona("adam").get("/governance/keys/").content.decode()
    listed = as_persona("adam").get("/api/keys/").json()["member_keys"]

    row = page[page.index(f"<td><code>{key.key_id}</code>") :]
    row = row[: row.index("</tr>")]
    assert "revoked " in row
    assert "confirmed by" not in row
    (api_key,) = [k for k in listed if k["key_id"] == key.key_id]
    assert api_key["revoked_at"] is not None
