"""In a real browser (htmx, the strict CSP): a large trace's events are paged in place, a
jump reaches a seq near the end, an event's payload opens in place; on the ledger page a
verification runs in the background and the banner says how far the chain is verified."""

from __future__ import annotations

import io

import pytest

from tests.browser.test_journeys import no_console_errors, sign_in, trace_key  # noqa: F401
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")


def _large_trace():
    from core.formats import default_registry, native
    from core.formats.native.recorder import record, signer_for
    from core.replay.runtime import RecordOptions
    from core.replay.signatures import HMAC_SHA256
    from replay.services import trace_ingest
    from tests.console.conftest import TRACE_KEY_ID, TRACE_SECRET

    document = record(
        RecordOptions(seed="browser-paging", iterations=10, filler_events=3000),
        default_registry(),
        signer_for(TRACE_KEY_ID, HMAC_SHA256, TRACE_SECRET),
    )
    data = b"".join(native.iter_jsonl(document))
    return trace_ingest(source=io.BytesIO(data), filename="large.trace.jsonl").trace


def test_a_large_trace_pages_in_place_and_the_ledger_verifies_in_the_background(
    new_context,
    trace_key,  # noqa: F811
):
    persona("vera")
    trace = _large_trace()
    vera = sign_in(new_context, "vera")
    vera.goto(f"/traces/{trace.blob.sha256}/")
    assert vera.locator("#timeline svg a.bucket").count() == 200

    vera.click("#events a[rel=next]")
    vera.wait_for_selector("#event-list >> text=seq 50:")
    assert "after=49" in vera.url

    near_end = trace.event_count - 20
    vera.fill("#events input[name=seq]", str(near_end))
    vera.click("#events button[type=submit]")
    vera.wait_for_selector(f"#event-list >> text=seq {near_end}:")
    assert vera.locator("#events a[rel=next]").count() == 0

    vera.click(f"#event-list >> text=seq {near_end}:")
    vera.wait_for_selector(f"#event-payload h2 >> text=Event {near_end}:")
    assert vera.url.endswith(f"seq={near_end}")  # the payload opened in place

    vera.goto("/governance/")
    assert vera.inner_text("#ledger-banner").startswith("Not verified yet:")
    vera.click("#verify-new")
    vera.wait_for_selector("#ledger-banner >> text=Verified through seq")
    no_console_errors(vera)
