"""What a newcomer met on the trace list and the trace page (issue 31, item 6): rows of one
trace id told apart and each linked by its file name, no green "replayable" on a tampered
file, the demo's traces saying what loaded them, and no "0 events, 0 steps" for a format whose
files have neither."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from console.demo import DEMO_LABEL, demo_traces_ensure
from console.tables import contents_words
from replay.keys import key_add_hmac
from replay.models import Trace
from replay.services import trace_ingest, trace_upload_batch
from tests.console.conftest import trace_bytes
from tests.console.factories import trace_row
from tests.console.personas import persona
from tests.published import PUBLISHED
from tests.replay import mace_reference as ref

pytestmark = pytest.mark.django_db

WRITER = Path(__file__).parents[1] / "replay" / "fixtures" / "mace" / "writer"
EVALS = PUBLISHED / "ahd" / "checkout" / "docs" / "evals"
SWISS = "2026-04-21-swiss.replay.json"
TOKEN = PUBLISHED / "ahd" / "checkout" / "tokens" / "swiss-editorial.yml"
BRIEF = PUBLISHED / "ahd" / "checkout" / "briefs" / "landing.yml"


def _list(as_persona, query: str = "") -> str:
    return as_persona("vera").get(f"/traces/{query}").content.decode()


def _page(as_persona, trace: Trace) -> str:
    return as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()


# --- a. rows of one trace id ------------------------------------------------------------------


def test_rows_sharing_a_trace_id_link_their_file_names_too(as_persona):
    first = trace_row(job_id="job-s1", status="ok")
    second = trace_row(job_id="job-s1", status="diverged")
    second.trace_id, second.filename = first.trace_id, "demo-diverged.trace.json"
    second.save()
    body = _list(as_persona)
    for t in (first, second):
        href = f"/traces/{t.blob.sha256}/"
        # the id still links, and the file name (what tells the rows apart) links too
        assert f'<a href="{href}"><code>{t.trace_id}</code></a>' in body
        assert f'<span class="trace-twin"><a href="{href}">{t.filename}</a> · ' in body
    # beside its own verdict, in its own row
    row = body[body.index("demo-diverged.trace.json") :]
    assert row.index("verdict-diverged") < row.index("</tr>")


# --- b. a tampered trace --------------------------------------------------------------------


def test_a_tampered_trace_is_not_intact_never_a_green_replayable(as_persona, ingest):
    tampered = ingest("tampered_snapshot")
    intact = ingest("ok")
    assert tampered.last_status == Trace.Status.TAMPER_DETECTED
    assert (tampered.missing_outputs, intact.missing_outputs) == ([], [])
    body = _list(as_persona)
    rows = {t: body[body.index(t.blob.sha256) :].split("</tr>")[0] for t in (tampered, intact)}
    assert "replayable</span>" not in rows[tampered]
    badge = '<span class="badge not-intact" title="the file failed its integrity check'
    assert badge in rows[tampered]
    assert ">not intact</span>" in rows[tampered]
    assert '<span class="badge yes">replayable</span>' in rows[intact]


def test_the_page_of_a_tampered_trace_does_not_call_it_replayable(as_persona, ingest):
    tampered = ingest("broken_chain")
    box = _page(as_persona, tampered).split('id="missing-box"')[1].split("</section>")[0]
    assert "This trace is replayable" not in box
    assert "failed its integrity check" in box
    intact = _page(as_persona, ingest("ok")).split('id="missing-box"')[1]
    assert "This trace is replayable." in intact.split("</section>")[0]


def test_the_upload_page_shows_a_tampered_file_not_intact(as_persona, trace_key):
    upload = SimpleUploadedFile("t.trace.json", trace_bytes("tampered_snapshot"))
    body = as_persona("alice").post("/traces/upload/", {"files": [upload]}).content.decode()
    assert "tamper_detected" in body
    assert ">not intact</span>" in body
    assert '<span class="badge yes">replayable</span>' not in body


# --- c. what loaded the demo's traces -----------------------------------------------------------


def test_the_demo_says_it_loaded_its_traces_not_nobody_on_record(as_persona, settings):
    settings.DEBUG = True
    demo_traces_ensure(replay=False)
    body = _list(as_persona)
    assert "nobody on record" not in body
    assert "· loaded by the demo</span>" in body  # its six files of one trace id say so
    assert set(Trace.objects.values_list("uploaded_label", "uploaded_by")) == {(DEMO_LABEL, None)}
    page = _page(as_persona, Trace.objects.get(filename="demo-diverged.trace.json"))
    assert ", loaded by the demo</dd>" in page
    # run again, it finds the same rows (it stores nothing twice)
    stored = Trace.objects.count()
    demo_traces_ensure(replay=False)
    assert Trace.objects.count() == stored


def test_a_person_who_uploaded_is_named_and_a_file_nobody_did_says_so(as_persona):
    alice = trace_row()
    alice.uploaded_by = persona("alice")
    alice.save()
    nobody = trace_row()
    nobody.trace_id = alice.trace_id
    nobody.save()
    body = _list(as_persona)
    assert "· uploaded by alice</span>" in body
    assert "· uploaded by nobody on record</span>" in body


# --- d. counts a format has -------------------------------------------------------------------


@pytest.fixture
def mace_key(db):
    key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=datetime(2000, 1, 1, tzinfo=UTC))


def _mace() -> Trace:
    data = (WRITER / "clean.json").read_bytes()
    return trace_ingest(source=io.BytesIO(data), filename="reflective_log.json").trace


def _ahd(settings) -> Trace:
    settings.REPLAY_AHD_ROOT = ""
    files = [(p.name, io.BytesIO(p.read_bytes())) for p in (EVALS / SWISS, TOKEN, BRIEF)]
    return next(o.result.trace for o in trace_upload_batch(files=files) if o.result is not None)


def test_ahd_and_mace_pages_do_not_say_0_events_0_steps(as_persona, mace_key, settings):
    for trace in (_mace(), _ahd(settings)):
        assert (trace.event_count, trace.step_count) == (0, 0)
        body = _page(as_persona, trace)
        assert "0 events" not in body
        assert "0 steps" not in body
        assert "<dt>Contents</dt>" not in body  # the format's panel says what it has
        assert 'id="format-panel"' in body


def test_a_native_trace_page_still_counts_its_events_and_steps(as_persona, ingest):
    trace = ingest("ok")
    body = _page(as_persona, trace)
    expected = f"{trace.event_count} events, {trace.step_count} steps"
    assert f'<dt>Contents</dt><dd id="trace-contents">{expected}</dd>' in body


def test_the_upload_page_does_not_say_0_events_0_steps(as_persona, mace_key):
    upload = SimpleUploadedFile("reflective_log.json", (WRITER / "clean.json").read_bytes())
    body = as_persona("alice").post("/traces/upload/", {"files": [upload]}).content.decode()
    assert "Stored as" in body
    assert "0 events" not in body


@pytest.mark.parametrize(
    ("events", "steps", "words"),
    [
        (0, 0, ""),
        (0, 5, "5 steps"),
        (1, 1, "1 event, 1 step"),
        (12, 3, "12 events, 3 steps"),
    ],
)
def test_counts_are_said_only_when_there_is_one(events, steps, words):
    assert contents_words(events, steps) == words
