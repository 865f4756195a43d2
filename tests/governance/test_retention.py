"""Retention (``governance.retention``): due traces become tombstones with their hashes, each
expiry one TRACE_EXPIRED event; a trace the ledger names, or a hold keeps, never expires."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.storage import storages
from django.core.management import call_command

from core import errors
from core.ledger import codes
from governance import ledger, retention
from governance.models import GovernanceEvent
from governance.services import replay_request, replay_run_govern
from replay.models import Blob, Snapshot, Trace
from tests.governance.conftest import ingest, recorded_bytes

# the demo traces start 2026-01-01; 30 days later they are due under {"default": 30}
STARTED = datetime(2026, 1, 1, tzinfo=UTC)
LATER = STARTED + timedelta(days=31)


@pytest.fixture
def policy(settings):
    settings.REPLAY_RETENTION = {"default": 30, "verdict": {"tamper_detected": None}}
    settings.REPLAY_RETENTION_HOLDS = []


@pytest.fixture
def alpha(stored_traces, policy):
    return ingest("alpha", data=recorded_bytes("alpha"))


@pytest.fixture
def beta(stored_traces, policy):
    return ingest("beta", data=recorded_bytes("beta"))


def _snapshot_ids(trace):
    return {ref["kind"]: ref["snapshot_id"] for ref in trace.required_snapshot_ids}


def test_it_expires_a_due_trace_as_a_tombstone_with_its_hashes(alpha, beta):
    assert alpha.started_at == STARTED
    blob_name, size, sha = alpha.blob.storage_name, alpha.blob.size, alpha.blob.sha256
    shared = _snapshot_ids(alpha)
    assert storages["blobs"].exists(blob_name)

    outcome = retention.retention_run(now=LATER, limit=1)

    assert [e.tombstone.trace_pk for e in outcome.expired] == [alpha.pk]
    alpha.refresh_from_db()
    assert (alpha.expired_at, alpha.expiry_rule) == (LATER, "default (30 days)")
    blob = Blob.objects.get(pk=alpha.blob.pk)
    assert (blob.sha256, blob.size, blob.expired_at) == (sha, size, LATER)
    assert not storages["blobs"].exists(blob_name)
    assert alpha.ingest_report["expired"] is True
    assert "detail" not in json.dumps(alpha.ingest_report)
    # the runtime's shared snapshots stay for beta; alpha's own ones are gone
    stored = set(Snapshot.objects.values_list("snapshot_id", flat=True))
    assert {shared["privacy"], shared["brainstate"], shared["governance"]} <= stored
    assert not {shared["selfrep"], shared["router"]} & stored


def test_each_expiry_is_one_trace_expired_event_without_content(alpha):
    retention.retention_run(now=LATER)

    event = GovernanceEvent.objects.get(code=codes.code_of(codes.TRACE_EXPIRED))
    snapshots = _snapshot_ids(alpha)
    assert event.actor_label == "system:retention"
    assert event.payload == {
        "trace_id": alpha.trace_id,
        "trace_sha256": alpha.blob.sha256,
        "bytes_removed": alpha.blob.size,
        "snapshots_removed": sorted(snapshots.values()),
        "reports_cleared": 0,
        "format": "replay-trace",
        "rule": "default (30 days)",
        "expires_at": "2026-01-31T00:00:00+00:00",
    }
    assert ledger.verify_all().ok


def test_it_never_expires_a_trace_a_governance_event_names(alpha, beta):
    run = replay_request(trace=alpha, mode="audit", enqueue=False)
    replay_run_govern(run_id=run.id)

    outcome = retention.retention_run(now=LATER)

    assert [e.tombstone.trace_pk for e in outcome.expired] == [beta.pk]
    assert outcome.protected == 1
    alpha.refresh_from_db()
    assert alpha.expired_at is None
    assert storages["blobs"].exists(alpha.blob.storage_name)


def test_a_note_on_a_trace_keeps_it(alpha, beta):
    from governance.services import trace_note_add

    trace_note_add(trace=alpha, actor=None, text="kept as evidence")

    outcome = retention.retention_run(now=LATER)

    assert [e.tombstone.trace_pk for e in outcome.expired] == [beta.pk]
    alpha.refresh_from_db()
    assert alpha.expired_at is None


def test_a_halt_on_one_of_its_snapshots_protects_a_trace(alpha):
    from django.db import transaction

    with transaction.atomic():
        halt = ledger.append(
            event_type=codes.FORCE_HALT_REPLAY,
            payload={
                "target_kind": "snapshot",
                "target_id": _snapshot_ids(alpha)["router"],
                "reason": "test",
            },
        )

    assert retention.traces_protected([alpha]) == {
        alpha.pk: f"named by governance event {halt.seq} (FORCE_HALT_REPLAY)"
    }
    assert retention.retention_run(now=LATER).expired == []


def test_a_registered_hold_keeps_a_trace(alpha, beta):
    def open_legal_request(traces):
        return {t.pk: "open legal request dsr_1" for t in traces if t.pk == alpha.pk}

    retention.hold_register(open_legal_request)
    try:
        plan = retention.retention_plan(now=LATER)
        outcome = retention.retention_run(now=LATER)
    finally:
        retention.hold_unregister(open_legal_request)

    assert {d.facts.pk: d.protected_by for d in plan.decisions} == {
        alpha.pk: "open legal request dsr_1",
        beta.pk: None,
    }
    assert [e.tombstone.trace_pk for e in outcome.expired] == [beta.pk]


def test_a_hold_named_in_the_settings_keeps_a_trace(alpha, settings):
    settings.REPLAY_RETENTION_HOLDS = ["tests.governance.test_retention.hold_everything"]

    assert retention.retention_run(now=LATER).expired == []


def hold_everything(traces):
    return {t.pk: "held by the settings' hold" for t in traces}


def test_nothing_is_due_before_its_time(alpha):
    assert retention.retention_run(now=LATER - timedelta(days=2)).due == []


def test_a_dry_run_changes_nothing(alpha):
    before = GovernanceEvent.objects.count()

    outcome = retention.retention_run(now=LATER, dry_run=True)

    assert [d.facts.pk for d in outcome.due] == [alpha.pk]
    assert outcome.expired == []
    assert GovernanceEvent.objects.count() == before
    alpha.refresh_from_db()
    assert alpha.expired_at is None


def test_a_trace_is_never_expired_twice(alpha):
    retention.retention_run(now=LATER)
    again = retention.retention_run(now=LATER + timedelta(days=1))

    assert again.due == []
    assert (
        retention.trace_expire(
            trace_pk=alpha.pk, rule="default (30 days)", expires_at=LATER, now=LATER
        )
        == f"already expired at {LATER.isoformat()}"
    )
    assert GovernanceEvent.objects.filter(code=codes.code_of(codes.TRACE_EXPIRED)).count() == 1


def test_it_checks_protection_again_when_it_expires(alpha):
    plan = retention.retention_plan(now=LATER)
    run = replay_request(trace=alpha, mode="audit", enqueue=False)  # named after the plan
    request = GovernanceEvent.objects.get(code=codes.code_of(codes.REPLAY_REQUEST))

    decision = plan.due(LATER)[0]
    result = retention.trace_expire(
        trace_pk=decision.facts.pk,
        rule=decision.rule.label,
        expires_at=LATER,
        now=LATER,
        checked_through=plan.head_seq,  # only the events after the plan are read again
    )

    assert request.seq > plan.head_seq
    assert result == f"protected: named by governance event {request.seq} (REPLAY_REQUEST)"
    assert run.trace.pk == alpha.pk


def test_a_verdict_kept_forever_never_expires(stored_traces, policy):
    from tests.governance.conftest import tampered_copy_bytes

    tampered = ingest("tampered", data=tampered_copy_bytes())
    assert tampered.last_status == Trace.Status.TAMPER_DETECTED

    assert retention.retention_run(now=LATER + timedelta(days=9999)).due == []


def test_a_replay_of_an_expired_trace_is_refused_with_trace_expired(alpha):
    retention.retention_run(now=LATER)
    alpha.refresh_from_db()

    run = replay_run_govern(run_id=replay_request(trace=alpha, mode="audit", enqueue=False).id)

    assert (run.status, run.error_code) == ("refused", errors.TRACE_EXPIRED)
    assert run.report["message"] == (
        f"the stored file {alpha.blob.sha256} expired on {LATER.isoformat()} by the retention "
        "rule default (30 days): its content is gone, its hashes stay"
    )
    assert ledger.verify_all().ok


def test_what_expires_next_lists_unprotected_traces_by_their_time(alpha, beta):
    replay_run_govern(run_id=replay_request(trace=beta, mode="audit", enqueue=False).id)

    upcoming = retention.retention_upcoming()

    assert [(d.facts.pk, d.rule.label) for d in upcoming] == [(alpha.pk, "default (30 days)")]
    assert upcoming[0].expires_at == STARTED + timedelta(days=30)


def test_no_policy_expires_nothing(alpha, settings):
    settings.REPLAY_RETENTION = None

    assert retention.retention_run(now=LATER + timedelta(days=9999)).due == []
    assert retention.retention_upcoming() == []


def test_the_command_lists_then_expires(alpha):
    from unittest import mock

    out = io.StringIO()
    with mock.patch("governance.retention.timezone.now", return_value=LATER):
        call_command("retention", "run", "--dry-run", stdout=out)
        assert out.getvalue().splitlines() == [
            f"would expire {alpha.trace_id} (replay-trace, trace #{alpha.pk}): due "
            "2026-01-31T00:00:00+00:00 by default (30 days)",
            "1 trace(s) would expire; 0 due but protected (named by the ledger or held)",
        ]
        out = io.StringIO()
        call_command("retention", "run", stdout=out)
    event = GovernanceEvent.objects.get(code=codes.code_of(codes.TRACE_EXPIRED))
    assert out.getvalue().splitlines() == [
        f"expired {alpha.trace_id} (file sha256:{alpha.blob.sha256}) by default (30 days): "
        f"{alpha.blob.size} bytes and 5 snapshot bodies removed; ledger event {event.seq}",
        "1 trace(s) expired; 0 due but protected (named by the ledger or held)",
    ]


def test_the_expiry_events_payload_has_fixed_canonical_bytes(alpha):
    from core.canonical import jcs

    retention.retention_run(now=LATER)
    event = GovernanceEvent.objects.get(code=codes.code_of(codes.TRACE_EXPIRED))
    removed = ",".join(f'"{s}"' for s in sorted(_snapshot_ids(alpha).values()))

    assert (
        jcs(event.payload)
        == (
            f'{{"bytes_removed":{alpha.blob.size},"expires_at":"2026-01-31T00:00:00+00:00",'
            f'"format":"replay-trace","reports_cleared":0,"rule":"default (30 days)",'
            f'"snapshots_removed":[{removed}],"trace_id":"{alpha.trace_id}",'
            f'"trace_sha256":"{alpha.blob.sha256}"}}'
        ).encode()
    )


def test_celery_beat_runs_retention_daily(alpha, settings):
    from governance.tasks import retention_run as task

    assert settings.CELERY_BEAT_SCHEDULE["retention-run"] == {
        "task": "governance.tasks.retention_run",
        "schedule": 86400.0,
    }
    # today is long past the demo trace's 30 days
    assert task.delay().get() == {"expired": 1, "skipped": 0}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('{"default": "a year"}', "REPLAY_RETENTION.default: retention is a whole number"),
        ("{not json", "REPLAY_RETENTION_JSON: Expecting property name"),
    ],
)
def test_a_retention_setting_that_is_not_a_policy_stops_the_start_up(value, message, tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "REPLAY_RETENTION_JSON": value,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "ImproperlyConfigured: REPLAY_RETENTION_JSON: " in done.stderr
    assert message in done.stderr


def test_what_expires_next_looks_past_a_page_of_protected_traces(alpha, beta, monkeypatch):
    monkeypatch.setattr(retention, "UPCOMING_SCAN", 1)
    replay_run_govern(run_id=replay_request(trace=alpha, mode="audit", enqueue=False).id)

    upcoming = retention.retention_upcoming()

    assert [d.facts.pk for d in upcoming] == [beta.pk]


def test_what_expires_next_reads_the_ledger_at_most_twice_whatever_the_pairs(
    alpha, beta, monkeypatch
):
    """One pass over the ledger answers every verdict and format pair's first page, one more
    the further pages of the pairs that need them (the operations page read it once per pair
    and page: 15 s on 10,000 traces and 100,000 events)."""
    Trace.objects.filter(pk=beta.pk).update(last_status="diverged")  # a second pair
    other = ingest("gamma", data=recorded_bytes("gamma"))
    Trace.objects.filter(pk=other.pk).update(last_status="diverged")
    for trace in (alpha, beta):  # named by the ledger: each pair reads a second page
        replay_run_govern(run_id=replay_request(trace=trace, mode="audit", enqueue=False).id)
    monkeypatch.setattr(retention, "UPCOMING_SCAN", 1)
    passes = []
    real = retention.events_naming

    def counted(traces, **kwargs):
        passes.append(sorted(t.pk for t in traces))
        return real(traces, **kwargs)

    monkeypatch.setattr(retention, "events_naming", counted)

    upcoming = retention.retention_upcoming()

    assert [d.facts.pk for d in upcoming] == [other.pk]
    assert len(passes) == 2  # both pairs' first page together, then the rest of one
    assert len(passes[0]) == 2
