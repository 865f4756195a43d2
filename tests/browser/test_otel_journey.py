"""In Chromium, the agent engineer's journey: two runs of one agent arrive over OTLP (the
bodies real exporters sent), are sealed; the auditor opens one, reads the waterfall and the
conversation with the tool's arguments and result side by side, replays it in audit mode and
reads the divergence of the run whose model received another tool result than the tool
returned, then compares the two runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from governance.services import api_token_create
from otel.models import OtelTrace
from otel.services import otel_seal
from tests.browser.test_journeys import no_console_errors, sign_in
from tests.console.personas import persona

pytestmark = pytest.mark.usefixtures("flushable_transactional_db")
FIXTURES = Path(__file__).resolve().parents[1] / "otel" / "fixtures"


def arrive(name: str):
    """One captured export body through the receiver, then its trace sealed."""
    _row, token = api_token_create(user=persona("oscar"))
    response = Client().post(
        "/otlp/v1/traces",
        (FIXTURES / name).read_bytes(),
        content_type="application/x-protobuf",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200
    (state,) = OtelTrace.objects.filter(open=True)
    return otel_seal(trace_id=state.trace_id)


def test_an_auditor_reads_replays_and_compares_otel_runs(new_context, shots):
    good = arrive("openai-v2-proto.bin")
    bad = arrive("openai-v2-proto-divergent.bin")
    alice = sign_in(new_context, "alice")
    alice.goto(f"/traces/{good.blob.sha256}/")
    alice.wait_for_selector("#otel-waterfall")
    assert alice.inner_text("#format-panel h2") == "An OpenTelemetry GenAI trace"
    rows = alice.locator("#otel-waterfall tbody tr")
    assert rows.count() == 4
    assert rows.nth(0).locator("td").first.inner_text().strip() == "invoke_agent weather-agent"
    bars = alice.locator("#otel-waterfall svg.waterfall-bar rect")
    assert bars.count() == 4
    assert float(bars.nth(0).get_attribute("width")) == 1000.0  # the root spans the axis
    conversation = alice.inner_text("#otel-conversation")
    assert "What is the weather in Paris?" in conversation
    tool = alice.locator(".conversation-tool").first
    sides = tool.locator(".tool-sides pre").all_inner_texts()
    assert '"city": "Paris"' in sides[0]
    assert '"temperature_c": 18' in sides[1]
    shots(alice, "otel-trace-conversation")

    alice.goto(f"/traces/{bad.blob.sha256}/")
    alice.wait_for_selector("#format-panel")
    alice.check("input[name=mode][value=audit]")
    alice.click("#replay-submit")
    alice.wait_for_selector("#verdict-status")
    assert alice.inner_text("#verdict-status") == "diverged"
    assert alice.inner_text("#verdict-code") == "REPLAY_DIVERGENCE"
    paths = alice.locator("#divergences td.path code").all_inner_texts()
    # the message that received the result, recorded (the tool's 21) beside received (18)
    assert paths[0] == "/spans/3/input_messages/3/parts/0/response"
    recorded, received = alice.locator("#divergences td pre").all_inner_texts()[:2]
    assert '"temperature_c": 21' in recorded
    assert '"temperature_c": 18' in received
    shots(alice, "otel-tool-result-divergence")

    alice.goto(f"/traces/{good.blob.sha256}/compare/{bad.blob.sha256}/")
    alice.wait_for_url(re.compile(r"/compare/"))
    body = alice.inner_text("main")
    assert "/tools/0/result/temperature_c" in body
    shots(alice, "otel-two-runs-compared")
    no_console_errors(alice)
