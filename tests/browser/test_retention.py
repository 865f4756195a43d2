"""Retention in real Chromium: the operations page says what expires next, its link leads to
the trace, and once retention ran that page is the tombstone (when, rule, ledger event)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


def test_legal_sees_what_expires_next_and_then_the_tombstone(new_context, shots, settings):
    from governance import retention
    from governance.models import GovernanceEvent
    from replay.keys import key_add_hmac
    from replay.services import trace_ingest

    settings.REPLAY_RETENTION = {"default": 30}
    settings.REPLAY_RETENTION_HOLDS = []
    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)
    trace = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace

    lena = sign_in(new_context, "lena")
    lena.goto("/ops/")
    row = lena.locator("#retention tbody tr")
    assert row.count() == 1
    assert "default (30 days)" in row.inner_text()
    assert "2026-01-31 00:00 UTC" in row.inner_text()
    shots(lena, "ops-retention")
    row.locator("a").click()
    lena.wait_for_url(f"**/traces/{trace.blob.sha256}/")
    assert lena.locator("#expired-banner").count() == 0

    retention.retention_run(now=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=31))
    lena.reload()
    banner = lena.locator("#expired-banner")
    assert "This trace expired on 2026-02-01 00:00:00 UTC" in banner.inner_text()
    seq = GovernanceEvent.objects.get(type="TRACE_EXPIRED").seq
    assert f"ledger event {seq} (TRACE_EXPIRED)" in banner.inner_text()
    assert f"sha256:{trace.blob.sha256}" in lena.locator("#tombstone-hashes").inner_text()
    shots(lena, "tombstone")
    banner.locator("a").click()
    lena.wait_for_url(f"**/governance/?before={seq + 1}")
    lena.goto("/ops/")
    assert "Nothing is due to expire" in lena.locator("#retention").inner_text()
    no_console_errors(lena)
