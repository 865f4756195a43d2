"""A halt names exactly what failed: the uploaded file (its blob) when the failure is in the
file, a stored snapshot when the retained body no longer hashes to its own id. A tampered copy
halts itself, never the genuine copies or the snapshots it merely claims.

alice uploads the genuine trace and another run that shares its privacy snapshot; oscar (an
operator, no signing key) uploads a copy with an event payload and the privacy snapshot body
edited, every id left as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from core import errors
from core.ledger import codes
from governance import ledger, selectors, services
from governance.models import GovernanceEvent, Halt
from governance.tasks import replay_run_governed
from replay.models import ReplayRun, Snapshot, Trace
from tests.governance.conftest import ingest, recorded_bytes, tampered_copy_bytes
from tests.governance.factories import enrol, person

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("stored_traces")]

HALTED = "replay is halted until a council FORCE_HALT_CLEAR: "


def _replay(trace, actor) -> ReplayRun:
    run = services.replay_request(trace=trace, mode="audit", actor=actor, enqueue=False)
    replay_run_governed.apply(args=[str(run.id)])
    run.refresh_from_db()
    return run


def _privacy_id(trace) -> str:
    return next(r["snapshot_id"] for r in trace.required_snapshot_ids if r["kind"] == "privacy")


@dataclass
class World:
    alice: Any
    oscar: Any
    genuine: Trace
    other: Trace
    tampered: Trace


@pytest.fixture
def world() -> World:
    alice, oscar = person("alice"), person("oscar")
    genuine = ingest("ok", uploaded_by=alice)
    other = ingest("other", data=recorded_bytes("s9-other"), uploaded_by=alice)
    tampered = ingest("copy", data=tampered_copy_bytes(), uploaded_by=oscar)
    assert tampered.trace_id == genuine.trace_id != other.trace_id
    assert _privacy_id(tampered) == _privacy_id(genuine) == _privacy_id(other)
    return World(alice, oscar, genuine, other, tampered)


class TestATamperedCopy:
    def test_it_halts_only_the_uploaded_file(self, world):
        w = world
        run = _replay(w.tampered, w.oscar)
        assert (run.status, run.error_code) == ("tamper_detected", errors.INTEGRITY_FAILURE)

        (halt,) = Halt.objects.active()
        assert (halt.target_kind, halt.target_id) == ("blob", w.tampered.blob.sha256)
        assert set(selectors.halts_active_map()) == {w.tampered.blob.sha256}

    def test_the_genuine_copy_and_the_traces_sharing_its_snapshot_still_replay(self, world):
        w = world
        _replay(w.tampered, w.oscar)
        assert _replay(w.genuine, w.alice).status == "ok"
        assert _replay(w.other, w.alice).status == "ok"

    def test_the_tampered_copy_itself_is_refused_naming_the_halt(self, world):
        w = world
        _replay(w.tampered, w.oscar)
        (halt,) = Halt.objects.active()
        again = _replay(w.tampered, w.alice)
        assert (again.status, again.error_code) == ("refused", errors.FORCE_HALT_ACTIVE)
        assert again.report["message"] == (
            f"{HALTED}halt {halt.seq} on blob {w.tampered.blob.sha256}: {halt.reason}"
        )

    def test_the_ledger_names_who_uploaded_it_and_who_replayed_it(self, world):
        w = world
        run = _replay(w.tampered, w.alice)
        failure = GovernanceEvent.objects.get(type=codes.INTEGRITY_FAILURE)
        assert failure.actor_id == w.alice.pk
        assert failure.payload == {
            "run_id": str(run.id),
            "trace_id": w.tampered.trace_id,
            "mode": "audit",
            "trace_sha256": w.tampered.blob.sha256,
            "uploaded_by": "oscar",
            "replayed_by": "alice",
            "target_kind": "blob",
            "target_id": w.tampered.blob.sha256,
            "snapshot_id": _privacy_id(w.tampered),
            "broke_at": run.report["broke_at"],
            "expected": run.report["expected"],
            "observed": run.report["observed"],
            "message": "snapshot privacy: its body does not hash to its snapshot_id",
        }
        (halt,) = Halt.objects.active()
        assert halt.payload == {
            "target_kind": "blob",
            "target_id": w.tampered.blob.sha256,
            "trace_id": w.tampered.trace_id,
            "reason": (
                f"INTEGRITY_FAILURE in replay {run.id} of a file uploaded by oscar: "
                "snapshot privacy: its body does not hash to its snapshot_id"
            ),
            "cause_seq": failure.seq,
            "cause_type": codes.INTEGRITY_FAILURE,
        }
        assert ledger.verify().ok

    def test_a_broken_chain_halts_the_file_not_the_trace_id(self, world):
        w = world
        chain = ingest("broken_chain", uploaded_by=w.oscar)
        assert _replay(chain, w.alice).error_code == errors.INTEGRITY_FAILURE
        (halt,) = Halt.objects.active()
        assert (halt.target_kind, halt.target_id) == ("blob", chain.blob.sha256)
        assert _replay(w.genuine, w.alice).status == "ok"

    def test_a_council_quorum_clears_the_files_halt(self, world):
        w = world
        carol, dave = enrol("carol"), enrol("dave")
        _replay(w.tampered, w.oscar)
        (halt,) = Halt.objects.active()
        payload = services.halt_clear_payload_for(halt=halt, reason="evidence kept")
        assert (payload["target_kind"], payload["target_id"]) == ("blob", w.tampered.blob.sha256)
        for signer in (carol, dave):
            services.halt_clear_approval_record(
                halt_seq=halt.seq, approver=signer.user, document=signer.sign(payload)
            )
        assert selectors.halts_active_map() == {}
        # replayed again, the copy is still tampered: it halts itself again, nothing else
        assert _replay(w.tampered, w.alice).error_code == errors.INTEGRITY_FAILURE
        assert [h.target_id for h in Halt.objects.active()] == [w.tampered.blob.sha256]


class TestAStoredSnapshotThatNoLongerMatchesItsId:
    @pytest.fixture
    def corrupted(self, world):
        w = world
        privacy = _privacy_id(w.genuine)
        # the retained store is not append-only (retention removes bodies): rewrite one
        Snapshot.objects.filter(snapshot_id=privacy).update(
            body={"redact": [], "retention_days": 30}
        )
        run = _replay(w.genuine, w.alice)
        assert (run.status, run.error_code) == ("tamper_detected", errors.INTEGRITY_FAILURE)
        return privacy, run

    def test_it_halts_the_snapshot(self, world, corrupted):
        privacy, run = corrupted
        (halt,) = Halt.objects.active()
        assert (halt.target_kind, halt.target_id) == ("snapshot", privacy)
        assert halt.reason == (
            f"INTEGRITY_FAILURE in replay {run.id}: the stored snapshot privacy: its body does "
            "not hash to its snapshot_id"
        )
        failure = GovernanceEvent.objects.get(type=codes.INTEGRITY_FAILURE)
        assert (failure.payload["target_kind"], failure.payload["target_id"]) == (
            "snapshot",
            privacy,
        )

    def test_every_trace_using_it_is_refused_naming_the_halt(self, world, corrupted):
        w = world
        privacy, _run = corrupted
        (halt,) = Halt.objects.active()
        refused = _replay(w.other, w.alice)
        assert refused.error_code == errors.FORCE_HALT_ACTIVE
        assert refused.report["message"] == (
            f"{HALTED}halt {halt.seq} on snapshot {privacy}: {halt.reason}"
        )


class TestHaltsAlreadyInTheLedger:
    """Halts appended before halts named files (keyed by trace id or snapshot id) still hold,
    and a council quorum still clears them."""

    @pytest.mark.parametrize("kind", ["trace", "snapshot"])
    def test_an_old_halt_is_honoured_and_clearable(self, world, kind):
        w = world
        carol, dave = enrol("carol"), enrol("dave")
        target = w.genuine.trace_id if kind == "trace" else _privacy_id(w.genuine)
        old = ledger.append(
            event_type=codes.FORCE_HALT_REPLAY,
            payload={
                "target_kind": kind,
                "target_id": target,
                "reason": "INTEGRITY_FAILURE in replay 1: an old halt",
                "cause_seq": 1,
                "cause_type": codes.INTEGRITY_FAILURE,
            },
        )
        refused = _replay(w.genuine, w.alice)
        assert refused.report["message"] == (
            f"{HALTED}halt {old.seq} on {kind} {target}: INTEGRITY_FAILURE in replay 1: an old halt"
        )
        payload = services.halt_clear_payload_for(halt=Halt.objects.get(seq=old.seq))
        for signer in (carol, dave):
            services.halt_clear_approval_record(
                halt_seq=old.seq, approver=signer.user, document=signer.sign(payload)
            )
        assert _replay(w.genuine, w.alice).status == "ok"
