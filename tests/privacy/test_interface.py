"""The privacy app's interface (D2): subjects, the subject index, values, erasure."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from privacy import erasure, index, subjects, values
from privacy.models import PersonalValue, SealedBlob, Subject, SubjectKey
from replay.storage import blob_open

pytestmark = pytest.mark.django_db

ADA = "ada.lovelace@example.org"
ADA_NAME = "Ada Lovelace"


def test_ref_for_normalises_and_is_stable():
    ref = subjects.ref_for("  Ada.Lovelace@Example.org ")
    assert ref.startswith("subj_")
    assert len(ref) == 31
    assert subjects.ref_for(ADA) == ref
    assert subjects.lookup("ADA.LOVELACE@example.org") == ref
    assert subjects.identifier(ref) == ADA
    assert subjects.lookup("nobody@example.org") is None
    assert Subject.objects.count() == 1


def test_the_identifier_is_stored_only_encrypted():
    ref = subjects.ref_for(ADA)
    row = Subject.objects.get(ref=ref)
    assert ADA.encode() not in bytes(row.identifier_ciphertext)
    assert len(bytes(row.key.wrapped)) == 12 + 32 + 16
    assert ADA not in row.lookup_digest


def test_an_ingested_native_trace_is_indexed_by_subject(ingest):
    trace = ingest("ok")
    ref = subjects.lookup(ADA)
    assert ref is not None
    hits = index.find([ref])
    assert [(h.location, h.path) for h in hits] == [
        ("event 0", "/user/name"),
        ("event 0", "/user/email"),
    ]
    assert {(h.trace_pk, h.file_sha256, h.trace_id, h.format) for h in hits} == {
        (trace.pk, trace.blob.sha256, trace.trace_id, "replay-trace")
    }
    assert [v for _h, v in values.subject_values([ref], reveal=False)] == [
        "[redacted]",
        "[redacted]",
    ]
    assert [v for _h, v in values.subject_values([ref], reveal=True)] == [ADA_NAME, ADA]
    # the demo trace names three people in three events
    assert Subject.objects.count() == 3


def _stored_bytes(settings) -> bytes:
    root = Path(settings.STORAGES["blobs"]["OPTIONS"]["location"])
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_personal_values_are_cut_out_of_the_blob_at_rest_and_read_back_whole(ingest, settings):
    import hashlib

    trace = ingest("ok")
    assert SealedBlob.objects.filter(sha256=trace.blob.sha256).exists()
    at_rest = _stored_bytes(settings)
    assert ADA.encode() not in at_rest
    assert ADA_NAME.encode() not in at_rest
    with blob_open(trace.blob.storage_name) as fh:
        data = fh.read()
    assert hashlib.sha256(data).hexdigest() == trace.blob.sha256
    assert ADA.encode() in data


def test_plan_and_shred_destroy_the_key_once(ingest, settings):
    trace = ingest("ok")
    ref = subjects.lookup(ADA)
    plan = erasure.plan([ref, "subj_unknown"])
    assert plan.as_dict() == {
        "subjects": [ref],
        "unknown": ["subj_unknown"],
        "already_erased": [],
        "traces": [
            {
                "trace_id": trace.trace_id,
                "file_sha256": trace.blob.sha256,
                "format": "replay-trace",
                "fields": ["event 0 /user/name", "event 0 /user/email"],
            }
        ],
        "fields": 2,
        "keys": 1,
        "raw_copies": [],
        "stays": list(erasure.STAYS),
    }
    outcome = erasure.shred([ref])
    assert outcome.first_time is True
    assert outcome.keys_destroyed == 1
    assert outcome.fields == 2
    assert ADA not in repr(outcome.as_dict())
    assert ADA_NAME not in repr(outcome.as_dict())
    key = SubjectKey.objects.get(subject__ref=ref)
    assert key.wrapped is None
    assert key.destroyed_at is not None
    assert subjects.identifier(ref) is None
    assert subjects.lookup(ADA) is None
    assert [v for _h, v in values.subject_values([ref], reveal=True)] == ["[erased]"] * 2
    assert not PersonalValue.objects.filter(subject__ref=ref, ciphertext__isnull=False).exists()
    with blob_open(trace.blob.storage_name) as fh:
        data = fh.read()
    assert ADA.encode() not in data
    assert b'"[erased]____' in data
    # others' values are still there
    assert b"grace.hopper@example.org" in data

    again = erasure.shred([ref])
    assert again.first_time is False
    assert again.receipt == outcome.receipt
    assert {**again.as_dict(), "first_time": True} == outcome.as_dict()
    assert erasure.plan([ref]).already_erased == [ref]


def test_a_trace_uploaded_again_after_erasure_is_not_stored_twice(ingest):
    from replay.services import trace_ingest
    from tests.console.conftest import trace_bytes

    trace = ingest("ok")
    erasure.shred([subjects.lookup(ADA)])
    again = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json")
    assert again.created is False
    assert again.trace.pk == trace.pk


def test_an_audit_replay_after_erasure_names_the_erased_fields_and_what_they_make_impossible(
    ingest,
):
    from replay.services import replay_run_create, replay_run_execute

    trace = ingest("ok")
    erasure.shred([subjects.lookup(ADA)])
    run = replay_run_execute(run_id=replay_run_create(trace=trace, mode="audit").id)
    report = run.report
    assert report["status"] == "ok"
    assert report["authoritative"] is False
    assert report["erased"] == [
        {"location": "event 0", "path": "/user/name"},
        {"location": "event 0", "path": "/user/email"},
    ]
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["events"]["detail"] == (
        "11 event ids and chain links verify; the chain hashes of 1 event cannot be "
        "recomputed, their personal values are erased: event 0 (/user/name, /user/email)"
    )
    assert checks["seal"]["detail"] == ("not checked: the seal covers the erased values of event 0")
    assert all(c["ok"] for c in report["checks"])
    assert ADA not in repr(report)
    # the trace keeps the verdict its upload was given (a non-authoritative run changes none)
    trace.refresh_from_db()
    assert trace.last_status == "ok"


def test_a_replay_before_any_erasure_reports_no_erased_key(ingest):
    from replay.services import replay_run_create, replay_run_execute

    trace = ingest("ok")
    run = replay_run_execute(run_id=replay_run_create(trace=trace, mode="audit").id)
    assert "erased" not in run.report
    assert run.report["authoritative"] is True


def test_a_stored_file_changed_at_rest_is_tamper_detected_even_in_an_unhashed_field(
    ingest, settings
):
    from replay.services import replay_run_create, replay_run_execute

    trace = ingest("ok")
    path = Path(settings.STORAGES["blobs"]["OPTIONS"]["location"]) / trace.blob.storage_name
    stored = path.read_bytes()
    assert b'"started_at": "2026-01-01T00:00:00Z"' in stored  # job.started_at: no hash covers it
    path.write_bytes(stored.replace(b"2026-01-01T00:00:00Z", b"2026-01-01T00:00:01Z"))
    run = replay_run_execute(run_id=replay_run_create(trace=trace, mode="audit").id)
    assert run.report["status"] == "tamper_detected"
    assert run.report["error_code"] == "INTEGRITY_FAILURE"
    assert run.report["message"] == (
        f"stored file {trace.blob.sha256}: its bytes at rest changed (they no longer "
        "reassemble to the SHA-256 it was uploaded with)"
    )


def test_an_upload_refused_after_sealing_leaves_a_file_the_next_upload_repairs(trace_key):
    import hashlib

    from replay.models import Trace
    from replay.services import trace_ingest
    from replay.signals import trace_stored
    from tests.console.conftest import trace_bytes

    def refuse(**_kwargs):
        raise RuntimeError("a later receiver refuses the upload")

    trace_stored.connect(refuse, dispatch_uid="test.refuse")
    try:
        with pytest.raises(RuntimeError):
            trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json")
    finally:
        trace_stored.disconnect(dispatch_uid="test.refuse")
    assert not Trace.objects.exists()
    assert not SealedBlob.objects.exists()
    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace
    with blob_open(trace.blob.storage_name) as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == trace.blob.sha256
