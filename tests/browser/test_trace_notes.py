"""An auditor adds a note on a trace in Chromium and sees it listed with its ledger seq; a
viewer reads it without a form; a blank note is refused with the service's message."""

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
    from replay.services import trace_ingest

    return trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace


@pytest.mark.parametrize("width", [1440, 390])
def test_alice_adds_a_note_and_vera_reads_it(new_context, shots, stored, width):
    from governance.models import GovernanceEvent
    from governance.services import NOTE_EMPTY_MESSAGE

    page = sign_in(new_context, "alice")
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"/traces/{stored.blob.sha256}/")
    page.fill("#note-text", "   ")
    page.click("#note-submit")
    assert page.locator("#note-error").inner_text() == f"NOTE_INVALID {NOTE_EMPTY_MESSAGE}"
    # the refusal is a 400 page, which Chromium reports on the console: that one and no other
    assert page.errors == [  # type: ignore[attr-defined]
        "Failed to load resource: the server responded with a status of 400 (Bad Request)"
    ]
    page.errors.clear()  # type: ignore[attr-defined]
    page.fill("#note-text", "Seal checked against the archived copy.")
    shots(page, f"typed-{width}")
    page.click("#note-submit")
    page.wait_for_selector("#note-list")
    note = GovernanceEvent.objects.get(type="TRACE_NOTE")
    item = page.locator(f"#note-{note.seq}")
    assert "Seal checked against the archived copy." in item.inner_text()
    assert f"alice, {note.created_at:%Y-%m-%d %H:%M:%S} UTC, ledger seq {note.seq}" in (
        item.inner_text()
    )
    shots(page, f"added-{width}")
    # the section fits the viewport: nothing in it scrolls sideways
    overflow = page.eval_on_selector("#notes", "e => e.scrollWidth - e.clientWidth")
    assert overflow == 0
    no_console_errors(page)

    viewer = sign_in(new_context, "vera")
    viewer.goto(f"/traces/{stored.blob.sha256}/")
    assert "Seal checked against the archived copy." in viewer.locator("#notes").inner_text()
    assert viewer.locator("#note-form").count() == 0
