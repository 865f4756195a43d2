"""An OTel trace's page: the span waterfall and the conversation (tool arguments and result
side by side), its replay, and two runs of one agent compared at the first differing value."""

from __future__ import annotations

import re

import pytest

from otel.models import OtelTrace
from otel.services import otel_seal
from replay.models import Trace
from tests.otel.helpers import only_trace_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def sealed(send):
    def seal(name: str) -> Trace:
        send(name)
        return otel_seal(trace_id=only_trace_id())

    return seal


def test_the_page_draws_the_waterfall_and_the_conversation(sealed, as_persona):
    trace = sealed("openai-v2-proto.bin")
    body = as_persona("vera").get(f"/traces/{trace.blob.sha256}/").content.decode()
    rows = re.findall(r'<tr id="span-(\d+)" class="span-(\w+)', body)
    # the tree in start order: the agent, its first model call, the tool, the second call
    assert [kind for _i, kind in rows] == ["agent", "model", "tool", "model"]
    assert body.count('<svg class="waterfall-bar"') == 4
    assert "What is the weather in Paris?" in body
    assert "asks for tool <code>get_weather</code>" in body
    # the tool's arguments and result side by side, as recorded
    tool = body[body.index('<li class="conversation-tool"') :]
    tool = tool[: tool.index("</li>")]
    assert "&quot;city&quot;: &quot;Paris&quot;" in tool
    assert "&quot;temperature_c&quot;: 18" in tool
    # the second call shows what it received anew, not the whole conversation again
    assert "…and the 3 messages of the call before." in body
    assert '<span class="badge verdict-ok">ok</span>' in body


def test_a_content_free_trace_says_so_on_its_page(sealed, as_persona):
    trace = sealed("openai-v2-proto-nocontent.bin")
    body = as_persona("alice").get(f"/traces/{trace.blob.sha256}/").content.decode()
    assert "captured without message content" in body
    assert body.count("No messages recorded for this call.") == 2


def test_two_runs_of_one_agent_compare_at_the_first_differing_tool_result(sealed, as_persona):
    good = sealed("openai-v2-proto.bin")
    OtelTrace.objects.all().delete()  # bookkeeping only: the next run's id is then the only one
    bad = sealed("openai-v2-proto-divergent.bin")
    assert good.job_id == bad.job_id
    page = as_persona("alice").get(f"/traces/{good.blob.sha256}/compare/{bad.blob.sha256}/")
    body = page.content.decode()
    assert page.status_code == 200
    assert "/tools/0/result/temperature_c" in body


def test_the_api_serves_the_record_to_every_role_that_browses(sealed, as_persona):
    import json

    from tests.otel.helpers import record_of

    trace = sealed("openllmetry-proto.bin")
    for name in ("vera", "alice", "lena"):
        response = as_persona(name).get(f"/api/traces/{trace.blob.sha256}/record/")
        assert response.status_code == 200
        assert response.json() == record_of(trace)
    nobody = as_persona("nora").get(f"/api/traces/{trace.blob.sha256}/record/")
    assert nobody.status_code == 403
    assert json.loads(nobody.content)["error_code"]


def test_the_record_api_refuses_another_format_naming_it(as_persona):
    import io

    from replay.keys import key_add_hmac
    from replay.services import trace_ingest
    from tests.console.conftest import LONG_AGO, TRACE_KEY_ID, TRACE_SECRET, trace_bytes

    key_add_hmac(key_id=TRACE_KEY_ID, secret=TRACE_SECRET, valid_from=LONG_AGO)

    other = trace_ingest(source=io.BytesIO(trace_bytes("ok")), filename="ok.trace.json").trace
    response = as_persona("alice").get(f"/api/traces/{other.blob.sha256}/record/")
    assert response.status_code == 400
    body = response.json()
    assert body["error_code"] == "INVALID_INPUT"
    assert "only an OpenTelemetry GenAI trace has a normalised record" in body["message"]
