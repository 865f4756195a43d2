"""A trace's verdict is its authoritative verdict (core/replay/verdicts.py): the verification at
upload, then the latest authoritative audit or production replay that reached a verdict.
Force-continued, sandbox and refused replays are in its history, and never change it."""

from __future__ import annotations

import io

import pytest

from core.canonical import jcs
from core.ledger.signing import sign
from governance import services as gov_services
from governance.models import Halt
from replay.keys import key_add_hmac
from replay.models import Trace
from replay.services import trace_ingest
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


def listed(client, verdict: str) -> list[str]:
    """The file names the API lists under ``?verdict=``."""
    results = client.get(f"/api/traces/?verdict={verdict}").json()["results"]
    return [t["filename"] for t in results]


def page_lists(client, trace: Trace, verdict: str) -> bool:
    body = client.get(f"/traces/?verdict={verdict}").content.decode()
    return f'href="/traces/{trace.blob.sha256}/"' in body


def governed(trace: Trace, *, mode: str = "audit", by: str = "alice"):
    run = gov_services.replay_request(trace=trace, mode=mode, actor=persona(by), enqueue=False)
    return gov_services.replay_run_govern(run_id=run.id)


def force_continued(diverged_run, as_persona, member_key, capture):
    """One admin and two council members approve; the resumed run, finished."""
    fc = gov_services.force_continue_request_file(
        run=diverged_run, actor=persona("alice"), reason="the router drift is known"
    )
    for name, role in [("cora", "council"), ("colin", "council"), ("adam", "admin")]:
        key, private = member_key(name)
        payload = gov_services.force_continue_payload_for(
            request=fc, decision="approve", role=role, reason=""
        )
        text = jcs(payload).decode()
        with capture(execute=True):
            response = as_persona(name).post(
                f"/force-continue/{fc.id}/",
                {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
            )
        assert response.status_code == 303, response.content.decode()[:2000]
    fc.refresh_from_db()
    assert fc.resumed_run.state == "done"
    return fc.resumed_run


def test_it_keeps_a_force_continued_trace_diverged_in_the_list_and_the_api(
    as_persona, replayed, member_key, django_capture_on_commit_callbacks
):
    diverged_run = replayed("diverged")
    resumed = force_continued(
        diverged_run, as_persona, member_key, django_capture_on_commit_callbacks
    )
    assert (resumed.status, resumed.authoritative) == ("ok", False)
    trace = Trace.objects.get(pk=diverged_run.trace_id)
    assert trace.last_status == "diverged"
    vera = as_persona("vera")
    assert page_lists(vera, trace, "diverged")
    assert not page_lists(vera, trace, "ok")
    assert listed(vera, "diverged") == ["diverged.trace.json"]
    assert listed(vera, "ok") == []
    detail = vera.get(f"/api/traces/{trace.blob.sha256}/").json()
    assert (detail["verdict"], detail["verdict_run"]) == ("diverged", str(diverged_run.id))
    assert {run["id"]: run["verdict_effect"] for run in detail["runs"]} == {
        str(diverged_run.id): "decides the verdict",
        str(resumed.id): "non-authoritative (force-continued): never changes the trace's verdict",
    }


def test_it_shows_which_run_decides_the_verdict_and_why_the_others_do_not(
    as_persona, replayed, member_key, django_capture_on_commit_callbacks
):
    diverged_run = replayed("diverged")
    resumed = force_continued(
        diverged_run, as_persona, member_key, django_capture_on_commit_callbacks
    )
    body = as_persona("vera").get(f"/traces/{diverged_run.trace.blob.sha256}/").content.decode()
    assert '<span class="badge verdict-big verdict-diverged">diverged</span>' in body
    assert (
        f'<p id="verdict-basis">The verdict of the audit replay of '
        f'<a href="/runs/{diverged_run.id}/">' in body
    )
    assert f'<td id="effect-{diverged_run.id}">decides the verdict</td>' in body
    assert (
        f'<td id="effect-{resumed.id}">non-authoritative (force-continued): '
        "never changes the trace&#x27;s verdict</td>"
    ) in body
    assert '<td id="effect-ingest">superseded by a later authoritative replay</td>' in body


def test_it_keeps_the_verdict_a_halt_refused_run_found_after_the_halt_is_cleared(
    as_persona, ingest, member_key
):
    ok = ingest("ok")
    gov_services.security_incident_declare(  # an admin halts every copy of the trace id
        actor=persona("adam"), reason="key leaked", trace=ok.trace_id
    )
    refused = governed(ok)
    assert (refused.status, refused.error_code) == ("refused", "FORCE_HALT_ACTIVE")
    halt = Halt.objects.active().get(payload__target_kind="trace")
    for name in ("cora", "colin"):
        key, private = member_key(name)
        text = jcs(gov_services.halt_clear_payload_for(halt=halt)).decode()
        response = as_persona(name).post(
            f"/requests/halt-clear/{halt.seq}/",
            {"payload": text, "key_id": key.key_id, "signature": sign(private, text.encode())},
        )
        assert response.status_code == 303
    assert not Halt.objects.active().exists()
    ok.refresh_from_db()
    assert ok.last_status == "ok"
    vera = as_persona("vera")
    assert listed(vera, "ok") == ["ok.trace.json"]
    assert listed(vera, "refused") == []
    body = vera.get(f"/traces/{ok.blob.sha256}/").content.decode()
    assert '<span class="badge verdict-big verdict-ok">ok</span>' in body
    assert (
        f'<td id="effect-{refused.id}">refused (FORCE_HALT_ACTIVE): the replay reached no '
        "verdict on the trace</td>"
    ) in body


def test_it_does_not_let_a_sandbox_run_change_the_verdict(as_persona):
    # A file whose verification at upload said tamper_detected, which a later audit finds
    # intact: as one stored before its key was registered was, before an unknown key was
    # refused outright (UNKNOWN_KEY, tests/replay/test_unknown_key.py). The row is set to that
    # verdict; the replays below run for real.
    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace
    report = {**trace.ingest_report, "status": "tamper_detected", "error_code": "INTEGRITY_FAILURE"}
    Trace.objects.filter(pk=trace.pk).update(last_status="tamper_detected", ingest_report=report)
    trace.refresh_from_db()
    assert trace.last_status == "tamper_detected"
    sandbox = governed(trace, mode="sandbox")
    assert (sandbox.status, sandbox.authoritative) == ("ok", False)
    trace.refresh_from_db()
    assert trace.last_status == "tamper_detected"
    vera = as_persona("vera")
    assert listed(vera, "tamper_detected") == ["ok.trace.json"]
    assert vera.get(f"/api/traces/{trace.blob.sha256}/").json()["verdict_run"] is None
    assert page_lists(vera, trace, "tamper_detected")
    body = vera.get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert '<p id="verdict-basis">The verdict of the verification at upload' in body
    assert (
        f'<td id="effect-{sandbox.id}">a sandbox replay never changes the trace&#x27;s verdict</td>'
    ) in body

    audit = governed(trace, mode="audit")
    assert (audit.status, audit.authoritative) == ("ok", True)
    trace.refresh_from_db()
    assert trace.last_status == "ok"
    assert listed(vera, "ok") == ["ok.trace.json"]


def test_the_migration_recomputes_a_verdict_a_force_continued_run_overwrote(
    as_persona, replayed, member_key, django_capture_on_commit_callbacks
):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("replay.migrations.0004_trace_verdict_by_the_rule")
    diverged_run = replayed("diverged")
    force_continued(diverged_run, as_persona, member_key, django_capture_on_commit_callbacks)
    # what the code before the rule stored: the last run's status
    Trace.objects.filter(pk=diverged_run.trace_id).update(last_status="ok")
    migration.recompute(apps, None)
    assert Trace.objects.get(pk=diverged_run.trace_id).last_status == "diverged"
