"""The embedded default in a real browser: with no broker, a replay started on the trace page
runs on the web process's thread pool, the browser lands on the run page at once, sees the run
queued, and the page turns into the report by itself when the run finishes. The ledger's
"Verify the new events" runs there too, with something answering on Celery's default broker
address (127.0.0.1:5672) and no broker configured."""

from __future__ import annotations

import io
import threading

import pytest

from replay import background
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import trace_bytes
from tests.console.personas import persona
from tests.console.test_background import listener_on_5672  # noqa: F401

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


@pytest.fixture
def thread_runner(settings):
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
def trace_key():
    from replay.keys import key_add_hmac
    from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET

    return key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)


def test_a_replay_started_in_the_page_shows_queued_then_its_report(
    new_context, shots, trace_key, thread_runner
):
    from replay.services import trace_ingest

    trace = trace_ingest(
        source=io.BytesIO(trace_bytes("diverged")), filename="diverged.trace.json"
    ).trace
    # the trace's index is built on the pool once its upload commits: let it finish before
    # this thread writes (SQLite's shared in-memory test database locks a table a writer in
    # another thread holds, where a file database would wait)
    thread_runner.submit(lambda: None).result(timeout=60)
    alice = sign_in(new_context, "alice")
    alice.goto(f"/traces/{trace.blob.sha256}/")
    gate = threading.Event()
    thread_runner.submit(gate.wait, 60)  # the pool's one thread is busy until released
    try:
        alice.check("input[name=mode][value=audit]")
        alice.click("#replay-submit")
        alice.wait_for_selector("#run-state")
        assert alice.inner_text("#run-state") == "queued"
        assert alice.locator("#verdict-status").count() == 0
        shots(alice, "embedded-replay-queued")
    finally:
        gate.set()
    alice.wait_for_selector("#verdict-status", timeout=30_000)  # htmx polled, then reloaded
    assert alice.inner_text("#verdict-status") == "diverged"
    assert alice.inner_text("#verdict-code") == "REPLAY_DIVERGENCE"
    shots(alice, "embedded-replay-report")
    no_console_errors(alice)


@pytest.fixture
def no_broker(settings, monkeypatch, listener_on_5672, thread_runner):  # noqa: F811
    from config.celery import app

    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    settings.CELERY_BROKER_URL = None
    previous = app.conf.broker_url
    app.conf.broker_url = None
    yield thread_runner
    app.conf.broker_url = previous


def test_the_ledger_verification_finishes_with_no_broker_configured(new_context, shots, no_broker):
    from governance.models import LedgerVerification

    persona("vera")
    vera = sign_in(new_context, "vera")
    vera.goto("/governance/")
    assert vera.inner_text("#ledger-banner").startswith("Not verified yet:")
    gate = threading.Event()
    no_broker.submit(gate.wait, 60)  # the pool's one thread is busy until released
    try:
        vera.click("#verify-new")
        vera.wait_for_selector("#verification-run")
        assert "(queued): 0 of " in vera.inner_text("#verification-run")
        shots(vera, "embedded-verification-queued")
    finally:
        gate.set()
    vera.wait_for_selector("#ledger-banner >> text=Verified through seq", timeout=30_000)
    run = LedgerVerification.objects.get()
    assert run.state == "done"
    assert vera.inner_text("#ledger-banner").endswith(": every event.")
    assert vera.inner_text("#verification-run") == (
        f"The last verification (the events after seq 0, {run.checked} events) finished at "
        f"{run.finished_at:%Y-%m-%d %H:%M:%S} UTC: the chain holds."
    )
    shots(vera, "embedded-verification-done")
    no_console_errors(vera)
