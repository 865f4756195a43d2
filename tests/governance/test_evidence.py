"""The ledger evidence a bundle carries (``dsr.evidence``, over ``governance.evidence``): the
events naming the subject's traces, the keys that verify them and a checkpoint, signed by the
server key, and a bundle built from them verifies offline."""

from __future__ import annotations

import pytest

from core import bundle
from core.ledger import codes
from dsr import evidence
from governance import evidence as governance_evidence
from governance import ledger, selectors, transparency
from governance.services import replay_request, replay_run_govern
from tests.governance.conftest import ingest, recorded_bytes
from tlog import checkpoint as checkpoints
from tlog import note as notes


@pytest.fixture
def traces(stored_traces):
    alpha = ingest("alpha", data=recorded_bytes("alpha"))
    beta = ingest("beta", data=recorded_bytes("beta"))
    replay_run_govern(run_id=replay_request(trace=alpha, mode="audit", enqueue=False).id)
    replay_run_govern(run_id=replay_request(trace=beta, mode="audit", enqueue=False).id)
    return alpha, beta


def test_it_gathers_the_events_naming_the_traces_and_their_keys(traces):
    alpha, _beta = traces
    found = evidence.ledger_evidence([alpha])
    key = ledger.server_key_current()

    assert [e["type"] for e in found["events"]] == ["REPLAY_REQUEST", "REPLAY_RESULT"]
    assert {e["payload"]["trace_id"] for e in found["events"]} == {alpha.trace_id}
    assert [k["key_id"] for k in found["server_keys"]] == [key.key_id]
    assert found["member_keys"] == {}
    assert found["checkpoint"]["checkpoint"]["size"] == 5  # KEY_ADDED and two replays' events


def test_a_bundle_of_them_signed_by_the_server_verifies_offline(traces):
    alpha, _beta = traces
    found = evidence.ledger_evidence([alpha])
    inputs = bundle.BundleInputs(
        request_ref="dsr_1",
        subject_refs=("subj_X",),
        created_at="2026-02-01T00:00:00.000000Z",
        traces=(bundle.TraceEvidence(alpha.trace_id, alpha.blob.sha256, alpha.format),),
        **found,
    )
    data = bundle.build_bundle(inputs, evidence.server_sign)
    key = ledger.server_key_current()

    check = bundle.verify_bundle(data, [key.public_key])
    assert (check.ok, check.key_id, check.events, check.trust) == (
        True,
        key.key_id,
        2,
        "trusted key",
    )
    assert bundle.verify_bundle(data, checkpoint=found["checkpoint"]).trust == "checkpoint"


def test_the_bundle_proves_each_event_in_the_signed_tree_checkpoint(traces):
    alpha, _beta = traces
    found = evidence.ledger_evidence([alpha])
    inputs = bundle.BundleInputs(
        request_ref="dsr_1",
        subject_refs=("subj_X",),
        created_at="2026-02-01T00:00:00.000000Z",
        traces=(bundle.TraceEvidence(alpha.trace_id, alpha.blob.sha256, alpha.format),),
        **found,
    )
    data = bundle.build_bundle(inputs, evidence.server_sign)

    check = bundle.verify_bundle(data, vkeys=transparency.verifier_keys())
    assert (check.ok, check.tlog_trust, check.tlog_size, check.proven) == (True, "vkey", 5, 2)
    assert found["tlog"]["checkpoint"] == transparency.checkpoint(5).note
    assert [p["seq"] for p in found["tlog"]["inclusion"]] == [e["seq"] for e in found["events"]]
    other = notes.Signer.from_seed(transparency.origin(), bytes(32)).verifier.vkey
    refused = bundle.verify_bundle(data, vkeys=[other])
    assert (refused.code, refused.where) == (
        codes.BUNDLE_CHECKPOINT,
        "ledger/tlog.json: checkpoint",
    )


def test_the_exported_checkpoint_carries_the_tree_note_at_its_size(traces):
    document = selectors.checkpoint_export()
    size = document["checkpoint"]["size"]

    assert document["tlog"]["vkeys"] == transparency.verifier_keys()
    verifiers = [notes.parse_verifier(v) for v in document["tlog"]["vkeys"]]
    cp, _ = checkpoints.open_checkpoint(document["tlog"]["checkpoint"].encode(), verifiers)
    assert (cp.size, cp.root_hash) == (size, transparency.root(size))
    # the old checks still read it: the server signature over the JSON body
    assert selectors.checkpoint_check(document=document).ok


def test_an_event_naming_traces_of_two_chunks_comes_once(traces, monkeypatch):
    monkeypatch.setattr(governance_evidence, "CHUNK", 1)
    found = evidence.ledger_evidence(list(traces), checkpoint=False)

    seqs = [e["seq"] for e in found["events"]]
    assert seqs == sorted(set(seqs))
    assert len(seqs) == 4
    assert found["checkpoint"] is None


WITNESS_SIGNERS = [
    notes.Signer.from_seed(f"witness.test/w{i}", bytes([40 + i]) * 32).as_cosigner()
    for i in (1, 2, 3)
]


def _cosign(size: int, signers) -> None:
    """Store cosignatures of the checkpoint at ``size`` as a push would have (real signatures,
    made here instead of by witness processes)."""
    from django.utils import timezone

    from governance import witnessing
    from governance.models import WitnessCosignature

    cp = transparency.checkpoint(size)
    text = witnessing._text_of(cp.note)
    for i, w in enumerate(signers):
        WitnessCosignature.objects.create(
            witness=w.name,
            key_id=f"{w.key_id:08x}",
            tree_size=size,
            root_hash=bytes(cp.root_hash),
            timestamp=1_700_000_000 + i,
            line=notes.signature_line(w, text, timestamp=1_700_000_000 + i).rstrip("\n"),
            created_at=timezone.now(),
        )


def test_the_bundle_cites_the_largest_checkpoint_a_quorum_cosigned_with_their_lines(
    traces, settings
):
    alpha, _beta = traces
    settings.GOVERNANCE_WITNESSES = [
        {"url": f"http://127.0.0.1:{8260 + i}", "vkey": w.verifier.vkey}
        for i, w in enumerate(WITNESS_SIGNERS)
    ]
    settings.GOVERNANCE_WITNESS_QUORUM = 2
    cited = max(e["seq"] for e in evidence.ledger_evidence([alpha], checkpoint=False)["events"])
    assert cited < 5
    _cosign(cited, WITNESS_SIGNERS)  # a quorum at the size holding alpha's events
    _cosign(5, WITNESS_SIGNERS[:1])  # the whole tree: one witness only, below the quorum

    found = evidence.ledger_evidence([alpha])
    data = bundle.build_bundle(
        bundle.BundleInputs(
            request_ref="dsr_1",
            subject_refs=("subj_X",),
            created_at="2026-02-01T00:00:00.000000Z",
            traces=(bundle.TraceEvidence(alpha.trace_id, alpha.blob.sha256, alpha.format),),
            **found,
        ),
        evidence.server_sign,
    )
    vkeys = [w.verifier.vkey for w in WITNESS_SIGNERS]

    check = bundle.verify_bundle(
        data, vkeys=transparency.verifier_keys(), witnesses=vkeys, quorum=3
    )
    assert (check.ok, check.tlog_size, len(check.witnesses_signed)) == (True, cited, 3), check
    assert found["tlog"]["checkpoint"].count("\n— witness.test/w") == 3

    _cosign(5, WITNESS_SIGNERS[1:2])  # now a quorum of two at the whole tree: that one
    found = evidence.ledger_evidence([alpha])
    assert found["tlog"]["checkpoint"].startswith(transparency.checkpoint(5).note)
    assert found["tlog"]["checkpoint"].count("\n— witness.test/w") == 2


def test_the_exported_checkpoint_carries_the_witness_cosignatures(traces, settings):
    settings.GOVERNANCE_WITNESSES = [
        {"url": "http://127.0.0.1:8260", "vkey": WITNESS_SIGNERS[0].verifier.vkey}
    ]
    _cosign(5, WITNESS_SIGNERS[:1])

    note = selectors.tlog_checkpoint(5)["checkpoint"]

    assert note.startswith(transparency.checkpoint(5).note)
    assert note.endswith("\n— witness.test/w1 " + note.rsplit(" ", 1)[1])
    assert note.count("— ") == 2
