"""Council-approved production replay: someone holding auditor or admin (not both) asks, a
council quorum signs, and exactly one production run of exactly that stored file is queued
for them. Each refusal with its exact code and message; nothing half-recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.ledger import codes, signing
from governance import ledger, selectors, services
from governance.models import GovernanceEvent, ProductionReplayRequest, Vote
from governance.tasks import replay_run_governed
from replay.models import ReplayRun
from tests.governance.conftest import ingest
from tests.governance.factories import enrol, lift_request_guard, person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]

REASON = "disaster recovery drill for job 7"


@pytest.fixture
def signers():
    return {name: enrol(name) for name in ("carol", "dave", "erin", "sam", "bob")}


@pytest.fixture
def trace():
    return ingest("ok")


@pytest.fixture
def asked(trace):
    return services.production_replay_request_file(
        trace=trace, actor=person("alice"), reason=REASON
    )


def vote(signer, request, decision=signing.APPROVE, reason=""):
    payload = services.production_replay_payload_for(
        request=request, decision=decision, reason=reason
    )
    return signer.sign(payload)


def record(signer, request, document=None):
    return services.production_replay_approval_record(
        request=request, approver=signer.user, document=document or vote(signer, request)
    )


def refused(request, approver, document, code):
    before = (GovernanceEvent.objects.count(), Vote.objects.count())
    with pytest.raises(codes.GovernanceError) as caught:
        services.production_replay_approval_record(
            request=request, approver=approver, document=document
        )
    assert caught.value.code == code
    assert (GovernanceEvent.objects.count(), Vote.objects.count()) == before
    return caught.value.message


def types():
    return list(GovernanceEvent.objects.order_by("seq").values_list("type", flat=True))


class TestAsking:
    def test_the_request_is_on_the_ledger_bound_to_the_stored_file(self, asked, trace):
        event = asked.request_event
        assert event.type == codes.PRODUCTION_REPLAY_REQUEST
        assert event.code == 105
        assert event.actor_label == "alice"
        assert event.payload == {
            "request_id": str(asked.id),
            "trace_id": trace.trace_id,
            "trace_sha256": trace.blob.sha256,
            "mode": "production",
            "requested_by": "alice",
            "reason": REASON,
            "expires_at": signing.format_time(asked.expires_at),
            "council_required": 2,
            "deny_threshold": 1,
        }
        assert asked.state == ProductionReplayRequest.State.PENDING
        assert asked.run is None

    @pytest.mark.parametrize("name", ["carol", "frank"])
    def test_only_an_auditor_or_an_admin_may_ask(self, trace, name):
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(trace=trace, actor=person(name), reason="r")
        assert caught.value.code == codes.REQUEST_ROLE
        assert caught.value.message == services.PRODUCTION_ROLE_MESSAGE.format(user=name)
        assert not GovernanceEvent.objects.filter(type=codes.PRODUCTION_REPLAY_REQUEST).exists()

    def test_an_admin_may_ask_too(self, trace):
        asked = services.production_replay_request_file(
            trace=trace, actor=person("bob"), reason="r"
        )
        assert asked.requested_by.username == "bob"

    def test_it_refuses_a_trace_that_cannot_be_replayed_in_production(self):
        trace = ingest("missing_output")
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(trace=trace, actor=person("alice"), reason="r")
        assert caught.value.code == codes.REQUEST_NOT_REPLAYABLE
        assert caught.value.message.startswith(
            f"trace {trace.trace_id} cannot be replayed in production: missing output:"
        )
        assert caught.value.message.endswith("(not persisted)")

    @pytest.mark.parametrize("target", ["trace", "blob", "snapshot"])
    def test_it_refuses_a_halted_file_trace_or_snapshot_with_the_halt(self, trace, target):
        target_id = {
            "trace": trace.trace_id,
            "blob": trace.blob.sha256,
            "snapshot": trace.required_snapshot_ids[1]["snapshot_id"],
        }[target]
        incident = services.security_incident_record(
            actor=person("bob"), targets=[(target, target_id)], reason="key leaked"
        )
        halt = selectors.halts_active().get()
        alice = person("alice")
        before = GovernanceEvent.objects.count()
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(trace=trace, actor=alice, reason="r")
        assert caught.value.code == codes.REQUEST_HALTED
        assert caught.value.message == services.PRODUCTION_HALTED_MESSAGE.format(
            trace=trace.trace_id,
            why=f"{halt.label}: SECURITY_INCIDENT {incident.seq} declared by bob: key leaked",
        )
        assert GovernanceEvent.objects.count() == before

    def test_it_refuses_a_second_open_request_by_the_same_person(self, asked, trace):
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(
                trace=trace, actor=person("alice"), reason="again"
            )
        assert caught.value.code == codes.REQUEST_PENDING
        assert caught.value.message == services.PRODUCTION_PENDING_MESSAGE.format(
            request=asked.id, trace=trace.trace_id
        )

    def test_it_refuses_no_reason_and_an_expiry_beyond_the_limit(self, trace):
        alice = person("alice")
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(trace=trace, actor=alice, reason=" ")
        assert (caught.value.code, caught.value.message) == (
            codes.REQUEST_INVALID,
            services.PRODUCTION_REASON_MESSAGE,
        )
        with pytest.raises(codes.GovernanceError) as caught:
            services.production_replay_request_file(
                trace=trace,
                actor=alice,
                reason="r",
                expires_at=timezone.now() + timedelta(hours=169),
            )
        assert (caught.value.code, caught.value.message) == (
            codes.REQUEST_INVALID,
            services.REQUEST_EXPIRY_MESSAGE.format(hours=168),
        )


class TestQuorum:
    def test_two_council_signatures_queue_one_production_run_for_the_requester(
        self, signers, asked, trace, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks() as callbacks:
            record(signers["carol"], asked)
            assert selectors.production_tally(request=asked).state == "pending"
            record(signers["dave"], asked)
        assert len(callbacks) == 1  # the run is queued once the decision commits
        asked.refresh_from_db()
        assert asked.state == ProductionReplayRequest.State.APPROVED
        assert types()[-5:] == [
            codes.PRODUCTION_REPLAY_REQUEST,
            codes.PRODUCTION_REPLAY_APPROVAL,
            codes.PRODUCTION_REPLAY_APPROVAL,
            codes.PRODUCTION_REPLAY_APPROVED,
            codes.REPLAY_REQUEST,
        ]
        run = asked.run
        assert (run.mode, run.trace_id, run.requested_by.username) == (
            "production",
            trace.pk,
            "alice",
        )
        replay_request = GovernanceEvent.objects.get(type=codes.REPLAY_REQUEST)
        assert replay_request.payload["production_request"] == str(asked.id)
        assert replay_request.payload["mode"] == "production"
        decision = asked.decision_event
        assert decision.payload == {
            "request_id": str(asked.id),
            "trace_id": trace.trace_id,
            "trace_sha256": trace.blob.sha256,
            "approval_seqs": list(
                asked.approvals.order_by("event_id").values_list("event_id", flat=True)
            ),
            "council": 2,
            "denials": 0,
        }

        replay_run_governed.apply(args=[str(run.id)])
        run.refresh_from_db()
        assert (run.state, run.status, run.authoritative) == (ReplayRun.State.DONE, "ok", True)
        assert ledger.verify().ok

    def test_a_signed_denial_rejects_and_queues_nothing(self, signers, asked):
        record(signers["carol"], asked, vote(signers["carol"], asked, signing.DENY, "no drill"))
        asked.refresh_from_db()
        assert asked.state == ProductionReplayRequest.State.REJECTED
        assert asked.run is None
        assert asked.decision_event.type == codes.PRODUCTION_REPLAY_REJECTED
        assert asked.decision_event.payload == {
            "request_id": str(asked.id),
            "trace_id": asked.trace.trace_id,
            "trace_sha256": asked.trace.blob.sha256,
            "approval_seqs": [asked.approvals.get().event_id],
            "council": 0,
            "denials": 1,
        }
        assert asked.decision_event.idempotency_key == f"production-replay-decision:{asked.id}"
        assert not ReplayRun.objects.exists()

    def test_a_decided_request_takes_no_more_votes(self, signers, asked):
        record(signers["carol"], asked)
        record(signers["dave"], asked)
        asked.refresh_from_db()
        erin = signers["erin"]
        message = refused(asked, erin.user, vote(erin, asked), codes.REQUEST_CLOSED)
        assert message == services.REQUEST_CLOSED_MESSAGE.format(request=asked.id, state="approved")


class TestRefusals:
    def test_it_refuses_a_decision_it_does_not_know(self, signers, asked):
        carol = signers["carol"]
        payload = services.production_replay_payload_for(request=asked, decision=signing.APPROVE)
        payload["decision"] = "abstain"
        message = refused(asked, carol.user, carol.sign(payload), codes.APPROVAL_MALFORMED)
        assert message == (
            "a signed approval is {payload, key_id, alg, signature}: decision is not recognised"
        )

    def test_it_refuses_a_reason_that_is_not_a_string(self, signers, asked):
        carol = signers["carol"]
        payload = services.production_replay_payload_for(request=asked, decision=signing.APPROVE)
        payload["reason"] = 7
        message = refused(asked, carol.user, carol.sign(payload), codes.APPROVAL_MALFORMED)
        assert message == (
            "a signed approval is {payload, key_id, alg, signature}: reason is not a string"
        )

    def test_the_requester_cannot_approve_their_own_request(self, signers, trace):
        sam = signers["sam"]  # admin and council
        mine = services.production_replay_request_file(trace=trace, actor=sam.user, reason="r")
        message = refused(mine, sam.user, vote(sam, mine), codes.APPROVAL_SELF)
        assert message == services.APPROVAL_SELF_MESSAGE.format(user="sam", request=mine.id)

    def test_an_admin_without_the_council_role_cannot_sign(self, signers, asked):
        bob = signers["bob"]
        message = refused(asked, bob.user, vote(bob, asked), codes.APPROVAL_ROLE)
        assert message == services.APPROVAL_ROLE_MESSAGE.format(user="bob", role="council")

    def test_one_person_counts_once(self, signers, asked):
        carol = signers["carol"]
        record(carol, asked)
        second = enrol("carol")
        message = refused(asked, carol.user, vote(second, asked), codes.APPROVAL_DUPLICATE_PERSON)
        assert message == services.APPROVAL_DUPLICATE_PERSON_MESSAGE.format(
            user="carol", subject=f"request {asked.id}"
        )

    def test_a_signature_over_another_request_is_refused(self, signers, asked, trace):
        other = services.production_replay_request_file(
            trace=trace, actor=person("bob"), reason="mine"
        )
        carol = signers["carol"]
        message = refused(asked, carol.user, vote(carol, other), codes.APPROVAL_OTHER_REQUEST)
        assert message == services.APPROVAL_OTHER_REQUEST_MESSAGE.format(
            signed=f"request {other.id}", subject=f"request {asked.id}"
        )

    def test_a_force_continue_payload_is_not_a_production_approval(self, signers, asked):
        carol = signers["carol"]
        payload = {"type": signing.FORCE_CONTINUE_APPROVAL_TYPE, "request_id": str(asked.id)}
        message = refused(asked, carol.user, carol.sign(payload), codes.APPROVAL_OTHER_REQUEST)
        assert message == services.APPROVAL_OTHER_REQUEST_MESSAGE.format(
            signed=f"a {signing.FORCE_CONTINUE_APPROVAL_TYPE} payload",
            subject=f"request {asked.id}",
        )

    @pytest.mark.parametrize(
        ("field", "value"),
        [
            ("trace_sha256", "0" * 64),
            ("requested_by", "mallory"),
            ("expires_at", "2099-01-01T00:00:00Z"),
            ("mode", "audit"),
        ],
    )
    def test_every_bound_field_must_match_the_request(self, signers, asked, field, value):
        carol = signers["carol"]
        payload = services.production_replay_payload_for(request=asked, decision="approve")
        expected = payload[field]
        payload[field] = value
        message = refused(asked, carol.user, carol.sign(payload), codes.APPROVAL_PAYLOAD_MISMATCH)
        assert message == services.APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
            field=field,
            signed=f'"{value}"',
            subject=f"request {asked.id}",
            expected=f'"{expected}"',
        )

    def test_the_role_signed_in_must_be_council(self, signers, asked):
        carol = signers["carol"]
        payload = services.production_replay_payload_for(request=asked, decision="approve")
        payload["role"] = "admin"
        message = refused(asked, carol.user, carol.sign(payload), codes.APPROVAL_PAYLOAD_MISMATCH)
        assert message == services.APPROVAL_PAYLOAD_MISMATCH_MESSAGE.format(
            field="role", signed='"admin"', subject=f"request {asked.id}", expected='"council"'
        )

    def test_a_forged_signature_is_refused(self, signers, asked):
        carol, dave = signers["carol"], signers["dave"]
        forged = vote(carol, asked)
        forged["signature"] = vote(dave, asked)["signature"]
        message = refused(asked, carol.user, forged, codes.APPROVAL_BAD_SIGNATURE)
        assert message == services.APPROVAL_BAD_SIGNATURE_MESSAGE.format(key_id=carol.key.key_id)

    def test_an_expired_request_takes_no_votes(self, signers, asked):
        lift_request_guard()  # the row, not the signed filing, is made to expire
        ProductionReplayRequest.objects.filter(id=asked.id).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        asked.refresh_from_db()
        assert selectors.request_is_expired(request=asked)
        carol = signers["carol"]
        message = refused(asked, carol.user, vote(carol, asked), codes.APPROVAL_EXPIRED)
        assert message == services.APPROVAL_EXPIRED_MESSAGE.format(
            request=asked.id, expires_at=signing.format_time(asked.expires_at)
        )
