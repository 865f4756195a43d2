"""The JSON viewer in Chromium: a payload and a report fold and unfold from the keyboard,
and the same tree works with JavaScript off; the strict CSP refuses nothing."""

from __future__ import annotations

import io

import pytest

from tests.browser import test_journeys
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import trace_bytes

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")
trace_key = test_journeys.trace_key  # the trace HMAC key the journeys register


@pytest.fixture
def stored(trace_key):
    from governance.services import replay_request, replay_run_govern
    from replay.services import trace_ingest
    from tests.console.personas import persona

    trace = trace_ingest(source=io.BytesIO(trace_bytes("diverged")), filename="d.trace.json").trace
    run = replay_request(trace=trace, mode="audit", actor=persona("alice"), enqueue=False)
    return trace, replay_run_govern(run_id=run.id)


def test_a_payload_and_a_report_fold_from_the_keyboard(new_context, shots, stored):
    trace, run = stored
    page = sign_in(new_context, "alice")
    page.goto(f"/traces/{trace.blob.sha256}/events/0/")
    root = page.locator(".json-tree > details").first
    assert root.get_attribute("open") == ""
    summary = root.locator("> summary")
    summary.focus()
    page.keyboard.press("Enter")
    assert root.get_attribute("open") is None
    shots(page, "payload-folded")
    page.keyboard.press("Space")
    assert root.get_attribute("open") == ""
    shots(page, "payload-open")
    page.goto(f"/runs/{run.id}/")
    page.click("#browse-report")
    page.wait_for_selector("#report-tree .json-tree")
    folded = page.locator("#report-tree details:not([open])").first.element_handle()
    folded.eval_on_selector(":scope > summary", "s => s.focus()")
    page.keyboard.press("Enter")
    assert folded.get_attribute("open") == ""
    shots(page, "report-tree")
    no_console_errors(page)


def test_the_tree_works_without_javascript(new_context, stored):
    from tests.console.personas import PASSWORD

    trace, _run = stored
    page = new_context(java_script_enabled=False).new_page()
    page.goto("/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.goto(f"/traces/{trace.blob.sha256}/events/0/")
    root = page.locator(".json-tree > details").first
    root.locator("> summary").click()
    assert root.get_attribute("open") is None
    root.locator("> summary").click()
    assert root.get_attribute("open") == ""
