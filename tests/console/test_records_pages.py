"""The trace page reads a stored Paxman artifact, AHD sidecar, Verist snapshot, MACE log and
ContextOS trace as records: its ``#records`` section lists their labels with a link to each,
``?at=N`` moves its window of 100 (``?at=x`` is a bad request), and the record viewer
(``/traces/<sha256>/records/<n>/``) shows record n's value, the JSON its location holds in the
stored file (404 past the last one). A persona without browse rights gets neither."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.utils.html import escape

from core.canonical import python_sorted
from core.formats import formats
from core.formats import paxman as px
from core.formats.protocol import VerifyContext
from core.replay.diff import pointer_get
from replay.keys import key_add_hmac
from replay.models import Trace
from replay.services import trace_ingest, trace_upload_batch
from replay.storage import blob_open
from tests.console.formats import first_stored
from tests.published import AHD_CHECKOUT, PAXMAN
from tests.replay import mace_reference as ref
from tests.replay.helpers import LONG_AGO, register_golden_key

pytestmark = pytest.mark.django_db

REPLAY_FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures"
CONTEXTOS = REPLAY_FIXTURES / "contextos"
SWISS = AHD_CHECKOUT / "docs" / "evals" / "2026-04-21-swiss.replay.json"
MONEY = PAXMAN / "money_unresolved.json"
FORMATS = ["paxman", "ahd", "verist", "mace", "contextos"]


@dataclass
class Stored:
    """A stored file, its bytes and its records as its format lists them (kind, label,
    location)."""

    trace: Trace
    data: bytes
    rows: list[tuple[str, str, str]]

    @property
    def url(self) -> str:
        return f"/traces/{self.trace.blob.sha256}/"

    def record_url(self, position: int) -> str:
        return f"{self.url}records/{position}/"


def _batch(*paths: Path) -> Trace:
    """The first file stored with the others beside it (its inputs)."""
    files = [(p.name, io.BytesIO(p.read_bytes())) for p in paths]
    return first_stored(trace_upload_batch(files=files))


def _store(fmt: str, settings: Any) -> Trace:
    """One file of ``fmt`` stored as the format's own tests store it (with its inputs)."""
    if fmt == "paxman":
        return trace_ingest(source=io.BytesIO(MONEY.read_bytes()), filename=MONEY.name).trace
    if fmt == "ahd":
        settings.REPLAY_AHD_ROOT = ""
        token = AHD_CHECKOUT / "tokens" / "swiss-editorial.yml"
        return _batch(SWISS, token, AHD_CHECKOUT / "briefs" / "landing.yml")
    if fmt == "verist":
        path = REPLAY_FIXTURES / "verist" / "pass.snapshot.json"
        return trace_ingest(source=io.BytesIO(path.read_bytes()), filename=path.name).trace
    if fmt == "mace":
        key_add_hmac(key_id=ref.KEY_ID, secret=ref.SECRET, valid_from=LONG_AGO)
        made = ref.job()
        files = [("log_s1.json", io.BytesIO(ref.dumps(made["log"])))]
        files += [
            (f"{s['snapshot_id']}.json", io.BytesIO(ref.dumps(s)))
            for s in made["snapshots"].values()
        ]
        return first_stored(trace_upload_batch(files=files))
    register_golden_key()
    return _batch(
        CONTEXTOS / "pass.trace.json",
        CONTEXTOS / "refund-triage@1.4.0.pack.json",
        CONTEXTOS / "kg-snapshot.kg.json",
    )


def _stored(trace: Trace) -> Stored:
    """The stored file read back from the blob store, and its records (its format's)."""
    with blob_open(trace.blob.storage_name) as fh:
        data = fh.read()
    fmt: Any = formats().get(trace.format)
    parsed = fmt.parse(io.BytesIO(data), trace.filename, VerifyContext())
    rows = [(r.kind, r.label, r.location) for r in fmt.records(parsed)]
    return Stored(trace, data, rows)


@pytest.fixture(params=FORMATS)
def stored(request, settings) -> Stored:
    trace = _store(request.param, settings)
    assert trace.format.startswith(request.param)
    assert trace.last_status == "ok"
    return _stored(trace)


def page(client: Any, url: str) -> tuple[int, str]:
    response = client.get(url)
    return response.status_code, response.content.decode()


# --- the trace page's records ----------------------------------------------------------------


def test_the_trace_page_lists_every_record_with_a_link_to_it(stored, as_persona):
    status, body = page(as_persona("alice"), stored.url)

    assert status == 200
    assert '<section class="card" id="records">' in body
    assert '<table id="record-rows">' in body
    for n, (kind, label, location) in enumerate(stored.rows):
        link = f'<a href="{stored.record_url(n)}" hx-get="{stored.record_url(n)}"'
        assert link in body
        assert f'<td class="num">{n}</td><td>{escape(kind)}</td>' in body
        assert f">{escape(label)}</a></td><td><code>{escape(location)}</code></td>" in body
    total = len(stored.rows)
    assert f"{total} record{'s' if total != 1 else ''} (" in body
    assert 'rel="next"' not in body
    assert 'rel="prev"' not in body


def test_at_moves_the_window_to_that_record(stored, as_persona):
    status, body = page(as_persona("alice"), stored.url + "?at=3")

    assert status == 200
    assert f'href="{stored.record_url(2)}"' not in body
    for n in range(3, len(stored.rows)):
        assert f'href="{stored.record_url(n)}"' in body
    assert f"; 4 to {len(stored.rows)} are listed here." in body
    assert '<a href="?at=0#records" rel="prev">' in body


def test_at_that_is_not_a_position_is_a_bad_request(stored, as_persona):
    status, body = page(as_persona("alice"), stored.url + "?at=x")

    assert status == 400
    assert escape("at must be a whole number (a record's position), not 'x'.") in body


def test_the_record_viewer_shows_the_value_its_location_holds_in_the_file(stored, as_persona):
    client = as_persona("alice")
    document = json.loads(stored.data)

    for n, (kind, label, location) in enumerate(stored.rows):
        status, body = page(client, stored.record_url(n))
        assert status == 200, (n, location)
        assert f"<h2>{escape(kind.capitalize())} {n}: {escape(label)}</h2>" in body
        assert f"At <code>{escape(location)}</code> in the stored file." in body
        value = pointer_get(document, location)
        shown = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
        assert f'<pre class="payload">{escape(shown)}</pre>' in body


def test_the_record_viewer_answers_404_past_the_last_record(stored, as_persona):
    client = as_persona("alice")

    assert client.get(stored.record_url(len(stored.rows) - 1)).status_code == 200
    assert client.get(stored.record_url(len(stored.rows))).status_code == 404


@pytest.mark.parametrize(("name", "code"), [("vera", 200), ("nora", 403)])
def test_only_a_persona_who_browses_sees_the_records(stored, as_persona, name, code):
    client = as_persona(name)

    assert client.get(stored.url).status_code == code
    assert client.get(stored.record_url(0)).status_code == code


# --- more than one window --------------------------------------------------------------------


def test_a_file_of_more_than_a_hundred_records_is_paged_a_hundred_at_a_time(as_persona):
    document = json.loads(MONEY.read_bytes())
    diagnostic = document["diagnostics"][0]
    document["diagnostics"] = [diagnostic] * 150
    document["replay_hash"] = px.replay_hash_of(document)
    data = python_sorted(document) + b"\n"  # as Paxman writes an artifact
    trace = trace_ingest(source=io.BytesIO(data), filename="many.json").trace
    assert trace.last_status == "ok"
    many = _stored(trace)
    client = as_persona("alice")
    total = len(many.rows)

    _, first = page(client, many.url)
    _, second = page(client, many.url + "?at=100")

    assert total == 22 - 3 + 150  # the golden's 22 records, its 3 diagnostics now 150
    assert f'href="{many.record_url(99)}"' in first
    assert f'href="{many.record_url(100)}"' not in first
    assert '<a href="?at=100#records" rel="next">' in first
    assert f'href="{many.record_url(99)}"' not in second
    assert f'href="{many.record_url(total - 1)}"' in second
    assert '<a href="?at=0#records" rel="prev">' in second
    assert 'rel="next"' not in second
    assert f"{total} records (" in first
    assert f"; 101 to {total} are listed here." in second
