"""Every replay is on the record (REPLAY_REQUEST before, REPLAY_RESULT after, once); an
integrity failure halts what failed (tests/governance/test_halt_scope.py) until a council
quorum clears it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import errors
from core.ledger import codes
from governance import ledger, selectors, services
from governance.models import GovernanceEvent, Halt
from governance.tasks import replay_run_governed
from replay.models import ReplayRun
from tests.governance.conftest import ingest
from tests.governance.factories import enrol, person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]


def _events(*types):
    return list(GovernanceEvent.objects.filter(type__in=types).order_by("seq"))


def _run_queued(run: ReplayRun) -> ReplayRun:
    replay_run_governed.apply(args=[str(run.id)])
    run.refresh_from_db()
    return run


def test_a_replay_request_is_signed_queued_on_commit_and_its_result_recorded_once(
    django_capture_on_commit_callbacks,
):
    alice = person("alice")
    trace = ingest("ok")
    with django_capture_on_commit_callbacks() as callbacks:
        run = services.replay_request(trace=trace, mode="audit", actor=alice)
    assert len(callbacks) == 1
    assert run.state == ReplayRun.State.QUEUED
    (request,) = _events(codes.REPLAY_REQUEST)
    assert (request.actor_id, request.actor_label) == (alice.pk, "alice")
    assert request.payload == {
        "run_id": str(run.id),
        "trace_id": trace.trace_id,
        "trace_sha256": trace.blob.sha256,
        "mode": "audit",
        "continue_past": [],
        "resumed_from": None,
    }

    run = _run_queued(run)
    _run_queued(run)  # a redelivered task appends nothing twice

    assert run.status == "ok"
    (result,) = _events(codes.REPLAY_RESULT)
    assert result.payload["run_id"] == str(run.id)
    assert (result.payload["status"], result.payload["error_code"]) == ("ok", None)
    assert result.payload["authoritative"] is True
    assert result.idempotency_key == f"replay-result:{run.id}"
    assert ledger.verify().ok


def test_a_divergence_is_recorded_with_its_digest():
    run = services.replay_request(trace=ingest("diverged"), mode="audit", enqueue=False)
    run = _run_queued(run)
    assert run.error_code == errors.REPLAY_DIVERGENCE
    (divergence,) = _events(codes.REPLAY_DIVERGENCE)
    assert divergence.payload["step"] == 3
    assert divergence.payload["path"] == "/route"
    assert divergence.payload["divergences"] == 1
    assert [e.type for e in GovernanceEvent.objects.order_by("-seq")[:2]] == [
        codes.REPLAY_RESULT,
        codes.REPLAY_DIVERGENCE,
    ]


class TestHalts:
    @pytest.fixture
    def halted(self):
        """A copy with a tampered snapshot body was replayed: that file is halted."""
        trace = ingest("tampered_snapshot")
        run = _run_queued(services.replay_request(trace=trace, mode="audit", enqueue=False))
        assert run.error_code == errors.INTEGRITY_FAILURE
        assert run.report["checks"][-1]["name"] == "snapshots"
        return trace, run

    def test_an_integrity_failure_in_the_file_halts_that_file(self, halted):
        trace, run = halted
        (failure,) = _events(codes.INTEGRITY_FAILURE)
        assert failure.payload["run_id"] == str(run.id)
        # the snapshot the file claims, whose body in the file no longer hashes to its id
        tampered = run.report["snapshot_ids"][run.report["broke_at"]]
        assert tampered == run.report["observed"]
        assert failure.payload["snapshot_id"] == tampered
        halts = list(Halt.objects.active())
        assert [(h.target_kind, h.target_id) for h in halts] == [("blob", trace.blob.sha256)]
        assert all(h.payload["cause_seq"] == failure.seq for h in halts)
        assert set(selectors.halts_active_map()) == {trace.blob.sha256}

    def test_a_later_replay_of_the_file_is_refused_but_not_of_its_genuine_copy(self, halted):
        trace, _run = halted
        again = _run_queued(services.replay_request(trace=trace, mode="audit", enqueue=False))
        assert (again.status, again.error_code) == ("refused", errors.FORCE_HALT_ACTIVE)
        assert trace.blob.sha256 in again.report["message"]
        # the genuine copy (same trace id, same snapshot ids) is not concerned
        genuine = _run_queued(
            services.replay_request(trace=ingest("ok"), mode="audit", enqueue=False)
        )
        assert (genuine.status, genuine.error_code) == ("ok", "")

    def test_a_council_quorum_clears_a_halt(self, halted):
        carol, dave, bob = enrol("carol"), enrol("dave"), enrol("bob")
        trace, _run = halted
        file_halt = Halt.objects.active().get(payload__target_kind="blob")
        payload = services.halt_clear_payload_for(halt=file_halt, reason="evidence kept")

        with pytest.raises(codes.GovernanceError) as caught:
            services.halt_clear_approval_record(
                halt_seq=file_halt.seq, approver=bob.user, document=bob.sign(payload)
            )
        assert caught.value.message == services.APPROVAL_ROLE_MESSAGE.format(
            user="bob", role="council"
        )

        services.security_incident_record(
            actor=person("grace"), targets=[("trace", trace.trace_id)], reason="key leaked"
        )
        trace_halt = Halt.objects.active().get(payload__target_kind="trace")
        with pytest.raises(codes.GovernanceError) as caught:
            services.halt_clear_approval_record(
                halt_seq=file_halt.seq,
                approver=carol.user,
                document=carol.sign(services.halt_clear_payload_for(halt=trace_halt)),
            )
        assert caught.value.code == codes.APPROVAL_OTHER_REQUEST
        assert caught.value.message == services.APPROVAL_OTHER_REQUEST_MESSAGE.format(
            signed=f"halt {trace_halt.seq}", subject=f"halt {file_halt.seq}"
        )

        services.halt_clear_approval_record(
            halt_seq=file_halt.seq, approver=carol.user, document=carol.sign(payload)
        )
        assert Halt.objects.active().filter(seq=file_halt.seq).exists()
        services.halt_clear_approval_record(
            halt_seq=file_halt.seq, approver=dave.user, document=dave.sign(payload)
        )
        assert not Halt.objects.active().filter(seq=file_halt.seq).exists()
        (cleared,) = _events(codes.FORCE_HALT_CLEAR)
        assert cleared.payload["halt_seq"] == file_halt.seq
        assert cleared.payload["target_id"] == trace.blob.sha256
        # the clears are read in the halts' own query (every page showing halts asks)
        with CaptureQueriesContext(connection) as queries:
            assert selectors.halts_active_map() == {
                trace.trace_id: f"{trace_halt.label}: {trace_halt.reason}"
            }
        assert len(queries.captured_queries) == 1

        with pytest.raises(codes.GovernanceError) as caught:
            services.halt_clear_approval_record(
                halt_seq=file_halt.seq, approver=dave.user, document=dave.sign(payload)
            )
        assert (caught.value.code, caught.value.message) == (
            codes.HALT_NOT_ACTIVE,
            services.HALT_NOT_ACTIVE_MESSAGE.format(halt=file_halt.seq),
        )
        # the incident's halt on the trace id still stops every copy ...
        ok = ingest("ok")
        refused = _run_queued(services.replay_request(trace=ok, mode="audit", enqueue=False))
        assert refused.error_code == errors.FORCE_HALT_ACTIVE
        assert trace.blob.sha256 not in refused.report["message"]
        # ... until the council clears that halt too
        payload = services.halt_clear_payload_for(halt=trace_halt)
        for signer in (carol, dave):
            services.halt_clear_approval_record(
                halt_seq=trace_halt.seq, approver=signer.user, document=signer.sign(payload)
            )
        assert selectors.halts_active_map() == {}
        again = _run_queued(services.replay_request(trace=ok, mode="audit", enqueue=False))
        assert (again.status, again.error_code) == ("ok", "")
        assert ledger.verify().ok


def test_a_security_incident_halts_its_targets():
    trace = ingest("ok")
    incident = services.security_incident_record(
        actor=person("bob"), targets=[("trace", trace.trace_id)], reason="key leaked"
    )
    (halt,) = Halt.objects.active()
    assert halt.payload == {
        "target_kind": "trace",
        "target_id": trace.trace_id,
        "reason": f"SECURITY_INCIDENT {incident.seq} declared by bob: key leaked",
        "cause_seq": incident.seq,
        "cause_type": codes.SECURITY_INCIDENT,
    }
    run = _run_queued(services.replay_request(trace=trace, mode="audit", enqueue=False))
    assert run.error_code == errors.FORCE_HALT_ACTIVE


def test_a_replay_over_its_iteration_cap_is_recorded_as_a_timeout(settings):
    trace = ingest("ok")
    settings.REPLAY_MAX_ITERATIONS = 1
    run = _run_queued(services.replay_request(trace=trace, mode="audit", enqueue=False))
    assert run.error_code == errors.REPLAY_TIMEOUT
    (timeout,) = _events(codes.REPLAY_TIMEOUT)
    assert timeout.payload == {
        "run_id": str(run.id),
        "trace_id": trace.trace_id,
        "mode": "audit",
        "message": run.report["message"],
    }
    assert GovernanceEvent.objects.order_by("-seq").first().type == codes.REPLAY_RESULT


def test_a_personal_data_access_is_on_the_record():
    bob = person("bob")
    event = services.pii_access_record(
        actor=bob, trace_id="t1", fields=["/steps/2/input/email"], reason="DSR 17", context="page"
    )
    assert (event.type, event.code, event.actor_id) == (codes.PII_REVEALED, 500, bob.pk)
    assert event.payload == {
        "trace_id": "t1",
        "fields": ["/steps/2/input/email"],
        "reason": "DSR 17",
        "context": "page",
    }
