"""The trace page: header, snapshots with signature status, the events timeline with its
chain break, steps, what is missing for production replay, and the replay history."""

from __future__ import annotations

import json
import re

import pytest

from replay.selectors import trace_missing
from tests.console.conftest import trace_bytes

pytestmark = pytest.mark.django_db


def page(client, trace) -> str:
    response = client.get(f"/traces/{trace.blob.sha256}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_header_names_ids_runtime_and_seed(as_persona, ingest):
    trace = ingest("ok")
    body = page(as_persona("vera"), trace)
    for value in [trace.trace_id, trace.job_id, trace.job_seed, trace.runtime_name]:
        assert value in body
    assert f"{trace.event_count} events, {trace.step_count} steps" in body


def test_a_complete_trace_says_nothing_is_missing(as_persona, ingest):
    body = page(as_persona("vera"), ingest("ok"))
    assert 'class="card missing-box complete"' in body
    assert "This trace is replayable." in body


def test_an_unpersisted_output_is_listed_as_missing_for_production(as_persona, ingest):
    trace = ingest("unpersisted")
    missing = trace_missing(trace)
    assert missing
    body = page(as_persona("vera"), trace)
    for item in missing:
        assert f"<li><code>{item}</code></li>" in body


def test_snapshots_are_listed_verified_when_their_signatures_verified(as_persona, ingest):
    body = page(as_persona("vera"), ingest("ok"))
    section = body[body.index('id="snapshots"') : body.index('id="timeline"')]
    assert section.count(">verified</span>") == 5
    assert "hmac-sha256 by <code>console-tests</code>" in section


def test_a_tampered_snapshot_is_marked_failed_and_the_rest_not_checked(as_persona, ingest):
    trace = ingest("tampered_snapshot")
    report = trace.ingest_report
    body = page(as_persona("vera"), trace)
    section = body[body.index('id="snapshots"') : body.index('id="timeline"')]
    index = report["broke_at"]
    rows = re.findall(r'<span class="badge sig-\w+">([a-z ]+)</span>', section)
    assert rows[index] == "failed"
    assert set(rows[:index]) <= {"verified"}
    assert set(rows[index + 1 :]) <= {"not checked"}


def test_the_timeline_shows_where_the_chain_broke(as_persona, ingest):
    trace = ingest("broken_chain")
    broke_at = trace.ingest_report["broke_at"]
    body = page(as_persona("vera"), trace)
    assert f"The event chain broke at seq {broke_at}:" in body
    svg = body[body.index('<svg class="timeline"') : body.index("</svg>")]
    # fewer events than buckets: one bucket an event
    assert svg.count('class="ev-bad"') == 1
    assert f"seq {broke_at}: " in svg
    assert f" — the chain broke at seq {broke_at}</title>" in svg
    assert svg.count('class="ev-ok"') == broke_at
    assert svg.count('class="ev-after"') == trace.event_count - broke_at - 1


def test_an_intact_chain_draws_every_event_verified(as_persona, ingest):
    trace = ingest("ok")
    body = page(as_persona("vera"), trace)
    svg = body[body.index('<svg class="timeline"') : body.index("</svg>")]
    assert svg.count('class="ev-ok"') == trace.event_count
    assert "ev-bad" not in svg


def test_steps_are_listed(as_persona, ingest):
    trace = ingest("ok")
    body = page(as_persona("vera"), trace)
    section = body[body.index('id="steps"') : body.index('id="replay-start"')]
    assert section.count("<tr>") == trace.step_count + 1
    document = json.loads(trace_bytes("ok"))
    for step in document["steps"]:
        assert f"<code>{step['step_id']}</code>" in section
        assert f"<code>{step.get('fn') or step.get('name')}</code>" in section


def test_the_replay_history_lists_runs_newest_first(as_persona, replayed):
    run = replayed("diverged")
    body = page(as_persona("vera"), run.trace)
    history = body[body.index('id="trace-runs"') :]
    assert f'href="/runs/{run.id}/"' in history
    assert "REPLAY_DIVERGENCE" in history
    assert ">alice<" in history


def test_the_history_partial_alone_over_htmx(as_persona, replayed, htmx_headers):
    run = replayed("diverged")
    response = as_persona("vera").get(f"/traces/{run.trace.blob.sha256}/", **htmx_headers)
    body = response.content.decode()
    assert body.strip().startswith('<section class="card" id="trace-runs">')
    assert "HX-Request" in response["Vary"]


@pytest.mark.parametrize(
    ("name", "modes"),
    [
        ("alice", ["audit", "sandbox"]),
        ("oscar", ["audit", "sandbox"]),
        ("sam", ["audit", "sandbox", "production"]),
        ("vera", []),
        ("cora", []),
    ],
)
def test_the_replay_form_offers_the_modes_of_the_role(as_persona, ingest, name, modes):
    body = page(as_persona(name), ingest("ok"))
    assert re.findall(r'name="mode" value="(\w+)"', body) == modes
    assert ("Your roles do not allow starting a replay." in body) is (not modes)


def test_a_halted_trace_says_so(as_persona, replayed):
    run = replayed("broken_chain")
    body = page(as_persona("vera"), run.trace)
    assert 'id="halt-banner"' in body
    assert run.trace.blob.sha256 in body[body.index('id="halt-banner"') :]


def test_a_halted_copy_does_not_mark_the_genuine_copy(as_persona, replayed, ingest):
    replayed("broken_chain")
    body = page(as_persona("vera"), ingest("ok"))
    assert 'id="halt-banner"' not in body


def test_the_trace_id_alone_finds_the_newest_copy(as_persona, ingest):
    ingest("ok")
    newest = ingest("diverged")  # same trace id, other bytes
    response = as_persona("vera").get(f"/traces/{newest.trace_id}/")
    body = response.content.decode()
    assert newest.filename in body
    assert 'id="other-copies"' in body
    assert "ok.trace.json" in body[body.index('id="other-copies"') :]


def test_a_snapshot_removed_from_the_store_is_missing_and_its_line_says_so(as_persona, ingest):
    """The outline and the missing box read one answer from the store (one query, issue 23):
    a snapshot retention removed is missing for production replay on the page."""
    from replay.services import snapshot_remove

    trace = ingest("ok")
    removed = trace.required_snapshot_ids[0]
    snapshot_remove(snapshot_id=removed["snapshot_id"])
    body = page(as_persona("vera"), trace)

    assert trace_missing(trace) == [
        f"snapshot:{removed['kind']} {removed['snapshot_id']} (not retained)"
    ]
    assert f"<li><code>{trace_missing(trace)[0]}</code></li>" in body
    assert "This trace is replayable." not in body
    section = body[body.index('id="snapshots"') : body.index('id="timeline"')]
    line = section[section.index(removed["snapshot_id"][:27]) :]
    assert line.index("in the file") < line.index("</tr>")  # its body is in the file still
