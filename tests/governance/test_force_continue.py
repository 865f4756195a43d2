"""Force-continue through the council: one admin AND a council quorum of distinct people with
distinct keys, each refusal with its exact code and message."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core import errors
from core.canonical import jcs
from core.ledger import codes, signing
from governance import ledger, selectors, services
from governance.models import ForceContinueRequest, GovernanceEvent, Vote
from replay.models import ReplayRun
from tests.governance.factories import (
    DIVERGENCES,
    approve,
    diverged_run,
    enrol,
    filed_request,
    person,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def signers():
    return {name: enrol(name) for name in ("bob", "carol", "dave", "erin", "sam")}


@pytest.fixture
def request_(signers):
    return filed_request(by="alice")


def _refused(request, signer, document, code):
    events, approvals = GovernanceEvent.objects.count(), Vote.objects.count()
    with pytest.raises(codes.GovernanceError) as caught:
        services.approval_record(request=request, approver=signer.user, document=document)
    assert caught.value.code == code
    assert (GovernanceEvent.objects.count(), Vote.objects.count()) == (events, approvals)
    return caught.value.message


def _types():
    return list(GovernanceEvent.objects.order_by("seq").values_list("type", flat=True))


class TestFiling:
    def test_it_files_a_request_with_the_divergence_it_continues_past(self, request_):
        event = request_.request_event
        assert request_.step == 3
        assert request_.divergence_digest == signing.divergence_digest(DIVERGENCES)
        assert event.type == codes.FORCE_CONTINUE_REQUEST
        assert event.actor_label == "alice"
        assert event.payload == {
            "request_id": str(request_.id),
            "run_id": str(request_.run_id),
            "trace_id": request_.run.trace.trace_id,
            "step": 3,
            "divergence_digest": request_.divergence_digest,
            "reason": "the router table was hot-fixed",
            "expires_at": signing.format_time(request_.expires_at),
            "admins_required": 1,
            "council_required": 2,
            "deny_threshold": 1,
        }

    def test_it_refuses_a_run_that_did_not_diverge(self):
        run = diverged_run()
        ReplayRun.objects.filter(id=run.id).update(error_code="", status="ok")
        run.refresh_from_db()
        with pytest.raises(codes.GovernanceError) as caught:
            filed_request(run=run)
        assert caught.value.code == codes.REQUEST_NOT_DIVERGED
        assert caught.value.message == services.REQUEST_NOT_DIVERGED_MESSAGE.format(
            run=run.id, status="ok"
        )

    def test_it_refuses_a_second_open_request_for_one_run(self, request_):
        with pytest.raises(codes.GovernanceError) as caught:
            filed_request(run=request_.run)
        assert caught.value.code == codes.REQUEST_PENDING
        assert caught.value.message == services.REQUEST_PENDING_MESSAGE.format(
            request=request_.id, run=request_.run_id
        )

    def test_it_refuses_a_request_for_a_run_whose_request_was_approved(self, signers, request_):
        bob, carol, dave = signers["bob"], signers["carol"], signers["dave"]
        for signer, role in [(bob, "admin"), (carol, "council"), (dave, "council")]:
            services.approval_record(
                request=request_,
                approver=signer.user,
                document=approve(signer, request_, role=role),
            )
        request_.refresh_from_db()
        events = GovernanceEvent.objects.count()
        with pytest.raises(codes.GovernanceError) as caught:
            filed_request(run=request_.run)
        assert caught.value.code == codes.REQUEST_ALREADY_APPROVED
        assert caught.value.message == services.REQUEST_ALREADY_APPROVED_MESSAGE.format(
            request=request_.id, run=request_.run_id, resumed=request_.resumed_run_id
        )
        assert GovernanceEvent.objects.count() == events
        assert ForceContinueRequest.objects.count() == 1

    def test_a_rejected_request_does_not_stop_a_new_one(self, signers, request_):
        carol = signers["carol"]
        services.approval_record(
            request=request_,
            approver=carol.user,
            document=approve(carol, request_, decision="deny"),
        )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.REJECTED
        assert filed_request(run=request_.run).state == ForceContinueRequest.State.PENDING

    def test_it_refuses_an_expiry_beyond_the_limit(self):
        with pytest.raises(codes.GovernanceError) as caught:
            services.force_continue_request_file(
                run=diverged_run(),
                actor=person("alice"),
                reason="r",
                expires_at=timezone.now() + timedelta(hours=169),
            )
        assert caught.value.code == codes.REQUEST_INVALID
        assert caught.value.message == services.REQUEST_EXPIRY_MESSAGE.format(hours=168)

    def test_it_refuses_a_request_without_a_reason(self):
        with pytest.raises(codes.GovernanceError) as caught:
            services.force_continue_request_file(
                run=diverged_run(), actor=person("alice"), reason="  "
            )
        assert (caught.value.code, caught.value.message) == (
            codes.REQUEST_INVALID,
            services.REQUEST_REASON_MESSAGE,
        )


class TestQuorum:
    def test_one_admin_and_two_council_members_approve_and_the_replay_resumes(
        self, signers, request_, django_capture_on_commit_callbacks
    ):
        bob, carol, dave = signers["bob"], signers["carol"], signers["dave"]
        with django_capture_on_commit_callbacks() as callbacks:
            services.approval_record(
                request=request_, approver=bob.user, document=approve(bob, request_, role="admin")
            )
            services.approval_record(
                request=request_, approver=carol.user, document=approve(carol, request_)
            )
            assert selectors.force_continue_tally(request=request_).missing == (
                "1 council approval(s)"
            )
            services.approval_record(
                request=request_, approver=dave.user, document=approve(dave, request_)
            )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.APPROVED
        resumed = request_.resumed_run
        assert resumed.resumed_from_id == request_.run_id
        assert resumed.continue_past == [3]
        assert resumed.state == ReplayRun.State.QUEUED
        assert len(callbacks) == 1  # the resumed run is queued once, after commit
        assert _types()[-5:] == [
            codes.FORCE_CONTINUE_APPROVAL,
            codes.FORCE_CONTINUE_APPROVAL,
            codes.FORCE_CONTINUE_APPROVAL,
            codes.FORCE_CONTINUE_APPROVED,
            codes.REPLAY_REQUEST,
        ]
        approved = request_.decision_event
        assert approved.payload["approval_seqs"] == list(
            Vote.objects.order_by("id").values_list("event_id", flat=True)
        )
        assert (approved.payload["admins"], approved.payload["council"]) == (1, 2)
        assert GovernanceEvent.objects.order_by("-seq").first().payload == {
            "run_id": str(resumed.id),
            "trace_id": resumed.trace.trace_id,
            "trace_sha256": resumed.trace.blob.sha256,
            "mode": "audit",
            "continue_past": [3],
            "resumed_from": str(request_.run_id),
            "force_continue_request": str(request_.id),
        }
        assert services.force_continue_resume(run=request_.run) == resumed
        assert ledger.verify().ok

    def test_council_members_alone_do_not_make_a_quorum(self, signers, request_):
        for name in ("carol", "dave", "erin"):
            s = signers[name]
            services.approval_record(
                request=request_, approver=s.user, document=approve(s, request_)
            )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.PENDING
        assert selectors.force_continue_tally(request=request_).missing == "1 admin approval(s)"

    def test_the_quorum_follows_the_setting(self, signers, request_, settings):
        settings.GOVERNANCE_COUNCIL_QUORUM = 3
        for name, role in (("bob", "admin"), ("carol", "council"), ("dave", "council")):
            s = signers[name]
            services.approval_record(
                request=request_, approver=s.user, document=approve(s, request_, role=role)
            )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.PENDING
        erin = signers["erin"]
        services.approval_record(
            request=request_, approver=erin.user, document=approve(erin, request_)
        )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.APPROVED

    def test_a_signed_denial_rejects_the_request(self, signers, request_):
        carol, dave = signers["carol"], signers["dave"]
        services.approval_record(
            request=request_,
            approver=carol.user,
            document=approve(carol, request_, decision="deny"),
        )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.REJECTED
        assert request_.decision_event.type == codes.FORCE_CONTINUE_REJECTED
        assert request_.decision_event.payload == {
            "request_id": str(request_.id),
            "run_id": str(request_.run_id),
            "trace_id": request_.run.trace.trace_id,
            "step": request_.step,
            "divergence_digest": request_.divergence_digest,
            "approval_seqs": [request_.approvals.get().event_id],
            "admins": 0,
            "council": 0,
            "denials": 1,
        }
        assert request_.decision_event.idempotency_key == (f"force-continue-decision:{request_.id}")
        message = _refused(request_, dave, approve(dave, request_), codes.REQUEST_CLOSED)
        assert message == services.REQUEST_CLOSED_MESSAGE.format(
            request=request_.id, state="rejected"
        )

    def test_an_approval_made_before_its_key_was_revoked_still_counts(self, signers, request_):
        bob, carol, dave = signers["bob"], signers["carol"], signers["dave"]
        services.approval_record(
            request=request_, approver=bob.user, document=approve(bob, request_, role="admin")
        )
        services.approval_record(
            request=request_, approver=carol.user, document=approve(carol, request_)
        )
        services.member_key_revoke(key=carol.key, actor=carol.user, reason="laptop lost")
        services.approval_record(
            request=request_, approver=dave.user, document=approve(dave, request_)
        )
        request_.refresh_from_db()
        assert request_.state == ForceContinueRequest.State.APPROVED


class TestRefusals:
    """Each refused approval leaves nothing behind (checked in _refused)."""

    def test_it_refuses_self_approval(self, signers):
        bob = signers["bob"]
        own = filed_request(by="bob")
        message = _refused(own, bob, approve(bob, own, role="admin"), codes.APPROVAL_SELF)
        assert message == services.APPROVAL_SELF_MESSAGE.format(user="bob", request=own.id)

    def test_it_refuses_two_approvals_by_one_person(self, signers, request_):
        carol = signers["carol"]
        services.approval_record(
            request=request_, approver=carol.user, document=approve(carol, request_)
        )
        second_key = enrol("carol")
        message = _refused(
            request_, second_key, approve(second_key, request_), codes.APPROVAL_DUPLICATE_PERSON
        )
        assert message == services.APPROVAL_DUPLICATE_PERSON_MESSAGE.format(
            user="carol", subject=f"request {request_.id}"
        )

    def test_it_refuses_two_approvals_by_one_key(self, signers, request_):
        carol = signers["carol"]
        services.approval_record(
            request=request_, approver=carol.user, document=approve(carol, request_)
        )
        message = _refused(request_, carol, approve(carol, request_), codes.APPROVAL_DUPLICATE_KEY)
        assert message == services.APPROVAL_DUPLICATE_KEY_MESSAGE.format(
            key_id=carol.key.key_id, subject=f"request {request_.id}"
        )

    def test_it_refuses_an_approval_replayed_onto_another_request(self, signers, request_):
        dave = signers["dave"]
        other = filed_request(by="alice")
        signed_for_other = approve(dave, other)
        message = _refused(request_, dave, signed_for_other, codes.APPROVAL_OTHER_REQUEST)
        assert message == services.APPROVAL_OTHER_REQUEST_MESSAGE.format(
            signed=f"request {other.id}", subject=f"request {request_.id}"
        )

    def test_it_refuses_an_approval_after_expiry(self, signers, request_, monkeypatch):
        dave = signers["dave"]
        document = approve(dave, request_)
        later = request_.expires_at + timedelta(seconds=1)
        monkeypatch.setattr(timezone, "now", lambda: later)
        message = _refused(request_, dave, document, codes.APPROVAL_EXPIRED)
        assert message == services.APPROVAL_EXPIRED_MESSAGE.format(
            request=request_.id, expires_at=signing.format_time(request_.expires_at)
        )

    def test_it_refuses_an_approval_by_a_revoked_key(self, signers, request_):
        dave = signers["dave"]
        document = approve(dave, request_)
        revoked = services.member_key_revoke(key=dave.key, actor=dave.user, reason="compromised")
        message = _refused(request_, dave, document, codes.APPROVAL_KEY_REVOKED)
        assert message == services.APPROVAL_KEY_REVOKED_MESSAGE.format(
            key_id=dave.key.key_id, revoked_at=signing.format_time(revoked.revoked_at)
        )

    def test_it_refuses_an_unconfirmed_key(self, request_):
        newcomer = enrol("erin", confirm=False)
        message = _refused(
            request_, newcomer, approve(newcomer, request_), codes.APPROVAL_KEY_UNCONFIRMED
        )
        assert message == services.APPROVAL_KEY_UNCONFIRMED_MESSAGE.format(
            key_id=newcomer.key.key_id
        )

    def test_it_refuses_someone_elses_key(self, signers, request_):
        carol, dave = signers["carol"], signers["dave"]
        message = _refused(request_, dave, approve(carol, request_), codes.APPROVAL_KEY_UNKNOWN)
        assert message == services.APPROVAL_KEY_UNKNOWN_MESSAGE.format(
            key_id=carol.key.key_id, user="dave"
        )

    def test_it_refuses_a_signature_by_another_private_key(self, signers, request_):
        dave, erin = signers["dave"], signers["erin"]
        payload = services.force_continue_payload_for(
            request=request_, decision="approve", role="council"
        )
        forged = dave.sign(payload, private=erin.private)
        message = _refused(request_, dave, forged, codes.APPROVAL_BAD_SIGNATURE)
        assert message == services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=dave.key.key_id)

    def test_it_refuses_a_signed_payload_that_differs_from_the_request(self, signers, request_):
        dave = signers["dave"]
        payload = services.force_continue_payload_for(
            request=request_, decision="approve", role="council"
        )
        payload["divergence_digest"] = "sha256:" + "0" * 64
        message = _refused(request_, dave, dave.sign(payload), codes.APPROVAL_PAYLOAD_MISMATCH)
        assert message == services.APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
            field="divergence_digest",
            signed=f'"sha256:{"0" * 64}"',
            subject=f"request {request_.id}",
            expected=f'"{request_.divergence_digest}"',
        )

    def test_it_refuses_a_role_the_signer_does_not_hold(self, signers, request_):
        dave = signers["dave"]
        message = _refused(
            request_, dave, approve(dave, request_, role="admin"), codes.APPROVAL_ROLE
        )
        assert message == services.APPROVAL_ROLE_MESSAGE.format(user="dave", role="admin")

    @pytest.mark.parametrize("field", ["decision", "role"])
    def test_it_refuses_a_decision_or_role_it_does_not_know(self, signers, request_, field):
        dave = signers["dave"]
        payload = services.force_continue_payload_for(
            request=request_, decision="approve", role="council"
        )
        payload[field] = "abstain"
        message = _refused(request_, dave, dave.sign(payload), codes.APPROVAL_MALFORMED)
        assert message == (
            "a signed approval is {payload, key_id, alg, signature}: "
            "decision or role is not recognised"
        )

    @pytest.mark.parametrize("spelling", [str.upper, lambda hex_: hex_[:127].upper() + hex_[127]])
    def test_it_refuses_a_signature_not_in_lower_case_hex(self, signers, request_, spelling):
        """The same bytes in upper (or mixed) case are not the contract's spelling: refused,
        not normalised, nothing stored (the signature would otherwise verify)."""
        dave = signers["dave"]
        document = approve(dave, request_, role="council")
        document["signature"] = spelling(document["signature"])
        public, signed = bytes.fromhex(dave.key.public_key), jcs(document["payload"])
        assert signing.verify(public, signed, document["signature"].lower())
        message = _refused(request_, dave, document, codes.APPROVAL_MALFORMED)
        assert message == (
            "a signed approval is {payload, key_id, alg, signature}: "
            "signature is not 128 lower-case hex digits"
        )
        assert not signing.verify(public, signed, document["signature"])

    def test_it_refuses_a_document_that_is_not_a_signed_approval(self, signers, request_):
        dave = signers["dave"]
        message = _refused(request_, dave, {"payload": "yes"}, codes.APPROVAL_MALFORMED)
        assert message == services.APPROVAL_MALFORMED_MESSAGE.format(
            problem="payload is not an object"
        )


def test_it_refuses_to_register_one_public_key_for_two_people():
    carol = enrol("carol")
    with pytest.raises(codes.GovernanceError) as caught:
        services.member_key_register(
            user=person("dave"), public_key=signing.public_key_of(carol.private).hex()
        )
    assert caught.value.code == codes.KEY_DUPLICATE
    assert caught.value.message == services.KEY_DUPLICATE_MESSAGE.format(key_id=carol.key.key_id)


def test_continuing_without_an_approved_request_is_force_continue_required():
    run = diverged_run()
    with pytest.raises(errors.ReplayError) as caught:
        services.force_continue_resume(run=run, actor=person("alice"))
    assert caught.value.code == errors.FORCE_CONTINUE_REQUIRED
    assert caught.value.message == services.FORCE_CONTINUE_REQUIRED_MESSAGE.format(
        run=run.id, step=3, quorum=2
    )
    refused = GovernanceEvent.objects.order_by("-seq").first()
    assert refused.type == codes.FORCE_CONTINUE_REFUSED
    assert refused.payload == {
        "run_id": str(run.id),
        "trace_id": run.trace.trace_id,
        "step": 3,
        "error_code": "FORCE_CONTINUE_REQUIRED",
    }
