"""In Chromium, the one trace page of a format other than native: an auditor opens a Paxman
artifact, reads its records, opens one record's value in place (htmx), turns to the next
window of records, and opens a span of an OpenTelemetry trace the same way."""

from __future__ import annotations

import io

import pytest

from replay.services import trace_ingest
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.published import PAXMAN

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")

MONEY = PAXMAN / "money_unresolved.json"


def test_an_auditor_reads_a_paxman_artifact_record_by_record(new_context, shots, monkeypatch):
    from console.views import traces as trace_views

    monkeypatch.setattr(trace_views, "RECORDS_WINDOW", 5)  # a window the test can turn
    trace = trace_ingest(source=io.BytesIO(MONEY.read_bytes()), filename=MONEY.name).trace
    alice = sign_in(new_context, "alice")
    alice.goto(f"/traces/{trace.blob.sha256}/")
    alice.wait_for_selector("#record-rows")
    summary = alice.inner_text("#records-summary")
    assert " records (" in summary
    assert "1 to 5 are listed here" in summary
    rows = alice.locator("#record-rows tbody tr")
    assert rows.count() == 5
    first = rows.nth(0).locator("td").nth(2).inner_text().strip()
    rows.nth(0).locator("a").click()  # the value opens in place
    alice.wait_for_selector("#record-value h2")
    assert alice.inner_text("#record-value h2") == f"Field 0: {first}"
    assert alice.url.endswith(f"/traces/{trace.blob.sha256}/")  # no navigation
    assert "At /" in alice.inner_text("#record-value")
    shots(alice, "paxman-records")
    alice.click("#records >> text=Later records →")
    alice.wait_for_url("**?at=5#records")
    assert alice.locator("#record-rows tbody tr td.num").first.inner_text() == "5"
    no_console_errors(alice)
