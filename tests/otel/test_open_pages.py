"""A trace before it is sealed: listed as being received, its page drawing the spans that have
arrived (a span is visible as soon as its request returned), and "Seal now" for those who may
upload; every role checked."""

from __future__ import annotations

import re

import pytest

from otel.models import OtelTrace
from replay.models import Trace
from tests.console.personas import BY_ROLE

pytestmark = pytest.mark.django_db


def test_an_open_trace_is_listed_and_its_spans_drawn_before_the_seal(send, as_persona):
    send("openai-v2-proto-onebyone-1.bin")  # one model call; its root has not come
    state = OtelTrace.objects.get()
    vera = as_persona("vera")
    listing = vera.get("/traces/").content.decode()
    assert "1 OpenTelemetry trace being received" in listing
    body = vera.get("/otel/traces/").content.decode()
    assert f'<a href="/otel/traces/{state.trace_id}/"><code>{state.trace_id}</code></a>' in body
    page = vera.get(f"/otel/traces/{state.trace_id}/").content.decode()
    assert re.findall(r'<tr id="span-\d+" class="span-(\w+)', page) == ["model"]
    assert "its root span has not arrived" in page
    assert "What is the weather in Paris?" in page
    assert 'id="otel-seal-now"' not in page  # a viewer may not seal
    send("openai-v2-proto-onebyone-2.bin")
    page = vera.get(f"/otel/traces/{state.trace_id}/").content.decode()
    assert re.findall(r'<tr id="span-\d+" class="span-(\w+)', page) == ["model", "tool"]


@pytest.mark.parametrize("role", sorted(BY_ROLE))
def test_seal_now_is_for_those_who_may_upload(send, as_persona, role):
    for n in (1, 2, 3, 4):
        send(f"openai-v2-proto-onebyone-{n}.bin")
    state = OtelTrace.objects.get()
    client = as_persona(BY_ROLE[role])
    assert client.get(f"/otel/traces/{state.trace_id}/").status_code == 200
    response = client.post(f"/otel/traces/{state.trace_id}/seal/")
    if role in ("auditor", "operator", "admin"):
        trace = Trace.objects.get(format="otel-genai")
        assert response.status_code == 303
        assert response["Location"] == f"/traces/{trace.blob.sha256}/"
        # sealed: its page is now the stored trace's
        moved = client.get(f"/otel/traces/{state.trace_id}/")
        assert moved.status_code == 302
        assert moved["Location"] == f"/traces/{trace.blob.sha256}/"
    else:
        assert response.status_code == 403
        assert not Trace.objects.filter(format="otel-genai").exists()


def test_unknown_and_malformed_ids_are_404_after_the_role_check(as_persona):
    assert as_persona("vera").get("/otel/traces/" + "ab" * 16 + "/").status_code == 404
    assert as_persona("vera").get("/otel/traces/not-an-id/").status_code == 404
    assert as_persona("nora").get("/otel/traces/" + "ab" * 16 + "/").status_code == 403
    assert as_persona("nora").get("/otel/traces/").status_code == 403
