"""Replays never run inside a request: the embedded default (no broker) runs queued work on a
small thread pool in the web process, so the POST that starts a replay returns at once and the
progress page shows the run queued, then its report. The test overlay runs tasks inline; these
tests switch the pool back on, against the real (SQLite or PostgreSQL) test database."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from replay import background
from replay.models import ReplayRun

ROOT = Path(__file__).resolve().parents[2]


def _settings_without_broker(tmp_path, **extra: str) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CELERY_BROKER_URL", "REPLAY_TASK_RUNNER", "DJANGO_DEBUG")
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings", REPLAY_VAR_DIR=str(tmp_path), **extra)
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.REPLAY_TASK_RUNNER, s.CELERY_TASK_ALWAYS_EAGER, s.REPLAY_TASK_THREADS)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_default_configuration_runs_tasks_on_the_thread_pool(tmp_path):
    assert _settings_without_broker(tmp_path) == "thread False 2"


def test_a_broker_makes_celery_the_runner(tmp_path):
    out = _settings_without_broker(tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:6379/9")
    assert out == "celery False 2"


def test_it_refuses_an_unknown_runner(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.update(REPLAY_VAR_DIR=str(tmp_path), REPLAY_TASK_RUNNER="fork")
    code = "import django; django.setup()"
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "REPLAY_TASK_RUNNER='fork': use celery, thread or eager" in done.stderr


@pytest.fixture
def thread_runner(settings):
    """The embedded default's runner: one pool thread, Celery not forced eager."""
    from config.celery import app

    settings.REPLAY_TASK_RUNNER = "thread"
    settings.REPLAY_TASK_THREADS = 1
    background.pool_shutdown()
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield background.pool()
    app.conf.task_always_eager = eager
    background.pool_shutdown()


@pytest.fixture
def ingest(ingest):
    """The console's `ingest`, then the pool drained when tasks run on it: storing a trace
    queues background work of its own, which must not write while the test's next statement
    does (the tests' shared-cache SQLite answers two writers with "database table is
    locked" at once, whatever the busy timeout)."""

    def make(name: str):
        trace = ingest(name)
        if background.runner() == background.THREAD:
            background.pool().submit(lambda: None).result(timeout=60)
        return trace

    return make


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_replay_started_in_the_page_returns_at_once_and_runs_in_the_background(
    thread_runner, ingest, as_persona
):
    trace = ingest("diverged")
    alice = as_persona("alice")
    gate = threading.Event()
    busy = thread_runner.submit(gate.wait, 30)  # the one pool thread is busy until released
    try:
        response = alice.post(f"/traces/{trace.blob.sha256}/replay/", {"mode": "audit"})
        assert response.status_code == 303
        run = ReplayRun.objects.get(trace=trace)
        assert response["Location"] == f"/runs/{run.id}/"
        assert run.state == "queued"  # the request did not run it
        polled = alice.get(f"/runs/{run.id}/status/", HTTP_HX_REQUEST="true")
        assert polled.status_code == 200
        assert b'id="run-state">queued<' in polled.content
        assert "HX-Refresh" not in polled
    finally:
        gate.set()
    assert busy.result(timeout=30) is True

    thread_runner.submit(lambda: None).result(timeout=60)  # the replay ran before it
    run.refresh_from_db()
    assert run.state == "done"
    assert (run.status, run.error_code) == ("diverged", "REPLAY_DIVERGENCE")
    done = alice.get(f"/runs/{run.id}/status/", HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true"
    page = alice.get(f"/runs/{run.id}/")
    assert b'id="verdict-status">diverged<' in page.content


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_task_that_fails_in_the_pool_is_logged_and_the_pool_goes_on(
    thread_runner, ingest, caplog
):
    from governance.tasks import replay_run_governed

    failed = background.submit(replay_run_governed, "not-a-run-id")
    with pytest.raises(Exception):  # noqa: B017, PT011 (whatever the service raises)
        failed.result(timeout=30)
    assert "background task governance.tasks.replay_run_governed('not-a-run-id',) failed" in (
        caplog.text
    )
    trace = ingest("ok")
    from governance.services import replay_request

    run = replay_request(trace=trace, mode="audit", enqueue=True)
    # the one pool thread takes tasks in order: once a later no-op has run, the replay has;
    # nothing reads the database while the pool writes (the tests' shared-cache SQLite
    # refuses a read meeting a write at once, on either side)
    thread_runner.submit(lambda: None).result(timeout=60)
    assert ReplayRun.objects.get(id=run.id).state == "done"
    assert ReplayRun.objects.get(id=run.id).status == "ok"


# --- no broker configured: never a default one ------------------------------------------------


@pytest.fixture
def listener_on_5672():
    """Something answers on 127.0.0.1:5672, Celery's default broker address: this machine's
    RabbitMQ (with no worker of ours), else a listener of our own that accepts and says
    nothing. The trap `make run` fell into: a job published there waits forever."""
    import socket

    own = socket.socket()
    try:
        own.bind(("127.0.0.1", 5672))
        own.listen(8)
    except OSError:  # taken: whoever holds it answers
        own.close()
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            pass
        yield
        return
    try:
        yield
    finally:
        own.close()


@pytest.fixture
def no_broker(settings, monkeypatch, listener_on_5672, thread_runner):
    """`make run`'s settings: no CELERY_BROKER_URL anywhere, tasks on the thread pool."""
    from config.celery import app

    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery reads it itself too
    settings.CELERY_BROKER_URL = None
    previous = app.conf.broker_url
    app.conf.broker_url = None
    yield thread_runner
    app.conf.broker_url = previous


@pytest.mark.usefixtures("flushable_transactional_db")
def test_the_ledger_verification_runs_in_process_with_no_broker_configured(no_broker, as_persona):
    from governance.models import LedgerVerification, VerificationMark

    vera = as_persona("vera")
    response = vera.post("/governance/verify/", {"scope": "new"})
    assert response.status_code == 303
    no_broker.submit(lambda: None).result(timeout=60)  # the one pool thread ran it before
    run = LedgerVerification.objects.get()
    assert (run.state, run.checked, run.total) == ("done", run.total, run.total)
    assert run.total > 0
    mark = VerificationMark.objects.get()
    assert mark.through_seq == run.total
    page = vera.get("/governance/")
    assert f"Verified through seq {mark.through_seq} at ".encode() in page.content


def test_a_task_queued_with_no_broker_runs_in_process_and_no_broker_connection_is_opened(
    no_broker, caplog
):
    from django.core.exceptions import ImproperlyConfigured

    from config.celery import NO_BROKER_MESSAGE, app
    from governance.tasks import ledger_verification_run

    future = ledger_verification_run.delay(-1)  # no such run: the task body raises in the pool
    with pytest.raises(Exception):  # noqa: B017, PT011 (whatever the service raises)
        future.result(timeout=30)
    assert "background task governance.tasks.ledger_verification_run(-1,) failed" in caplog.text
    with pytest.raises(ImproperlyConfigured) as refused:
        app.connection_for_write()
    assert str(refused.value) == NO_BROKER_MESSAGE
    assert NO_BROKER_MESSAGE == (
        "no Celery broker is configured (CELERY_BROKER_URL is unset): background work runs in "
        "this process (REPLAY_TASK_RUNNER=thread), never on a default broker"
    )


def test_a_worker_started_without_a_broker_refuses_to_start(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CELERY_BROKER_URL", "REPLAY_TASK_RUNNER", "DJANGO_DEBUG")
    }
    env.update(DJANGO_SETTINGS_MODULE="config.settings", REPLAY_VAR_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "no Celery broker is configured (CELERY_BROKER_URL is unset)" in done.stderr


# --- a job whose task was lost: shown as stale, queued again -----------------------------------


def _lost_run(ingest, *, minutes_ago: int):
    """A replay queued `minutes_ago` whose task never ran (the process that held it stopped)."""
    from datetime import timedelta

    from django.utils import timezone

    from governance.services import replay_request
    from tests.console.personas import persona

    run = replay_request(
        trace=ingest("diverged"), mode="audit", actor=persona("alice"), enqueue=False
    )
    ReplayRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    return ReplayRun.objects.get(pk=run.pk)


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_stale_queued_run_is_shown_as_such_and_queued_again(
    thread_runner, ingest, as_persona, settings
):
    settings.REPLAY_STALE_SECONDS = 600
    run = _lost_run(ingest, minutes_ago=11)
    vera, alice = as_persona("vera"), as_persona("alice")

    page = alice.get(f"/runs/{run.id}/")
    assert b'id="run-stale"' in page.content
    assert (
        f"Queued since {run.created_at:%Y-%m-%d %H:%M:%S} UTC and not picked up for more than "
        "600 s: its task was lost (the process that held it stopped, or the broker was down)."
    ).encode() in page.content
    assert b'id="run-requeue"' in page.content
    seen = vera.get(f"/runs/{run.id}/")  # a viewer sees it is stale, and no button
    assert b'id="run-stale"' in seen.content
    assert b'id="run-requeue"' not in seen.content

    assert vera.post(f"/runs/{run.id}/requeue/").status_code == 403
    assert ReplayRun.objects.get(pk=run.pk).requeued_at is None

    response = alice.post(f"/runs/{run.id}/requeue/")
    assert response.status_code == 303
    assert response["Location"] == f"/runs/{run.id}/"
    thread_runner.submit(lambda: None).result(timeout=60)  # the one pool thread ran it before
    done = ReplayRun.objects.get(pk=run.pk)
    assert done.requeued_at is not None
    assert (done.state, done.status, done.error_code) == ("done", "diverged", "REPLAY_DIVERGENCE")
    assert b'id="run-stale"' not in alice.get(f"/runs/{run.id}/").content


@pytest.mark.usefixtures("flushable_transactional_db")
def test_a_run_not_stale_is_not_queued_again(thread_runner, ingest, as_persona, settings):
    from core.ledger import codes, signing
    from governance.services import RUN_NOT_STALE_MESSAGE

    settings.REPLAY_STALE_SECONDS = 900
    run = _lost_run(ingest, minutes_ago=14)
    alice = as_persona("alice")
    assert b'id="run-stale"' not in alice.get(f"/runs/{run.id}/").content
    refused = alice.post(f"/runs/{run.id}/requeue/")
    assert refused.status_code == 409
    message = RUN_NOT_STALE_MESSAGE.format(
        run=run.id, state="queued", since=signing.format_time(run.created_at), limit=900
    )
    assert message.startswith(f"run {run.id} is queued, queued since 20")
    assert message.encode() in refused.content
    assert codes.RUN_NOT_STALE.encode() in refused.content
    assert ReplayRun.objects.get(pk=run.pk).requeued_at is None


def test_a_job_queued_while_the_broker_is_down_is_logged_and_the_request_goes_on(tmp_path):
    """With a broker configured but not answering, queuing on commit logs why and returns:
    the job's row stays queued (its page shows it stale later, with the button above)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REPLAY_TASK_RUNNER", "DJANGO_DEBUG", "DATABASE_URL")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        REPLAY_VAR_DIR=str(tmp_path),  # its own SQLite file: no test database is touched
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",  # nothing listens on port 1
    )
    code = (
        "import django; django.setup(); from replay import background; "
        "from governance.tasks import ledger_verification_run as t; "
        "background.enqueue(t, 41); print('returned', background.runner())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "returned celery"
    assert (
        "could not queue governance.tasks.ledger_verification_run(41,) (the broker did not "
        "take it: OperationalError); its row stays queued, and its page shows it stale, with a "
        "button to queue it again, once the stale limit has passed"
    ) in done.stderr


# --- periodic jobs with no broker: the serving process runs the schedule ----------------------


def test_a_periodic_entry_is_due_one_interval_after_it_was_first_seen_then_each_interval():
    schedule = {"a": {"schedule": 10.0}, "b": {"schedule": 25.0}}
    last: dict[str, float] = {}
    assert background.periodic_due(schedule, last, 100.0) == []  # as beat: not at start
    assert background.periodic_due(schedule, last, 109.9) == []
    assert background.periodic_due(schedule, last, 110.0) == ["a"]
    assert background.periodic_due(schedule, last, 119.0) == []
    assert background.periodic_due(schedule, last, 125.0) == ["a", "b"]
    assert last == {"a": 125.0, "b": 125.0}


@pytest.mark.usefixtures("flushable_transactional_db")
def test_with_no_broker_a_serving_process_runs_the_beat_schedule_itself(
    no_broker, as_persona, settings, monkeypatch
):
    """A verification row nobody queued, run by a periodic entry: the first request starts
    the process's periodic thread, which hands the entry to the pool when it is due."""
    from governance.models import LedgerVerification

    vera = as_persona("vera")
    run = LedgerVerification.objects.create(scope="new", total=0)
    monkeypatch.setattr(background, "PERIODIC_TICK_SECONDS", 0.05)
    settings.REPLAY_PERIODIC_IN_PROCESS = True
    settings.CELERY_BEAT_SCHEDULE = {
        "probe": {
            "task": "governance.tasks.ledger_verification_run",
            "schedule": 0.2,
            "args": [run.id],
        }
    }
    background.periodic_stop()
    try:
        vera.get("/governance/")
        assert background._periodic is not None
        assert background._periodic.is_alive()
        assert background.periodic_start() is False  # one thread a process
        time.sleep(1.0)  # the entry is due 0.2 s after the thread started
    finally:
        background.periodic_stop()
    # nothing reads the database while the pool writes (the tests' shared-cache SQLite)
    no_broker.submit(lambda: None).result(timeout=60)
    assert LedgerVerification.objects.get(pk=run.pk).state == "done"


@pytest.mark.usefixtures("flushable_transactional_db")
def test_the_periodic_thread_stays_off_when_turned_off(no_broker, as_persona, settings):
    settings.REPLAY_PERIODIC_IN_PROCESS = False
    background.periodic_stop()
    as_persona("vera").get("/governance/")
    assert background._periodic is None
