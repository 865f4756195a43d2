"""SECURITY_INCIDENT (seed 003 §10): an admin declares one against a trace id, a stored file
or a snapshot id with a reason; it is a signed ledger event and halts its target like an
integrity failure, until a council quorum clears the halt (an admin alone cannot)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from core import errors
from core.ledger import codes
from governance import ledger, services
from governance.models import GovernanceEvent, Halt
from governance.tasks import replay_run_governed
from replay.models import ReplayRun
from tests.governance.conftest import ingest, recorded_bytes
from tests.governance.factories import enrol, person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]

HALTED = "replay is halted until a council FORCE_HALT_CLEAR: "


def _replay(trace) -> ReplayRun:
    run = services.replay_request(trace=trace, mode="audit", actor=person("alice"), enqueue=False)
    replay_run_governed.apply(args=[str(run.id)])
    run.refresh_from_db()
    return run


def _privacy_id(trace) -> str:
    return next(r["snapshot_id"] for r in trace.required_snapshot_ids if r["kind"] == "privacy")


def manage(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


class TestDeclaring:
    def test_an_incident_on_a_trace_id_halts_every_copy_naming_the_incident(self):
        genuine, diverged = ingest("ok"), ingest("diverged")
        incident, halt = services.security_incident_declare(
            actor=person("bob"), trace=genuine.trace_id, reason="runtime key leaked"
        )
        assert (incident.type, incident.code, incident.actor_label) == (
            codes.SECURITY_INCIDENT,
            303,
            "bob",
        )
        assert incident.payload == {
            "targets": [["trace", genuine.trace_id]],
            "reason": "runtime key leaked",
        }
        assert halt.payload == {
            "target_kind": "trace",
            "target_id": genuine.trace_id,
            "reason": f"SECURITY_INCIDENT {incident.seq} declared by bob: runtime key leaked",
            "cause_seq": incident.seq,
            "cause_type": codes.SECURITY_INCIDENT,
        }
        for copy in (genuine, diverged):
            refused = _replay(copy)
            assert (refused.status, refused.error_code) == ("refused", errors.FORCE_HALT_ACTIVE)
            assert refused.report["message"] == (
                f"{HALTED}halt {halt.seq} on trace {genuine.trace_id}: "
                f"SECURITY_INCIDENT {incident.seq} declared by bob: runtime key leaked"
            )
        assert ledger.verify().ok

    def test_an_incident_on_a_stored_file_halts_that_file_only(self):
        genuine, diverged = ingest("ok"), ingest("diverged")
        _incident, halt = services.security_incident_declare(
            actor=person("bob"), trace=diverged.blob.sha256.upper(), reason="uploaded by mistake"
        )
        assert (halt.payload["target_kind"], halt.payload["target_id"]) == (
            "blob",
            diverged.blob.sha256,
        )
        assert halt.payload["trace_id"] == diverged.trace_id
        assert _replay(diverged).error_code == errors.FORCE_HALT_ACTIVE
        assert _replay(genuine).status == "ok"

    def test_an_incident_on_a_snapshot_halts_every_trace_using_it(self):
        genuine, other = ingest("ok"), ingest("other", data=recorded_bytes("s9-other"))
        privacy = _privacy_id(genuine)
        _incident, halt = services.security_incident_declare(
            actor=person("bob"), snapshot=privacy, reason="policy body disclosed"
        )
        assert (halt.payload["target_kind"], halt.payload["target_id"]) == ("snapshot", privacy)
        for trace in (genuine, other):
            assert _replay(trace).error_code == errors.FORCE_HALT_ACTIVE


class TestRefusals:
    def _refused(self, **kwargs) -> codes.GovernanceError:
        before = GovernanceEvent.objects.count()
        with pytest.raises(codes.GovernanceError) as caught:
            services.security_incident_declare(**kwargs)
        assert GovernanceEvent.objects.count() == before
        return caught.value

    @pytest.mark.parametrize("name", ["alice", "carol", "frank", "oscar"])
    def test_it_refuses_anyone_but_an_admin(self, name):
        trace = ingest("ok")
        refusal = self._refused(actor=person(name), trace=trace.trace_id, reason="r")
        assert (refusal.code, refusal.message) == (
            codes.REQUEST_ROLE,
            services.INCIDENT_ROLE_MESSAGE.format(user=name),
        )

    def test_it_refuses_an_incident_without_a_reason(self):
        trace = ingest("ok")
        refusal = self._refused(actor=person("bob"), trace=trace.trace_id, reason="  ")
        assert (refusal.code, refusal.message) == (
            codes.REQUEST_INVALID,
            services.INCIDENT_REASON_MESSAGE,
        )

    @pytest.mark.parametrize("targets", [{}, {"trace": "t", "snapshot": "s"}])
    def test_it_refuses_anything_but_one_target(self, targets):
        refusal = self._refused(actor=person("bob"), reason="r", **targets)
        assert (refusal.code, refusal.message) == (
            codes.REQUEST_INVALID,
            services.INCIDENT_TARGET_MESSAGE,
        )

    @pytest.mark.parametrize(
        ("targets", "what"),
        [
            ({"trace": "0" * 32}, "trace 00000000000000000000000000000000"),
            ({"trace": "f" * 64}, f"file {'f' * 64}"),
            ({"snapshot": "sha256:" + "e" * 64}, f"snapshot sha256:{'e' * 64}"),
        ],
    )
    def test_it_refuses_a_target_it_does_not_store(self, targets, what):
        ingest("ok")
        refusal = self._refused(actor=person("bob"), reason="r", **targets)
        assert (refusal.code, refusal.message) == (
            codes.INCIDENT_TARGET_UNKNOWN,
            services.INCIDENT_TARGET_UNKNOWN_MESSAGE.format(what=what),
        )


class TestClearing:
    def test_only_a_council_quorum_clears_an_incidents_halt(self):
        trace = ingest("ok")
        grace, carol, dave = enrol("grace"), enrol("carol"), enrol("dave")
        _incident, halt = services.security_incident_declare(
            actor=person("bob"), trace=trace.trace_id, reason="key leaked"
        )
        payload = services.halt_clear_payload_for(halt=halt, reason="key rotated")
        with pytest.raises(codes.GovernanceError) as caught:
            services.halt_clear_approval_record(
                halt_seq=halt.seq, approver=grace.user, document=grace.sign(payload)
            )
        assert (caught.value.code, caught.value.message) == (
            codes.APPROVAL_ROLE,
            services.APPROVAL_ROLE_MESSAGE.format(user="grace", role="council"),
        )
        services.halt_clear_approval_record(
            halt_seq=halt.seq, approver=carol.user, document=carol.sign(payload)
        )
        assert Halt.objects.active().filter(seq=halt.seq).exists()
        services.halt_clear_approval_record(
            halt_seq=halt.seq, approver=dave.user, document=dave.sign(payload)
        )
        assert not Halt.objects.active().exists()
        assert _replay(trace).status == "ok"

    def test_the_admin_who_declared_it_may_not_sign_its_clear(self):
        """Four eyes: sam (admin and council) declared the incident, so his signature toward
        clearing its halt is refused as a self-approval, before his key is looked at, and
        nothing is appended."""
        trace = ingest("ok")
        sam = enrol("sam")
        _incident, halt = services.security_incident_declare(
            actor=sam.user, trace=trace.trace_id, reason="key leaked"
        )
        payload = services.halt_clear_payload_for(halt=halt, reason="rotated")
        before = GovernanceEvent.objects.count()
        for document in (sam.sign(payload), {"payload": payload}):
            with pytest.raises(codes.GovernanceError) as caught:
                services.halt_clear_approval_record(
                    halt_seq=halt.seq, approver=sam.user, document=document
                )
            assert (caught.value.code, caught.value.message) == (
                codes.APPROVAL_SELF,
                services.HALT_CLEAR_SELF_MESSAGE.format(user="sam", halt=halt.seq),
            )
        assert GovernanceEvent.objects.count() == before
        assert Halt.objects.active().filter(seq=halt.seq).exists()

    def test_a_halt_a_failed_replay_set_has_no_declarer(self):
        """The system set it (the halt event has no actor): sam, who asked for the replay
        that failed, signs toward its clear like any council member."""
        trace = ingest("tampered_snapshot")
        sam = enrol("sam")
        run = services.replay_request(trace=trace, mode="audit", actor=sam.user, enqueue=False)
        replay_run_governed.apply(args=[str(run.id)])
        run.refresh_from_db()
        assert run.error_code == errors.INTEGRITY_FAILURE
        (failure,) = GovernanceEvent.objects.filter(type=codes.INTEGRITY_FAILURE)
        halt = Halt.objects.active().get()
        assert (failure.actor_id, halt.actor_id) == (sam.user.pk, None)
        payload = services.halt_clear_payload_for(halt=halt, reason="evidence kept")

        vote = services.halt_clear_approval_record(
            halt_seq=halt.seq, approver=sam.user, document=sam.sign(payload)
        )

        assert (vote.approver, vote.event.type) == (sam.user, codes.HALT_CLEAR_APPROVAL)


class TestCommand:
    def test_an_admin_declares_one_from_the_command_line(self):
        trace = ingest("ok")
        person("bob")
        code, out, err = manage(
            "governance", "incident", "--trace", trace.trace_id, "--reason", "leak", "--user", "bob"
        )
        assert (code, err) == (0, "")
        halt = Halt.objects.active().get()
        assert out.strip() == (
            f"SECURITY_INCIDENT {halt.payload['cause_seq']} recorded; "
            f"halt {halt.seq} on trace {trace.trace_id}"
        )

    def test_a_snapshot_by_its_id(self):
        trace = ingest("ok")
        person("bob")
        privacy = _privacy_id(trace)
        code, out, _ = manage(
            "governance", "incident", "--snapshot", privacy, "--reason", "leak", "--user", "bob"
        )
        assert code == 0
        assert out.strip().endswith(f"on snapshot {privacy}")

    def test_anyone_but_an_admin_exits_1_with_the_code(self):
        trace = ingest("ok")
        person("oscar")
        code, _out, err = manage(
            "governance", "incident", "--trace", trace.trace_id, "--reason", "x", "--user", "oscar"
        )
        assert code == 1
        assert err.strip() == "REQUEST_ROLE: " + services.INCIDENT_ROLE_MESSAGE.format(user="oscar")
        assert not Halt.objects.exists()
