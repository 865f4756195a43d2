"""The operations dashboard and the periodic drift sampling."""

from __future__ import annotations

import re

import pytest

from console.models import DriftSample
from console.services import drift_sample_pick, drift_sample_run
from console.tasks import drift_sample
from governance.models import GovernanceEvent
from replay.models import ReplayRun, Trace
from replay.selectors import trace_missing

pytestmark = pytest.mark.django_db


def test_the_dashboard_lists_what_each_non_replayable_trace_misses(as_persona, ingest):
    ingest("ok")
    lacking = ingest("unpersisted")
    body = as_persona("oscar").get("/ops/").content.decode()
    section = body[body.index('id="not-replayable"') : body.index('id="drift"')]
    assert f'href="/traces/{lacking.blob.sha256}/"' in section
    for item in trace_missing(lacking):
        assert f"<li><code>{item}</code></li>" in section
    assert section.count("<tr>") == 2  # header + the one trace
    assert "Every stored trace is replayable." not in section


def test_the_dashboard_says_when_every_stored_trace_is_replayable(as_persona, ingest):
    ingest("ok")
    body = as_persona("oscar").get("/ops/").content.decode()
    section = body[body.index('id="not-replayable"') : body.index('id="drift"')]
    assert section.count('<tr><td colspan="3" class="empty">Every stored trace is replayable.') == 1
    assert section.count("<tr>") == 2  # header + the empty row


def test_the_chart_stacks_todays_verdicts(as_persona, replayed):
    replayed("ok")
    replayed("diverged")
    replayed("broken_chain")
    body = as_persona("oscar").get("/ops/").content.decode()
    svg = body[body.index('<svg class="chart"') : body.index("</svg>")]
    assert re.search(r'<rect class="bar-ok"[^>]*><title>\d\d-\d\d: 1 ok</title>', svg)
    assert re.search(r'<rect class="bar-diverged"[^>]*><title>\d\d-\d\d: 1 diverged</title>', svg)
    assert re.search(r"<title>\d\d-\d\d: 1 tamper_detected</title>", svg)
    assert "Replays per day by verdict: 3 in 30 days" in svg


def test_drift_sampling_replays_a_fraction_and_records_what_moved(ingest):
    for name in ("ok", "diverged", "unpersisted"):
        ingest(name)
    # make one trace look as if it used to pass: its verdict now "drifts"
    diverged = Trace.objects.get(filename="diverged.trace.json")
    Trace.objects.filter(pk=diverged.pk).update(last_status="ok")
    sweep = drift_sample_run(fraction=1.0, max_count=10)
    samples = DriftSample.objects.filter(sweep=sweep)
    assert samples.count() == 3
    drifted = samples.get(drifted=True)
    assert drifted.trace_id == diverged.pk
    assert (drifted.previous_status, drifted.status) == ("ok", "diverged")
    assert drifted.error_code == "REPLAY_DIVERGENCE"
    assert ReplayRun.objects.filter(mode="audit").count() == 3
    requests = GovernanceEvent.objects.filter(type="REPLAY_REQUEST")
    assert {e.actor_label for e in requests} == {"drift-sampling"}


def test_the_fraction_bounds_the_sample(ingest):
    for name in ("ok", "diverged", "unpersisted", "broken_chain"):
        ingest(name)
    assert len(drift_sample_pick(fraction=0.25, max_count=100)) == 1
    assert len(drift_sample_pick(fraction=1.0, max_count=2)) == 2
    assert drift_sample_pick(fraction=0.5, max_count=0) == []


def test_no_traces_no_sample(db):
    assert drift_sample_pick(fraction=1.0, max_count=10) == []


def test_the_task_uses_the_configured_fraction(ingest, settings):
    ingest("ok")
    settings.REPLAY_DRIFT_SAMPLE_FRACTION = 1.0
    sweep = drift_sample.delay().get()
    assert DriftSample.objects.filter(sweep=sweep).count() == 1


def test_the_dashboard_shows_the_latest_sweep_and_links_the_report(as_persona, ingest):
    trace = ingest("diverged")
    Trace.objects.filter(pk=trace.pk).update(last_status="ok")
    drift_sample_run(fraction=1.0, max_count=10)
    sample = DriftSample.objects.get()
    body = as_persona("oscar").get("/ops/").content.decode()
    section = body[body.index('id="drift"') :]
    assert "1 traces replayed on the current runtime, <strong>1 drifted</strong>" in section
    assert f'href="/runs/{sample.run_id}/">report</a>' in section


def test_the_beat_schedule_names_the_task():
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULE["drift-sample"]["task"] == "console.tasks.drift_sample"
    assert drift_sample.name == "console.tasks.drift_sample"


def test_the_chart_has_axes_ticks_counts_and_a_legend_with_totals(as_persona, replayed):
    replayed("ok")
    replayed("diverged")
    replayed("broken_chain")
    body = as_persona("oscar").get("/ops/").content.decode()
    svg = body[body.index('<svg class="chart"') : body.index("</svg>")]
    assert '<line class="axis" x1="60" y1="20" x2="60" y2="190"></line>' in svg
    ticks = re.findall(r'<text class="tick" x="54" y="[\d.]+" text-anchor="end">(\d+)</text>', svg)
    assert ticks == ["0", "1", "2", "3"]
    assert '<text class="axis-title"' in svg
    assert ">replays</text>" in svg
    assert re.search(
        r'<text class="count" x="[\d.]+" y="[\d.]+" text-anchor="middle">3</text>', svg
    )
    assert re.search(r'<text class="day" x="[\d.]+" y="208" text-anchor="middle">today</text>', svg)
    legend = body[
        body.index('<ul class="legend"') : body.index("</ul>", body.index('<ul class="legend"'))
    ]
    for status, label, count in (
        ("ok", "ok", 1),
        ("diverged", "diverged", 1),
        ("tamper_detected", "tamper detected", 1),
        ("refused", "refused", 0),
    ):
        assert (
            f'<li><span class="swatch {status}"></span>{label}: <strong>{count}</strong></li>'
            in legend
        )


def test_tamper_detected_and_refused_have_distinct_colours(settings):
    from pathlib import Path

    css = (Path(settings.BASE_DIR) / "static" / "css" / "console.css").read_text()
    fills = dict(re.findall(r"svg \.bar-([a-z_]+) \{ fill: ([^;]+);", css))
    assert set(fills) == {"ok", "diverged", "tamper_detected", "refused"}
    assert len(set(fills.values())) == 4
    assert fills["refused"] not in ("var(--bad)", "#7a271a")  # no second red beside tamper


def test_the_dashboard_reads_a_fixed_number_of_queries_whatever_the_traces(as_persona):
    """The page was the slowest (one snapshot query per non-replayable trace): its queries no
    longer grow with the traces it lists."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.console.factories import trace_row

    def lacking() -> None:
        trace_row(
            required_snapshot_ids=[{"kind": "env", "snapshot_id": "sha256:" + "ab" * 32}],
            missing_outputs=["out-1"],
        )

    client = as_persona("oscar")
    lacking()
    client.get("/ops/")  # the session's and roles' first reads
    with CaptureQueriesContext(connection) as one:
        assert client.get("/ops/").status_code == 200
    for _ in range(9):
        lacking()
    with CaptureQueriesContext(connection) as ten:
        body = client.get("/ops/").content.decode()
    section = body[body.index('id="not-replayable"') : body.index('id="drift"')]
    assert section.count("(not retained)</code>") == 10
    assert len(ten.captured_queries) == len(one.captured_queries) <= 12
