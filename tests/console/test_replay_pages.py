"""Starting a replay, watching it, and reading its report with the divergence diff."""

from __future__ import annotations

import json
import re

import pytest

from governance.models import GovernanceEvent
from governance.services import replay_request
from replay.models import ReplayRun
from tests.console.personas import persona

pytestmark = pytest.mark.django_db


def start(client, trace, mode="audit", capture=None):
    return client.post(f"/traces/{trace.blob.sha256}/replay/", {"mode": mode})


class TestStart:
    def test_alice_starts_an_audit_replay_and_lands_on_its_page(
        self, as_persona, ingest, django_capture_on_commit_callbacks
    ):
        trace = ingest("diverged")
        with django_capture_on_commit_callbacks(execute=True):
            response = start(as_persona("alice"), trace)
        run = ReplayRun.objects.get(trace=trace)
        assert response.status_code == 303
        assert response["Location"] == f"/runs/{run.id}/"
        assert run.requested_by.username == "alice"
        assert run.state == "done"
        assert run.error_code == "REPLAY_DIVERGENCE"
        request = GovernanceEvent.objects.get(type="REPLAY_REQUEST")
        assert request.payload["run_id"] == str(run.id)
        assert request.actor.username == "alice"

    def test_alice_may_not_run_production_alone(self, as_persona, ingest):
        response = start(as_persona("alice"), ingest("ok"), mode="production")
        assert response.status_code == 403
        assert "your roles do not allow a production replay" in response.content.decode()
        assert not ReplayRun.objects.exists()

    def test_sam_as_auditor_and_admin_may_run_production(
        self, as_persona, ingest, django_capture_on_commit_callbacks
    ):
        with django_capture_on_commit_callbacks(execute=True):
            response = start(as_persona("sam"), ingest("ok"), mode="production")
        assert response.status_code == 303
        assert ReplayRun.objects.get().mode == "production"

    def test_an_unknown_mode_is_a_400_naming_the_offered_ones(self, as_persona, ingest):
        response = start(as_persona("oscar"), ingest("ok"), mode="turbo")
        assert response.status_code == 400
        assert "Choose one of the modes offered: audit, sandbox." in response.content.decode()

    @pytest.mark.parametrize("name", ["vera", "cora", "lena", "nora"])
    def test_roles_without_replay_get_403_for_existing_and_missing_traces(
        self, as_persona, ingest, name
    ):
        client = as_persona(name)
        assert start(client, ingest("ok")).status_code == 403
        assert client.post(f"/traces/{'0' * 64}/replay/", {"mode": "audit"}).status_code == 403
        assert not ReplayRun.objects.exists()

    def test_a_get_is_not_allowed(self, as_persona, ingest):
        trace = ingest("ok")
        assert as_persona("alice").get(f"/traces/{trace.blob.sha256}/replay/").status_code == 405


class TestProgress:
    @pytest.fixture
    def queued(self, ingest):
        return replay_request(
            trace=ingest("ok"), mode="audit", actor=persona("alice"), enqueue=False
        )

    def test_a_queued_run_shows_progress_and_polls_its_status(self, as_persona, queued):
        body = as_persona("vera").get(f"/runs/{queued.id}/").content.decode()
        assert '<span class="badge state-queued" id="run-state">queued</span>' in body
        link = re.search(r'<a href="([^"]+)" hx-get="([^"]+)" hx-trigger="every 1s"', body)
        assert link[1] == f"/runs/{queued.id}/"
        assert link[2] == f"/runs/{queued.id}/status/"
        assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in body
        assert 'id="verdict"' not in body

    def test_the_status_partial_reloads_the_page_once_done(self, as_persona, queued, htmx_headers):
        from governance.services import replay_run_govern

        client = as_persona("vera")
        polling = client.get(f"/runs/{queued.id}/status/", **htmx_headers)
        assert "HX-Refresh" not in polling
        assert polling.content.decode().strip().startswith('<section id="run-status"')
        replay_run_govern(run_id=queued.id)
        done = client.get(f"/runs/{queued.id}/status/", **htmx_headers)
        assert done["HX-Refresh"] == "true"
        assert "100%" in done.content.decode()


class TestReport:
    def test_the_report_shows_verdict_checks_and_a_side_by_side_diff(self, as_persona, replayed):
        run = replayed("diverged")
        report = run.report
        body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
        assert '<span class="badge verdict-big verdict-diverged" id="verdict-status">' in body
        assert '<code class="code" id="verdict-code">REPLAY_DIVERGENCE</code>' in body
        for check in report["checks"]:
            assert f"<strong>{check['name']}</strong>: " in body
        first = report["divergences"][0]
        diff = body[body.index('id="divergences"') :]
        assert f'<td class="path"><code>{first["path"]}</code>' in diff
        before = json.dumps(first["before"], indent=2, ensure_ascii=False, sort_keys=True)
        after = json.dumps(first["after"], indent=2, ensure_ascii=False, sort_keys=True)
        assert f"<pre>{before}</pre>".replace('"', "&quot;") in diff
        assert f"<pre>{after}</pre>".replace('"', "&quot;") in diff

    def test_unchanged_fields_of_the_step_are_folded_context(self, as_persona, replayed):
        run = replayed("diverged")
        body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
        context = body[body.index('<details class="context">') :]
        assert "<summary>Unchanged context: " in context
        changed = run.report["divergences"][0]["path"]
        folded = context[: context.index("</details>")]
        assert f"<code>{changed}</code>" not in folded

    def test_a_large_value_is_cut_and_loaded_on_demand_by_pointer(
        self, as_persona, replayed, htmx_headers
    ):
        run = replayed("diverged")
        report = dict(run.report)
        report["divergences"] = [dict(report["divergences"][0], after="x" * 5000)]
        ReplayRun.objects.filter(id=run.id).update(report=report)
        client = as_persona("vera")
        body = client.get(f"/runs/{run.id}/").content.decode()
        link = re.search(r'class="value-more" href="([^"]+)" hx-get="([^"]+)"', body)
        assert link[1] == link[2] == f"/runs/{run.id}/value/?pointer=/divergences/0/after"
        assert "x" * 5000 not in body
        value = client.get(link[1].replace("&amp;", "&"), **htmx_headers).content.decode()
        assert value.strip() == f'<div class="value full"><pre>&quot;{"x" * 5000}&quot;</pre></div>'

    def test_a_pointer_that_does_not_resolve_is_a_404_with_the_reason(self, as_persona, replayed):
        run = replayed("diverged")
        response = as_persona("vera").get(f"/runs/{run.id}/value/?pointer=/nope")
        assert response.status_code == 404
        assert "no member &#x27;nope&#x27; in &#x27;/nope&#x27;" in response.content.decode()

    def test_the_report_downloads_and_copies_as_json(self, as_persona, replayed):
        run = replayed("diverged")
        client = as_persona("vera")
        download = client.get(f"/runs/{run.id}/report.json?download=1")
        assert download["Content-Type"] == "application/json"
        assert download["Content-Disposition"] == (
            f'attachment; filename="replay-{run.trace.trace_id}-{run.id}.json"'
        )
        assert json.loads(download.content) == run.report
        body = client.get(f"/runs/{run.id}/").content.decode()
        assert f'data-copy-url="/runs/{run.id}/report.json" id="copy-json"' in body

    def test_the_report_of_an_unfinished_run_is_a_409(self, as_persona, ingest):
        run = replay_request(trace=ingest("ok"), mode="audit", actor=None, enqueue=False)
        response = as_persona("vera").get(f"/runs/{run.id}/report.json")
        assert response.status_code == 409
        assert response.json() == {
            "error_code": "REPORT_NOT_READY",
            "message": f"replay {run.id} is queued",
        }

    def test_alice_may_request_force_continue_from_a_diverged_report(self, as_persona, replayed):
        run = replayed("diverged")
        assert (
            'id="request-force-continue"'
            in as_persona("alice").get(f"/runs/{run.id}/").content.decode()
        )
        assert (
            'id="request-force-continue"'
            not in as_persona("vera").get(f"/runs/{run.id}/").content.decode()
        )

    def test_a_sandbox_replay_is_marked_non_authoritative(self, as_persona, replayed):
        run = replayed("unpersisted", mode="sandbox")
        body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
        assert run.authoritative is False
        assert 'id="non-authoritative">non-authoritative</span>' in body


class TestTamperedAndRefused:
    """A replay of a trace whose integrity check failed halts others: the form says so before
    it starts; a replay refused before it ran is never shown as an authoritative, complete one."""

    @staticmethod
    def replay_box(client, trace) -> str:
        body = client.get(f"/traces/{trace.blob.sha256}/").content.decode()
        return body[body.index('id="replay-start"') : body.index('id="trace-runs"')]

    def test_it_warns_before_replaying_a_broken_chain_that_it_halts_this_file_only(
        self, as_persona, ingest
    ):
        ok, diverged, broken = ingest("ok"), ingest("diverged"), ingest("broken_chain")
        box = self.replay_box(as_persona("alice"), broken)
        assert box.index('id="halt-warning"') < box.index('id="replay-submit"')
        warning = box[box.index('id="halt-warning"') : box.index("</div>")]
        assert (
            "This trace failed its integrity check (<code>INTEGRITY_FAILURE</code>: event 4: the "
            "chain hash does not verify (the event or one before it changed)).\n  Starting a "
            "replay records the failure in the ledger and halts this file "
            f"(<code>{broken.blob.sha256}</code>) until a council quorum signs "
            "FORCE_HALT_CLEAR; other files with the same trace id and the stored snapshots it "
            "claims are not halted." in warning
        )
        for trace in (ok, diverged):
            assert trace.blob.sha256 not in warning

    def test_it_warns_that_a_copy_with_an_edited_snapshot_body_halts_only_itself(
        self, as_persona, ingest
    ):
        ok, tampered = ingest("ok"), ingest("tampered_snapshot")
        snapshot_id = tampered.ingest_report["snapshot_ids"][1]
        box = self.replay_box(as_persona("alice"), tampered)
        warning = box[box.index('id="halt-warning"') : box.index("</div>")]
        assert f"halts this file (<code>{tampered.blob.sha256}</code>)" in warning
        assert snapshot_id not in warning
        assert ok.blob.sha256 not in warning

    def test_a_trace_that_verified_or_is_already_halted_has_no_warning(
        self, as_persona, ingest, replayed
    ):
        assert 'id="halt-warning"' not in self.replay_box(as_persona("alice"), ingest("ok"))
        run = replayed("broken_chain")
        box = self.replay_box(as_persona("alice"), run.trace)
        assert 'id="halt-warning"' not in box  # the halt banner says what holds now

    @staticmethod
    def halted_run(ingest, replayed):
        """A replay refused because an admin's security incident halts its trace id."""
        from governance.services import security_incident_declare

        trace = ingest("ok")
        security_incident_declare(actor=persona("adam"), reason="key leaked", trace=trace.trace_id)
        return replayed("ok")

    def test_a_refused_run_is_not_labelled_authoritative_nor_complete(
        self, as_persona, ingest, replayed
    ):
        run = self.halted_run(ingest, replayed)
        assert (run.status, run.error_code) == ("refused", "FORCE_HALT_ACTIVE")
        body = as_persona("vera").get(f"/runs/{run.id}/").content.decode()
        assert "authoritative" not in body.replace("non-authoritative", "")
        assert "100%" not in body
        assert f"({run.progress_total} of {run.progress_total})" not in body
        assert (
            '<span class="badge verdict-refused" id="run-refused">refused</span> '
            "<code>FORCE_HALT_ACTIVE</code> at the <strong>halts</strong> check, "
            "before any step was replayed" in body
        )
        assert 'id="non-authoritative"' not in body
        assert '<span class="badge nonauth" id="no-verdict">no verdict on the trace</span>' in body

    def test_a_refused_run_is_not_listed_as_authoritative(self, as_persona, ingest, replayed):
        run = self.halted_run(ingest, replayed)
        body = as_persona("vera").get(f"/traces/{run.trace.blob.sha256}/").content.decode()
        history = body[body.index('id="trace-runs"') :]
        row = history[history.index(f'href="/runs/{run.id}/"') :]
        row = row[: row.index("</tr>")]
        assert "<td>yes</td>" not in row
        assert '<td><span class="badge nonauth">refused: no verdict</span></td>' in row
