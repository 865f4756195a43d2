"""Force-continue in the browser's pages: request it, read the exact payload, sign it, and see
the replay resume non-authoritative once one admin and the council quorum have signed."""

from __future__ import annotations

import html
import json

import pytest

from core.canonical import jcs
from core.ledger.signing import sign
from governance import services as gov_services
from governance.models import ForceContinueRequest, Vote
from tests.console.personas import persona
from tests.governance.factories import lift_request_guard

pytestmark = pytest.mark.django_db


@pytest.fixture
def diverged(replayed):
    return replayed("diverged", by="alice")


@pytest.fixture
def fc(diverged, signers):
    return gov_services.force_continue_request_file(
        run=diverged, actor=persona("alice"), reason="drift in the router is known"
    )


def approved_by_quorum(fc, member_key):
    """One admin and two council members sign ``fc`` through the service; the replay resumes."""
    for name, role in [("cora", "council"), ("colin", "council"), ("adam", "admin")]:
        key, private = member_key(name)
        payload = payload_for(fc, role)
        document = {
            "payload": payload,
            "key_id": key.key_id,
            "alg": "ed25519",
            "signature": sign(private, jcs(payload)),
        }
        gov_services.approval_record(request=fc, approver=persona(name), document=document)
    fc.refresh_from_db()
    assert fc.state == "approved"
    return fc


@pytest.fixture
def approved(fc, member_key, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return approved_by_quorum(fc, member_key)


def payload_for(fc, role, decision="approve", reason=""):
    return gov_services.force_continue_payload_for(
        request=fc, decision=decision, role=role, reason=reason
    )


def post_signature(client, fc, key, private, role, *, decision="approve", **extra):
    text = jcs(payload_for(fc, role, decision)).decode()
    return client.post(
        f"/force-continue/{fc.id}/",
        {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode()), **extra},
    )


class TestRequest:
    def test_alice_files_a_request_with_a_reason(self, as_persona, diverged):
        response = as_persona("alice").post(
            f"/runs/{diverged.id}/force-continue/",
            {"reason": "we expect this drift", "hours": "24"},
        )
        fc = ForceContinueRequest.objects.get()
        assert response.status_code == 303
        assert response["Location"] == f"/requests/force-continue/{fc.id}/"
        assert fc.reason == "we expect this drift"
        assert fc.requested_by.username == "alice"

    def test_an_empty_reason_is_refused_with_the_governance_message(self, as_persona, diverged):
        response = as_persona("alice").post(
            f"/runs/{diverged.id}/force-continue/", {"reason": "  ", "hours": "24"}
        )
        assert response.status_code == 400
        assert (
            f'<code class="code">REQUEST_INVALID</code> {gov_services.REQUEST_REASON_MESSAGE}'
            in response.content.decode()
        )

    def test_a_replay_that_did_not_diverge_cannot_be_force_continued(self, as_persona, replayed):
        ok = replayed("ok")
        response = as_persona("alice").post(
            f"/runs/{ok.id}/force-continue/", {"reason": "why not", "hours": "24"}
        )
        message = gov_services.REQUEST_NOT_DIVERGED_MESSAGE.format(run=ok.id, status="ok")
        assert response.status_code == 409
        assert f"REQUEST_NOT_DIVERGED</code> {html.escape(message)}" in response.content.decode()

    def test_a_replay_it_cannot_continue_says_why_on_its_report(self, as_persona, replayed):
        mismatch = replayed("result_mismatch", by="alice")
        assert mismatch.error_code == "RESULT_MISMATCH"
        body = as_persona("alice").get(f"/runs/{mismatch.id}/").content.decode()
        assert 'id="request-force-continue"' not in body
        assert (
            '<span id="force-continue-why-not">A force-continue resumes a replay past the step '
            "where it diverged (REPLAY_DIVERGENCE); this one ended RESULT_MISMATCH, which it "
            "cannot continue past.</span>"
        ) in body
        diverged = replayed("diverged", by="alice")
        vera = as_persona("vera").get(f"/runs/{diverged.id}/").content.decode()
        assert (
            '<span id="force-continue-why-not">Your roles do not include asking for a '
            "force-continue.</span>"
        ) in vera
        alice = as_persona("alice").get(f"/runs/{diverged.id}/").content.decode()
        assert 'id="request-force-continue"' in alice
        assert "force-continue-why-not" not in alice

    def test_a_second_open_request_is_refused(self, as_persona, fc):
        response = as_persona("alice").post(
            f"/runs/{fc.run_id}/force-continue/", {"reason": "again", "hours": "24"}
        )
        message = gov_services.REQUEST_PENDING_MESSAGE.format(request=fc.id, run=fc.run_id)
        assert response.status_code == 409
        assert f'<code class="code">REQUEST_PENDING</code> {message}' in response.content.decode()
        assert ForceContinueRequest.objects.count() == 1

    def test_it_refuses_a_request_for_a_replay_whose_request_was_approved(
        self, as_persona, approved
    ):
        response = as_persona("alice").post(
            f"/runs/{approved.run_id}/force-continue/", {"reason": "once more", "hours": "24"}
        )
        message = gov_services.REQUEST_ALREADY_APPROVED_MESSAGE.format(
            request=approved.id, run=approved.run_id, resumed=approved.resumed_run_id
        )
        assert response.status_code == 409
        assert f'<code class="code">REQUEST_ALREADY_APPROVED</code> {message}' in (
            response.content.decode()
        )
        assert ForceContinueRequest.objects.count() == 1

    def test_the_request_page_of_an_approved_run_shows_the_request_instead_of_the_form(
        self, as_persona, approved
    ):
        body = as_persona("alice").get(f"/runs/{approved.run_id}/force-continue/").content.decode()
        assert 'id="file-request"' not in body
        notice = body[body.index('id="standing-request"') :]
        assert notice.startswith(
            'id="standing-request">A force-continue request for this replay is already approved:'
        )
        assert f'href="/runs/{approved.resumed_run_id}/">resumed replay</a>' in notice

    def test_the_report_of_an_approved_and_resumed_run_shows_the_request_not_the_button(
        self, as_persona, approved
    ):
        body = as_persona("alice").get(f"/runs/{approved.run_id}/").content.decode()
        section = body[body.index('id="force-continue"') : body.index('id="report-json-box"')]
        assert 'id="request-force-continue"' not in section
        assert f'href="/requests/force-continue/{approved.id}/"' in section
        assert '<span class="badge">approved</span>' in section
        assert f'href="/runs/{approved.resumed_run_id}/" id="resumed-run-link"' in section

    def test_the_report_of_a_run_with_an_open_request_does_not_offer_another(self, as_persona, fc):
        body = as_persona("alice").get(f"/runs/{fc.run_id}/").content.decode()
        assert 'id="request-force-continue"' not in body
        assert '<span class="badge">pending</span>' in body

    def test_the_report_of_a_run_whose_request_was_rejected_offers_a_new_one(
        self, as_persona, fc, member_key
    ):
        key, private = member_key("cora")
        payload = payload_for(fc, "council", decision="deny")
        document = {
            "payload": payload,
            "key_id": key.key_id,
            "alg": "ed25519",
            "signature": sign(private, jcs(payload)),
        }
        gov_services.approval_record(request=fc, approver=persona("cora"), document=document)
        body = as_persona("alice").get(f"/runs/{fc.run_id}/").content.decode()
        assert '<span class="badge">rejected</span>' in body
        assert 'id="request-force-continue"' in body

    @pytest.mark.parametrize("name", ["vera", "oscar", "cora", "lena", "nora"])
    def test_roles_that_may_not_request_get_403(self, as_persona, diverged, name):
        response = as_persona(name).post(
            f"/runs/{diverged.id}/force-continue/", {"reason": "x", "hours": "24"}
        )
        assert response.status_code == 403
        assert not ForceContinueRequest.objects.exists()


class TestApprovalPage:
    def test_it_shows_the_exact_canonical_payload_and_who_still_has_to_sign(
        self, as_persona, fc, member_key
    ):
        member_key("cora")
        body = as_persona("cora").get(f"/requests/force-continue/{fc.id}/").content.decode()
        text = jcs(payload_for(fc, "council")).decode()
        assert f'<pre class="payload" id="payload-text">{html.escape(text)}</pre>' in body
        assert f'name="payload" value="{html.escape(text)}"' in body
        still = "Still needed: <strong>1 admin approval(s) and 2 council approval(s)</strong>"
        assert still in body
        assert '<script src="/static/js/sign.js"' in body

    def test_choosing_deny_over_htmx_returns_only_the_new_payload(
        self, as_persona, fc, htmx_headers
    ):
        response = as_persona("cora").get(
            f"/requests/force-continue/{fc.id}/?decision=deny&role=council&reason=no",
            **htmx_headers,
        )
        body = response.content.decode()
        assert body.strip().startswith('<div id="signing-payload">')
        assert html.escape(jcs(payload_for(fc, "council", "deny", "no")).decode()) in body

    def test_the_requester_is_told_someone_else_must_approve(self, as_persona, replayed):
        run = replayed("diverged", by="sam")
        fc = gov_services.force_continue_request_file(run=run, actor=persona("sam"), reason="x")
        body = as_persona("sam").get(f"/requests/force-continue/{fc.id}/").content.decode()
        assert '<p class="notice" id="sign-blocker">You filed this request' in body

    def test_the_list_puts_what_awaits_me_first(self, as_persona, fc):
        body = as_persona("cora").get("/requests/force-continue/").content.decode()
        assert "Awaits your signature" in body
        assert (
            "Awaits your signature"
            not in as_persona("vera").get("/requests/force-continue/").content.decode()
        )


class TestSigning:
    def test_a_council_signature_is_recorded(self, as_persona, fc, member_key):
        key, private = member_key("cora")
        response = post_signature(as_persona("cora"), fc, key, private, "council")
        assert response.status_code == 303
        approval = Vote.objects.get()
        assert (approval.approver.username, approval.role, approval.decision) == (
            "cora",
            "council",
            "approve",
        )

    def test_one_admin_and_two_council_members_resume_the_replay_non_authoritative(
        self, as_persona, fc, member_key, django_capture_on_commit_callbacks
    ):
        for name, role in [("cora", "council"), ("colin", "council"), ("adam", "admin")]:
            key, private = member_key(name)
            with django_capture_on_commit_callbacks(execute=True):
                response = post_signature(as_persona(name), fc, key, private, role)
            assert response.status_code == 303, response.content.decode()[:2000]
        fc.refresh_from_db()
        assert fc.state == "approved"
        resumed = fc.resumed_run
        assert resumed.state == "done"
        assert resumed.authoritative is False
        assert resumed.report["force_continued"] is True
        page = as_persona("vera").get(f"/runs/{resumed.id}/").content.decode()
        assert 'id="resumed-banner"' in page
        assert 'id="non-authoritative">non-authoritative</span>' in page
        assert 'id="force-continued">force-continued</span>' in page
        origin = as_persona("vera").get(f"/runs/{fc.run_id}/").content.decode()
        assert f'href="/runs/{resumed.id}/" id="resumed-run-link"' in origin

    def test_a_forged_signature_is_refused_precisely(self, as_persona, fc, member_key):
        key, _private = member_key("cora")
        _other_key, other_private = member_key("colin")
        response = post_signature(as_persona("cora"), fc, key, other_private, "council")
        message = gov_services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=key.key_id)
        assert response.status_code == 400
        assert f"APPROVAL_BAD_SIGNATURE</code> {message}" in response.content.decode()
        assert not Vote.objects.exists()

    def test_a_malformed_signature_field_is_refused_precisely(self, as_persona, fc, member_key):
        key, _private = member_key("cora")
        text = jcs(payload_for(fc, "council")).decode()
        response = as_persona("cora").post(
            f"/force-continue/{fc.id}/", {"payload": text, "key_id": key.key_id, "signature": "zz"}
        )
        assert response.status_code == 400
        assert (
            '<code class="code">APPROVAL_MALFORMED</code> a signed approval is {payload, key_id, '
            "alg, signature}: signature is not 128 lower-case hex digits"
        ) in response.content.decode()

    def test_a_payload_that_is_not_json_is_refused(self, as_persona, fc, member_key):
        key, _private = member_key("cora")
        response = as_persona("cora").post(
            f"/force-continue/{fc.id}/",
            {"payload": "{nope", "key_id": key.key_id, "signature": "ab" * 64},
        )
        assert response.status_code == 400
        assert "APPROVAL_MALFORMED</code> The signed approval document is not JSON:" in (
            response.content.decode()
        )

    def test_a_pasted_offline_document_is_accepted(self, as_persona, fc, member_key):
        key, private = member_key("colin")
        payload = payload_for(fc, "council")
        document = {
            "payload": payload,
            "key_id": key.key_id,
            "alg": "ed25519",
            "signature": sign(private, jcs(payload)),
        }
        response = as_persona("colin").post(
            f"/force-continue/{fc.id}/", {"document": json.dumps(document), "offline": "1"}
        )
        assert response.status_code == 303
        assert Vote.objects.get().approver.username == "colin"

    def test_a_council_member_cannot_sign_as_admin(self, as_persona, fc, member_key):
        key, private = member_key("cora")
        response = post_signature(as_persona("cora"), fc, key, private, "admin")
        assert response.status_code == 403
        assert not Vote.objects.exists()

    def test_the_requester_cannot_approve_their_own_request(self, as_persona, replayed, member_key):
        run = replayed("diverged", by="sam")
        fc = gov_services.force_continue_request_file(run=run, actor=persona("sam"), reason="x")
        key, private = member_key("sam")
        response = post_signature(as_persona("sam"), fc, key, private, "admin")
        message = gov_services.APPROVAL_SELF_MESSAGE.format(user="sam", request=fc.id)
        assert response.status_code == 403
        assert f"APPROVAL_SELF</code> {message}" in response.content.decode()

    def test_an_expired_request_cannot_be_signed(self, as_persona, fc, member_key):
        from datetime import timedelta

        from django.utils import timezone

        key, private = member_key("cora")
        lift_request_guard()  # the row, not the signed filing, is made to expire
        ForceContinueRequest.objects.filter(id=fc.id).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
        fc.refresh_from_db()
        response = post_signature(as_persona("cora"), fc, key, private, "council")
        assert response.status_code == 409
        assert "APPROVAL_EXPIRED" in response.content.decode()

    @pytest.mark.parametrize("name", ["vera", "alice", "oscar", "lena", "nora"])
    def test_roles_that_cannot_sign_get_403(self, as_persona, fc, name):
        response = as_persona(name).post(
            f"/force-continue/{fc.id}/", {"payload": "{}", "key_id": "x", "signature": "y"}
        )
        assert response.status_code == 403
