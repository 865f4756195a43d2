"""The one rule for a trace's verdict (core/replay/verdicts.py), case by case."""

from __future__ import annotations

from core.replay import verdicts
from core.replay.verdicts import RunOutcome, run_effect, trace_verdict, why_not_deciding

AUDIT_OK = RunOutcome("audit", "ok")
AUDIT_DIVERGED = RunOutcome("audit", "diverged", "REPLAY_DIVERGENCE")
FORCED_OK = RunOutcome("audit", "ok", authoritative=False)
SANDBOX_OK = RunOutcome("sandbox", "ok", authoritative=False)
HALTED = RunOutcome("audit", "refused", "FORCE_HALT_ACTIVE")
RETAINED = RunOutcome("production", "refused", "MISSING_SNAPSHOT")
TAMPERED = RunOutcome("production", "tamper_detected", "INTEGRITY_FAILURE")


def test_it_keeps_the_upload_verdict_without_runs():
    assert trace_verdict(ingest="diverged", runs=[]) == "diverged"


def test_it_takes_the_latest_authoritative_audit_or_production_verdict():
    assert trace_verdict(ingest="tamper_detected", runs=[AUDIT_DIVERGED, AUDIT_OK]) == "ok"
    assert trace_verdict(ingest="ok", runs=[AUDIT_OK, TAMPERED]) == "tamper_detected"


def test_it_ignores_force_continued_sandbox_and_refused_runs():
    runs = [AUDIT_DIVERGED, FORCED_OK, SANDBOX_OK, HALTED, RETAINED]
    assert trace_verdict(ingest="ok", runs=runs) == "diverged"
    assert trace_verdict(ingest="ok", runs=runs[1:]) == "ok"


def test_it_says_why_a_run_never_decides():
    assert why_not_deciding(FORCED_OK) == (
        "non-authoritative (force-continued): never changes the trace's verdict"
    )
    assert why_not_deciding(SANDBOX_OK) == "a sandbox replay never changes the trace's verdict"
    assert why_not_deciding(HALTED) == (
        "refused (FORCE_HALT_ACTIVE): the replay reached no verdict on the trace"
    )
    assert why_not_deciding(RunOutcome("audit", "")) == "not finished: no verdict yet"
    assert why_not_deciding(TAMPERED) is None


def test_it_marks_the_deciding_run_and_the_superseded_one():
    runs = [AUDIT_DIVERGED, AUDIT_OK, FORCED_OK]
    assert [run_effect(runs, i) for i in range(3)] == [
        verdicts.SUPERSEDED,
        verdicts.DECIDES,
        verdicts.NON_AUTHORITATIVE,
    ]
    assert verdicts.ingest_effect(runs) == verdicts.SUPERSEDED
    assert verdicts.ingest_effect([SANDBOX_OK]) == verdicts.DECIDES
