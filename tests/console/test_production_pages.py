"""Council-approved production replay in the pages: alice (auditor only) asks from the trace
page, cora and colin sign the exact payload, and her production replay runs."""

from __future__ import annotations

import html

import pytest

from core.canonical import jcs
from core.ledger import codes
from core.ledger.signing import sign
from governance import services as gov_services
from governance.models import GovernanceEvent, ProductionReplayRequest, Vote
from replay.models import ReplayRun
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def ok_trace(ingest):
    return ingest("ok")


@pytest.fixture
def asked(ok_trace, signers):
    return gov_services.production_replay_request_file(
        trace=ok_trace, actor=persona("alice"), reason="disaster recovery drill"
    )


def post_vote(client, asked, key, private, *, decision="approve", signature=None):
    payload = gov_services.production_replay_payload_for(request=asked, decision=decision)
    text = jcs(payload).decode()
    return client.post(
        f"/production/{asked.id}/",
        {
            "payload": text,
            "key_id": key.key_id,
            "signature": signature or sign(private, text.encode()),
        },
    )


class TestTheTracePage:
    def test_alice_is_offered_to_ask_the_council(self, as_persona, ok_trace):
        body = as_persona("alice").get(f"/traces/{ok_trace.blob.sha256}/").content.decode()
        assert 'value="production"' not in body
        assert f'href="/traces/{ok_trace.blob.sha256}/production/"' in body

    def test_sam_with_auditor_and_admin_runs_it_directly(self, as_persona, ok_trace):
        body = as_persona("sam").get(f"/traces/{ok_trace.blob.sha256}/").content.decode()
        assert 'value="production"' in body
        assert 'id="ask-production"' not in body

    @pytest.mark.parametrize("name", ["oscar", "cora", "vera"])
    def test_others_are_offered_neither(self, as_persona, ok_trace, name):
        body = as_persona(name).get(f"/traces/{ok_trace.blob.sha256}/").content.decode()
        assert 'value="production"' not in body
        assert 'id="ask-production"' not in body

    def test_the_trace_page_lists_its_production_requests(self, as_persona, asked, ok_trace):
        body = as_persona("vera").get(f"/traces/{ok_trace.blob.sha256}/").content.decode()
        assert f'href="/requests/production-replay/{asked.id}/"' in body


class TestAsking:
    def test_alice_asks_with_a_reason(self, as_persona, ok_trace):
        response = as_persona("alice").post(
            f"/traces/{ok_trace.blob.sha256}/production/",
            {"reason": "restore job 7 exactly", "hours": "24"},
        )
        asked = ProductionReplayRequest.objects.get()
        assert response.status_code == 303
        assert response["Location"] == f"/requests/production-replay/{asked.id}/"
        assert (asked.reason, asked.requested_by.username) == ("restore job 7 exactly", "alice")
        assert asked.request_event.type == codes.PRODUCTION_REPLAY_REQUEST

    def test_a_trace_that_cannot_be_replayed_in_production_is_refused(self, as_persona, ingest):
        trace = ingest("missing_output")
        response = as_persona("alice").post(
            f"/traces/{trace.blob.sha256}/production/", {"reason": "try", "hours": "24"}
        )
        body = response.content.decode()
        assert response.status_code == 409
        assert '<code class="code">REQUEST_NOT_REPLAYABLE</code>' in body
        assert html.escape(f"trace {trace.trace_id} cannot be replayed in production") in body
        assert not ProductionReplayRequest.objects.exists()

    def test_an_empty_reason_is_refused(self, as_persona, ok_trace):
        response = as_persona("alice").post(
            f"/traces/{ok_trace.blob.sha256}/production/", {"reason": " ", "hours": "24"}
        )
        assert response.status_code == 400
        assert (
            f'<code class="code">REQUEST_INVALID</code> {gov_services.PRODUCTION_REASON_MESSAGE}'
            in response.content.decode()
        )

    @pytest.mark.parametrize("hours", ["abc", "0", "-3", "100000"])
    def test_an_expiry_that_is_not_a_choice_is_refused(self, as_persona, ok_trace, hours):
        response = as_persona("alice").post(
            f"/traces/{ok_trace.blob.sha256}/production/", {"reason": "r", "hours": hours}
        )
        assert response.status_code == 400
        message = gov_services.REQUEST_EXPIRY_MESSAGE.format(hours=168)
        assert f'<code class="code">REQUEST_INVALID</code> {message}' in response.content.decode()
        assert not ProductionReplayRequest.objects.exists()

    @pytest.mark.parametrize("name", ["vera", "oscar", "cora", "lena", "nora"])
    def test_roles_that_may_not_ask_get_403(self, as_persona, ok_trace, name):
        response = as_persona(name).post(
            f"/traces/{ok_trace.blob.sha256}/production/", {"reason": "x", "hours": "24"}
        )
        assert response.status_code == 403
        assert not ProductionReplayRequest.objects.exists()


class TestSigning:
    def test_the_page_shows_the_exact_payload_to_sign(self, as_persona, asked):
        body = as_persona("cora").get(f"/requests/production-replay/{asked.id}/").content.decode()
        payload = gov_services.production_replay_payload_for(request=asked, decision="approve")
        assert (
            f'<pre class="payload" id="payload-text">{html.escape(jcs(payload).decode())}</pre>'
            in body
        )
        assert 'id="sign-form"' in body

    def test_the_list_shows_what_awaits_cora(self, as_persona, asked):
        body = as_persona("cora").get("/requests/production-replay/").content.decode()
        assert "Awaits your signature" in body
        assert (
            "Awaits your signature"
            not in as_persona("alice").get("/requests/production-replay/").content.decode()
        )

    def test_two_council_signatures_run_alices_production_replay(
        self, as_persona, asked, member_key, django_capture_on_commit_callbacks
    ):
        cora_key, cora_private = member_key("cora")
        colin_key, colin_private = member_key("colin")
        first = post_vote(as_persona("cora"), asked, cora_key, cora_private)
        assert first.status_code == 303
        with django_capture_on_commit_callbacks(execute=True):
            second = post_vote(as_persona("colin"), asked, colin_key, colin_private)
        assert second.status_code == 303
        asked.refresh_from_db()
        assert asked.state == ProductionReplayRequest.State.APPROVED
        run = ReplayRun.objects.get(id=asked.run_id)  # the task ran in-process on commit
        assert (run.mode, run.state, run.status, run.requested_by.username) == (
            "production",
            ReplayRun.State.DONE,
            "ok",
            "alice",
        )
        body = as_persona("alice").get(f"/requests/production-replay/{asked.id}/").content.decode()
        assert f'href="/runs/{run.id}/" id="production-run-link"' in body
        # the list's "Still needs" says nothing is needed, not "the replay"
        listed = as_persona("cora").get("/requests/production-replay/").content.decode()
        assert f'<td>nothing: <a href="/runs/{run.id}/">its replay ran</a></td>' in listed

    def test_an_admin_who_is_not_on_the_council_gets_403(self, as_persona, asked, member_key):
        key, private = member_key("adam")
        response = post_vote(as_persona("adam"), asked, key, private)
        assert response.status_code == 403
        assert not Vote.objects.exists()

    def test_a_forged_signature_is_refused_precisely(self, as_persona, asked, member_key):
        key, _ = member_key("cora")
        before = GovernanceEvent.objects.count()
        response = post_vote(as_persona("cora"), asked, key, b"", signature="00" * 64)
        assert response.status_code == 400
        message = gov_services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=key.key_id)
        assert f'<code class="code">APPROVAL_BAD_SIGNATURE</code> {message}' in (
            response.content.decode()
        )
        assert GovernanceEvent.objects.count() == before

    def test_a_malformed_signature_is_refused_precisely(self, as_persona, asked, member_key):
        key, _ = member_key("cora")
        response = post_vote(as_persona("cora"), asked, key, b"", signature="not hex")
        assert response.status_code == 400
        assert (
            '<code class="code">APPROVAL_MALFORMED</code> a signed approval is {payload, key_id, '
            "alg, signature}: signature is not 128 lower-case hex digits"
        ) in response.content.decode()
