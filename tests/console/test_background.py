"""Replays never run inside a request: the embedded default (no broker) runs queued work on a
small thread pool in the web process, so the POST that starts a replay returns at once and the
progress page shows the run queued, then its report. The test overlay runs tasks inline; these
tests switch the pool back on, against the real (SQLite or PostgreSQL) test database."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
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
    env.update(DJANGO_SETTINGS_MODULE="console.settings", REPLAY_VAR_DIR=str(tmp_path), **extra)
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
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"}
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
    from console.celery import app

    settings.REPLAY_TASK_RUNNER = "thread"
    settings.REPLAY_TASK_THREADS = 1
    background.pool_shutdown()
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield background.pool()
    app.conf.task_always_eager = eager
    background.pool_shutdown()


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
