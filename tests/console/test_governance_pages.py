"""The ledger browser with its verification banner, checkpoints, halts and their clearing,
keys, and users and roles."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from core.canonical import jcs
from core.ledger.signing import sign
from governance import services as gov_services
from governance.models import (
    GovernanceEvent,
    Halt,
    LedgerVerification,
    MemberKey,
    SigningKey,
    VerificationMark,
)
from replay.dbguards import drop_append_only_sql
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def halted(replayed):
    replayed("broken_chain")
    return Halt.objects.get(payload__target_kind="blob")


class TestLedger:
    def test_it_verifies_nothing_on_load_and_says_the_chain_was_never_verified(
        self, as_persona, halted
    ):
        client = as_persona("vera")
        size = GovernanceEvent.objects.count()
        body = client.get("/governance/").content.decode()
        assert (
            f'<p class="notice" id="ledger-banner">Not verified yet: {size} event(s) never '
            "verified.</p>"
        ) in body
        assert 'hx-trigger="load' not in body
        assert "verify=1" not in body
        assert LedgerVerification.objects.count() == 0
        assert body.count(">not yet verified</span>") == size
        for event in GovernanceEvent.objects.all():
            assert f"<code>{event.code} {event.type}</code>" in body

    def test_a_viewer_verifies_the_new_events_and_the_page_then_says_verified_through_the_head(
        self, as_persona, halted, htmx_headers, django_capture_on_commit_callbacks
    ):
        client = as_persona("vera")
        size = GovernanceEvent.objects.count()
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/governance/verify/", {"scope": "new"}, **htmx_headers)
        assert response.status_code == 200
        assert (
            '<a href="/governance/" id="verification-poll" hx-get="/governance/verification/" '
            'hx-trigger="every 2s" hx-target="#ledger-verification" hx-swap="outerHTML">Refresh</a>'
        ) in response.content.decode()
        body = client.get("/governance/verification/", **htmx_headers).content.decode()
        assert f"(the events after seq 0, {size} events) finished at" in body
        assert "every 2s" not in body
        mark = VerificationMark.objects.get()
        assert mark.through_seq == size
        page = client.get("/governance/").content.decode()
        assert (
            f'<p class="banner ok" id="ledger-banner">Verified through seq {size} at '
            f"{mark.verified_at:%Y-%m-%d %H:%M:%S} UTC: every event.</p>"
        ) in page
        assert page.count(">verified</span>") == size

    def test_a_rewritten_event_turns_the_banner_red_at_its_seq(
        self, as_persona, halted, django_capture_on_commit_callbacks
    ):
        event = GovernanceEvent.objects.order_by("seq")[1]
        with connection.cursor() as cur:
            for sql in drop_append_only_sql(connection.vendor, "governance_governanceevent"):
                cur.execute(sql)
            cur.execute(
                "UPDATE governance_governanceevent SET actor_label = %s WHERE seq = %s",
                ["mallory", event.seq],
            )
        client = as_persona("adam")
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post("/governance/verify/", {"scope": "full"})
        assert response.status_code == 303
        body = client.get("/governance/").content.decode()
        assert (
            f'id="verification-run" role="alert">The chain is broken at seq {event.seq}: '
            "<code>CHAIN_HASH</code>"
        ) in body
        assert body.count(">broken</span>") == 1
        assert not VerificationMark.objects.exists()

    def test_it_refuses_a_full_reverification_to_a_viewer(self, as_persona, halted):
        response = as_persona("vera").post("/governance/verify/", {"scope": "full"})
        assert response.status_code == 403
        assert not LedgerVerification.objects.exists()

    def test_it_shows_the_running_verification_with_its_progress_and_polls_it(
        self, as_persona, halted, htmx_headers
    ):
        client = as_persona("adam")
        LedgerVerification.objects.create(scope="full", state="running", checked=3, total=8)
        body = client.get("/governance/verification/", **htmx_headers).content.decode()
        assert 'hx-get="/governance/verification/" hx-trigger="every 2s"' in body
        assert '<a href="/governance/" id="verification-poll"' in body
        assert (
            "Re-verifying the whole chain (running): 3 of 8 events checked. "
            '<progress max="8" value="3">37%</progress>'
        ) in body
        assert 'id="verify-full"' not in body
        response = client.post("/governance/verify/", {"scope": "full"}, follow=True)
        assert "A verification is already running; you joined it." in response.content.decode()
        assert LedgerVerification.objects.count() == 1

    def test_filter_by_range(self, as_persona, halted):
        body = as_persona("vera").get("/governance/?range=3").content.decode()
        assert "FORCE_HALT_REPLAY" in body
        assert "REPLAY_REQUEST" not in body.split('id="ledger-table"')[1]

    def test_a_checkpoint_exports_and_checks(self, as_persona, halted):
        client = as_persona("vera")
        exported = client.get("/governance/checkpoint.json")
        assert exported.status_code == 200
        assert exported["Content-Disposition"].startswith(
            'attachment; filename="ledger-checkpoint-'
        )
        document = exported.json()
        # the tree's signed note at the same size rides along, with the keys to check it
        from governance import transparency

        assert document["tlog"] == {
            "checkpoint": transparency.checkpoint(document["checkpoint"]["size"]).note,
            "vkeys": transparency.verifier_keys(),
        }
        checked = client.post(
            "/governance/checkpoint/check/",
            {"checkpoint": SimpleUploadedFile("c.json", json.dumps(document).encode())},
        )
        assert checked.status_code == 200
        size = GovernanceEvent.objects.count()
        assert (
            f"the ledger ({size} events) extends the checkpoint ({size} events)"
            in checked.content.decode()
        )

    def test_a_forged_checkpoint_is_refused_with_its_code(self, as_persona, halted):
        client = as_persona("vera")
        document = client.get("/governance/checkpoint.json").json()
        document["checkpoint"]["size"] += 5
        checked = client.post(
            "/governance/checkpoint/check/",
            {"checkpoint": SimpleUploadedFile("c.json", json.dumps(document).encode())},
        )
        assert checked.status_code == 409
        assert "<code>CHECKPOINT_SIGNATURE</code>" in checked.content.decode()

    def test_an_empty_ledger_has_no_checkpoint(self):
        # through the service: whoever may open the page holds a role, so the ledger that
        # records it is not empty
        from core.ledger import codes
        from governance import selectors

        with pytest.raises(codes.GovernanceError) as caught:
            selectors.checkpoint_export()
        assert caught.value.code == codes.LEDGER_EMPTY


class TestHalts:
    def test_the_list_shows_active_halts_and_the_quorum(self, as_persona, halted):
        body = as_persona("vera").get("/governance/halts/").content.decode()
        assert f'href="/requests/halt-clear/{halted.seq}/"' in body
        assert '<span class="badge no">active</span>' in body
        assert "<td>0 / 2</td>" in body

    def test_two_council_signatures_clear_a_halt(self, as_persona, halted, member_key):
        for name in ("cora", "colin"):
            key, private = member_key(name)
            page = as_persona(name).get(f"/requests/halt-clear/{halted.seq}/").content.decode()
            assert 'id="sign-form"' in page
            text = jcs(gov_services.halt_clear_payload_for(halt=halted)).decode()
            response = as_persona(name).post(
                f"/requests/halt-clear/{halted.seq}/",
                {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
            )
            assert response.status_code == 303
        assert not Halt.objects.active().filter(seq=halted.seq).exists()
        body = as_persona("vera").get(f"/requests/halt-clear/{halted.seq}/").content.decode()
        assert '<span class="badge yes">cleared</span>' in body

    @pytest.mark.parametrize("name", ["vera", "alice", "adam", "lena", "nora"])
    def test_only_the_council_may_sign_a_clear(self, as_persona, halted, name):
        response = as_persona(name).post(
            f"/requests/halt-clear/{halted.seq}/", {"payload": "{}", "signature": "x"}
        )
        assert response.status_code == 403

    def test_a_bad_signature_is_refused_precisely(self, as_persona, halted, member_key):
        key, _ = member_key("cora")
        text = jcs(gov_services.halt_clear_payload_for(halt=halted)).decode()
        response = as_persona("cora").post(
            f"/requests/halt-clear/{halted.seq}/",
            {"payload": text, "key_id": key.key_id, "signature": "00" * 64},
        )
        assert response.status_code == 400
        assert "APPROVAL_BAD_SIGNATURE" in response.content.decode()


class TestKeys:
    def test_cora_registers_a_public_key_and_it_awaits_confirmation(self, as_persona):
        from core.ledger.signing import public_key_of
        from governance import keystore

        public = public_key_of(keystore.generate_private_key()).hex()
        response = as_persona("cora").post(
            "/governance/keys/register/", {"public_key": public, "label": "laptop"}
        )
        assert response.status_code == 303
        key = MemberKey.objects.get()
        assert (key.user.username, key.label, key.confirmed_at) == ("cora", "laptop", None)
        page = as_persona("cora").get("/governance/keys/").content.decode()
        assert "awaiting an admin's confirmation" in page
        assert 'id="generate-key"' in page

    def test_adam_confirms_it_but_not_his_own(self, as_persona, member_key):
        key, _ = member_key("cora", confirm=False)
        own, _ = member_key("adam", confirm=False)
        page = as_persona("adam").get("/governance/keys/").content.decode()
        assert f'id="confirm-{key.key_id}"' in page
        assert f'id="confirm-{own.key_id}"' not in page
        assert as_persona("adam").post(f"/governance/keys/{key.key_id}/confirm/").status_code == 303
        key.refresh_from_db()
        assert key.confirmed_by.username == "adam"
        refused = as_persona("adam").post(f"/governance/keys/{own.key_id}/confirm/")
        assert refused.status_code == 403
        assert "APPROVAL_SELF" in refused.content.decode()

    def test_an_invalid_key_is_refused_with_its_code(self, as_persona):
        response = as_persona("cora").post("/governance/keys/register/", {"public_key": "nope"})
        assert response.status_code == 400
        assert '<code class="code">KEY_INVALID</code> not an Ed25519 public key:' in (
            response.content.decode()
        )

    def test_an_owner_revokes_their_key_and_others_may_not(self, as_persona, member_key):
        key, _ = member_key("cora")
        assert (
            as_persona("colin")
            .post(f"/governance/keys/{key.key_id}/revoke/", {"reason": "x"})
            .status_code
            == 403
        )
        assert (
            as_persona("cora")
            .post(f"/governance/keys/{key.key_id}/revoke/", {"reason": "lost laptop"})
            .status_code
            == 303
        )
        key.refresh_from_db()
        assert key.revocation_reason == "lost laptop"

    def test_adam_rotates_the_server_key(self, as_persona, halted):
        before = SigningKey.objects.count()
        assert as_persona("adam").post("/governance/keys/rotate/").status_code == 303
        assert SigningKey.objects.count() == before + 1
        assert GovernanceEvent.objects.order_by("-seq").first().type == "KEY_ROTATED"

    @pytest.mark.parametrize("name", ["vera", "alice", "cora", "lena", "nora"])
    def test_only_admins_confirm_and_rotate(self, as_persona, member_key, name):
        key, _ = member_key("colin", confirm=False)
        client = as_persona(name)
        assert client.post(f"/governance/keys/{key.key_id}/confirm/").status_code == 403
        assert client.post("/governance/keys/rotate/").status_code == 403

    @pytest.mark.parametrize("name", ["vera", "alice", "oscar", "lena", "nora"])
    def test_only_admins_and_council_register_keys(self, as_persona, name):
        assert (
            as_persona(name)
            .post("/governance/keys/register/", {"public_key": "00" * 32})
            .status_code
            == 403
        )


class TestUsers:
    def test_adam_gives_vera_the_auditor_role(self, as_persona):
        vera = persona("vera")
        response = as_persona("adam").post(
            "/governance/users/", {"user_id": vera.pk, "roles": ["viewer", "auditor"]}
        )
        assert response.status_code == 303
        assert set(vera.groups.values_list("name", flat=True)) == {"viewer", "auditor"}

    def test_adam_cannot_take_admin_from_himself(self, as_persona):
        adam = persona("adam")
        response = as_persona("adam").post("/governance/users/", {"user_id": adam.pk})
        assert response.status_code == 403
        assert "adam cannot change their own roles" in response.content.decode()
        assert adam.groups.filter(name="admin").exists()

    def test_an_unknown_user_is_404_to_admins_and_403_to_others(self, as_persona):
        assert as_persona("adam").post("/governance/users/", {"user_id": 999999}).status_code == 404
        assert (
            as_persona("alice").post("/governance/users/", {"user_id": 999999}).status_code == 403
        )

    def test_unknown_role_names_are_refused_and_change_nothing(self, as_persona):
        vera = persona("vera")
        response = as_persona("adam").post(
            "/governance/users/", {"user_id": vera.pk, "roles": ["root"]}
        )
        assert response.status_code == 400
        assert set(User.objects.get(pk=vera.pk).groups.values_list("name", flat=True)) == {"viewer"}


class TestHaltTargets:
    def test_a_file_halt_links_to_that_file_and_says_other_copies_are_not_halted(
        self, as_persona, halted
    ):
        sha = halted.target_id
        listing = as_persona("vera").get("/governance/halts/").content.decode()
        assert f'<a href="/traces/{sha}/"><code>{sha[:23]}…</code></a>' in listing
        page = as_persona("vera").get(f"/requests/halt-clear/{halted.seq}/").content.decode()
        assert f"<h1>Halt #{halted.seq} on blob <code>{sha}</code></h1>" in page
        assert f'<a href="/traces/{sha}/">its trace page</a>' in page
        assert "Other copies of that trace are not halted." in page
