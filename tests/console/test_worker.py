"""Replays on a real Celery worker (Redis broker, PostgreSQL): the run row exists before the
task is queued, and killing the worker process mid-replay loses nothing and appends no event
twice. Runs in CI's second pass (DATABASE_URL=postgres..., CELERY_BROKER_URL=redis...)."""

from __future__ import annotations

import io
import os
import re
import signal
import time

import pytest

from governance.models import GovernanceEvent
from replay.models import ReplayRun
from tests.console.personas import persona

pytestmark = [pytest.mark.celery_worker, pytest.mark.postgres]

#: events in the trace the kill test replays: long enough to kill the worker in the middle
KILL_TEST_EVENTS = 200_000


@pytest.fixture(autouse=True)
def _private_storage(settings, celery_worker):
    """The worker's blob store, instead of a private one: both processes read the same files."""
    settings.VAR_DIR = celery_worker.var_dir
    settings.STORAGES = {
        **settings.STORAGES,
        "blobs": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(celery_worker.var_dir / "blobs")},
        },
    }


def _wait_for(predicate, timeout: float, what: str, worker) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; worker log:\n{worker.output()[-4000:]}")
        time.sleep(0.1)


def _idle(worker) -> bool:
    from config.celery import app

    inspect = app.control.inspect(destination=[worker.name], timeout=2)
    active, reserved = inspect.active() or {}, inspect.reserved() or {}
    return not any(active.values()) and not any(reserved.values()) and bool(active)


def _run_state(run_id) -> ReplayRun:
    return ReplayRun.objects.get(id=run_id)


def test_the_worker_takes_tasks_only_from_this_test_process_queue(celery_worker):
    """Under pytest-xdist every test process that runs these tests starts its own worker on the
    same broker, each pointed at its own test database: a queue per process
    (config/settings_test.py) keeps one process's tasks off the other's worker."""
    from config.celery import app

    xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
    queue = f"replay-tests-{xdist_worker}" if xdist_worker else "celery"
    assert app.conf.task_default_queue == queue
    consumed: dict = {}

    def answered() -> bool:
        inspect = app.control.inspect(destination=[celery_worker.name], timeout=5)
        consumed.update(inspect.active_queues() or {})
        return celery_worker.name in consumed

    _wait_for(answered, 60, "the worker's queues", celery_worker)
    assert [q["name"] for q in consumed[celery_worker.name]] == [queue]


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_replay_started_in_the_page_runs_on_the_worker(celery_worker, ingest, as_persona):
    trace = ingest("diverged")
    response = as_persona("alice").post(f"/traces/{trace.blob.sha256}/replay/", {"mode": "audit"})
    run = ReplayRun.objects.get(trace=trace)
    assert response.status_code == 303
    results = GovernanceEvent.objects.filter(type="REPLAY_RESULT", payload__run_id=str(run.id))
    _wait_for(results.exists, 60, "the replay's REPLAY_RESULT", celery_worker)
    _wait_for(lambda: _idle(celery_worker), 60, "the worker to be idle", celery_worker)
    run.refresh_from_db()
    assert (run.state, run.error_code) == ("done", "REPLAY_DIVERGENCE")
    assert results.count() == 1


@pytest.mark.usefixtures("flushable_transactional_db")
def test_the_worker_logs_the_replay_with_the_id_of_the_request_that_queued_it(
    celery_worker, ingest, as_persona
):
    trace = ingest("ok")
    alice = as_persona("alice")
    response = alice.post(
        f"/traces/{trace.blob.sha256}/replay/", {"mode": "audit"}, HTTP_X_REQUEST_ID="ci-rid-42"
    )
    assert response["X-Request-ID"] == "ci-rid-42"
    run = ReplayRun.objects.get(trace=trace)
    done = "[ci-rid-42] Task governance.tasks.replay_run_governed["
    _wait_for(lambda: done in celery_worker.output(), 60, "the task's log record", celery_worker)
    [line] = [x for x in celery_worker.output().splitlines() if done in x]
    assert re.search(r"\] succeeded in [0-9.]+s: 'ok'$", line), line
    _wait_for(lambda: _run_state(run.id).state == "done", 60, "the replay", celery_worker)


def _long_trace(trace_key):
    from core.formats import default_registry, native
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256
    from replay.services import trace_ingest
    from tests.console.conftest import TRACE_KEY_ID, TRACE_SECRET

    document = record(
        RecordOptions(seed="kill-me", iterations=12, filler_events=KILL_TEST_EVENTS),
        default_registry(),
        signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET),
    )
    data = b"".join(native.iter_jsonl(document))
    return trace_ingest(source=io.BytesIO(data), filename="long.trace.jsonl").trace


@pytest.mark.usefixtures("flushable_transactional_db")
def test_killing_the_worker_mid_replay_loses_nothing_and_duplicates_no_event(
    celery_worker, trace_key
):
    from governance.services import replay_request

    trace = _long_trace(trace_key)
    # the run row is committed before its task reaches the broker (on_commit)
    run = replay_request(trace=trace, mode="audit", actor=persona("alice"))
    _wait_for(
        lambda: _run_state(run.id).state == "running" and _run_state(run.id).progress_done > 0,
        60,
        "the replay to be under way",
        celery_worker,
    )
    children = celery_worker.pool_children()
    assert len(children) == 1, children
    os.kill(children[0], signal.SIGKILL)  # the process executing the replay dies mid-way
    assert _run_state(run.id).state == "running"
    results = GovernanceEvent.objects.filter(type="REPLAY_RESULT", payload__run_id=str(run.id))
    _wait_for(results.exists, 120, "the redelivered replay's REPLAY_RESULT", celery_worker)
    _wait_for(lambda: _idle(celery_worker), 60, "the worker to be idle", celery_worker)
    run.refresh_from_db()
    assert run.status == "ok"
    assert run.report["stats"]["events"] == trace.event_count
    assert run.progress_done == run.progress_total
    log = celery_worker.output()
    assert "WorkerLostError" in log or "signal 9" in log
    for event_type in ("REPLAY_REQUEST", "REPLAY_RESULT"):
        assert (
            GovernanceEvent.objects.filter(type=event_type, payload__run_id=str(run.id)).count()
            == 1
        ), event_type
    from governance.selectors import ledger_verify

    assert ledger_verify().ok


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_full_ledger_verification_started_in_the_page_runs_on_the_worker(
    celery_worker, as_persona
):
    from governance.models import LedgerVerification, VerificationMark

    client = as_persona("adam")
    as_persona("vera")
    head = GovernanceEvent.objects.order_by("-seq").first()
    response = client.post("/governance/verify/", {"scope": "full"})
    assert response.status_code == 303
    run = LedgerVerification.objects.get()
    _wait_for(
        lambda: LedgerVerification.objects.get(pk=run.pk).finished_at is not None,
        60,
        "the ledger verification to finish",
        celery_worker,
    )
    run.refresh_from_db()
    assert (run.state, run.checked, run.total) == ("done", head.seq, head.seq)
    assert VerificationMark.objects.get().through_seq == head.seq
    body = client.get("/governance/").content.decode()
    assert f"Verified through seq {head.seq} at" in body
