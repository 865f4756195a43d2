"""`manage.py privacy reindex` indexes the traces stored before the subject index."""

from __future__ import annotations

import io
from io import StringIO

import pytest
from django.core.management import call_command

from privacy import index, subjects
from privacy.ingest import on_trace_stored
from privacy.models import PersonalValue, SealedBlob
from replay.signals import trace_stored
from replay.storage import blob_open

pytestmark = pytest.mark.django_db


def test_traces_stored_before_the_index_are_indexed_once(ingest, settings):
    trace_stored.disconnect(dispatch_uid="privacy.index")
    try:
        old = ingest("ok")
        other = ingest("diverged")
    finally:
        trace_stored.connect(on_trace_stored, dispatch_uid="privacy.index")
    assert not PersonalValue.objects.exists()
    out = StringIO()
    call_command("privacy", "reindex", stdout=out)
    assert out.getvalue() == "looked at 2 traces: 2 hold personal data (12 values indexed)\n"
    ref = subjects.lookup("ada.lovelace@example.org")
    assert sorted({h.trace_pk for h in index.find([ref])}) == sorted([old.pk, other.pk])
    assert SealedBlob.objects.count() == 2
    with blob_open(old.blob.storage_name) as fh:
        assert b"ada.lovelace@example.org" in fh.read()

    again = StringIO()
    call_command("privacy", "reindex", stdout=again)
    assert again.getvalue() == "looked at 0 traces: 0 hold personal data (0 values indexed)\n"
    assert PersonalValue.objects.count() == 12


def test_a_file_without_a_value_at_the_subject_path_indexes_nothing(settings, trace_key):
    from replay.services import trace_ingest
    from tests.privacy.test_erasure_everywhere import PAXMAN

    settings.PRIVACY_PATH_RULES = {"paxman-artifact": {"subject": ["/metadata/who"]}}
    trace = trace_ingest(source=io.BytesIO(PAXMAN.read_bytes()), filename="m.json").trace
    assert not PersonalValue.objects.filter(trace=trace).exists()
    assert not SealedBlob.objects.filter(sha256=trace.blob.sha256).exists()
