"""Verist snapshots and baselines are stored traces like the other formats: uploaded through the
page, the API and `manage.py ingest`, listed (`?format=verist-snapshot`), opened (the Verist
panel), re-verified as governed replays (REPLAY_REQUEST / REPLAY_RESULT), compared
(inputDiff / outputDiff / commandsDiff), and an edited input is INPUT_HASH_MISMATCH, an
integrity failure that halts that file only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from core.errors import FORCE_HALT_ACTIVE, INPUT_HASH_MISMATCH, UNSUPPORTED_SCHEMA_VERSION
from core.formats import VERIST
from governance.models import GovernanceEvent
from replay.models import Trace
from tests.console.formats import (
    api_client,
    assert_halted_alone,
    compare_page,
    event_types,
    governed,
    listed,
    replayed_by_page_and_api,
    trace_page,
    upload_api,
    upload_of,
    upload_page,
    verify_api,
)
from tests.console.formats import ingest_file as ingest
from tests.published import PUBLISHED
from tests.replay.helpers import stored_counts

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "replay" / "fixtures" / "verist"
PASS = FIXTURES / "pass.snapshot.json"
BASELINE = FIXTURES / "pass.baseline.json"
SECOND = FIXTURES / "second_run.snapshot.json"
TAMPERED = FIXTURES / "tamper_input.snapshot.json"
INPUT_HASH = "sha256:cd0aa153bec459d9b0d05f27d5b6736a64a4147c254f4e9cad0bfe9eacf67c32"
CHECKS = ["format", "halts", "input_hash", "artifacts", "output", "recompute"]


# --- storing -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [PASS, BASELINE], ids=["snapshot", "baseline"])
def test_it_stores_a_snapshot_and_a_baseline(path):
    trace = ingest(path)
    assert (trace.format, trace.last_status, trace.runtime_name) == (VERIST, "ok", "verist")
    assert trace.trace_id == trace.blob.sha256
    assert (trace.job_id, trace.job_seed, trace.runtime_version) == (
        "verify-doc/extract",
        INPUT_HASH,
        "1.0.0",
    )
    assert trace.started_at.isoformat() == "2026-01-01T00:00:00+00:00"
    assert trace.ingest_report["verist"]["code"] is None


def test_it_refuses_another_baseline_version_and_stores_nothing():
    from core.errors import ReplayError

    with pytest.raises(ReplayError) as refused:
        ingest(FIXTURES / "unsupported.baseline.json")
    assert refused.value.code == UNSUPPORTED_SCHEMA_VERSION
    assert stored_counts() == {"traces": 0, "blobs": 0, "snapshots": 0}


def test_an_edited_input_is_stored_as_tampered_evidence():
    trace = ingest(TAMPERED)
    assert (trace.last_status, trace.ingest_report["error_code"]) == (
        "tamper_detected",
        INPUT_HASH_MISMATCH,
    )
    assert trace.ingest_report["verist"]["code"] == "input_hash_mismatch"


# --- pages, API, CLI ----------------------------------------------------------------------


def test_the_upload_page_stores_a_snapshot(as_persona):
    response = upload_page(as_persona("alice"), [upload_of(PASS)])
    assert response.status_code == 200
    trace = Trace.objects.get()
    assert trace.format == VERIST
    assert f'href="/traces/{trace.blob.sha256}/"' in response.content.decode()


def test_a_viewer_may_open_but_not_upload(as_persona):
    trace = ingest(PASS)
    client = as_persona("vera")
    assert trace_page(client, trace).status_code == 200
    upload = upload_page(client, [upload_of(PASS)])
    assert upload.status_code == 403
    assert Trace.objects.count() == 1


def test_the_list_filters_verist_files_by_format(as_persona):
    snapshot = ingest(PASS)
    ingest(FIXTURES / "hash_only.snapshot.json")
    other = ingest(PUBLISHED / "paxman" / "money_unresolved.json")
    results, page = listed(as_persona("alice"), VERIST)
    assert [t["format"] for t in results] == [VERIST, VERIST]
    assert f'href="/traces/{snapshot.blob.sha256}/"' in page
    assert f'href="/traces/{other.blob.sha256}/"' not in page


def test_the_trace_page_shows_the_verist_panel(as_persona):
    trace = ingest(BASELINE)
    body = trace_page(as_persona("alice"), trace).content.decode()
    assert '<section class="card" id="format-panel">' in body
    assert "<h2>A Verist snapshot</h2>" in body
    assert f"<dt>inputHash</dt><dd><code>{INPUT_HASH}</code></dd>" in body
    assert "<dt>file</dt><dd><code>verist-baseline@1</code></dd>" in body
    assert '<li class="ok"><strong>input_hash</strong> hashValue(input) is the recorded' in body


def test_a_snapshot_is_re_verified_through_the_page_and_the_api(
    as_persona, django_capture_on_commit_callbacks
):
    trace = ingest(PASS)
    runs = replayed_by_page_and_api(as_persona("alice"), trace, django_capture_on_commit_callbacks)
    assert [c["name"] for c in runs[0].report["checks"]] == CHECKS
    assert runs[0].report["verist"]["outputDiff"] == {"equal": True, "entries": []}
    assert GovernanceEvent.objects.filter(type="REPLAY_RESULT").count() == 2


def test_the_api_stores_a_baseline():
    response = upload_api(api_client("alice"), upload_of(BASELINE))
    assert response.status_code == 201
    body = response.json()
    assert (body["format"], body["verdict"], body["job_id"]) == (
        VERIST,
        "ok",
        "verify-doc/extract",
    )


def test_ingest_stores_a_snapshot_and_the_cli_replays_it(capsys):
    call_command("ingest", str(PASS))
    trace = Trace.objects.get()
    assert capsys.readouterr().out == f"{trace.trace_id} {VERIST} replayable ok\n"
    call_command("replay", trace.blob.sha256, "--json")
    report = json.loads(capsys.readouterr().out)
    assert (report["format"], report["status"], report["error_code"]) == (VERIST, "ok", None)
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert event_types()[-2:] == ["REPLAY_REQUEST", "REPLAY_RESULT"]


def test_ingest_says_a_hash_only_output_is_not_replayable(capsys):
    call_command("ingest", str(FIXTURES / "hash_only.snapshot.json"))
    trace = Trace.objects.get()
    assert capsys.readouterr().out == f"{trace.trace_id} {VERIST} not-replayable ok\n"


# --- tampering halts that file only --------------------------------------------------------


def test_an_input_hash_mismatch_is_an_integrity_failure_that_halts_only_that_file():
    tampered = ingest(TAMPERED)
    clean = ingest(PASS)
    run = governed(tampered)
    assert (run.status, run.error_code, run.report["broke_at"], run.report["expected"]) == (
        "tamper_detected",
        INPUT_HASH_MISMATCH,
        "inputHash",
        INPUT_HASH,
    )
    failure = GovernanceEvent.objects.get(type="INTEGRITY_FAILURE")
    assert failure.payload["error_code"] == INPUT_HASH_MISMATCH
    assert failure.payload["target_id"] == tampered.blob.sha256
    again = assert_halted_alone(tampered, clean)
    assert (again.error_code, again.report["verist"]["code"]) == (FORCE_HALT_ACTIVE, "halted")


# --- comparing two runs of one step --------------------------------------------------------


def test_two_snapshots_of_one_step_compare_input_output_and_commands(as_persona):
    a = ingest(PASS)
    b = ingest(SECOND)
    body = compare_page(as_persona("alice"), a, b).content.decode()
    for row in (
        '<td class="path"><code>/input/text</code></td><td>changed</td>',
        '<td class="path"><code>/output/flagged</code></td><td>changed</td>'
        "<td><code>True</code></td><td><code>False</code></td>",
        '<td class="path"><code>/commands/0/type</code></td><td>changed</td>'
        "<td><code>emit</code></td><td><code>complete</code></td>",
    ):
        assert row in body


def test_a_hash_only_output_is_not_comparable_and_says_so(as_persona):
    a = ingest(PASS)
    b = ingest(FIXTURES / "hash_only.snapshot.json")
    body = compare_page(as_persona("alice"), a, b).content.decode()
    assert (
        '<td class="path"><code>/output</code></td><td>not comparable</td><td><code>—</code></td>'
        "<td><code>outputDiff is undefined</code></td>"
    ) in body


def test_a_recomputed_divergence_is_a_replay_divergence_event():
    trace = ingest(FIXTURES / "rehashed_output.snapshot.json")
    assert (trace.last_status, trace.ingest_report["error_code"]) == (
        "diverged",
        "REPLAY_DIVERGENCE",
    )
    run = governed(trace)
    assert (run.status, run.error_code, run.report["broke_at"]) == (
        "diverged",
        "REPLAY_DIVERGENCE",
        "/output/flagged",
    )
    event = GovernanceEvent.objects.get(type="REPLAY_DIVERGENCE")
    assert (event.payload["step"], event.payload["path"], event.payload["divergences"]) == (
        "extract",
        "/output/flagged",
        1,
    )
    assert not GovernanceEvent.objects.filter(type="INTEGRITY_FAILURE").exists()


def test_ingest_takes_the_declared_format(capsys):
    call_command("ingest", str(PASS), "--format", VERIST)
    assert capsys.readouterr().out.endswith(f" {VERIST} replayable ok\n")


def test_the_api_verifies_a_tampered_snapshot_without_storing_it(as_persona):
    response = verify_api(as_persona("alice"), upload_of(TAMPERED))
    assert response.status_code == 200
    body = response.json()
    report = body["report"]
    assert (body["format"], body["stored"], report["status"], report["error_code"]) == (
        VERIST,
        False,
        "tamper_detected",
        INPUT_HASH_MISMATCH,
    )
    assert (report["broke_at"], report["expected"], report["verist"]["code"]) == (
        "inputHash",
        INPUT_HASH,
        "input_hash_mismatch",
    )
    assert Trace.objects.count() == 0


def test_the_trace_page_of_a_tampered_snapshot_says_it_in_both_vocabularies(as_persona):
    trace = ingest(TAMPERED)
    body = trace_page(as_persona("alice"), trace).content.decode()
    assert (
        '<span class="badge verdict-tamper_detected">tamper_detected</span> '
        '<code class="code">INPUT_HASH_MISMATCH</code> (Verist: <code>input_hash_mismatch</code>)'
        f" Input hash mismatch: expected {INPUT_HASH}, got sha256:"
    ) in body


def verdict_line(body: str) -> str:
    """The panel's verdict paragraph, whole."""
    found = re.search(r'<p id="format-verdict">.*?</p>', body, re.S)
    assert found is not None, body
    return found[0]


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("pass.snapshot.json", '<span class="badge verdict-ok">ok</span>'),
        (
            "tamper_input.snapshot.json",
            '<span class="badge verdict-tamper_detected">tamper_detected</span> '
            '<code class="code">INPUT_HASH_MISMATCH</code> (Verist: '
            "<code>input_hash_mismatch</code>) Input hash mismatch: expected "
            f"{INPUT_HASH}, got "
            "sha256:07c25358c012dc13005f26a17a1633f2de464a365221c42f725c84afdd8c1e2d",
        ),
        (
            "rehashed_output.snapshot.json",
            '<span class="badge verdict-diverged">diverged</span> '
            '<code class="code">REPLAY_DIVERGENCE</code> (Verist: <code>output_diverged</code>)'
            " the recomputed step differs from the recorded one at /output/flagged",
        ),
    ],
)
def test_the_panel_verdict_says_the_console_code_and_verists_own(as_persona, name, line):
    trace = ingest(FIXTURES / name)
    body = trace_page(as_persona("alice"), trace).content.decode()
    assert verdict_line(body) == f'<p id="format-verdict">{line}</p>'


def test_the_panel_of_a_halted_snapshot_gives_verists_word_for_the_refusal(as_persona):
    tampered = ingest(TAMPERED)
    governed(tampered)
    refused = governed(tampered)
    assert refused.error_code == FORCE_HALT_ACTIVE
    body = trace_page(as_persona("alice"), tampered).content.decode()
    assert verdict_line(body) == (
        '<p id="format-verdict"><span class="badge verdict-refused">refused</span> '
        '<code class="code">FORCE_HALT_ACTIVE</code> (Verist: <code>halted</code>) '
        f"{refused.report['message']}</p>"
    )
