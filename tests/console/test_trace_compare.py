"""Compare on the trace page: "compare with…" on every trace page (the other runs of the same
job first, any trace by id; a plain GET form), and two native runs compared step by step, the
recorded values side by side, the seal last."""

from __future__ import annotations

import html
import io
import json
import re

import pytest

from console.views.traces import MESSAGE_OTHER_FORMAT, MESSAGE_PICK_OTHER
from core.formats import native
from replay.services import trace_ingest
from tests.console.conftest import trace_bytes
from tests.console.test_format_traces import EVALS, SWISS

pytestmark = pytest.mark.django_db


def rows(body):
    """(path, change, this file's value, the other's) of every row of the comparison."""
    found = re.findall(
        r'<tr><td class="path"><code>([^<]*)</code></td><td>(\w+)</td>'
        r"<td>(?:<pre class=\"value\">)?(.*?)(?:</pre>)?</td>"
        r"<td>(?:<pre class=\"value\">)?(.*?)(?:</pre>)?</td></tr>",
        body,
        re.S,
    )
    return [tuple(html.unescape(cell) for cell in row) for row in found]


def test_two_native_runs_compare_at_the_step_that_diverged_with_both_values(as_persona, ingest):
    ok, diverged = ingest("ok"), ingest("diverged")
    response = as_persona("vera").get(f"/traces/{ok.blob.sha256}/compare/{diverged.blob.sha256}/")
    assert response.status_code == 200
    body = response.content.decode()

    headings = re.findall(r"<h3>(.*?) <code>(.*?)</code></h3>", body)
    assert headings == [("Step 3 (seq 3, route-1, router.decide@1)", "/steps/3"), ("Seal", "/seal")]
    assert rows(body) == [
        ("/steps/3/output/route", "changed", '"search"', '"write"'),
        (
            "/seal/value",
            "changed",
            json.dumps(json.loads(trace_bytes("ok"))["seal"]["value"]),
            json.dumps(json.loads(trace_bytes("diverged"))["seal"]["value"]),
        ),
    ]
    assert "<th>ok.trace.json</th><th>diverged.trace.json</th>" in body
    assert 'id="seal-alone"' not in body


def test_every_trace_page_offers_compare_with_the_other_runs_of_its_job_first(as_persona, ingest):
    ok, diverged, other_job = ingest("ok"), ingest("diverged"), ingest("unpersisted")
    body = as_persona("vera").get(f"/traces/{ok.blob.sha256}/").content.decode()
    form = body[
        body.index('id="compare-with"') : body.index("</section>", body.index('id="compare-with"'))
    ]

    assert f'action="/traces/{ok.blob.sha256}/compare/"' in form
    assert 'method="get"' in form
    options = re.findall(r'<option value="([0-9a-f]{64})">([^<]*)</option>', form)
    assert [sha for sha, _ in options] == [diverged.blob.sha256]
    assert options[0][1].startswith("diverged.trace.json — same job, uploaded ")
    assert 'name="other_id"' in form
    assert other_job.blob.sha256 not in form


def test_the_form_goes_to_the_comparison_with_the_run_chosen_or_the_id_typed(as_persona, ingest):
    ok, diverged, other_job = ingest("ok"), ingest("diverged"), ingest("unpersisted")
    client = as_persona("vera")
    chosen = client.get(f"/traces/{ok.blob.sha256}/compare/", {"other": diverged.blob.sha256})
    assert chosen.status_code == 302
    assert chosen["Location"] == f"/traces/{ok.blob.sha256}/compare/{diverged.blob.sha256}/"
    typed = client.get(
        f"/traces/{ok.blob.sha256}/compare/",
        {"other": diverged.blob.sha256, "other_id": other_job.trace_id},
    )
    assert typed["Location"] == f"/traces/{ok.blob.sha256}/compare/{other_job.blob.sha256}/"
    nothing = client.get(f"/traces/{ok.blob.sha256}/compare/")
    assert nothing.status_code == 400
    assert MESSAGE_PICK_OTHER in nothing.content.decode()
    missing = client.get(f"/traces/{ok.blob.sha256}/compare/", {"other_id": "0" * 32})
    assert missing.status_code == 404


def test_a_file_of_another_format_is_refused_saying_why(as_persona, ingest):
    ok = ingest("ok")
    ahd = trace_ingest(source=io.BytesIO((EVALS / SWISS).read_bytes()), filename=SWISS).trace
    response = as_persona("vera").get(f"/traces/{ok.blob.sha256}/compare/{ahd.blob.sha256}/")
    assert response.status_code == 400
    assert (
        html.escape(
            MESSAGE_OTHER_FORMAT.format(other=SWISS, other_format=ahd.format, format=ok.format)
        )
        in response.content.decode()
    )


def test_personal_fields_of_an_event_payload_are_redacted_by_the_privacy_policy(as_persona, ingest):
    ok = ingest("ok")
    doc = json.loads(trace_bytes("ok"))
    doc["events"][1]["payload"]["user"]["name"] = "Someone Else"
    doc["events"][1]["payload"]["text"] = "question 1, edited"
    edited = trace_ingest(
        source=io.BytesIO(native.dumps_document(doc)), filename="edited.trace.json"
    ).trace  # stored as tampered evidence: the event no longer hashes to its chain
    body = as_persona("adam").get(f"/traces/{ok.blob.sha256}/compare/{edited.blob.sha256}/")
    assert rows(body.content.decode()) == [
        ("/events/1/payload/user/name", "changed", '"[redacted]"', '"[redacted]"'),
        ("/events/1/payload/text", "changed", '"question 1"', '"question 1, edited"'),
    ]
    assert "Grace Hopper" not in body.content.decode()
    assert "Someone Else" not in body.content.decode()


def test_who_may_not_browse_cannot_pick_or_compare(as_persona, ingest):
    ok, diverged = ingest("ok"), ingest("diverged")
    client = as_persona("nora")
    pick = client.get(f"/traces/{ok.blob.sha256}/compare/", {"other": diverged.blob.sha256})
    page = client.get(f"/traces/{ok.blob.sha256}/compare/{diverged.blob.sha256}/")
    assert (pick.status_code, page.status_code) == (403, 403)
